"""Local training of a set of clients: one entry point, two paths, one arithmetic.

:func:`train` runs, for each client of a list, its local optimisation of one round:
``steps`` optimiser steps on mini-batches from
:meth:`~pflrepro.training.context.StepContext.minibatches`, each step's gradient that of
the batch's mean cross-entropy (or of the method's objective,
:mod:`pflrepro.training.objective`) plus the method's gradient terms
(:mod:`pflrepro.training.terms`), then :meth:`pflrepro.training.optim.Optimizer.step_`.
Parameters and
optimiser states come and go stacked (row ``i`` for ``clients[i]``). Two paths:

* ``loop``: one client after another (on the run's client threads,
  :class:`~pflrepro.training.threads.ClientThreads`), each step a ``functional_call`` and
  ``autograd.grad`` of that client's model (of its mean loss, or of the objective's
  loss) (:func:`train_client`);
* ``vmap``: every client in one pass per step: ``torch.func.vmap`` of
  ``grad_and_value`` (of the same loss) over the client dimension (a convolution with
  per-client weights becomes one grouped convolution), the terms and the optimiser
  applied to the stacked tensors (:func:`train_vmap`).

Both draw the same mini-batches, add the same terms and call the same optimiser
update, so they differ only in float rounding. Clients differ in their step counts
and batch sizes; the vectorised path pads batches with weight-zero samples (the loss
of a padded batch is the sum over its real samples divided by their number, the
loop's mean) and steps with masked steps that leave a client's parameters and
optimiser state as they are.

On a GPU one pass over K clients costs little more than one client's; on a CPU the
loop is as fast or faster, so ``training.client_training: auto`` loops there.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
import torch
from torch.func import grad_and_value, vmap

from pflrepro.training import memory
from pflrepro.training.context import StepContext
from pflrepro.training.objective import (
    Batch,
    Objective,
    Stream,
    loss_and_grad,
    masked_ce,
    stacked_loss_and_grad,
)
from pflrepro.training.optim import OptState, Params
from pflrepro.training.params import put, take
from pflrepro.training.terms import GradTerm, add_terms

__all__ = ["LOOP", "PATHS", "VMAP", "auto_chunk", "client_batch", "padded_minibatches",
           "stream_batches", "train", "train_client", "train_vmap"]

log = logging.getLogger(__name__)

#: The two training paths (recorded per run as the ``client_training`` column).
LOOP, VMAP = "loop", "vmap"
PATHS = (LOOP, VMAP)


def train(ctx: StepContext, params: Params, opt_state: OptState, clients: Sequence[int],
          rnd: int, purpose: str = "local", steps: Sequence[int] | int | None = None,
          terms: Sequence[GradTerm] = (), path: str = LOOP, chunk: int | None = None,
          pools: Sequence[torch.Tensor] | None = None,
          objective: Objective | None = None) -> tuple[Params, OptState, np.ndarray]:
    """Local training of ``clients`` (stacked ``params``/``opt_state``, row per client).

    ``steps``: one count per client, one for all, or None for each client's
    :meth:`~pflrepro.training.context.StepContext.steps_per_round` (of its pool).
    ``terms`` are given shared or per client (stacked like ``params``). ``pools``: per
    client, the sample indices it trains on instead of its training set. ``path`` is
    :data:`LOOP` or :data:`VMAP`; ``chunk`` bounds the clients of one vectorised pass
    (None/0: all). ``objective`` (:mod:`pflrepro.training.objective`) replaces each step's
    mean cross-entropy (shared or per client, like ``terms``).

    Returns new stacked parameters and optimiser states (the inputs are untouched)
    and each client's mean data loss over its steps (float64; 0 for no steps).
    """
    clients = [int(k) for k in clients]
    if pools is not None and len(pools) != len(clients):
        raise ValueError(f"pools has {len(pools)} entries for {len(clients)} clients")
    counts = _step_counts(ctx, clients, steps, pools)
    _check_stacked(params, opt_state, len(clients))
    if path == VMAP:
        p, o, losses = train_vmap(ctx, params, opt_state, clients, rnd, purpose, counts,
                                  terms, chunk, pools, objective)
        return p, o, losses.cpu().numpy()
    if path != LOOP:
        raise ValueError(f"unknown training path {path!r}; known: {list(PATHS)}")
    # every row is written below: no copy of the inputs (which may be broadcast views)
    out_p = {k: torch.empty_like(v) for k, v in params.items()}
    out_o = {k: torch.empty_like(v) for k, v in opt_state.items()}
    losses = np.zeros(len(clients), dtype=np.float64)

    def one(i: int) -> None:
        p, o, losses[i] = train_client(ctx, take(params, i), take(opt_state, i),
                                       clients[i], rnd, purpose, counts[i],
                                       [t.row(i) for t in terms],
                                       None if pools is None else pools[i],
                                       None if objective is None else objective.row(i))
        put(out_p, i, p)
        put(out_o, i, o)

    ctx.threads.run_clients(one, range(len(clients)))
    return out_p, out_o, losses


def train_client(ctx: StepContext, params: Params, opt_state: OptState, client: int, rnd: int,
                 purpose: str = "local", steps: int | None = None,
                 terms: Sequence[GradTerm] = (),
                 pool: torch.Tensor | None = None,
                 objective: Objective | None = None) -> tuple[Params, OptState, float]:
    """One client's local steps (one model, not stacked); params, state, mean loss.

    ``terms`` and ``objective`` hold this client's tensors (``row``); ``pool`` replaces
    its training set; the reported loss is the data loss only (the objective's).
    """
    if steps is None:
        steps = ctx.steps_per_round(client, samples=None if pool is None else len(pool))
    batches = ctx.minibatches(client, rnd, purpose, steps, pool)
    # working copies, updated in place step by step (the inputs stay untouched)
    work = {k: v.detach().clone() for k, v in params.items()}
    opt_state = {k: v.clone() for k, v in opt_state.items()}
    streams = () if objective is None else objective.streams
    extra = [stream_batches(ctx, client, rnd, st, steps, pool) for st in streams]
    model = ctx.net_for(work)
    total = 0.0
    for s, idx in enumerate(batches):
        if objective is None:
            loss, grads = ctx.loss_and_grad(work, idx)
        else:
            value, grads = loss_and_grad(
                objective, model, work, client_batch(ctx, idx),
                [client_batch(ctx, b[s], st.public) for b, st in zip(extra, streams, strict=True)],
                opt_state)
            loss = float(value)
        if terms:
            grads = add_terms(terms, work, grads)
        ctx.optimizer.step_(work, grads, opt_state)
        total += loss
    return work, opt_state, total / max(len(batches), 1)


def client_batch(ctx: StepContext, idx: torch.Tensor, public: bool = False) -> Batch:
    """One client's unpadded :class:`~pflrepro.training.objective.Batch` of rows ``idx``.

    ``public``: rows of the public set (labels zeros).
    """
    n = len(idx)
    if public:
        assert ctx.data.public is not None
        x, y = ctx.data.public[idx], torch.zeros(n, dtype=torch.long, device=ctx.device)
    else:
        x, y = ctx.data.x[idx], ctx.data.y[idx]
    return Batch(idx, x, y, torch.ones(n, device=ctx.device),
                 torch.tensor(float(n), device=ctx.device))


def _step_counts(ctx: StepContext, clients: list[int], steps: Sequence[int] | int | None,
                 pools: Sequence[torch.Tensor] | None) -> list[int]:
    if steps is None:
        return [ctx.steps_per_round(k, samples=None if pools is None else len(pools[i]))
                for i, k in enumerate(clients)]
    if isinstance(steps, int):
        return [steps] * len(clients)
    counts = [int(n) for n in steps]
    if len(counts) != len(clients):
        raise ValueError(f"steps has {len(counts)} entries for {len(clients)} clients")
    return counts


def _check_stacked(params: Params, opt_state: OptState, c: int) -> None:
    for name, v in params.items():
        if v.shape[0] != c:
            raise ValueError(f"params[{name!r}] has leading size {v.shape[0]}, expected {c}")
    if opt_state["step"].shape != (c,):
        raise ValueError(f"opt_state['step'] must have shape ({c},), got "
                         f"{tuple(opt_state['step'].shape)}")


def _stream_pool(ctx: StepContext, stream: Stream,
                 pool: torch.Tensor | None) -> torch.Tensor | None:
    """The rows a further stream draws from: the public set's, or the client's pool.

    None: the training set of the client that seeds the stream.
    """
    if stream.public:
        if ctx.data.public is None:
            raise ValueError(f"stream {stream.purpose!r} draws from the public set; there is none")
        return torch.arange(len(ctx.data.public), device=ctx.device)
    return pool if stream.client is None else None


def stream_batches(ctx: StepContext, client: int, rnd: int, stream: Stream, steps: int,
                   pool: torch.Tensor | None = None) -> list[torch.Tensor]:
    """``steps`` batches of trained client ``client``'s further stream ``stream``.

    Seeded by the stream's ``client`` when it names one (that client's training rows),
    else by ``client`` (its pool, or the public set's rows); a ``whole`` stream's every
    batch is the whole pool in stored order. Both paths draw through here.
    """
    owner = client if stream.client is None else stream.client
    rows = _stream_pool(ctx, stream, pool)
    if stream.whole:
        whole = ctx.data.train[owner] if rows is None else rows
        return [whole] * max(int(steps), 0)
    sized = {} if stream.batch_size is None else {"batch_size": stream.batch_size}
    return ctx.minibatches(owner, rnd, stream.purpose, steps, rows, **sized)


def padded_minibatches(ctx: StepContext, clients: Sequence[int], rnd: int, purpose: str,
                       steps: Sequence[int], pools: Sequence[torch.Tensor | None] | None = None,
                       batch_size: int | None = None,
                       ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, np.ndarray]:
    """Every client's mini-batches from ``ctx.minibatches``, padded into one tensor.

    Returns ``(index, mask, count, active)``:

    * ``index`` (C, S, B) int64 on the device: row ``index[i, s, j]`` of the data set
      is sample ``j`` of client ``clients[i]``'s batch ``s``; padding points at row 0;
    * ``mask`` (C, S, B) float32: 1 for real samples, 0 for padding;
    * ``count`` (C, S) float32: real samples per batch (1 on padded steps, so the
      loss divides by a non-zero number; their mask is all zero anyway);
    * ``active`` (C, S) bool NumPy array: whether step ``s`` is a real step of client
      ``i`` (kept on the host so the caller can skip masking without a device sync).

    S is the largest step count, B the largest batch; C = ``len(clients)``.
    """
    sized = {} if batch_size is None else {"batch_size": batch_size}
    per_client = [ctx.minibatches(k, rnd, purpose, int(n),
                                     None if pools is None else pools[i], **sized)
                  for i, (k, n) in enumerate(zip(clients, steps, strict=True))]
    return _pad_batches(ctx, per_client)


def _pad_batches(ctx: StepContext, per_client: Sequence[Sequence[torch.Tensor]],
                 min_steps: int = 1
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, np.ndarray]:
    """Per-client lists of batches padded into one tensor (see :func:`padded_minibatches`).

    At least ``min_steps`` steps (a client with fewer batches has masked steps).
    """
    c = len(per_client)
    s_max = max((len(b) for b in per_client), default=0)
    b_max = max((len(idx) for b in per_client for idx in b), default=0)
    s_max, b_max = max(s_max, min_steps, 1), max(b_max, 1)
    mask = np.zeros((c, s_max, b_max), dtype=np.float32)
    count = np.ones((c, s_max), dtype=np.float32)
    active = np.zeros((c, s_max), dtype=bool)
    dest: list[np.ndarray] = []
    flat: list[torch.Tensor] = []
    for i, batches in enumerate(per_client):
        for s, idx in enumerate(batches):
            n = len(idx)  # a shape: no device sync
            if n == 0:
                continue
            mask[i, s, :n] = 1.0
            count[i, s] = n
            active[i, s] = True
            dest.append((i * s_max + s) * b_max + np.arange(n))
            flat.append(idx)
    device = ctx.device
    index = torch.zeros(c * s_max * b_max, dtype=torch.long, device=device)
    if flat:
        where = torch.from_numpy(np.concatenate(dest)).to(device)
        index[where] = torch.cat(flat).to(device=device, dtype=torch.long)
    return (index.view(c, s_max, b_max), torch.from_numpy(mask).to(device),
            torch.from_numpy(count).to(device), active)


def _slice(stacked: Params, a: int, b: int) -> Params:
    return {k: v[a:b] for k, v in stacked.items()}


def train_vmap(ctx: StepContext, params: Params, opt_state: OptState, clients: list[int],
               rnd: int, purpose: str, counts: list[int], terms: Sequence[GradTerm] = (),
               chunk: int | None = None, pools: Sequence[torch.Tensor] | None = None,
               objective: Objective | None = None) -> tuple[Params, OptState, torch.Tensor]:
    """The vectorised path of :func:`train` (losses stay on the device).

    Chunks of at most ``chunk`` clients run one after the other (memory: a pass holds
    ``chunk`` batches of activations and a few stacked copies of ``chunk`` models); a
    client's result does not depend on the chunking beyond float rounding. No
    ``chunk`` (None/0): all clients in one pass, unless the device reports its free
    memory (CUDA) and they would not fit it (:func:`auto_chunk`).
    """
    c = len(clients)
    stacked_terms = [t.stacked(params) for t in terms]
    stacked_objective = None if objective is None else objective.stacked(c)
    size = auto_chunk(ctx, params, c, objective) if not chunk or chunk <= 0 else int(chunk)
    parts: list[tuple[Params, OptState, torch.Tensor]] = []
    for a in range(0, c, max(size, 1)):
        b = min(c, a + size)
        parts.append(_train_chunk(ctx, _slice(params, a, b), _slice(opt_state, a, b),
                                  clients[a:b], rnd, purpose, counts[a:b],
                                  [t.rows(a, b) for t in stacked_terms],
                                  None if pools is None else pools[a:b],
                                  None if stacked_objective is None
                                  else stacked_objective.rows(a, b)))
    if not parts:
        return ({k: v.clone() for k, v in params.items()},
                {k: v.clone() for k, v in opt_state.items()},
                torch.zeros(0, dtype=torch.float64, device=ctx.device))
    if len(parts) == 1:
        return parts[0]
    out_params = {k: torch.cat([p[0][k] for p in parts]) for k in parts[0][0]}
    out_state = {k: torch.cat([p[1][k] for p in parts]) for k in parts[0][1]}
    return out_params, out_state, torch.cat([p[2] for p in parts])


def auto_chunk(ctx: StepContext, params: Params, c: int,
               objective: Objective | None = None) -> int:
    """Clients per pass so that one pass over ``c`` stacked clients fits the device.

    ``c`` when :func:`~pflrepro.training.memory.device_free_bytes` reports no limit
    (the CPU) or all fit; else the clients whose estimated need
    (:func:`~pflrepro.training.memory.client_memory` of the parameters it trains, at the
    run's batch size, one forward per model it holds and per objective stream) fits
    :data:`~pflrepro.training.memory.SAFETY` of the free memory. A chunked pass is
    logged with its chunk size.
    """
    free = memory.device_free_bytes(ctx.device)
    if free is None or c <= 1:
        return c
    model = ctx.models[ctx.arch_index(params, stacked=True)]
    per_client = sum(v[0].numel() for v in params.values())
    # a client training several models' worth (a mixture's experts) runs each forward
    models = max(1, round(per_client / sum(p.numel() for p in model.parameters())))
    streams = 0 if objective is None else max(len(objective.client_streams(i))
                                              for i in range(c))
    need = memory.client_memory(
        model, ctx.in_shape, ctx.cfg.batch_size, ctx.cfg.optimizer,
        ctx.cfg.momentum, forwards=models * (1 + streams),
        dtype=next(iter(params.values())).dtype, parameters=per_client)
    size = min(c, memory.clients_that_fit(need.per_client, free))
    if size < c:
        log.info("vmapped local training: %d clients of about %.1f MiB each do not fit "
                 "%.1f GiB free; passes of %d clients", c, need.per_client / 2**20,
                 free / 2**30, size)
    return size


def _train_chunk(ctx: StepContext, params: Params, opt_state: OptState, clients: list[int],
                 rnd: int, purpose: str, counts: list[int], terms: Sequence[GradTerm],
                 pools: Sequence[torch.Tensor] | None, objective: Objective | None = None,
                 ) -> tuple[Params, OptState, torch.Tensor]:
    """One pass per step over the clients of one chunk (see :func:`train_vmap`)."""
    model = ctx.models[ctx.arch_index(params, stacked=True)]
    x_all, y_all = ctx.data.x, ctx.data.y
    index, mask, count, active = padded_minibatches(ctx, clients, rnd, purpose, counts,
                                                    pools)
    n_steps = index.shape[1]
    # further streams of the objective (same step counts as the main one): slot j holds
    # each client's j-th stream, empty (mask 0) for a client with fewer
    per_streams = [() if objective is None else objective.client_streams(i)
                   for i in range(len(clients))]
    extra = []
    for j in range(max((len(st) for st in per_streams), default=0)):
        slot = [st[j] if j < len(st) else None for st in per_streams]
        public = {st.public for st in slot if st is not None}
        if len(public) > 1:
            raise ValueError(f"stream slot {j} mixes public and private streams")
        st_index, st_mask, st_count, _ = _pad_batches(ctx, [
            [] if st is None else stream_batches(ctx, k, rnd, st, n,
                                                 None if pools is None else pools[i])
            for i, (k, n, st) in enumerate(zip(clients, counts, slot, strict=True))], n_steps)
        on_public = public == {True}
        extra.append((st_index, st_mask, st_count,
                      ctx.data.public if on_public else x_all,
                      torch.zeros((), dtype=torch.long, device=ctx.device) if on_public
                      else y_all))
    active_dev = torch.from_numpy(active).to(ctx.device)

    # without an objective: the batch's mean cross-entropy over its real samples
    loss_and_grads = vmap(grad_and_value(lambda p, batch: masked_ce(model, p, batch)))
    # working copies, updated in place by the optimiser (the inputs stay untouched); the
    # step count may live on the CPU (Optimizer.init): stepped on the device, handed
    # back where it was
    work = {k: v.detach().clone() for k, v in params.items()}
    step_device = opt_state["step"].device
    state = {k: v.detach().to(ctx.device, copy=True) for k, v in opt_state.items()}
    total = torch.zeros(len(clients), dtype=torch.float64, device=ctx.device)
    for s in range(n_steps):
        idx = index[:, s]
        step_active = None if active[:, s].all() else active_dev[:, s]
        batch = Batch(idx, x_all[idx], y_all[idx], mask[:, s], count[:, s])
        if objective is None:
            grads, loss = loss_and_grads(work, batch)
        else:
            loss, grads = stacked_loss_and_grad(
                objective, model, work, batch, state=state, active=step_active,
                extra=[Batch(i[:, s], xs[i[:, s]], ys.expand_as(i)[:, s] if ys.dim() == 0
                             else ys[i[:, s]], m[:, s], c[:, s])
                       for i, m, c, xs, ys in extra])
        if terms:
            grads = add_terms(terms, work, grads)
        ctx.optimizer.step_(work, grads, state, step_active)
        loss = loss.detach().to(torch.float64)
        total += loss if step_active is None else torch.where(step_active, loss, 0.0)
    done = torch.tensor([max(n, 1) for n in (int(a.sum()) for a in active)],
                        dtype=torch.float64, device=ctx.device)
    state["step"] = state["step"].to(step_device)
    return work, state, total / done
