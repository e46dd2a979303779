"""Adapters between the parsed config and Snakemake: paths, targets and job parameters.

The rule files call these functions and hold no logic of their own. Every path
pattern lives here once, as a constant the rules use for their inputs, outputs and
benchmarks (:func:`pattern` fills a pattern's fixed parts, e.g. a figure's ``ext``, and
leaves its wildcards), and their logs (the ``*_LOG`` patterns; the plot rules, made in a
loop, take theirs from :func:`figure_log`).
"""

from __future__ import annotations

import dataclasses
import re
import shlex
import string
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pflrepro import results as R
from pflrepro.algorithms.registry import INFOS
from pflrepro.codedigest import partition_code_digest
from pflrepro.config import RunKey, WorkflowConfig, canonical_json
from pflrepro.data.checksums import checksum_args
from pflrepro.data.datasets import DATASETS
from pflrepro.paths import AGGREGATE, DATA_DIR, METHOD_AGGREGATE, PARTITION, PUBLIC, RUN
from pflrepro.reporting.cost_projection import COST_PROJECTION as COST_PROJECTION
from pflrepro.reporting.figures.kinds import (
    FigureKind,
    figure_kind,
    kinds_of_entry,
    rule_kinds,
    rule_options,
)
from pflrepro.tuning_jobs import shared_tuning_method

if TYPE_CHECKING:
    from pflrepro.reporting.claims.parse import Claim
    from pflrepro.reporting.paper import PaperCell



def pattern(template: str, **fields: object) -> str:
    """``template`` with the named ``{fields}`` filled in and every other ``{...}`` kept.

    Unlike ``str.format`` it leaves the fields it is not given (Snakemake wildcards)
    as they are, e.g. ``pattern(FIGURE, kind="accuracy", ext="pdf")`` is
    ``"figures/{experiment}-accuracy.pdf"``. Values go in verbatim, so a value
    ``"{table}"`` renames a wildcard. A name that is not a plain field of ``template``
    (``{name}``, not ``{name,regex}``) raises ``KeyError``: a typo would otherwise
    leave the pattern unchanged.
    """
    out: list[str] = []
    used: set[str] = set()
    for literal, field, spec, conversion in string.Formatter().parse(template):
        out.append(literal.replace("{", "{{").replace("}", "}}"))
        if field is None:
            continue
        if field in fields and not spec and conversion is None:
            out.append(str(fields[field]))
            used.add(field)
        else:
            out.append("{" + field + (f"!{conversion}" if conversion else "")
                       + (f":{spec}" if spec else "") + "}")
    unknown = sorted(set(fields) - used)
    if unknown:
        raise KeyError(f"{unknown} not plain fields of the pattern {template!r}")
    return "".join(out)


DATA_META = DATA_DIR + "/meta.json"
DATA_X = DATA_DIR + "/x.npy"
DATA_Y = DATA_DIR + "/y.npy"
#: Where a data set's downloaded (or placed) raw files go (``pflrepro prepare --raw``).
RAW_DIR = "data/raw/{dataset}"
#: Time and memory of each train job (Snakemake's ``benchmark``).
BENCHMARK = ("results/benchmarks/train/{experiment}/{partition}/{method}/"
             "split{split}-seed{seed}.tsv")
TABLE = "results/tables/{experiment}.{ext}"
#: An experiment's communication table (``pflrepro.reporting.communication``).
COMMUNICATION_TABLE = "results/tables/{experiment}-communication.{ext}"
#: An experiment's compute-cost table (``pflrepro.reporting.cost``; ``kind``: ``cost``), and
#: one projection of the paper-scale grid from them all (``reporting.cost_projection``).
COST_TABLE = "results/tables/{experiment}-{kind}.{ext}"
#: A combined table of the config's ``tables`` (the ``table`` wildcard).
COMBINED_TABLE = pattern(TABLE, experiment="{table}")
#: An experiment's figure; ``kind`` is the ``file`` its figure kind declares
#: (:mod:`pflrepro.reporting.figures.kinds`), whose ``{method}`` and ``{client}`` are
#: filled per figure here and are wildcards of the plot rules.
FIGURE = "figures/{experiment}-{kind}.{ext}"
FIGURE_LOG = "logs/plot/{experiment}-{kind}.log"
PARTITION_STATS = "results/partitions/{dataset}/{partition}/split{split}-{kind}"
PARTITION_FIGURE = "figures/partitions/{dataset}/{partition}-split{split}.{ext}"
#: Each rule's log (its Snakemake ``log:``), by rule; the training jobs' are TRAIN_LOG
#: and BATCH_LOG, the plot rules' FIGURE_LOG.
PREPARE_LOG = "logs/prepare_data/{dataset}.log"
PARTITION_LOG = "logs/partition/{dataset}/{partition}/split{split}.log"
PARTITION_STATS_LOG = "logs/partition_stats/{dataset}/{partition}/split{split}.log"
PARTITION_FIGURE_LOG = "logs/plot_partition/{dataset}/{partition}/split{split}.log"
PUBLIC_LOG = "logs/public_set/{dataset}/{partition}/split{split}-{source}{size}.log"
METHOD_AGGREGATE_LOG = "logs/aggregate/{experiment}/{method}.log"
AGGREGATE_LOG = "logs/aggregate/{experiment}.log"
COST_LOG = "logs/cost/{experiment}.log"
TABLE_LOG = "logs/table/{experiment}.log"
COMBINED_TABLE_LOG = pattern(TABLE_LOG, experiment="{table}")
COMMUNICATION_LOG = "logs/communication/{experiment}.log"
CLAIMS_LOG = "logs/claims/{claims}.log"
PAPER_TABLE_LOG = "logs/paper_table/{paper_table}.log"
REPORT_TABLE_LOG = "logs/report_table/{name}.log"
#: The claims file, relative to the Snakefile's directory (not the working directory).
CLAIMS_FILE = "config/claims.yaml"
CLAIMS_TABLE = pattern(TABLE, experiment="{claims}")
#: The claims table of each scale (the ``claims`` wildcard), e.g. ``claims_cpu``.
CLAIMS_TABLES: Mapping[str, str] = {"paper": "claims", "cpu": "claims_cpu"}

