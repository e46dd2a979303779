# Config validation, wildcard constraints and the functions the rules use.
# Logic lives in the pflrepro package; this file only adapts it to Snakemake.

from snakemake.exceptions import WorkflowError
from snakemake.logging import logger
from snakemake.io import is_flagged
from snakemake.utils import min_version

import os
import shlex
import sys
import warnings

import pflrepro.pipeline.workflow as W
import pflrepro.pipeline.tuning_jobs as TJ
import pflrepro.config as C
import pflrepro.pipeline.other_configs as OC
import pflrepro.pipeline.plan_cost as PLAN_COST
from pflrepro.config.checks import refuse_periodic_names
from pflrepro.config.errors import located
from pflrepro.pipeline.data_targets import prepared_files
from pflrepro.reporting.claims.parse import ClaimsError, design_json, design_of, load_claims
import pflrepro.reporting.report as RP
import pflrepro.reporting.flops as FL
from pflrepro.reporting.names import method_name
from pflrepro.reporting.paper import PaperNumbersError, load_paper_numbers

min_version("9.0")

# Snakemake 9 leaves coroutines of its own un-awaited while it plans (input sizes of jobs
# whose resources it never evaluates): with --report, dozens of "RuntimeWarning:
# coroutine ... was never awaited" from snakemake/rules.py. Silenced for Snakemake's own
# modules only; the same warning from this workflow's code still shows.
warnings.filterwarnings("ignore", message=r"coroutine '.*' was never awaited",
                        category=RuntimeWarning, module=r"snakemake(\..*)?$")

# The files behind the config, weakest first: --configfile files override (or, with
# --replace-workflow-config, replace) the Snakefile's own config.yaml.
CONFIG_FILES = C.files_in_force(workflow.configfiles, workflow.overwrite_configfiles or (),
                                workflow.config_settings.replace_workflow_config)

# Snakemake has already read the config files (config.yaml, --configfile files, the
# profile's configfile) with plain YAML, where a repeated key silently keeps the last
# value: re-read them strictly, then check the merged config against the schema (a
# short message naming the key) and parse it (references, sizes, per-model options).
# A --configfile of only new experiments merged over config.yaml: said in one line.
MERGE_NOTE = C.merge_note(workflow.configfiles, workflow.overwrite_configfiles or (),
                          workflow.config_settings.replace_workflow_config)
try:
    C.check_config_files(CONFIG_FILES)
    with located(CONFIG_FILES):  # a schema error names the file and line of its key
        CFG = C.check(config, os.path.join(workflow.basedir, "workflow/schemas/config.schema.yaml"))
    refuse_periodic_names(CFG)  # names Snakemake would take for a recursion
except C.ConfigError as err:
    raise WorkflowError(f"Invalid config: {err}" + (f" (note: {MERGE_NOTE})" if MERGE_NOTE
                                                      else "")) from None
if MERGE_NOTE:
    logger.warning(f"Note: {MERGE_NOTE}")

# `pflrepro plan` prices the planned runs of the config merged here (its dry run names a
# file in PFLREPRO_PLAN_CONFIG; otherwise nothing is written).
PLAN_COST.export_config(config)

# The rules' conda environment (--use-conda), relative to workflow/rules/; the project
# itself is installed into it by workflow/envs/pflrepro.post-deploy.sh.
ENV = "../envs/pflrepro.yaml"

# The papers' claims (config/claims.yaml beside the Snakefile), checked before any job.
CLAIMS_FILE = os.path.join(workflow.basedir, W.CLAIMS_FILE)
try:
    CLAIMS = load_claims(CLAIMS_FILE)
except ClaimsError as err:
    raise WorkflowError(f"Invalid claims file: {err}") from None


wildcard_constraints:
    experiment=W.alternation(CFG.experiments),
    table=W.alternation(CFG.tables),
    method=W.alternation(CFG.methods),
    dataset=W.alternation(W.dataset_names()),
    partition=r"[^/]+",
    split=r"\d+",
    seed=r"\d+",
    client=r"\d+",
    source=W.alternation(W.dataset_names()),
    size=r"\d+",
    claims=W.alternation(W.CLAIMS_TABLES.values()),


def all_targets():
    # report_targets (report.smk): paper-vs-ours tables and the report's table pages
    # FL (cost.smk): the paper grid's GPU-hours projected from counted FLOPs, at paper scale
    return (W.all_targets(CFG, CLAIMS) + report_targets() + W.tune_targets(CFG)
            + prepared_files(CFG, W.chosen_experiments(CFG)) + cost_projection_targets()
            + FL.projection_targets(CFG))


