"""The one object the rule files ask: the inputs, params and targets of every rule.

workflow/rules/common.smk builds one :class:`Rules` from the checked config, and each
rule names what it needs as an attribute of it (``input: P.run_inputs(job)``,
``params: methods=P.experiment.methods``). The attributes are Snakemake's input and
params functions: they take the job's ``wildcards`` and answer from the config, the
papers' claims and numbers, and the tuning selections the ``tune_select`` checkpoint
writes (asked through Snakemake's ``checkpoints``, so a job that needs a selection waits
for it).

Shell words: every placeholder of a rule's command is quoted (``{x:q}``; a list becomes
one quoted word per item), so a param of several arguments is a list of words here.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pflrepro.config import WorkflowConfig
from pflrepro.pipeline.workflow import figures, jobs, report, targets, tuning
from pflrepro.pipeline.workflow.training_rules import TrainingRule, training_rules
from pflrepro.reporting.cost_projection import COST_PROJECTION

if TYPE_CHECKING:
    from pflrepro.reporting.claims.parse import Claim
    from pflrepro.reporting.paper import PaperCell

#: A function of a job's wildcards: what Snakemake calls for an input or a param.
WildcardsFunction = Callable[[Any], Any]


def words(text: str) -> list[str]:
    """Shell text (:mod:`.jobs` quotes where a value may hold a space) as its words."""
    return shlex.split(text)


@dataclass(frozen=True)
class Scope:
    """The experiments a reporting job reads, and what its params say about them.

    ``experiments`` names them for a job's wildcards: one experiment's table, a combined
    table, a paper-vs-ours table, a claims table.
    """

    rules: Rules
    experiments: WildcardsFunction

    def methods(self, wildcards: Any) -> list[str]:
        """Row order: the experiments' methods, first appearance first (``--methods``)."""
        return words(figures.table_methods(self.rules.cfg, self.experiments(wildcards)))

    def labels(self, wildcards: Any) -> str:
        """Display labels of the experiments' partitions, methods and names (JSON)."""
        return targets.display_labels(self.rules.cfg, self.experiments(wildcards))

    def selections(self, wildcards: Any) -> list[Any]:
        """The tuning selections of the experiments (ancient: their params rerun a job)."""
        return self.rules.selections(self.experiments(wildcards))

    def tuning(self, wildcards: Any) -> str:
        """``--tuning`` JSON: waits for the experiments' tuning selections."""
        return self.rules.tuning_notes(self.experiments(wildcards))


