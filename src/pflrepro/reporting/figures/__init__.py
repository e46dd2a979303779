"""Figures, one module per kind, each written as a PDF and a PNG (atomically, reproducibly).

Each module but :mod:`.common` declares its kind at top level,
``KIND = FigureKind(...)`` (:mod:`pflrepro.config.figure_kinds`): the name (the one spelling: the config's
``figures`` entry, ``pflrepro plot NAME`` and, unless the kind names its ``rule``, the
rule ``plot_NAME``), the file name part, the name of its draw function, the input
(the experiment's aggregate, one method's, those of the methods it applies to, or a
partition), the ``pflrepro plot`` options it takes, the report's caption and label,
and which methods it applies to (those whose algorithm ``records`` a metric of
:mod:`pflrepro.store.results`). :data:`pflrepro.config.figure_kinds.KINDS` holds the
declarations, read from the modules' source without importing them; ``pflrepro plot --help`` lists them. Derived
from them: the config check's figure entries (``pflrepro.config.FIGURE_KINDS``), the
``pflrepro plot`` command and its options, the report captions
(:mod:`pflrepro.reporting.report`), and, for every kind drawn from aggregates, the
output and log paths (:func:`pflrepro.pipeline.workflow.figure_pattern`,
:func:`pflrepro.pipeline.workflow.figure_log`) and the plot rule (one per kind, made in a loop
in ``workflow/rules/report.smk``). The partition figure (:mod:`.labels`, input
``partition``) is the exception: its rule ``plot_partition`` and its paths
(``pflrepro.pipeline.workflow.PARTITION_FIGURE``) are written in ``workflow/rules/data.smk``,
since it is drawn for every partition, not for an experiment's ``figures`` entry.

Adding a figure kind drawn from aggregates is one module here and its test,
``tests/unit/test_figures_<name>.py``: write a draw function
``name(agg, pdf, png, *, labels, **options)`` (save with :func:`.common.finish`),
declare ``KIND = FigureKind(name=..., file=..., draw="<its name>", caption=...,
label=..., options=(...))``, with values that are literals or metric names imported
from :mod:`pflrepro.store.results` (the registry reads them without importing the module),
and list its name in an experiment's ``figures``. A kind that comes with another entry
(as the cluster and FedMix figures come with ``weights``) says so with ``entry``.
Nothing else lists it.

:mod:`.common` holds what they share: the style, the layout that fits every figure on
its canvas, saving, and picking the run a panel shows. This file imports nothing, so
importing the package loads no figure module; drawing one kind imports its module and
what that imports (:mod:`.common`, matplotlib and seaborn; some also
:mod:`pflrepro.reporting.tables`), not the other kinds.
"""