# `snakemake --report` of the default target (every output of the loaded config): when
# files the report shows were never built (the paper-scale figures, without the demo
# profile), planning stops with one line naming the config, the command that builds it
# and the demo profile (pflrepro.pipeline.other_configs.report_hint), instead of
# Snakemake's "marked for report but does not exist". It is rule all's input function,
# so a report of explicitly named targets is Snakemake's own.
def all_input(wildcards):
    targets = all_targets()
    if OC.report_mode(sys.argv):
        flagged = [f for rule in workflow.rules for f in rule.output if is_flagged(f, "report")]
        shown = [t for t in targets if any(f.match(t) for f in flagged)]
        missing = [t for t in shown if not os.path.exists(t)]
        if missing:
            raise WorkflowError(OC.report_hint(loaded_config(), CFG.scale, missing, len(shown),
                                               OC.profiles_of(workflow.basedir)))
    return targets


def cost_projection_inputs(wildcards):
    return [W.COST_TABLE.format(experiment=name, kind="cost", ext="csv")
            for name in W.chosen_experiments(CFG)]


def cost_projection_targets():
    # one projection of the paper grid, from the chosen experiments' cost tables (cost.smk)
    if not W.chosen_experiments(CFG):
        return []
    return [W.COST_PROJECTION.format(ext=ext) for ext in ("md", "csv")]


def run_spec(wildcards):
    return W.run_spec_json(CFG, wildcards)


def partition_spec(wildcards):
    return W.partition_spec_json(CFG, wildcards)


def partition_code(wildcards):
    return W.partition_code(CFG, wildcards)


def experiment_runs(wildcards):
    return W.run_paths(CFG, wildcards.experiment, wildcards.method)


def experiment_method_aggregates(wildcards):
    return W.method_aggregate_paths(CFG, wildcards.experiment)


def experiment_input(name):
    return lambda wildcards: W.experiment_path(CFG, wildcards, name)


def train_public_inputs(wildcards):
    return W.train_public_inputs(CFG, wildcards)


# Shell words. Every placeholder of a rule's shell command is quoted ({x:q}; a list
# becomes one quoted word per item), so the adapters below that give several arguments
# return them as lists: pflrepro.pipeline.workflow writes them as shell text (quoted where a value
# may hold a space), and shlex.split gives back the words it quoted.
def words(text):
    return shlex.split(text)


def train_public_args(wildcards):
    return words(W.train_public_args(CFG, wildcards))


def train_resources(name):
    return lambda wildcards: W.train_resource(CFG, wildcards, name)


def mirrors(wildcards):
    return words(W.mirror_args(CFG, wildcards.dataset))


def methods_order(wildcards):
    return words(W.table_methods(CFG, [wildcards.experiment]))


def experiment_labels(wildcards):
    return W.display_labels(CFG, [wildcards.experiment])


def figure_input(kind):
    # the plot rule's input: a pattern, or the aggregates of the methods the kind applies to
    found = W.plot_input(kind)
    return found if found is not None else (
        lambda wildcards: W.figure_aggregates(CFG, wildcards.experiment, kind))


def figure_options(kind):
    return lambda wildcards: words(W.plot_options(CFG, wildcards, kind))


def table_aggregates(wildcards):
    return W.table_inputs(CFG, wildcards.table)


def table_methods(wildcards):
    return words(W.table_methods(CFG, CFG.tables[wildcards.table].experiments))


def table_labels(wildcards):
    return W.display_labels(CFG, CFG.tables[wildcards.table].experiments)


def table_metric(wildcards):
    return CFG.tables[wildcards.table].metric


def table_caption(wildcards):
    return CFG.tables[wildcards.table].caption


def public_exclude(wildcards, input):
    return words(W.public_exclude_arg(wildcards.source, wildcards.dataset, input.partition))


def table_experiments(wildcards):
    return list(CFG.tables[wildcards.table].experiments)


def cost_args(wildcards):
    # runs trained by one job (TRAIN_BATCHES, below) share its benchmark record
    return words(W.cost_args(CFG, wildcards.experiment, TRAIN_BATCHES))


def partition_title(wildcards):
    return W.partition_title(CFG, wildcards.dataset, wildcards.partition, wildcards.split)


def claims_aggregates(wildcards):
    return W.claims_inputs(CFG, CLAIMS, wildcards.claims)


def claims_scale(wildcards):
    return W.claims_scale(wildcards.claims)


def claims_labels(wildcards):
    return W.display_labels(CFG, W.claims_experiments(CFG, CLAIMS, wildcards.claims))


def claims_design(wildcards):
    # partitions, methods and seed pairs a claim needs, so partial results never decide it
    return design_json(design_of(CFG, W.claims_experiments(CFG, CLAIMS, wildcards.claims)))