def recording(metric: str) -> tuple[str, ...]:
    """Algorithms whose ``records`` declare ``metric``.

    ``recording(results.WEIGHT)``: the algorithms that learn pairwise weights
    (client-client or client-component), each drawn as a heatmap figure;
    ``recording(results.MODEL_DISTANCE)``: those logging pairwise model distances.
    """
    return tuple(name for name, info in INFOS.items() if metric in info.records)


def alternation(names: Iterable[str]) -> str:
    """Regex matching exactly one of ``names`` (for wildcard constraints)."""
    names = sorted(names, key=len, reverse=True)
    return "|".join(re.escape(n) for n in names) if names else r"(?!)"


def figure_pattern(kind: str, ext: str) -> str:
    """A plot rule's output: the ``ext`` file of figure kind ``kind``, wildcards kept."""
    return pattern(FIGURE, kind=figure_kind(kind).file, ext=ext)


def figure_rule_kinds() -> list[FigureKind]:
    """The figure kinds with a plot rule each (all but the partition figure's)."""
    return rule_kinds()


def figure_log(kind: str) -> str:
    """A plot rule's log: ``logs/plot/{experiment}-<the kind's file>.log``."""
    return pattern(FIGURE_LOG, kind=figure_kind(kind).file)


def figure_methods(cfg: WorkflowConfig, experiment: str, kind: str) -> list[str]:
    """Methods of ``experiment`` that figure kind ``kind`` applies to.

    All of them, or those whose algorithm records the metric the kind ``records``.
    """
    records = figure_kind(kind).records
    return [m for m in cfg.experiments[experiment].methods
            if not records or records in INFOS[cfg.methods[m].algorithm].records]


def figure_aggregates(cfg: WorkflowConfig, experiment: str, kind: str) -> list[str]:
    """The per-method aggregates of the methods figure kind ``kind`` applies to.

    The input of a plot rule whose kind's input is ``recording``.
    """
    return [METHOD_AGGREGATE.format(experiment=experiment, method=m)
            for m in figure_methods(cfg, experiment, kind)]


def plot_input(kind: str) -> str | None:
    """A plot rule's input pattern (``None``: :func:`figure_aggregates`).

    ``None`` for a kind that reads the aggregates of the methods it applies to.
    """
    source = figure_kind(kind).input
    return {"aggregate": AGGREGATE, "method": METHOD_AGGREGATE}.get(source)


def plot_options(cfg: WorkflowConfig, wildcards: Any, kind: str) -> str:
    """A plot rule's ``pflrepro plot`` options beyond every kind's own (shell-quoted).

    ``--method``/``--client`` from the wildcards, ``--methods`` the legend order,
    ``--names`` the architectures.
    """
    out: list[str] = []
    for option in rule_options(figure_kind(kind)):
        if option == "methods":
            out += ["--methods", table_methods(cfg, [wildcards.experiment])]
        elif option == "names":
            out += ["--names", shlex.quote(architecture_names(cfg, wildcards.experiment))]
        else:  # a wildcard of the rule
            out += [f"--{option}", shlex.quote(str(getattr(wildcards, option)))]
    return " ".join(out)


def dataset_names() -> list[str]:
    """Every registered data set."""
    return sorted(DATASETS)


def weighted_methods(cfg: WorkflowConfig, experiment: str) -> list[str]:
    """Methods of ``experiment`` whose algorithm records client weights."""
    return [m for m in cfg.experiments[experiment].methods
            if cfg.methods[m].algorithm in recording(R.WEIGHT)]


