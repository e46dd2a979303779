"""pflrepro.training.params: stacked parameter dicts, by hand."""

import numpy as np
import pytest
import torch
from _fl_helpers import assert_params_close

from pflrepro.training.params import RunningMean, put, stack, take, weighted_mean


def test_weighted_mean_by_hand():
    # [[1,2],[3,4]] with weights [1,3] -> (1*[1,2] + 3*[3,4]) / 4 = [2.5, 3.5]
    stacked = {"a": torch.tensor([[1.0, 2.0], [3.0, 4.0]]),
               "m": torch.tensor([[[1.0, 0.0]], [[0.0, 1.0]]])}  # (2, 1, 2)
    out = weighted_mean(stacked, torch.tensor([1.0, 3.0]))
    torch.testing.assert_close(out["a"], torch.tensor([2.5, 3.5]))
    torch.testing.assert_close(out["m"], torch.tensor([[0.25, 0.75]]))
    # weights need not be normalised; equal weights give the plain mean
    out = weighted_mean(stacked, torch.tensor([5.0, 5.0]))
    torch.testing.assert_close(out["a"], torch.tensor([2.0, 3.0]))


def test_stack_take_put():
    params = {"w": torch.tensor([[1.0, 2.0]]), "b": torch.tensor(3.0)}
    stacked = stack(params, 3)
    assert stacked["w"].shape == (3, 1, 2) and stacked["b"].shape == (3,)
    assert torch.equal(take(stacked, 2)["w"], params["w"])
    put(stacked, 1, {"w": torch.tensor([[7.0, 8.0]]), "b": torch.tensor(9.0)})
    assert stacked["w"][:, 0, 0].tolist() == [1.0, 7.0, 1.0]
    assert stacked["b"].tolist() == [3.0, 9.0, 3.0]
    # stack copies: params untouched; take gives views into the stack
    assert params["w"].tolist() == [[1.0, 2.0]]
    view = take(stacked, 0)
    view["b"].fill_(-1.0)
    assert stacked["b"].tolist() == [-1.0, 9.0, 3.0]


def test_running_mean_equals_weighted_mean_bitwise():
    gen = torch.Generator().manual_seed(0)
    stacked = {"a": torch.randn(4, 3, 2, generator=gen), "b": torch.randn(4, 5, generator=gen)}
    weights = torch.tensor([3.0, 1.0, 0.0, 2.0])
    acc = RunningMean(take(stacked, 0), weights)
    for k in range(4):
        acc.add(k, take(stacked, k))
    got = acc.result()
    assert_params_close(got, weighted_mean(stacked, weights), atol=0, rtol=0)
    w = weights / weights.sum()
    assert_params_close(got, {n: torch.tensordot(w, v, dims=1) for n, v in stacked.items()})


def test_broadcast_is_read_only_views_that_train_like_a_stack():
    """One model's memory for any number of rows; training from it equals a real stack."""
    from _fl_helpers import make_engine

    from pflrepro.training.params import broadcast

    e = make_engine()
    start = e.init_params()
    views = broadcast(start, 100)
    for k, v in views.items():
        assert v.shape == (100, *start[k].shape)
        assert v.untyped_storage().data_ptr() == start[k].untyped_storage().data_ptr()
    clients = list(range(e.num_clients))
    opt = stack(e.init_opt(start), len(clients))
    a = e.train(broadcast(start, len(clients)), opt, clients, 1)
    b = e.train(stack(start, len(clients)), opt, clients, 1)
    for x, y in zip(a[:2], b[:2], strict=True):
        for k in x:
            assert torch.equal(x[k], y[k])
    np.testing.assert_array_equal(a[2], b[2])
    with pytest.raises(RuntimeError):
        broadcast(start, 3)[next(iter(start))].add_(1.0)  # rows share their memory
