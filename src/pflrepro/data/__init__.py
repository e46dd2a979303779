"""Data: sources (one module per data set), partition schemes, prepared data sets.

Layer (tests/unit/test_layers.py): data sets and partitions; it may import
:mod:`pflrepro.models` and :mod:`pflrepro.store`, nothing above.
"""