def weights_method(cfg: WorkflowConfig, experiment: str) -> str:
    """The first method of ``experiment`` whose algorithm records client weights."""
    found = weighted_methods(cfg, experiment)
    if not found:
        raise ValueError(f"experiment {experiment!r} has no method with client weights "
                         f"(algorithms {list(recording(R.WEIGHT))})")
    return found[0]


def figure_paths(cfg: WorkflowConfig, experiment: str) -> list[str]:
    """The figures an experiment asks for (its ``figures`` list), PDF and PNG each.

    Each entry asks for its own kind and the kinds that come with it (their
    ``entry``), as each kind declares: one figure per method it applies to when its
    file names ``{method}``, else one figure if it applies to any method (a kind with
    ``if_none="error"`` refuses the experiment otherwise), for the experiment's
    ``focus_client`` when its file names ``{client}``.
    """
    exp = cfg.experiments[experiment]
    files: list[str] = []
    for entry in exp.figures:
        for kind in kinds_of_entry(entry):
            methods = figure_methods(cfg, experiment, kind.name)
            if kind.heterogeneous and not exp.training.heterogeneous:
                raise ValueError(f"experiment {experiment!r} asks for the {kind.name!r} figure "
                                 f"but its clients share one model (training.architectures "
                                 f"lists fewer than two)")
            if kind.per_method:
                files += [pattern(kind.file, method=m) for m in methods]
            elif methods:
                files.append(pattern(kind.file, client=exp.focus_client)
                             if "client" in kind.options else kind.file)
            elif kind.if_none == "error":
                raise ValueError(f"experiment {experiment!r} asks for the {kind.name!r} figure "
                                 f"but none of its methods records {kind.records!r} "
                                 f"(algorithms {list(recording(kind.records))})")
    return [FIGURE.format(experiment=experiment, kind=k, ext=ext)
            for k in files for ext in ("pdf", "png")]


def architecture_names(cfg: WorkflowConfig, experiment: str) -> str:
    """JSON ``{index: "model {options}"}`` of an experiment's architectures (figure legends)."""
    import json

    models = cfg.experiments[experiment].training.models
    return json.dumps({str(i): f"{name} {json.dumps(dict(options), sort_keys=True)}"
                       if options else name for i, (name, options) in enumerate(models)})


def experiment_targets(cfg: WorkflowConfig, experiment: str) -> list[str]:
    """Table files and figures of one experiment."""
    out = [TABLE.format(experiment=experiment, ext=ext) for ext in ("md", "tex", "csv")]
    out += [COMMUNICATION_TABLE.format(experiment=experiment, ext=ext) for ext in ("md", "csv")]
    out += cost_targets(experiment)
    return out + figure_paths(cfg, experiment)


def partition_targets(cfg: WorkflowConfig, experiments: Iterable[str]) -> list[str]:
    """Statistics tables and label-distribution figures of the experiments' partitions."""
    out: list[str] = []
    for name in experiments:
        exp = cfg.experiments[name]
        for p in exp.partitions:
            for split in exp.split_seeds:
                keys = {"dataset": exp.dataset, "partition": p.id, "split": split}
                out += [PARTITION_STATS.format(**keys, kind=k)
                        for k in ("clients.csv", "summary.md")]
                out += [PARTITION_FIGURE.format(**keys, ext=ext) for ext in ("pdf", "png")]
                if exp.public is not None:
                    out.append(PUBLIC.format(**keys, source=exp.public.dataset,
                                             size=exp.public.size))
    return list(dict.fromkeys(out))


def stored_targets(cfg: WorkflowConfig, experiments: Iterable[str]) -> list[str]:
    """The files behind the experiments' tables: partitions, runs and aggregates.

    They are targets of ``all`` as well as inputs. A job that finds one damaged sets
    it aside (:func:`pflrepro.io.read_verified`), and a missing target is rebuilt, with
    everything made from it; a file that is only an input is not rebuilt while the
    outputs made from it exist (Snakemake would say "Nothing to be done").
    """
    out: list[str] = []
    for name in experiments:
        exp = cfg.experiments[name]
        out += [PARTITION.format(dataset=exp.dataset, partition=p.id, split=split)
                for p in exp.partitions for split in exp.split_seeds]
        out += [path for method in exp.methods for path in run_paths(cfg, name, method)]
        out += method_aggregate_paths(cfg, name) + [AGGREGATE.format(experiment=name)]
    return list(dict.fromkeys(out))


#: Partial tables written after a failed workflow (:mod:`pflrepro.reporting.partial`).
PARTIAL_REPORT = "results/partial/{experiment}.{ext}"
TRAIN_LOG = "logs/train/{experiment}/{partition}/{method}/split{split}-seed{seed}.log"


