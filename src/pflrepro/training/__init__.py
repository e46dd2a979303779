"""The training core: the engine that owns the round loop, and everything a local step needs.

The step context (what a local step needs, built by the engine and handed down),
optimisers, stacked parameters, gradient terms, the objective protocol, distillation,
the per-client loop and its vectorised CUDA path, architectures, communication counts,
threads, device leases and the C allocator's settings. No module here imports the
engine: it sits on top and owns the round loop. It may import
:mod:`pflrepro.store`, :mod:`pflrepro.models` and :mod:`pflrepro.data`; it knows a
method only by the :class:`~pflrepro.training.engine.Method` protocol, never
:mod:`pflrepro.algorithms` (which builds on it).
"""