class Rules:
    """The input and params functions of the workflow's rules, over one checked config.

    ``raw``: the config as Snakemake merged it (``runs_per_job``); ``workflow`` and
    ``checkpoints``: Snakemake's objects of the running workflow; ``python`` and
    ``source``: the interpreter and source the jobs run (preflight.smk).
    """

    def __init__(self, cfg: WorkflowConfig, raw: Mapping[str, Any], *, workflow: Any,
                 checkpoints: Any, claims: Sequence[Claim], paper_cells: Sequence[PaperCell],
                 config_files: Sequence[Any], python: Any, source: Any) -> None:
        self.cfg = cfg
        self.workflow = workflow
        self.checkpoints = checkpoints
        self.claims = claims
        self.paper_cells = paper_cells
        self.config_files = list(config_files)
        #: Every rule's ``params`` of :data:`~.training_rules.CLI` (not rerun triggers:
        #: Snakemake records only plain params, and these are paths).
        self.cli = {"python": python, "source": source}
        self.training_rules: list[TrainingRule] = training_rules(cfg, raw)
        self.train_batches = jobs.train_batches(cfg, raw)
        self.paper_tables = report.paper_tables(cfg, paper_cells)
        self.experiment = Scope(self, lambda w: [w.experiment])
        self.table = Scope(self, lambda w: list(cfg.tables[w.table].experiments))
        self.paper_table = Scope(self, lambda w: report.paper_table_experiments(
            cfg, paper_cells, w.paper_table))
        self.claims_table = Scope(self, lambda w: targets.claims_experiments(
            cfg, claims, w.claims))

    # ------------------------------------------------------------------ targets
    def cost_projection_targets(self) -> list[str]:
        """One projection of the paper grid, from the chosen experiments' cost tables."""
        if not targets.chosen_experiments(self.cfg):
            return []
        return [COST_PROJECTION.format(ext=ext) for ext in ("md", "csv")]

    def report_targets(self) -> list[str]:
        """Paper-vs-ours tables and a report page beside every table of ``all``."""
        from pflrepro.reporting.flops import projection_targets

        return report.report_targets(self.cfg, self.claims, self.paper_cells,
                                     self.cost_projection_targets()
                                     + projection_targets(self.cfg))

    def all_targets(self) -> list[str]:
        """Every output of the loaded config (rule ``all``)."""
        from pflrepro.pipeline.data_targets import prepared_files
        from pflrepro.reporting.flops import projection_targets

        cfg = self.cfg
        return (targets.all_targets(cfg, self.claims) + self.report_targets()
                + tuning.tune_targets(cfg)
                + prepared_files(cfg, targets.chosen_experiments(cfg))
                + self.cost_projection_targets() + projection_targets(cfg))

    def all_input(self, wildcards: Any) -> list[str]:
        """Rule ``all``'s input; under ``--report``, a one-line stop if outputs are missing.

        The report of the default target shows files that must exist: when the loaded
        config's were never built, planning stops naming the command that builds them
        (:func:`~pflrepro.pipeline.other_configs.report_hint`).
        """
        import sys

        from pflrepro.pipeline import other_configs

        found = self.all_targets()
        if not other_configs.report_mode(sys.argv):
            return found
        from snakemake.exceptions import WorkflowError
        from snakemake.io import is_flagged

        flagged = [f for rule in self.workflow.rules for f in rule.output
                   if is_flagged(f, "report")]
        shown = [t for t in found if any(f.match(t) for f in flagged)]
        missing = [t for t in shown if not os.path.exists(t)]
        if missing:
            raise WorkflowError(other_configs.report_hint(
                self.loaded_config, self.cfg.scale, missing, len(shown),
                other_configs.profiles_of(self.workflow.basedir)))
        return found

    def target_problems(self, argv: Sequence[str], other_names: Mapping[str, str]
                        ) -> list[str]:
        """One line per target named in Snakemake's ``argv`` that this config cannot build.

        A file of another shipped config
        (:func:`~pflrepro.pipeline.other_configs.target_problems`), and a path naming an
        experiment, method, partition, data set, table, figure or tuning the config
        lacks (:func:`~pflrepro.pipeline.workflow.named_targets.target_problems`).
        """
        from pflrepro.pipeline import other_configs
        from pflrepro.pipeline.workflow import named_targets

        named = other_configs.command_line_targets(argv)
        if not named:
            return []
        problems = other_configs.target_problems(
            named, other_names, other_configs.profiles_of(self.workflow.basedir),
            self.loaded_config)
        return problems or named_targets.target_problems(
            named, self.cfg, self.loaded_config, figures.dataset_names(), self.all_targets)

    @property
    def loaded_config(self) -> str:
        """The config file in force last, relative to the workflow (a hint names it)."""
        files = [os.path.relpath(str(f), self.workflow.basedir) for f in self.config_files]
        return files[-1] if files else "config.yaml"

    # ------------------------------------------------------------------ data
    def mirrors(self, wildcards: Any) -> list[str]:
        """``--mirror``, ``--checksum`` and download limits of ``prepare``."""
        return words(jobs.mirror_args(self.cfg, wildcards.dataset))

    def partition_spec(self, wildcards: Any) -> str:
        """The partitioner's spec (JSON)."""
        return jobs.partition_spec_json(self.cfg, wildcards)

    def partition_code(self, wildcards: Any) -> str:
        """A digest of the partitioner's code (a param: an edit re-partitions)."""
        return jobs.partition_code(self.cfg, wildcards)

    def partition_title(self, wildcards: Any) -> str:
        """The label-distribution figure's title."""
        return targets.partition_title(self.cfg, wildcards.dataset, wildcards.partition,
                                       wildcards.split)

    def public_exclude(self, wildcards: Any, input: Any) -> list[str]:
        """``--exclude-partition P`` when the public set comes from the clients' data set."""
        return words(jobs.public_exclude_arg(wildcards.source, wildcards.dataset,
                                             input.partition))

    # ------------------------------------------------------------------ training
    def run_inputs(self, rule: TrainingRule) -> WildcardsFunction:
        """A training job's data, partition(s) and public set (``unpack``)."""
        def inputs(wildcards: Any) -> dict[str, Any]:
            runs = rule.runs(wildcards)
            public = [jobs.train_public_inputs(self.cfg, run) for run in runs]
            if not rule.several:
                return {**public[0], "meta": jobs.experiment_path(self.cfg, runs[0], "meta"),
                        "partition": self._partition(rule, runs[0])}
            out: dict[str, Any] = {
                "meta": jobs.experiment_path(self.cfg, runs[0], "meta"),
                "partition": sorted({self._partition(rule, run) for run in runs})}
            if public[0]:
                out["public"] = sorted({p["public"] for p in public})
                out["public_meta"] = public[0]["public_meta"]
            return out
        return inputs

    def run_selections(self, rule: TrainingRule) -> WildcardsFunction:
        """The selection files a final run's spec reads, an input item each (``unpack``).

        An item apart from the files the command names: until the checkpoint is done,
        Snakemake gives the function that asks for it the checkpoint's target alone.
        """
        from pflrepro.pipeline.tuning_jobs import selection_sources

        def selections(wildcards: Any) -> dict[str, Any]:
            if rule.tuning:
                return {}
            run = rule.runs(wildcards)[0]
            return {f"tuned_{m}": self.selection_file(run.experiment, m)
                    for m in selection_sources(self.cfg, run.experiment, run.method)}
        return selections

    def run_params(self, rule: TrainingRule) -> dict[str, Any]:
        """A training rule's params: spec(s), public set, and each run's files."""
        def spec(wildcards: Any) -> str | list[str]:
            found = [self.run_spec(rule, run) for run in rule.runs(wildcards)]
            return found if rule.several else found[0]

        def public(wildcards: Any) -> list[str]:
            found = [jobs.train_public_inputs(self.cfg, run) for run in rule.runs(wildcards)]
            if not found[0]:
                return []
            return ["--public", *(f["public"] for f in found),
                    "--public-data", found[0]["public_meta"]]

        out: dict[str, Any] = {"spec": spec, "public": public, **self.cli}
        if rule.several:
            out["partitions"] = lambda w: [self._partition(rule, r) for r in rule.runs(w)]
            out["logs"] = lambda w: [p.format(experiment=w.experiment, partition=w.partition,
                                              method=w.method) for p in rule.logs["runs"]]
            if not rule.tuning:
                out["checkpoints"] = lambda wildcards, output: [f"{o}.ckpt" for o in output]
        return out

    def run_resources(self, rule: TrainingRule) -> dict[str, WildcardsFunction]:
        """``gpu``, ``mem_mb`` and ``runtime`` (minutes, times the runs) of a training job."""
        def resource(name: str, times: int = 1) -> WildcardsFunction:
            return lambda w: jobs.train_resource(self.cfg, w, name) * times
        return {"gpu": resource("gpu"), "mem_mb": resource("mem_mb"),
                "runtime": resource("runtime", max(len(rule.members), 1))}

    def run_spec(self, rule: TrainingRule, run: Any) -> str:
        """A run's spec (JSON): a tuning run's grid point, or a final run's selections."""
        from pflrepro.pipeline import tuning_jobs

        if rule.tuning:
            return tuning_jobs.tune_run_spec_json(self.cfg, run)
        sources = tuning_jobs.selection_sources(self.cfg, run.experiment, run.method)
        if not sources:
            return jobs.run_spec_json(self.cfg, run)
        found = {m: self.checkpoints.tune_select.get(experiment=run.experiment, method=m)
                 .output.selection for m in sources}
        return tuning_jobs.tuned_run_spec_json(
            self.cfg, run, {m: tuning.read_selection(p) for m, p in found.items()})

    def _partition(self, rule: TrainingRule, run: Any) -> str:
        if rule.tuning:
            return tuning.TUNE_PARTITION.format(experiment=run.experiment,
                                                partition=run.partition, split=run.split)
        return jobs.experiment_path(self.cfg, run, "partition")

    # ------------------------------------------------------------------ tuning
    def selection_file(self, experiment: str, method: str) -> Any:
        """A tuning selection as a job's input.

        Named through ``checkpoints.tune_select.get()``, as the params that read it are:
        until Snakemake has decided whether the checkpoint reruns, a job whose input is
        the checkpoint's target is judged on its output alone, then again with its real
        params; a selection named directly would have its placeholder params judged
        changed and its downstream jobs rerun on every invocation. Ancient: a rewritten
        selection reruns a job through its params, not its date.
        """
        from snakemake.io import ancient

        return ancient(self.checkpoints.tune_select.get(experiment=experiment, method=method)
                       .output.selection)

    def selections(self, experiments: Sequence[str]) -> list[Any]:
        """The selection files of the experiments' tuned methods."""
        return [self.selection_file(name, method) for name in experiments
                for method in tuning.tuned_methods(self.cfg, name)]

    def tuning_notes(self, experiments: Sequence[str]) -> str:
        """A table job's ``--tuning`` JSON: the experiments' grids and selections."""
        found = {}
        for name in experiments:
            for method in tuning.tuned_methods(self.cfg, name):
                path = self.checkpoints.tune_select.get(experiment=name,
                                                        method=method).output.selection
                found[(name, method)] = tuning.read_selection(path)
        return tuning.table_tuning_json(self.cfg, experiments, found)

    def tune_split_input(self, wildcards: Any) -> str:
        """The partition a validation split is carved from."""
        from pflrepro.store.paths import PARTITION

        exp = self.cfg.experiments[wildcards.experiment]
        return PARTITION.format(dataset=exp.dataset, partition=wildcards.partition,
                                split=wildcards.split)

    def tune_fraction(self, wildcards: Any) -> float:
        """The share of each client's training rows held out for validation."""
        return self.cfg.experiments[wildcards.experiment].tune.fraction

    def tune_runs(self, wildcards: Any) -> list[str]:
        """The tuning runs of one method of one experiment."""
        return tuning.tune_run_paths(self.cfg, wildcards.experiment, wildcards.method)

    def tune_plan(self, wildcards: Any) -> str:
        """The tune-select job's plan (JSON; a changed grid or budget reruns it)."""
        return tuning.tune_plan_json(self.cfg, wildcards.experiment, wildcards.method)

    @staticmethod
    def tune_title(wildcards: Any) -> str:
        """The tuning figure's title."""
        from pflrepro.reporting.names import method_name

        return f"Tuning {method_name(wildcards.method)} on {wildcards.experiment}"

    # ------------------------------------------------------------------ aggregates, cost
    def experiment_runs(self, wildcards: Any) -> list[str]:
        """Run tables of one method of one experiment."""
        return jobs.run_paths(self.cfg, wildcards.experiment, wildcards.method)

    def method_aggregates(self, wildcards: Any) -> list[str]:
        """Per-method aggregates of one experiment."""
        return jobs.method_aggregate_paths(self.cfg, wildcards.experiment)

    def cost_runs(self, wildcards: Any) -> list[str]:
        """Run tables of every job of an experiment (the cost table's)."""
        return report.cost_inputs(self.cfg, wildcards.experiment)

    def cost_args(self, wildcards: Any) -> list[str]:
        """``--benchmarks``, ``--logs``, ``--training`` of the cost job (words).

        Runs trained by one job share its benchmark record.
        """
        return words(report.cost_args(self.cfg, wildcards.experiment, self.train_batches))

    def cost_tables(self, wildcards: Any) -> list[str]:
        """The chosen experiments' cost tables (the projection's input)."""
        from pflrepro.pipeline.workflow.patterns import COST_TABLE

        return [COST_TABLE.format(experiment=name, kind="cost", ext="csv")
                for name in targets.chosen_experiments(self.cfg)]

    # ------------------------------------------------------------------ tables, figures
    def table_aggregates(self, wildcards: Any) -> list[str]:
        """Aggregates a combined table reads."""
        return targets.table_inputs(self.cfg, wildcards.table)

    def table_metric(self, wildcards: Any) -> str:
        """A combined table's metric."""
        return self.cfg.tables[wildcards.table].metric

    def table_caption(self, wildcards: Any) -> str:
        """A combined table's caption (empty: none)."""
        return self.cfg.tables[wildcards.table].caption

    def table_experiments(self, wildcards: Any) -> list[str]:
        """A combined table's experiments (``--experiments``)."""
        return list(self.cfg.tables[wildcards.table].experiments)

    def figure_input(self, kind: str) -> Any:
        """A plot rule's input: a pattern, or the aggregates of the methods it applies to."""
        found = figures.plot_input(kind)
        return found if found is not None else (
            lambda w: figures.figure_aggregates(self.cfg, w.experiment, kind))

    def figure_options(self, kind: str) -> WildcardsFunction:
        """``pflrepro plot`` options of a figure kind (words)."""
        return lambda w: words(figures.plot_options(self.cfg, w, kind))

    def figure_report(self, label: str, output: str = "{experiment}") -> dict[str, Any]:
        """``report()`` arguments of an experiment's figure: its paper, experiment, kind."""
        return dict(caption=report.REPORT_CAPTION.format(kind="figure"),
                    category=self.report_category, subcategory=output,
                    labels={"output": label, "name": "{experiment}"})

    def report_category(self, wildcards: Any) -> str:
        """A figure's report category: the paper of its experiment."""
        from pflrepro.reporting.report import paper_of

        return paper_of(wildcards.experiment, self.claims)

    def report_table_category(self, wildcards: Any) -> str:
        """A table page's report category."""
        from pflrepro.reporting.report import table_category

        return table_category(wildcards.name, self.cfg, self.claims, self.paper_cells)[0]

    def report_table_subcategory(self, wildcards: Any) -> str:
        """A table page's report subcategory."""
        from pflrepro.reporting.report import table_category

        return table_category(wildcards.name, self.cfg, self.claims, self.paper_cells)[1]

    def report_table_labels(self, wildcards: Any) -> dict[str, str]:
        """A table page's labels in the report."""
        from pflrepro.reporting.report import table_label

        return {"output": table_label(wildcards.name, self.cfg), "name": wildcards.name}

    def paper_table_inputs(self, wildcards: Any) -> list[str]:
        """Aggregates a paper-vs-ours table reads."""
        return report.paper_table_inputs(self.cfg, self.paper_cells, wildcards.paper_table)

    def paper_table_id(self, wildcards: Any) -> str:
        """The numbers file's ``table_id`` of a paper-vs-ours table."""
        return self.paper_tables[wildcards.paper_table]

    def claims_aggregates(self, wildcards: Any) -> list[str]:
        """Aggregates a claims table reads."""
        return targets.claims_inputs(self.cfg, self.claims, wildcards.claims)

    @staticmethod
    def claims_scale(wildcards: Any) -> str:
        """The scale of a claims table."""
        return targets.claims_scale(wildcards.claims)

    def claims_design(self, wildcards: Any) -> str:
        """Partitions, methods and seed pairs a claim needs (partial results never decide)."""
        from pflrepro.reporting.claims.parse import design_json, design_of

        return design_json(design_of(self.cfg, self.claims_table.experiments(wildcards)))