def chosen_experiments(cfg: WorkflowConfig) -> list[str]:
    """The experiments of the selected scale."""
    return [n for n, e in cfg.experiments.items() if e.scale == cfg.scale]


def drop_local_rate_limiter(workflow: Any) -> bool:
    """Switch off Snakemake's job-rate limiter for a run on the local executor.

    Called from the Snakefile's ``onstart`` (after Snakemake made its scheduler, before
    the first job). The limiter (``--max-jobs-per-timespan``, CLI default 100/1s; the
    Python API's default is none) arms a one-second timer after every pass of the
    scheduler loop, and every finished job starts one more such chain
    (snakemake/snakemake PR #3744): the loop runs about once a second per job finished
    so far, and each pass looks at every waiting job (a profile of the demo: 13,327
    passes for 100 jobs). On the CPU scale (about 700 jobs, 2 cores) Snakemake's own
    process used a third of a core for the whole build (15.7 of 66 CPU-min).
    Locally at most ``--cores`` jobs run at once, so there is nothing to limit; a cluster
    executor (SLURM) keeps its limiter. Returns whether it was switched off (False where
    this Snakemake names things otherwise: then nothing changes).
    """
    plugin = getattr(workflow, "executor_plugin", None)
    scheduler = getattr(workflow, "scheduler", None)
    if (getattr(plugin, "name", None) != "local"
            or getattr(scheduler, "job_rate_limiter", None) is None):
        return False
    scheduler.job_rate_limiter = None
    return True


def write_partial_reports(cfg: WorkflowConfig) -> list[str]:
    """After a failed workflow: partial tables of the experiments missing some runs.

    Returns the reports written (see :mod:`pflrepro.reporting.partial`).
    """
    from pflrepro.reporting.partial import PartialRun, write_partial_report

    written = []
    for name in chosen_experiments(cfg):
        runs = []
        for method in cfg.experiments[name].methods:
            for k in cfg.runs(name, method):
                where = dict(experiment=k.experiment, partition=k.partition, method=k.method,
                             split=k.split, seed=k.seed)
                runs.append(PartialRun(RUN.format(**where), TRAIN_LOG.format(**where),
                                       f"{k.method}, {k.partition}, split {k.split}, "
                                       f"seed {k.seed}"))
        md = PARTIAL_REPORT.format(experiment=name, ext="md")
        present, missing = write_partial_report(
            name, runs, md, PARTIAL_REPORT.format(experiment=name, ext="csv"))
        if present and missing:
            written.append(md)
    return written


def all_targets(cfg: WorkflowConfig, claims: Sequence[Claim] | None = None) -> list[str]:
    """Everything of the selected scale.

    That is the experiments' tables and figures, the combined tables, every
    partition's report, the files they are made from (:func:`stored_targets`), and
    the claims table (:func:`claims_targets`) when ``claims`` are given.
    """
    chosen = chosen_experiments(cfg)
    out = [t for name in chosen for t in experiment_targets(cfg, name)]
    for name, table in cfg.tables.items():
        if table.scale == cfg.scale:
            out += [COMBINED_TABLE.format(table=name, ext=ext) for ext in ("md", "tex", "csv")]
    out += partition_targets(cfg, chosen)
    out += stored_targets(cfg, chosen)
    return out + (claims_targets(cfg, claims) if claims is not None else [])


def claims_scale(name: str) -> str:
    """The scale whose claims table is ``name`` (the ``claims`` wildcard)."""
    for scale, table in CLAIMS_TABLES.items():
        if table == name:
            return scale
    raise ValueError(f"unknown claims table {name!r}; expected one of "
                     f"{sorted(CLAIMS_TABLES.values())}")


def claims_experiments(cfg: WorkflowConfig, claims: Sequence[Claim], name: str) -> list[str]:
    """Experiments of the config that the claims table ``name`` reads (others: missing)."""
    from pflrepro.reporting.claims.parse import claim_experiments

    return [e for e in claim_experiments(claims, claims_scale(name)) if e in cfg.experiments]


def claims_inputs(cfg: WorkflowConfig, claims: Sequence[Claim], name: str) -> list[str]:
    """Aggregates of the experiments the claims table ``name`` reads."""
    return [AGGREGATE.format(experiment=e) for e in claims_experiments(cfg, claims, name)]


def claims_targets(cfg: WorkflowConfig, claims: Sequence[Claim]) -> list[str]:
    """The claims table of the selected scale, if the config has an experiment it reads.

    Raises ``ValueError`` when an experiment or table is named like a claims table
    (their outputs would collide).
    """
    clash = sorted(set(CLAIMS_TABLES.values()) & (set(cfg.experiments) | set(cfg.tables)))
    if clash:
        raise ValueError(f"experiment or table name(s) {clash} are reserved for the claims "
                         "tables; rename them")
    name = CLAIMS_TABLES[cfg.scale]
    if not claims_experiments(cfg, claims, name):
        return []
    return [CLAIMS_TABLE.format(claims=name, ext=ext) for ext in ("md", "csv")]


