"""pflrepro.training.architectures: per-client architectures' models, lookup and assignment."""

import pytest
import torch

from pflrepro.seeding import SETUP_ROUND, torch_generator
from pflrepro.training.architectures import Architectures, assign_architectures, param_shapes

CPU = torch.device("cpu")
SPECS = [("mlp", {"hidden": []}), ("mlp", {"hidden": [3]})]


def test_models_sizes_and_lookup_by_shape() -> None:
    archs = Architectures(SPECS, (1, 1, 2), 2, CPU)
    # 2 inputs, 2 classes: 2·2 + 2 = 6 scalars; with 3 hidden: 2·3 + 3 + 3·2 + 2 = 17
    assert archs.sizes == [6, 17]
    for a, model in enumerate(archs.models):
        params = dict(model.named_parameters())
        assert archs.index(params) == a
        assert archs.index({k: v.expand(4, *v.shape) for k, v in params.items()},
                           stacked=True) == a
        assert not any(p.requires_grad for p in model.parameters())
    with pytest.raises(ValueError, match="no architecture of this run"):
        archs.index({"net.1.weight": torch.zeros(7, 2)})
    with pytest.raises(ValueError, match="same parameter names and shapes"):
        Architectures([SPECS[1], SPECS[1]], (1, 1, 2), 2, CPU)
    one = Architectures(SPECS[:1], (1, 1, 2), 2, CPU)
    assert one.index({"anything": torch.zeros(1)}) == 0  # one architecture: no lookup


def test_param_shapes_sorted_and_skipping_the_stack_dimension() -> None:
    params = {"b": torch.zeros(4, 3), "a": torch.zeros(4, 2, 5)}
    assert param_shapes(params) == (("a", (4, 2, 5)), ("b", (4, 3)))
    assert param_shapes(params, skip=1) == (("a", (2, 5)), ("b", (3,)))


def test_data_size_rule_climbs_each_step_with_probability_n_over_max() -> None:
    sizes = [40, 1, 20, 0]
    got = assign_architectures(3, sizes, 5, "data_size")
    for k, n in enumerate(sizes):  # by hand: the client's two uniforms below n / 40
        u = torch.rand(2, generator=torch_generator(5, SETUP_ROUND, k, "architecture"),
                       dtype=torch.float64)
        assert got[k] == int((u < n / 40).sum())
    assert got[0] == 2 and got[3] == 0  # the largest always climbs, an empty client never
    assert assign_architectures(3, sizes, 5, "data_size") == got  # seeded


def test_uniform_rule_and_a_single_architecture() -> None:
    got = assign_architectures(3, [5] * 6, 1, "uniform")
    for k in range(6):
        gen = torch_generator(1, SETUP_ROUND, k, "architecture")
        assert got[k] == int(torch.randint(3, (1,), generator=gen))
    assert assign_architectures(1, [5, 0, 2], 1, "data_size") == [0, 0, 0]
