"""Local training of many clients at once: parameters stacked along a client dimension.

:func:`local_train_batched` runs, for every client of a list, exactly the local
optimisation :meth:`pflrepro.engine.Engine.local_train` runs for that client alone
(same mini-batches in the same order, same loss, same optimiser update, optionally
the same proximal term as :func:`pflrepro.engine.proximal_hook`), but all clients in
one pass per step: the loss gradient is ``torch.func.vmap`` of
``torch.func.grad_and_value`` of the model's ``functional_call`` over the leading
client dimension (functorch turns a convolution with per-client weights into one
grouped convolution and a linear layer into a batched matmul), and the optimiser
update is written out over stacked tensors.

Clients differ in their number of steps (their data sizes differ) and in their batch
sizes (``min(batch_size, n_train)``, and possibly a shorter last batch). Batches are
padded to a common size with samples of weight zero, and the loss of a padded batch
is the sum over its real samples divided by their number, i.e. exactly the mean the
loop computes. Steps are padded to a common count with masked steps: on a masked
step a client's parameters and optimiser state (SGD's momentum buffer, Adam's step
count and moments) are kept as they are, so the result does not depend on which
other clients share the pass.

This pays off on a GPU, where one pass over K clients' batches costs little more
than one client's; on a CPU the per-client loop is as fast or faster (the work is the
same and the CPU is already busy), so the engine keeps the loop there.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import torch
import torch.nn.functional as F
from torch.func import functional_call, grad_and_value, vmap

from pflrepro.optim import Optimizer, OptState, Params

if TYPE_CHECKING:  # engine imports algorithms, which may import this module
    from pflrepro.engine import Engine

__all__ = ["local_train_batched", "padded_batches"]


def padded_batches(engine: Engine, clients: Sequence[int], rnd: int, purpose: str,
                   steps: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor,
                                                  np.ndarray]:
    """Every client's mini-batches from ``engine.batches``, padded into one tensor.

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
    per_client = [engine.batches(k, rnd, purpose, int(n))
                  for k, n in zip(clients, steps, strict=True)]
    c = len(clients)
    s_max = max((len(b) for b in per_client), default=0)
    b_max = max((len(idx) for b in per_client for idx in b), default=0)
    s_max, b_max = max(s_max, 1), max(b_max, 1)
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
    device = engine.device
    index = torch.zeros(c * s_max * b_max, dtype=torch.long, device=device)
    if flat:
        where = torch.from_numpy(np.concatenate(dest)).to(device)
        index[where] = torch.cat(flat).to(device=device, dtype=torch.long)
    return (index.view(c, s_max, b_max), torch.from_numpy(mask).to(device),
            torch.from_numpy(count).to(device), active)