def table_inputs(cfg: WorkflowConfig, table: str) -> list[str]:
    """Experiment aggregates a combined table reads."""
    return [AGGREGATE.format(experiment=e) for e in cfg.tables[table].experiments]


def table_methods(cfg: WorkflowConfig, experiments: Iterable[str]) -> str:
    """Row order: the methods of the experiments, first appearance first."""
    order = [m for e in experiments for m in cfg.experiments[e].methods]
    return " ".join(dict.fromkeys(order))


def display_labels(cfg: WorkflowConfig, experiments: Iterable[str]) -> str:
    """JSON of display labels: ``{"partitions": {id: label}, "experiments": {name: label}}``."""
    names = list(experiments)
    partitions: dict[str, str] = {}
    for name in names:
        partitions.update(cfg.experiments[name].partition_labels)
    return canonical_json({"partitions": partitions,
                           "experiments": {n: cfg.experiments[n].label for n in names}})


def _key(wildcards: Any) -> RunKey:
    return RunKey(experiment=wildcards.experiment, partition=wildcards.partition,
                  method=wildcards.method, split=int(wildcards.split), seed=int(wildcards.seed))


def run_spec_json(cfg: WorkflowConfig, wildcards: Any) -> str:
    """The train job's spec as canonical JSON (a Snakemake ``params`` value)."""
    return canonical_json(cfg.run_spec(_key(wildcards)))


def partition_spec_json(cfg: WorkflowConfig, wildcards: Any) -> str:
    """The partitioner's spec for the partition job, as canonical JSON."""
    return canonical_json(cfg.partition_spec(wildcards.dataset, wildcards.partition).spec())


def partition_code(cfg: WorkflowConfig, wildcards: Any) -> str:
    """Digest of the code a partition job runs (a param, so edits re-partition)."""
    scheme = cfg.partition_spec(wildcards.dataset, wildcards.partition).scheme
    return partition_code_digest(scheme)


def run_paths(cfg: WorkflowConfig, experiment: str, method: str) -> list[str]:
    """Run tables of one method of one experiment."""
    return [RUN.format(experiment=k.experiment, partition=k.partition, method=k.method,
                       split=k.split, seed=k.seed) for k in cfg.runs(experiment, method)]


def method_aggregate_paths(cfg: WorkflowConfig, experiment: str) -> list[str]:
    """Per-method aggregates of one experiment."""
    return [METHOD_AGGREGATE.format(experiment=experiment, method=m)
            for m in cfg.experiments[experiment].methods]


def experiment_path(cfg: WorkflowConfig, wildcards: Any, what: str) -> str:
    """Inputs of a train job: the data set's ``meta`` or the ``partition`` file."""
    exp = cfg.experiments[wildcards.experiment]
    if what == "meta":
        return DATA_META.format(dataset=exp.dataset)
    if what == "partition":
        exp.partition(wildcards.partition)
        return PARTITION.format(dataset=exp.dataset, partition=wildcards.partition,
                                split=wildcards.split)
    raise ValueError(f"unknown train input {what!r}")


def train_public_inputs(cfg: WorkflowConfig, wildcards: Any) -> dict[str, str]:
    """A train job's public-set inputs (``public``, ``public_meta``), or none."""
    exp = cfg.experiments[wildcards.experiment]
    if exp.public is None:
        return {}
    return {"public": PUBLIC.format(dataset=exp.dataset, partition=wildcards.partition,
                                    split=wildcards.split, source=exp.public.dataset,
                                    size=exp.public.size),
            "public_meta": DATA_META.format(dataset=exp.public.dataset)}


def train_public_args(cfg: WorkflowConfig, wildcards: Any) -> str:
    """``--public FILE --public-data META`` for a train job whose experiment has one."""
    paths = train_public_inputs(cfg, wildcards)
    if not paths:
        return ""
    return f"--public {paths['public']} --public-data {paths['public_meta']}"


def train_resource(cfg: WorkflowConfig, wildcards: Any, name: str) -> int:
    """``gpu``, ``mem_mb`` or ``runtime`` (minutes) of a train job, from the experiment."""
    res: Mapping[str, int] = cfg.experiments[wildcards.experiment].resources
    return int(res[name])


# ------------------------------------------------------------- runs sharing a job
#: A job that trains several runs of one experiment, partition and method (the rules
#: ``train_<runs>``, ``runs`` e.g. ``s0t0_s1t0``: split 0 seed 0, split 1 seed 0): its
#: benchmark record and its own log (the process's stderr: every member's lines, and
#: what happens before the first run starts); each run logs to TRAIN_LOG as alone.
BATCH_BENCHMARK = ("results/benchmarks/train/{experiment}/{partition}/{method}/"
                   "runs-{runs}.tsv")
