"""The training core: the engine that owns the round loop, and everything a local step needs.

Optimisers, stacked parameters, gradient terms, objectives, distillation, the
per-client loop and its vectorised CUDA path, architectures, communication counts,
threads, device leases and the C allocator's settings. It may import
:mod:`pflrepro.store`, :mod:`pflrepro.models` and :mod:`pflrepro.data`; it knows a
method only by the :class:`~pflrepro.training.engine.Method` protocol, never
:mod:`pflrepro.algorithms` (which builds on it).
"""