# ------------------------------------------------------------------ report (report.smk)
# The papers' own numbers (config/paper_numbers.csv beside the Snakefile), checked
# before any job; they feed the paper-vs-ours tables.
PAPER_NUMBERS_FILE = os.path.join(workflow.basedir, W.PAPER_NUMBERS_FILE)
try:
    PAPER_CELLS = load_paper_numbers(PAPER_NUMBERS_FILE)
except PaperNumbersError as err:
    raise WorkflowError(f"Invalid paper numbers file: {err}") from None
PAPER_TABLES = W.paper_tables(CFG, PAPER_CELLS)

def report_targets():
    # the grid's projections (cost.smk) get report pages beside every table of `all`
    return W.report_targets(CFG, CLAIMS, PAPER_CELLS,
                            cost_projection_targets() + FL.projection_targets(CFG))


# The report's captions: the templates read them as snakemake.config[RP.CAPTIONS_KEY]
# (written after the config was checked; jobs never see it).
config[RP.CAPTIONS_KEY] = RP.report_captions(
    CFG, CLAIMS, PAPER_CELLS, paper_tables=PAPER_TABLES,
    table_names=W.report_table_names(report_targets()))


def report_category(wildcards):
    """Report category (the paper) of a figure of experiment `wildcards.experiment`."""
    return RP.paper_of(wildcards.experiment, CLAIMS)


def report_table_category(wildcards):
    return RP.table_category(wildcards.name, CFG, CLAIMS, PAPER_CELLS)[0]


def report_table_subcategory(wildcards):
    return RP.table_category(wildcards.name, CFG, CLAIMS, PAPER_CELLS)[1]


def report_table_labels(wildcards):
    return {"output": RP.table_label(wildcards.name, CFG), "name": wildcards.name}


def paper_table_inputs(wildcards):
    return W.paper_table_inputs(CFG, PAPER_CELLS, wildcards.paper_table)


def paper_table_id(wildcards):
    return PAPER_TABLES[wildcards.paper_table]


def paper_table_labels(wildcards):
    return W.display_labels(CFG, W.paper_table_experiments(CFG, PAPER_CELLS,
                                                            wildcards.paper_table))


def figure_report(kind, output="{experiment}", caption=W.REPORT_CAPTION.format(kind="figure")):
    """report() arguments of an experiment's figure: its paper, experiment and kind."""
    return dict(caption=caption, category=report_category, subcategory=output,
                labels={"output": kind, "name": "{experiment}"})


# --- tuning (tune.smk; train.smk's spec and selection input) -----------------------


def final_run_spec(wildcards):
    sources = TJ.selection_sources(CFG, wildcards.experiment, wildcards.method)
    if not sources:
        return W.run_spec_json(CFG, wildcards)
    found = {m: checkpoints.tune_select.get(experiment=wildcards.experiment,
                                            method=m).output.selection for m in sources}
    return TJ.tuned_run_spec_json(CFG, wildcards,
                                  {m: W.read_selection(p) for m, p in found.items()})


# The inputs below name a selection through checkpoints.tune_select.get(), as the params
# that read it do: until Snakemake has decided whether the checkpoint reruns, a job whose
# input is that checkpoint's target is judged on its output alone, then re-judged with its
# real params. A selection input named directly would let the first judgement compare
# the placeholder params with the recorded ones, call the job changed, and leave that
# verdict on its downstream jobs (aggregates, tables, figures) after Snakemake has
# re-judged the job itself: they would rerun on every invocation. Until then the input
# function that asks gives the checkpoint's target alone, so a rule takes the selection
# as an input item of its own (unpack), beside the items its command names.
def selection_file(experiment, method):
    """A tuning selection as a train or table job's input (ancient: its params rerun it)."""
    return ancient(checkpoints.tune_select.get(experiment=experiment,
                                               method=method).output.selection)


def tuning_selection_input(wildcards):
    """The selection files the run's spec reads (its own, the shared training one)."""
    sources = TJ.selection_sources(CFG, wildcards.experiment, wildcards.method)
    return {f"tuned_{m}": selection_file(wildcards.experiment, m) for m in sources}


def tuning_notes(experiments):
    """The table job's --tuning JSON: waits for the experiments' tuning selections."""
    selections = {}
    for name in experiments:
        for method in W.tuned_methods(CFG, name):
            path = checkpoints.tune_select.get(experiment=name, method=method).output.selection
            selections[(name, method)] = W.read_selection(path)
    return W.table_tuning_json(CFG, experiments, selections)


def selections(experiments):
    """The experiments' tuning selections (ancient: a rewrite reruns via the params)."""
    return [selection_file(name, method)
            for name in experiments for method in W.tuned_methods(CFG, name)]


def experiment_selections(wildcards):
    return selections([wildcards.experiment])


def table_selections(wildcards):
    return selections(CFG.tables[wildcards.table].experiments)


