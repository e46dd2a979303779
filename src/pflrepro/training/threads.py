"""Clients side by side on CPU threads, each with its own copy of the model.

Torch kernels release the GIL, so clients trained on separate threads (one torch
thread each) run in parallel; each computes the same sequence of single-threaded
kernels as in a plain loop, so results are the same bits for any number of threads.
"""

from __future__ import annotations

import copy
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

import torch
from torch import nn

__all__ = ["ClientThreads"]

T = TypeVar("T")


class ClientThreads:
    """Runs per-client functions on ``workers`` threads; model instances per thread."""

    def __init__(self, model: nn.Module | Sequence[nn.Module], workers: int = 1) -> None:
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        #: The models (one per architecture of the run; the first is :attr:`model`).
        self.models = [model] if isinstance(model, nn.Module) else list(model)
        self.model = self.models[0]
        self.workers = workers
        self._pool: ThreadPoolExecutor | None = None
        self._nets = threading.local()
        self._owner = threading.get_ident()

    @property
    def net(self) -> nn.Module:
        """The calling thread's instance of the (first) model; see :meth:`net_of`."""
        return self.net_of(0)

    def net_of(self, arch: int) -> nn.Module:
        """The calling thread's instance of model ``arch``.

        ``functional_call`` swaps a module's tensors in and out, so each client thread
        (:meth:`map_clients`) has its own copies; they have the structure of the originals.
        """
        if threading.get_ident() == self._owner:
            return self.models[arch]
        nets = getattr(self._nets, "models", None)
        if nets is None:
            nets = self._nets.models = {}
        net = nets.get(arch)
        if net is None:
            net = nets[arch] = copy.deepcopy(self.models[arch])
        return net

    def map_clients(self, fn: Callable[[int], T], clients: Iterable[int]) -> Iterator[T]:
        """``fn(k)`` for every client ``k``, yielded in the order of ``clients``.

        With :attr:`workers` > 1 (CPU) the calls run on that many threads, each with one
        torch thread and its own model instance (:attr:`net`); torch kernels release the
        GIL, so the clients train in parallel. Every client's computation is the same
        sequence of single-threaded kernels as in a plain loop, so the results are the
        same bits for any number of workers. ``fn`` may read shared state and write only
        client ``k``'s own rows; whatever combines clients belongs to the caller, which
        gets the results in order (at most ``2 × workers`` are computed ahead).
        """
        order = list(clients)
        if self.workers == 1 or len(order) < 2:
            for k in order:
                yield fn(k)
            return
        if self._pool is None:
            # one torch thread per client thread (torch's setting is per thread)
            self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="pflrepro-client",
                                            initializer=torch.set_num_threads, initargs=(1,))
        pending: deque[Future[T]] = deque()
        todo = iter(order)
        try:
            for k in todo:
                pending.append(self._pool.submit(fn, k))
                if len(pending) >= 2 * self.workers:
                    break
            while pending:
                result = pending.popleft().result()
                nxt = next(todo, None)
                if nxt is not None:
                    pending.append(self._pool.submit(fn, nxt))
                yield result
        finally:
            for fut in pending:  # an error (or an early stop): drop what has not started
                fut.cancel()
            for fut in pending:
                if not fut.cancelled():
                    fut.exception()  # wait, so nothing still writes after we return

    def close(self) -> None:
        """Stop the client threads (if any ran); the engine stays usable."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def run_clients(self, fn: Callable[[int], object], clients: Iterable[int]) -> None:
        """:meth:`map_clients` for its side effects: ``fn(k)`` writes client ``k``'s rows."""
        for _ in self.map_clients(fn, clients):
            pass