BATCH_LOG = "logs/train/{experiment}/{partition}/{method}/runs-{runs}.log"
#: Runs per training job by scale where the config's ``runs_per_job`` says nothing
#: (the schema's defaults; None: all runs of an experiment, partition and method).
RUNS_PER_JOB: Mapping[str, int | None] = {"paper": 1, "cpu": None}


@dataclass(frozen=True)
class TrainBatch:
    """The (split, seed) runs one training job trains, for each of ``experiments``.

    One Snakemake rule each (:attr:`rule`), its ``experiment`` wildcard limited to
    ``experiments``; ``partition`` and ``method`` stay wildcards.
    """

    pairs: tuple[tuple[int, int], ...]
    experiments: tuple[str, ...]

    @property
    def label(self) -> str:
        """The runs as a name part, e.g. ``s0t0_s1t0`` (split 0 seed 0, split 1 seed 0)."""
        return "_".join(f"s{split}t{seed}" for split, seed in self.pairs)

    @property
    def rule(self) -> str:
        """The Snakemake rule that trains them."""
        return f"train_{self.label}"


def runs_per_job(raw: Mapping[str, Any], scale: str) -> int | None:
    """The config's runs per training job at ``scale`` (None: all of a method's runs)."""
    value = dict(raw.get("runs_per_job") or {}).get(scale, RUNS_PER_JOB[scale])
    if value == "all" or value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"runs_per_job.{scale}: a positive integer or 'all', got {value!r}")
    return value


def train_batches(cfg: WorkflowConfig, raw: Mapping[str, Any]) -> list[TrainBatch]:
    """The jobs of the experiments whose scale trains several runs per job.

    An experiment's runs of one partition and method are its seed pairs in order
    (:meth:`pflrepro.config.ExperimentConfig.seed_pairs`), cut into chunks of
    ``runs_per_job`` (the last may be shorter); experiments with the same chunk share
    its rule. Experiments at one run per job are left to the ``train`` rule
    (:func:`single_run_experiments`).
    """
    found: dict[tuple[tuple[int, int], ...], list[str]] = {}
    for name, exp in cfg.experiments.items():
        size = runs_per_job(raw, exp.scale)
        if size == 1:
            continue
        for chunk in chunks(exp.seed_pairs(), size):
            found.setdefault(chunk, []).append(name)
    return [TrainBatch(pairs, tuple(names)) for pairs, names in found.items()]


def single_run_experiments(cfg: WorkflowConfig, raw: Mapping[str, Any]) -> list[str]:
    """Experiments trained one run per job (the ``train`` rule's ``experiment``)."""
    return [name for name, exp in cfg.experiments.items()
            if runs_per_job(raw, exp.scale) == 1]


def member_wildcards(wildcards: Any, split: int, seed: int, point: str | None = None) -> Any:
    """A batch job's wildcards with one member's ``split`` and ``seed`` (as the train rule's).

    ``point``: the member's grid point, for a tuning job (as the tune_train rule's).
    """
    from types import SimpleNamespace

    member = SimpleNamespace(experiment=wildcards.experiment, partition=wildcards.partition,
                             method=wildcards.method, split=str(split), seed=str(seed))
    if point is not None:
        member.point = point
    return member


def chunks(items: Sequence[Any], size: int | None) -> list[tuple[Any, ...]]:
    """``items`` cut in order into runs of ``size`` (the last may be shorter; None: one)."""
    step = size or len(items)
    return [tuple(items[i:i + step]) for i in range(0, len(items), step)]


def batch_member_paths(wildcards: Any, pairs: Sequence[tuple[int, int]],
                       template: str) -> list[str]:
    """``template`` (RUN, TRAIN_LOG, BENCHMARK, ...) of each member of a batch job."""
    return [template.format(experiment=wildcards.experiment, partition=wildcards.partition,
                            method=wildcards.method, split=split, seed=seed)
            for split, seed in pairs]


def batch_of(batches: Sequence[TrainBatch], key: RunKey) -> TrainBatch | None:
    """The batch job that trains run ``key``, None where it has a job of its own."""
    for batch in batches:
        if key.experiment in batch.experiments and (key.split, key.seed) in batch.pairs:
            return batch
    return None


def public_exclude_arg(source: str, dataset: str, partition: str) -> str:
    """``--exclude-partition P`` when the public set comes from the clients' data set."""
    return f"--exclude-partition {partition}" if source == dataset else ""


def mirror_args(cfg: WorkflowConfig, dataset: str) -> str:
    """``--mirror URL`` and ``--checksum FILE=SHA256`` arguments of a data set (quoted)."""
    words = [w for m in cfg.mirrors.get(dataset, ()) for w in ("--mirror", m)]
    return shlex.join(words + checksum_args(cfg.checksums.get(dataset, {})))


