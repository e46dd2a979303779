"""People's tools for looking at the project: what it offers, what would run, what ran.

:mod:`~pflrepro.inspect.listing` (methods, data sets, partition schemes, hyperparameters
and settings), :mod:`~pflrepro.inspect.plan` (a Snakemake dry run's jobs summed up and
priced), :mod:`~pflrepro.inspect.status` (the training jobs of a results directory),
:mod:`~pflrepro.inspect.run_log`, :mod:`~pflrepro.inspect.run_view` and
:mod:`~pflrepro.inspect.watch` (a running Snakemake's progress, from its log) and
:mod:`~pflrepro.inspect.verify` (every stored file against its digest). Each reads what
the pipeline plans or stores and returns it as text or findings; none is a step of the
workflow, so none is imported by :mod:`pflrepro.pipeline`.

Layer (tests/unit/test_layers.py): above :mod:`pflrepro.pipeline` (a plan is priced with
its :mod:`~pflrepro.pipeline.plan_cost`), below :mod:`pflrepro.cli`, whose commands call
these functions.
"""
