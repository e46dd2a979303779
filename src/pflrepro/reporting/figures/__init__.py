"""Figures, one module per kind, each written as a PDF and a PNG (atomically, reproducibly).

Each module declares its kind at top level, ``KIND = FigureKind(...)``
(:mod:`.kinds`): the name (the one spelling: the config's ``figures`` entry, ``pflrepro
plot NAME``, the rule ``plot_NAME``), the file name part, the draw function, the input
(the experiment's aggregate, one method's, or those of the methods it applies to), the
``pflrepro plot`` options it takes, the report's caption and label, and which methods
it applies to (those whose algorithm ``records`` a metric of :mod:`pflrepro.results`).
``pflrepro plot --help`` lists the kinds; :data:`.kinds.KINDS` holds the
declarations (no table here to fall behind them). The config check
(``pflrepro.config.FIGURE_KINDS``), the CLI, the output and log paths
(``pflrepro.workflow``), the plot rules (one per kind, made in a loop in
``workflow/rules/report.smk``) and the report captions are derived from them.

Adding a figure kind is one module here and its test, ``tests/unit/test_figures_<name>.py``:
write the draw function ``draw(agg, pdf, png, *, labels, **options)`` (save with
:func:`.common.finish`), declare ``KIND = FigureKind(name=..., file=..., draw=...,
caption=..., label=..., options=(...))``, with values that are literals or metric names
imported from :mod:`pflrepro.results` (the registry reads them without importing the
module), and list its name in an experiment's ``figures``. A kind that comes with
another entry (as the cluster and FedMix figures come with ``weights``) says so with
``entry``. Nothing else lists it.

:mod:`.common` holds what they share: the style, the layout that fits every figure on
its canvas, saving, and picking the run a panel shows. Nothing is imported here, so
loading one kind loads only its module (and matplotlib).
"""
