"""The cost tables' inputs and arguments, the paper-vs-ours tables and the report pages."""

from __future__ import annotations

import dataclasses
import re
import shlex
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from pflrepro.config import WorkflowConfig, canonical_json
from pflrepro.pipeline.workflow.jobs import BATCH_BENCHMARK, TrainBatch, batch_of
from pflrepro.pipeline.workflow.patterns import BENCHMARK, TRAIN_LOG
from pflrepro.pipeline.workflow.targets import all_targets, chosen_experiments
from pflrepro.store.paths import AGGREGATE, RUN

if TYPE_CHECKING:
    from pflrepro.reporting.claims.parse import Claim
    from pflrepro.reporting.paper import PaperCell


# ------------------------------------------------------------------ compute cost
def _job_paths(cfg: WorkflowConfig, experiment: str, template: str) -> list[str]:
    return [template.format(experiment=k.experiment, partition=k.partition, method=k.method,
                            split=k.split, seed=k.seed)
            for method in cfg.experiments[experiment].methods
            for k in cfg.runs(experiment, method)]


def cost_inputs(cfg: WorkflowConfig, experiment: str) -> list[str]:
    """Run tables of every job of ``experiment``, in the order of :func:`cost_args`."""
    return _job_paths(cfg, experiment, RUN)


def _benchmark_paths(cfg: WorkflowConfig, experiment: str,
                     batches: Sequence[TrainBatch]) -> list[str]:
    """The benchmark record of the job that trains each run, in :func:`cost_inputs` order."""
    out = []
    for method in cfg.experiments[experiment].methods:
        for k in cfg.runs(experiment, method):
            batch = batch_of(batches, k)
            out.append(BENCHMARK.format(**dataclasses.asdict(k)) if batch is None else
                       BATCH_BENCHMARK.format(experiment=k.experiment, partition=k.partition,
                                              method=k.method, runs=batch.label))
    return out


def cost_args(cfg: WorkflowConfig, experiment: str,
              batches: Sequence[TrainBatch] = ()) -> str:
    """``--benchmarks ... --logs ... --training JSON`` of the cost job (shell-quoted).

    The benchmark records and logs are written by the train jobs that write the runs
    (the cost rule's inputs), so they exist when the runs do; they are arguments, not
    inputs, since Snakemake tracks neither as an output. Runs trained by one job
    (``batches``: :func:`train_batches`) share its benchmark record.
    """
    training = canonical_json(cfg.experiments[experiment].training.to_dict())
    return " ".join(["--benchmarks", *_benchmark_paths(cfg, experiment, batches),
                     "--logs", *_job_paths(cfg, experiment, TRAIN_LOG),
                     "--training", shlex.quote(training)])


# --------------------------------------------------------------------------- report
#: The papers' own numbers (:mod:`pflrepro.reporting.paper`), relative to the Snakefile.
PAPER_NUMBERS_FILE = "config/paper_numbers.csv"
#: A paper-vs-ours table; ``{paper_table}`` is the numbers file's ``table_id``, with
#: ``_cpu`` at the CPU scale (:func:`pflrepro.reporting.paper.output_name`).
PAPER_TABLE = "results/tables/{paper_table}-paper.{ext}"
#: Caption templates of the report (Jinja + reStructuredText), relative to the rule
#: files in workflow/rules, as ``report(caption=...)`` takes them.
REPORT_CAPTION = "../report/{kind}.rst"
#: A Markdown table of ``results/tables`` as an HTML page, for ``snakemake --report``.
REPORT_TABLE = "results/report/{name}.html"
REPORT_TABLE_SOURCE = "results/tables/{name}.md"
_TABLE_MD = re.compile(r"^results/tables/([^/]+)\.md$")


def paper_tables(cfg: WorkflowConfig, cells: Sequence[PaperCell]) -> dict[str, str]:
    """Paper-vs-ours tables of the selected scale: output name -> the numbers' table id.

    Those with a row whose experiment at that scale is in the config.
    """
    from pflrepro.reporting.paper import tables_at

    return tables_at(cells, cfg.scale, chosen_experiments(cfg))


def paper_table_experiments(cfg: WorkflowConfig, cells: Sequence[PaperCell],
                            name: str) -> list[str]:
    """Experiments of the config that the paper-vs-ours table ``name`` reads."""
    from pflrepro.reporting.paper import table_experiments

    table_id = paper_tables(cfg, cells)[name]
    return [e for e in table_experiments(cells, table_id, cfg.scale) if e in cfg.experiments]


def paper_table_inputs(cfg: WorkflowConfig, cells: Sequence[PaperCell], name: str) -> list[str]:
    """Aggregates the paper-vs-ours table ``name`` reads."""
    return [AGGREGATE.format(experiment=e) for e in paper_table_experiments(cfg, cells, name)]


def report_targets(cfg: WorkflowConfig, claims: Sequence[Claim],
                   cells: Sequence[PaperCell], extra: Sequence[str] = ()) -> list[str]:
    """The paper-vs-ours tables and the HTML page of every Markdown table of ``all``.

    ``extra``: further targets of ``all`` whose Markdown tables get a page too (the
    paper grid's projections, which the workflow's rule files add to ``all``).
    """
    names = paper_tables(cfg, cells)
    out = [PAPER_TABLE.format(paper_table=n, ext=ext) for n in names for ext in ("md", "csv")]
    tables = [m.group(1) for t in [*all_targets(cfg, claims), *out, *extra]
              if (m := _TABLE_MD.match(t))]
    return out + [REPORT_TABLE.format(name=t) for t in dict.fromkeys(tables)]


def report_table_names(targets: Iterable[str]) -> list[str]:
    """Names of the report's table pages among ``targets`` (:data:`REPORT_TABLE`)."""
    pattern_ = re.compile(r"^results/report/([^/]+)\.html$")
    return [m.group(1) for t in targets if (m := pattern_.match(t))]