def experiment_tuning(wildcards):
    return tuning_notes([wildcards.experiment])


def table_tuning(wildcards):
    return tuning_notes(CFG.tables[wildcards.table].experiments)


def paper_table_selections(wildcards):
    return selections(W.paper_table_experiments(CFG, PAPER_CELLS, wildcards.paper_table))


def paper_table_tuning(wildcards):
    return tuning_notes(W.paper_table_experiments(CFG, PAPER_CELLS, wildcards.paper_table))


def tune_split_fraction(wildcards):
    return CFG.experiments[wildcards.experiment].tune.fraction


def tune_partition_input(wildcards):
    exp = CFG.experiments[wildcards.experiment]
    return W.PARTITION.format(dataset=exp.dataset, partition=wildcards.partition,
                              split=wildcards.split)


def tune_run_spec(wildcards):
    return TJ.tune_run_spec_json(CFG, wildcards)


def tune_runs(wildcards):
    return W.tune_run_paths(CFG, wildcards.experiment, wildcards.method)


def tune_title(wildcards):
    return f"Tuning {method_name(wildcards.method)} on {wildcards.experiment}"


def tune_plan(wildcards):
    return W.tune_plan_json(CFG, wildcards.experiment, wildcards.method)


# --- several tuning runs per job (tune.smk's tune_train_<runs> rules) ---------------
TUNE_BATCHES = W.tune_batches(CFG, config)


def tune_batch_function(trials, what):
    """A params/input function of a tuning batch job: `what` of each member, in order."""

    def member_values(wildcards):
        members = [W.member_wildcards(wildcards, s, t, point=p) for p, s, t in trials]
        if what == "spec":
            return [tune_run_spec(m) for m in members]
        if what == "partition":
            return W.tune_member_paths(wildcards, trials, W.TUNE_PARTITION)
        if what == "log":
            return W.tune_member_paths(wildcards, trials, W.TUNE_LOG)
        found = [train_public_inputs(m) for m in members]
        if what == "public":  # shell words: --public FILE... --public-data META, or none
            if not found[0]:
                return []
            return ["--public", *(f["public"] for f in found),
                    "--public-data", found[0]["public_meta"]]
        if what == "inputs":
            out = {"meta": W.experiment_path(CFG, members[0], "meta"),
                   "partition": sorted(set(W.tune_member_paths(wildcards, trials,
                                                               W.TUNE_PARTITION)))}
            if found[0]:
                out["public"] = sorted({f["public"] for f in found})
                out["public_meta"] = found[0]["public_meta"]
            return out
        raise ValueError(what)

    return member_values


# --- several runs per training job (train.smk's train_<runs> rules) ------------------
TRAIN_BATCHES = W.train_batches(CFG, config)


def batch_function(pairs, what):
    """A params/input function of a batch job: `what` of each member, in order."""

    def member_values(wildcards):
        members = [W.member_wildcards(wildcards, s, t) for s, t in pairs]
        if what == "spec":
            return [final_run_spec(m) for m in members]
        if what == "partition":
            return [W.experiment_path(CFG, m, "partition") for m in members]
        if what == "public":  # shell words: --public FILE... --public-data META, or none
            found = [train_public_inputs(m) for m in members]
            if not found[0]:
                return []
            return ["--public", *(f["public"] for f in found),
                    "--public-data", found[0]["public_meta"]]
        if what == "log":
            return W.batch_member_paths(wildcards, pairs, W.TRAIN_LOG)
        if what == "inputs":
            out = {"meta": W.experiment_path(CFG, members[0], "meta"),
                   "partition": sorted({W.experiment_path(CFG, m, "partition")
                                        for m in members})}
            found = [train_public_inputs(m) for m in members]
            if found[0]:
                out["public"] = sorted({f["public"] for f in found})
                out["public_meta"] = found[0]["public_meta"]
            return out
        if what == "tuned":  # a separate input item: see selection_file
            return tuning_selection_input(members[0])
        raise ValueError(what)

    return member_values


def batch_runtime(pairs):
    return lambda wildcards: W.train_resource(CFG, wildcards, "runtime") * len(pairs)


# A file of another shipped config named (hints.smk): the names the loaded config lacks,
# and the input function that stops planning with the one-line hint.
OTHER_NAMES = OC.foreign_names(OC.shipped_configs(workflow.basedir),
                               [*CFG.experiments, *CFG.tables])


def loaded_config():
    files = [os.path.relpath(str(f), workflow.basedir) for f in CONFIG_FILES]
    return files[-1] if files else "config.yaml"


def other_config_hint(wildcards):
    raise WorkflowError(OC.hint(wildcards.other_config_target, OTHER_NAMES,
                                OC.profiles_of(workflow.basedir), loaded_config()))
