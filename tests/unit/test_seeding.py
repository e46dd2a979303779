"""pflrepro.seeding: derived seeds are deterministic, sensitive to every argument."""

import numpy as np
import pytest
import torch

from pflrepro.seeding import NO_CLIENT, SETUP_ROUND, derive_seed, numpy_generator, torch_generator

BASE = (0, 1, 2, "batches")


def test_deterministic_and_in_range():
    assert derive_seed(*BASE) == derive_seed(*BASE)
    for args in [BASE, (123456789, SETUP_ROUND, NO_CLIENT, "init"), (2**40, 10**6, 999, "")]:
        s = derive_seed(*args)
        assert isinstance(s, int) and 0 <= s < 2**63


@pytest.mark.parametrize("position", range(4))
def test_sensitive_to_each_argument(position):
    changed = list(BASE)
    changed[position] = "batchez" if position == 3 else changed[position] + 1
    assert derive_seed(*changed) != derive_seed(*BASE)


def test_fields_are_separated():
    # "1|23|..." must not collide with "12|3|..."
    assert derive_seed(1, 23, 0, "x") != derive_seed(12, 3, 0, "x")
    assert derive_seed(0, 0, 1, "2") != derive_seed(0, 0, 12, "")


def test_many_seeds_distinct():
    seeds = {derive_seed(s, r, c, "p") for s in range(5) for r in range(-1, 5)
             for c in range(-1, 5)}
    assert len(seeds) == 5 * 6 * 6


def test_generators_reproducible():
    a = torch.randperm(50, generator=torch_generator(*BASE))
    b = torch.randperm(50, generator=torch_generator(*BASE))
    assert torch.equal(a, b)
    c = torch.randperm(50, generator=torch_generator(0, 1, 2, "other"))
    assert not torch.equal(a, c)
    x = numpy_generator(*BASE).random(10)
    np.testing.assert_array_equal(x, numpy_generator(*BASE).random(10))
    assert not np.array_equal(x, numpy_generator(0, 2, 2, "batches").random(10))


def test_generators_ignore_global_state():
    torch.manual_seed(1)
    np.random.seed(1)
    a = (torch.rand(5, generator=torch_generator(*BASE)), numpy_generator(*BASE).random(5))
    torch.manual_seed(2)
    np.random.seed(2)
    torch.rand(3)
    b = (torch.rand(5, generator=torch_generator(*BASE)), numpy_generator(*BASE).random(5))
    assert torch.equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])


def test_torch_generator_is_seeded_with_derived_seed():
    gen = torch_generator(*BASE)
    assert gen.initial_seed() == derive_seed(*BASE)
    assert gen.device.type == "cpu"
