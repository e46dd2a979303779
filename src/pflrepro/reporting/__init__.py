"""Tables and figures built from aggregated run tables (see :mod:`pflrepro.store.results`).

Layer (tests/unit/test_layers.py): everything a reader sees, made from stored
runs; it may import every layer up to :mod:`pflrepro.config` and
:mod:`pflrepro.tuning`, never :mod:`pflrepro.pipeline` or the CLI.
"""