def clustered_methods(cfg: WorkflowConfig, experiment: str) -> list[str]:
    """Methods of ``experiment`` whose algorithm records each client's cluster id."""
    return figure_methods(cfg, experiment, "clusters")


# ------------------------------------------------------------------ compute cost
def cost_targets(experiment: str) -> list[str]:
    """The cost table (Markdown, CSV) of one experiment."""
    return [COST_TABLE.format(experiment=experiment, kind="cost", ext=ext) for ext in ("md", "csv")]


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



# --------------------------------------------------------------------------- tuning
#: A tuning experiment's validation partition (:func:`pflrepro.tuning.validation_partition`).
TUNE_PARTITION = "results/tuning/{experiment}/partitions/{partition}/split{split}.parquet"
#: One tuning run: a grid point (``{point}``: :func:`pflrepro.tuning.point_id`).
TUNE_RUN = ("results/tuning/{experiment}/runs/{partition}/{method}/{point}/"
            "split{split}-seed{seed}.parquet")
#: One tuning run's own log, and (several runs per job) the job's stderr; benchmarks.
TUNE_LOG = ("logs/tuning/{experiment}/runs/{partition}/{method}/{point}/"
            "split{split}-seed{seed}.log")
TUNE_BATCH_LOG = "logs/tuning/{experiment}/runs/{partition}/{method}/runs-{runs}.log"
TUNE_BENCHMARK = ("results/benchmarks/tuning/{experiment}/{partition}/{method}/{point}/"
                  "split{split}-seed{seed}.tsv")
TUNE_BATCH_BENCHMARK = "results/benchmarks/tuning/{experiment}/{partition}/{method}/runs-{runs}.tsv"
#: Every value tried and its validation score (``ext``: md, csv), and the selection.
TUNE_TABLE = "results/tuning/{experiment}/{method}.{ext}"
TUNE_SELECTION = "results/tuning/{experiment}/{method}.json"
#: The other tuning rules' logs: validation split, selection (a run's: TUNE_LOG).
TUNE_SPLIT_LOG = "logs/tuning/{experiment}/partitions/{partition}/split{split}.log"
TUNE_SELECT_LOG = "logs/tuning/{experiment}/{method}.log"
#: FIGURE's ``kind`` of the tuning figure (validation score against the value).
TUNE_KIND = "tuning-{method}"


def tuned_methods(cfg: WorkflowConfig, experiment: str) -> list[str]:
    """Methods of ``experiment`` whose hyperparameters its ``tune:`` block selects."""
    tune = cfg.experiments[experiment].tune
    return [] if tune is None else [m for m in cfg.experiments[experiment].methods
                                    if m in tune.methods]


def tune_trials(cfg: WorkflowConfig, experiment: str, method: str) -> list[dict[str, Any]]:
    """Every tuning run of one method: ``{point, partition, split, seed}``, in order."""
    from pflrepro.tuning import grid_points

    exp = cfg.experiments[experiment]
    tune = exp.tune
    return [{"point": point, "partition": p.id, "split": split, "seed": seed}
            for p in exp.partitions for split in exp.split_seeds
            for point in grid_points(tune.methods[method]) for seed in tune.seeds]


def tune_run_paths(cfg: WorkflowConfig, experiment: str, method: str) -> list[str]:
    """The tuning runs of one method, in the order of :func:`tune_trials`."""
    from pflrepro.tuning import point_id

    return [TUNE_RUN.format(experiment=experiment, partition=t["partition"], method=method,
                            point=point_id(t["point"]), split=t["split"], seed=t["seed"])
            for t in tune_trials(cfg, experiment, method)]


@dataclass(frozen=True)
class TuneBatch:
    """The tuning runs one job trains (``runs_per_job``, as :class:`TrainBatch`).

    ``trials``: (grid point id, split, seed) of each run, in :func:`tune_trials` order,
    for tuned method ``method`` of each of ``experiments`` on any of their partitions.
    One Snakemake rule each (:attr:`rule`); ``experiment`` and ``partition`` stay
    wildcards, ``method`` is fixed.
    """

    method: str
    trials: tuple[tuple[str, int, int], ...]
    experiments: tuple[str, ...]

    @property
    def label(self) -> str:
        """The runs as a name part: their number and a digest of what they are.

        A list of every grid point would make a file name hundreds of characters long;
        the job's own log lists the runs, and each run keeps its own log.
        """
        import hashlib

        digest = hashlib.sha256(canonical_json([self.method, self.trials]).encode())
        return f"{len(self.trials)}runs-{digest.hexdigest()[:10]}"

    @property
    def rule(self) -> str:
        """The Snakemake rule that trains them."""
        return f"tune_train_{self.label.replace('-', '_')}"


