"""Device memory of a vectorised local-training pass, and how many clients fit one.

One client of a vmapped pass (:func:`pflrepro.training.local_training.train_vmap`)
holds, besides the data set (resident once, shared by all clients):

* its model state: :data:`PARAM_COPIES` copies of its parameters (the caller's
  stacked parameters, the pass's working copy, the gradients) plus the optimiser's
  per-parameter slots (:func:`optimizer_slots`: Adam's two moments, SGD momentum's
  buffer, none for plain SGD);
* its activations at the batch size: the tensors autograd saves for the backward
  pass, **measured** once per model by a forward pass at the batch size under
  ``torch.autograd.graph.saved_tensors_hooks`` (each saved storage counted once,
  views of the parameters not counted), plus twice the largest of them for the
  backward's working gradients. One forward per step and per further stream of the
  method's objective (a distillation batch is a second forward).

:func:`clients_that_fit` turns a device capacity into a chunk size; the vectorised
path uses it on CUDA when ``training.client_chunk`` is 0, so a pass fits the device's
free memory (:func:`device_free_bytes`).
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass

import torch
from torch import nn
from torch.func import functional_call

__all__ = ["PARAM_COPIES", "SAFETY", "ClientMemory", "activation_bytes", "client_memory",
           "clients_that_fit", "device_free_bytes", "optimizer_slots"]

#: Parameter-sized tensors a client holds in a pass besides its optimiser slots: the
#: caller's stacked parameters, the working copy the optimiser updates, the gradients.
PARAM_COPIES = 3
#: Share of the free device memory a pass may plan to use (the rest absorbs the
#: allocator's fragmentation, the optimiser's temporaries and the method's terms).
SAFETY = 0.7

_ACTIVATIONS: weakref.WeakKeyDictionary[nn.Module, dict[tuple, int]] = (
    weakref.WeakKeyDictionary())


def optimizer_slots(optimizer: str, momentum: float = 0.0) -> int:
    """Parameter-sized state tensors of :class:`~pflrepro.training.optim.Optimizer`."""
    if optimizer == "adam":
        return 2
    if optimizer == "sgd":
        return 1 if momentum else 0
    raise ValueError(f"unknown optimizer {optimizer!r}; known: ['adam', 'sgd']")


def activation_bytes(model: nn.Module, in_shape: tuple[int, ...], batch_size: int,
                     dtype: torch.dtype = torch.float32) -> int:
    """Bytes one training step of ``model`` at ``batch_size`` keeps for its backward.

    Measured by a forward pass on zeros (on the model's device) with gradients
    towards every parameter: the storages autograd saves, each once, less the
    parameters' own, plus twice the largest saved storage (the gradient flowing back
    and the one being formed). Cached per model, shape, batch size and dtype.
    """
    key = (tuple(in_shape), int(batch_size), dtype)
    cache = _ACTIVATIONS.setdefault(model, {})
    if key in cache:
        return cache[key]
    device = next(model.parameters()).device
    params = {k: v.detach().to(dtype).requires_grad_(True) for k, v in model.named_parameters()}
    own = {v.untyped_storage().data_ptr() for v in params.values()}
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        if storage.data_ptr() not in own:
            seen[storage.data_ptr()] = storage.nbytes()
        return t

    x = torch.zeros((int(batch_size), *in_shape), dtype=dtype, device=device)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = functional_call(model, params, (x,))
    del out
    total = sum(seen.values()) + 2 * max(seen.values(), default=0)
    cache[key] = total
    return total


@dataclass(frozen=True)
class ClientMemory:
    """One client's bytes in a vectorised pass (see the module docstring)."""

    param_bytes: int  # one copy of the client's parameters
    slots: int  # the optimiser's parameter-sized state tensors
    activation_bytes: int  # one training step's saved activations, all forwards

    @property
    def state_bytes(self) -> int:
        """Parameters, their working copy, gradients and optimiser slots."""
        return self.param_bytes * (PARAM_COPIES + self.slots)

    @property
    def per_client(self) -> int:
        """Model state plus activations."""
        return self.state_bytes + self.activation_bytes

    def total(self, clients: int) -> int:
        """Bytes of a pass over ``clients`` clients at once."""
        return int(clients) * self.per_client


def client_memory(model: nn.Module, in_shape: tuple[int, ...], batch_size: int,
                  optimizer: str, momentum: float = 0.0, forwards: int = 1,
                  dtype: torch.dtype = torch.float32,
                  parameters: int | None = None) -> ClientMemory:
    """:class:`ClientMemory` of ``model`` trained at ``batch_size`` with ``optimizer``.

    ``forwards``: forward passes of ``model`` per step whose activations coexist (the
    training batch, each further stream of the method's objective, each expert of a
    mixture). ``parameters``: scalars one client trains, when not one ``model``'s
    (a mixture's experts and gate).
    """
    element = torch.empty((), dtype=dtype).element_size()
    n = sum(p.numel() for p in model.parameters()) if parameters is None else int(parameters)
    return ClientMemory(param_bytes=n * element, slots=optimizer_slots(optimizer, momentum),
                        activation_bytes=int(forwards) * activation_bytes(
                            model, in_shape, batch_size, dtype))


def clients_that_fit(per_client: int, capacity: int, safety: float = SAFETY) -> int:
    """Clients of ``per_client`` bytes that fit ``safety`` of ``capacity`` bytes (>= 1)."""
    if per_client <= 0:
        raise ValueError(f"per_client must be > 0, got {per_client}")
    return max(1, math.floor(safety * capacity / per_client))


def device_free_bytes(device: torch.device) -> int | None:
    """Free memory of a CUDA device (``torch.cuda.mem_get_info``); None elsewhere.

    None means "no limit to plan for": the CPU path never chunks on its own.
    """
    if device.type != "cuda":
        return None
    free, _ = torch.cuda.mem_get_info(device)
    return int(free)
