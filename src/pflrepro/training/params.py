"""Parameter dicts and their stacked form (one leading client or component dimension).

Methods hold client models stacked: one tensor per parameter whose row ``k`` belongs
to client ``k``. These helpers build, read, write and average such stacks.
"""

from __future__ import annotations

import torch

from pflrepro.training.optim import Params

__all__ = ["RunningMean", "broadcast", "grad_leaves", "put", "put_rows", "rows", "stack",
           "take", "weighted_mean"]


def grad_leaves(params: Params) -> Params:
    """Parameters as fresh autograd leaves of a loss/gradient pass.

    A view (a client's row of a stacked state) is copied: its version counter is the
    whole stack's, which other client threads bump by writing their own rows.
    """
    return {k: (v.detach().clone() if v._is_view() else v.detach()).requires_grad_(True)
            for k, v in params.items()}


def stack(params: Params, copies: int) -> Params:
    """Stack ``copies`` copies of ``params`` along a new leading dimension."""
    return {k: v.unsqueeze(0).repeat(copies, *([1] * v.dim())) for k, v in params.items()}


def broadcast(params: Params, copies: int) -> Params:
    """``params`` seen as ``copies`` stacked rows without copying (read-only views).

    For a stack that is only read, such as the one start every client of a round trains
    from: :func:`~pflrepro.training.local_training.train` copies what it updates, so
    the round holds one model, not ``copies``. The rows share the memory of ``params``:
    an in-place write to the stack is an error, and one to a row writes ``params``.
    """
    return {k: v.unsqueeze(0).expand(copies, *v.shape) for k, v in params.items()}


def take(stacked: Params, k: int) -> Params:
    """Entry ``k`` of a stacked dict (views, no copy)."""
    return {name: v[k] for name, v in stacked.items()}


def put(stacked: Params, k: int, values: Params) -> None:
    """Write ``values`` into entry ``k`` of a stacked dict, in place."""
    for name, v in values.items():
        stacked[name][k].copy_(v)


def rows(stacked: Params, index: list[int]) -> Params:
    """Entries ``index`` of a stacked dict, stacked in that order (a copy)."""
    return {name: v[index] for name, v in stacked.items()}


def put_rows(stacked: Params, index: list[int], values: Params) -> None:
    """Write stacked ``values`` (one row per entry of ``index``) into ``stacked``, in place."""
    for name, v in values.items():
        stacked[name][index] = v.to(stacked[name].device)


class RunningMean:
    """Weighted mean of parameter dicts, accumulated as they arrive (filled one entry at a time)."""

    def __init__(self, like: Params, weights: torch.Tensor) -> None:
        self.names = list(like)
        self.weights = (weights / weights.sum()).tolist()
        self.total = [torch.zeros_like(like[k]) for k in self.names]

    def add(self, k: int, params: Params) -> None:
        """Add entry ``k``'s ``params`` with its weight."""
        torch._foreach_add_(self.total, [params[n] for n in self.names], alpha=self.weights[k])

    def result(self) -> Params:
        """The weighted mean (weights of entries never added count as zero)."""
        return dict(zip(self.names, self.total, strict=True))


def weighted_mean(stacked: Params, weights: torch.Tensor) -> Params:
    """Average a stacked dict over its leading dimension with ``weights`` (normalised).

    Accumulates entry after entry like :class:`RunningMean`, so both give the same
    bits (FedAvg averages with a running mean, APFL's global model with this).
    """
    average = RunningMean(take(stacked, 0), weights)
    for k in range(len(weights)):
        average.add(k, take(stacked, k))
    return average.result()