def tune_batches(cfg: WorkflowConfig, raw: Mapping[str, Any]) -> list[TuneBatch]:
    """The tuning jobs of the experiments whose scale trains several runs per job.

    A tuned method's runs on one partition of an experiment (its split seeds, grid
    points and tuning seeds, in :func:`tune_trials` order) cut into chunks of
    ``runs_per_job`` (:func:`runs_per_job`, the training jobs' setting); experiments
    with the same chunk of the same method share its rule. Experiments at one run per
    job are left to the ``tune_train`` rule (:func:`single_run_tune_experiments`).
    """
    from pflrepro.tuning import point_id

    found: dict[tuple[str, tuple[tuple[str, int, int], ...]], list[str]] = {}
    for name, exp in cfg.experiments.items():
        size = runs_per_job(raw, exp.scale)
        if size == 1:
            continue
        for method in tuned_methods(cfg, name):
            first = exp.partitions[0].id  # every partition has the same trials
            trials = tuple((point_id(t["point"]), int(t["split"]), int(t["seed"]))
                           for t in tune_trials(cfg, name, method) if t["partition"] == first)
            for chunk in chunks(trials, size):
                found.setdefault((method, chunk), []).append(name)
    return [TuneBatch(method, trials, tuple(names))
            for (method, trials), names in found.items()]


def single_run_tune_experiments(cfg: WorkflowConfig, raw: Mapping[str, Any]) -> list[str]:
    """Experiments whose tuning runs get a job each (the ``tune_train`` rule's)."""
    return [name for name in single_run_experiments(cfg, raw) if tuned_methods(cfg, name)]


def tune_member_paths(wildcards: Any, trials: Sequence[tuple[str, int, int]],
                      template: str) -> list[str]:
    """``template`` (TUNE_RUN, TUNE_LOG, TUNE_PARTITION) of each member of a tuning job."""
    return [template.format(experiment=wildcards.experiment, partition=wildcards.partition,
                            method=wildcards.method, point=point, split=split, seed=seed)
            for point, split, seed in trials]


def tune_plan_json(cfg: WorkflowConfig, experiment: str, method: str) -> str:
    """The tune-select job's plan (a param: a changed grid or budget reruns it)."""
    exp = cfg.experiments[experiment]
    tune = exp.tune
    grids = tune.methods[method]
    return canonical_json({
        "algorithm": cfg.methods[method].algorithm, "fixed": dict(cfg.methods[method].params),
        "clients": {p.id: p.clients for p in exp.partitions},
        "grids": {g.key: list(g.values) for g in grids},
        "log": [g.key for g in grids if g.log], "criterion": tune.criterion,
        "rounds": tune.rounds, "seeds": list(tune.seeds), "fraction": tune.fraction,
        "labels": dict(exp.partition_labels),
        **({"rounds_note": tune.rounds_note} if tune.rounds_note else {}),
        **({"training": True} if method == shared_tuning_method(cfg, experiment) else {}),
        "trials": tune_trials(cfg, experiment, method)})


def table_tuning_json(cfg: WorkflowConfig, experiments: Iterable[str],
                      selections: Mapping[tuple[str, str], Mapping[str, Any]]) -> str:
    """The table job's ``--tuning``: per tuned (experiment, method), grids and selection.

    ``selections``: (experiment, method) -> its selection file's content, for every
    method :func:`tuned_methods` names. ``"[]"`` when no method is tuned.
    """
    import json

    out = []
    for name in experiments:
        for method in tuned_methods(cfg, name):
            plan = json.loads(tune_plan_json(cfg, name, method))
            del plan["trials"]
            out.append({"experiment": name, "method": method, **plan,
                        "selection": dict(selections[(name, method)])})
    return canonical_json(out)


def read_selection(path: str) -> dict[str, Any]:
    """A tune-select job's selection file (:func:`pflrepro.tuning.selection_json`)."""
    import json

    with open(path) as fh:
        return dict(json.load(fh))


def tune_targets(cfg: WorkflowConfig) -> list[str]:
    """Tuning tables, selections and figures of the selected scale's experiments."""
    out: list[str] = []
    for name in chosen_experiments(cfg):
        for m in tuned_methods(cfg, name):
            out += [TUNE_TABLE.format(experiment=name, method=m, ext=ext) for ext in ("md", "csv")]
            out.append(TUNE_SELECTION.format(experiment=name, method=m))
            out += [FIGURE.format(experiment=name, kind=pattern(TUNE_KIND, method=m), ext=ext)
                    for ext in ("pdf", "png")]
    return out


def output_dirs() -> list[str]:
    """The fixed directories the rules write under (results/runs, figures, logs, ...)."""
    import os

    patterns = [v for k, v in globals().items() if k.isupper() and isinstance(v, str)
                and v.split("/")[0] in ("results", "figures", "logs")]
    return sorted({os.path.dirname(p.split("{")[0]) for p in patterns} | {"logs", "data/raw"})
