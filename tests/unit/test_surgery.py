"""pflrepro.models.surgery: faster layers with the same bits."""

import pytest
import torch
import torch.nn.functional as F

from pflrepro.models.surgery import PairMaxPool2d, pair_max_pools


@pytest.mark.parametrize("shape", [(2, 3, 8, 8), (3, 4, 7, 9), (1, 2, 2, 2)])
def test_pair_max_pool_same_bits_as_max_pool(shape):
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(*shape, generator=gen).round(decimals=1)  # plenty of ties
    x[0, 0, 0, 0] = float("nan")
    pool = PairMaxPool2d(2)
    for layout in (torch.contiguous_format, torch.channels_last):
        xs = x.contiguous(memory_format=layout)
        expected = F.max_pool2d(xs, 2)
        with torch.inference_mode():
            got = pool(xs)
        torch.testing.assert_close(got, expected, rtol=0, atol=0, equal_nan=True)
    # with autograd on it is max-pooling itself: the same gradient, ties included
    a = x.nan_to_num().requires_grad_(True)
    pool(a).sum().backward()
    b = x.nan_to_num().requires_grad_(True)
    F.max_pool2d(b, 2).sum().backward()
    assert torch.equal(a.grad, b.grad)


def test_pair_max_pools_replaces_only_plain_two_by_two_pools():
    model = torch.nn.Sequential(torch.nn.MaxPool2d(2), torch.nn.MaxPool2d((2, 2), 2),
                                torch.nn.MaxPool2d(3), torch.nn.MaxPool2d(2, padding=1),
                                torch.nn.MaxPool2d(2, ceil_mode=True),
                                torch.nn.Sequential(torch.nn.MaxPool2d(2, 2)))
    pair_max_pools(model)
    kinds = [type(m).__name__ for m in model.modules()][1:]
    assert kinds == ["PairMaxPool2d", "PairMaxPool2d", "MaxPool2d", "MaxPool2d", "MaxPool2d",
                     "Sequential", "PairMaxPool2d"]
