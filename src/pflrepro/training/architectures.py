"""Per-client architectures (model heterogeneity): the models, their assignment, lookup.

With two or more ``training.architectures`` (smallest first), each client trains its
own architecture (PerFed-CKT's Table 2 and Fig. 2a). :class:`Architectures` builds one
model instance per architecture (``functional_call`` runs it with any parameters of
its shape), tells which architecture a parameter dict belongs to (by parameter names
and shapes), and counts each one's scalars (what sending a model costs).
:func:`assign_architectures` draws each client's architecture. The engine
(:class:`pflrepro.training.engine.Engine`) holds one :class:`Architectures` and exposes it to
the methods (``arch_of``, ``arch_index``, ``net_for``, ``model_size_of``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import nn

from pflrepro.models import build_model
from pflrepro.models.surgery import speed_up
from pflrepro.seeding import SETUP_ROUND, torch_generator
from pflrepro.training.communication import size
from pflrepro.training.optim import Params


def param_shapes(params: Params, skip: int = 0) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """Parameter names and shapes (without the first ``skip`` dimensions), sorted."""
    return tuple(sorted((k, tuple(v.shape[skip:])) for k, v in params.items()))


class Architectures:
    """One model instance per architecture of a run, and which one parameters belong to."""

    def __init__(self, specs: Sequence[tuple[str, Mapping[str, Any]]],
                 in_shape: tuple[int, int, int], num_classes: int,
                 device: torch.device) -> None:
        #: (model, model_options) of each architecture, smallest first.
        self.specs = specs
        #: One model instance per architecture, built once, without gradients.
        self.models: list[nn.Module] = []
        for name, options in specs:
            model = build_model(name, in_shape, num_classes, **dict(options)).to(device)
            model.requires_grad_(False)
            speed_up(model)
            self.models.append(model)
        self._by_shape = {param_shapes(dict(m.named_parameters())): a
                          for a, m in enumerate(self.models)}
        if len(self._by_shape) != len(self.models):
            raise ValueError(f"training.architectures: two entries have the same parameter "
                             f"names and shapes ({[n for n, _ in specs]}); list each "
                             f"architecture once")
        #: Scalars in one model of each architecture (what sending it costs).
        self.sizes = [size(dict(m.named_parameters())) for m in self.models]

    def index(self, params: Params, stacked: bool = False) -> int:
        """The architecture ``params`` belong to (by parameter names and shapes).

        ``stacked``: ``params`` have a leading client dimension.
        """
        if len(self.models) == 1:
            return 0
        key = param_shapes(params, skip=1 if stacked else 0)
        try:
            return self._by_shape[key]
        except KeyError:
            raise ValueError("parameters of no architecture of this run: "
                             f"{[(n, s) for n, s in key]}") from None


def assign_architectures(count: int, sizes: Sequence[int], seed: int,
                         rule: str) -> list[int]:
    """Each client's architecture, drawn from (seed, setup round, client, 'architecture').

    ``count`` architectures, ``sizes`` the clients' training-set sizes. ``data_size``:
    client k climbs each of the A - 1 steps above the smallest model with probability
    n_k / max_j n_j (a binomial draw), so a larger model is the more likely the more
    data the client holds and its expected rank is proportional to its data size
    (PerFed-CKT Fig. 2a; the text gives no formula). ``uniform``: each architecture
    with probability 1/A.
    """
    if count == 1:
        return [0] * len(sizes)
    largest = max(max(sizes), 1)
    out = []
    for k in range(len(sizes)):
        gen = torch_generator(seed, SETUP_ROUND, k, "architecture")
        if rule == "uniform":
            out.append(int(torch.randint(count, (1,), generator=gen)))
        else:
            climbs = torch.rand(count - 1, generator=gen, dtype=torch.float64)
            out.append(int((climbs < sizes[k] / largest).sum()))
    return out