def _expand(flag: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """(C,) ``flag`` shaped to broadcast against the stacked tensor ``like``."""
    return flag.view(-1, *([1] * (like.dim() - 1)))


@torch.no_grad()
def _update(opt: Optimizer, params: Params, grads: Params, state: OptState,
            active: torch.Tensor | None) -> tuple[Params, OptState]:
    """One optimiser step of every client, :meth:`Optimizer.step` over stacked tensors.

    ``active`` (C,) bool on the device, or None when every client steps: an inactive
    client keeps its parameters and state (its step count included).
    """
    old_step = state["step"]
    if active is None:
        step = old_step + 1
    else:
        step = old_step + active.to(old_step.dtype)
    new_state: OptState = {"step": step}
    new_params: Params = {}

    def keep(new: torch.Tensor, old: torch.Tensor) -> torch.Tensor:
        return new if active is None else torch.where(_expand(active, new), new, old)

    if opt.name == "sgd":
        first = step == 1
        for k, p in params.items():
            g = grads[k]
            if opt.momentum:
                old_buf = state[f"buf.{k}"]
                buf = torch.where(_expand(first, g), g, old_buf * opt.momentum + g)
                new_state[f"buf.{k}"] = keep(buf, old_buf)
                g = buf
            new_params[k] = keep(p - opt.lr * g, p)
        return new_params, new_state
    b1, b2 = opt.betas
    t = step.clamp_min(1)  # masked clients may still be at step 0; their update is dropped
    bc1 = 1 - b1**t
    bc2 = 1 - b2**t
    for k, p in params.items():
        g = grads[k]
        old_m, old_v = state[f"m.{k}"], state[f"v.{k}"]
        m = old_m * b1 + g * (1 - b1)
        v = old_v * b2 + g * g * (1 - b2)
        new_state[f"m.{k}"] = keep(m, old_m)
        new_state[f"v.{k}"] = keep(v, old_v)
        scale = _expand((opt.lr / bc1).to(p.dtype), p)
        root_bc2 = _expand((bc2**0.5).to(p.dtype), p)
        denom = (v.sqrt() / root_bc2) + opt.eps
        new_params[k] = keep(p - scale * m / denom, p)
    return new_params, new_state


def _slice(stacked: dict[str, torch.Tensor], a: int, b: int) -> dict[str, torch.Tensor]:
    return {k: v[a:b] for k, v in stacked.items()}


def local_train_batched(engine: Engine, params: Params, opt_state: OptState,
                        clients: Sequence[int], rnd: int, purpose: str = "local",
                        steps: Sequence[int] | int | None = None,
                        anchor: Params | None = None, coef: float = 0.0,
                        offset: Params | None = None,
                        chunk: int | None = None) -> tuple[Params, OptState, torch.Tensor]:
    """:meth:`Engine.local_train` for every client in ``clients`` at once.

    ``params`` and ``opt_state`` are stacked: entry ``i`` of every tensor belongs to
    ``clients[i]`` (``opt_state["step"]`` has shape (C,)). ``steps`` is one count per
    client, one count for all, or None for each client's ``engine.steps_per_round``.
    With ``anchor`` every step's gradient gets ``coef · (params − anchor)`` (FedProx's
    pull, :func:`pflrepro.engine.proximal_hook`); ``anchor`` is stacked per client or,
    shaped like one client's parameters, shared by all. With ``offset`` (stacked or
    shared likewise) every step's gradient gets ``+ offset``, after the proximal term
    (SCAFFOLD's control-variate correction ``c − c_i``, ``control_hook``). ``chunk``
    bounds how many clients go through one pass (memory: a pass holds ``chunk``
    batches of activations and a few stacked copies of ``chunk`` models); None or 0
    means all at once. Chunks run one after the other; a client's result does not
    depend on the chunking beyond float rounding.

    Returns the updated stacked parameters and optimiser state (new tensors; the
    inputs are not modified) and each client's mean data loss over its steps
    (float64, shape (C,), on the device; 0 for a client with no steps, like the loop).
    """
    clients = [int(k) for k in clients]
    c = len(clients)
    if steps is None:
        counts = [engine.steps_per_round(k) for k in clients]
    elif isinstance(steps, int):
        counts = [steps] * c
    else:
        counts = [int(n) for n in steps]
        if len(counts) != c:
            raise ValueError(f"steps has {len(counts)} entries for {c} clients")
    for name, v in params.items():
        if v.shape[0] != c:
            raise ValueError(f"params[{name!r}] has leading size {v.shape[0]}, expected {c}")
    if opt_state["step"].shape != (c,):
        raise ValueError(f"opt_state['step'] must have shape ({c},), got "
                         f"{tuple(opt_state['step'].shape)}")
    anchor = None if anchor is None else _per_client(anchor, params)
    offset = None if offset is None else _per_client(offset, params)
    size = c if not chunk or chunk <= 0 else int(chunk)
    parts: list[tuple[Params, OptState, torch.Tensor]] = []
    for a in range(0, c, max(size, 1)):
        b = min(c, a + size)
        parts.append(_train_chunk(engine, _slice(params, a, b), _slice(opt_state, a, b),
                                  clients[a:b], rnd, purpose, counts[a:b],
                                  None if anchor is None else _slice(anchor, a, b), coef,
                                  None if offset is None else _slice(offset, a, b)))
    if not parts:
        return ({k: v.clone() for k, v in params.items()},
                {k: v.clone() for k, v in opt_state.items()},
                torch.zeros(0, dtype=torch.float64, device=engine.device))
    if len(parts) == 1:
        return parts[0]
    out_params = {k: torch.cat([p[0][k] for p in parts]) for k in parts[0][0]}
    out_state = {k: torch.cat([p[1][k] for p in parts]) for k in parts[0][1]}
    return out_params, out_state, torch.cat([p[2] for p in parts])


def _per_client(values: Params, params: Params) -> Params:
    """``values`` stacked like ``params``: stacked as given, or one copy broadcast to all."""
    return {k: (v.detach() if v.dim() == params[k].dim()
                else v.detach().unsqueeze(0).expand_as(params[k])) for k, v in values.items()}


def _train_chunk(engine: Engine, params: Params, opt_state: OptState, clients: list[int],
                 rnd: int, purpose: str, counts: list[int], anchor: Params | None,
                 coef: float, offset: Params | None) -> tuple[Params, OptState, torch.Tensor]:
    """One pass per step over the clients of one chunk (see :func:`local_train_batched`)."""
    model = engine.model
    x_all, y_all = engine.data.x, engine.data.y
    index, mask, count, active = padded_batches(engine, clients, rnd, purpose, counts)
    n_steps = index.shape[1]
    active_dev = torch.from_numpy(active).to(engine.device)

    def batch_loss(p: Params, x: torch.Tensor, y: torch.Tensor, m: torch.Tensor,
                   n: torch.Tensor) -> torch.Tensor:
        out = functional_call(model, p, (x,))
        return (F.cross_entropy(out, y, reduction="none") * m).sum() / n

    loss_and_grads = vmap(grad_and_value(batch_loss))
    params = {k: v.detach() for k, v in params.items()}
    # the optimiser's step count may live on the CPU (Optimizer.init): step it on the
    # device with everything else, hand it back where it was
    step_device = opt_state["step"].device
    state = {k: v.detach().to(engine.device) for k, v in opt_state.items()}
    total = torch.zeros(len(clients), dtype=torch.float64, device=engine.device)
    for s in range(n_steps):
        idx = index[:, s]
        grads, loss = loss_and_grads(params, x_all[idx], y_all[idx], mask[:, s], count[:, s])
        if anchor is not None:
            grads = {k: g + coef * (params[k] - anchor[k]) for k, g in grads.items()}
        if offset is not None:
            grads = {k: g + offset[k] for k, g in grads.items()}
        step_active = None if active[:, s].all() else active_dev[:, s]
        params, state = _update(engine.optimizer, params, grads, state, step_active)
        loss = loss.detach().to(torch.float64)
        total += loss if step_active is None else torch.where(step_active, loss, 0.0)
    done = torch.tensor([max(n, 1) for n in (int(a.sum()) for a in active)],
                        dtype=torch.float64, device=engine.device)
    state["step"] = state["step"].to(step_device)
    return params, state, total / done
