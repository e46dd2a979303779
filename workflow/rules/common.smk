# Config validation, wildcard constraints and `P`, the object whose attributes are the
# rules' input and params functions (pflrepro.pipeline.workflow.adapter.Rules).
# Logic lives in the pflrepro package; this file only hands it Snakemake's objects.

from snakemake.exceptions import WorkflowError
from snakemake.logging import logger
from snakemake.utils import min_version

import os
import sys
import warnings

import pflrepro.pipeline.workflow as W
import pflrepro.config as C
import pflrepro.pipeline.other_configs as OC
import pflrepro.pipeline.plan_cost as PLAN_COST
from pflrepro.config.checks import refuse_periodic_names
from pflrepro.config.errors import located
from pflrepro.pipeline.workflow.adapter import Rules
from pflrepro.pipeline.workflow.training_rules import cli
from pflrepro.reporting.claims.parse import ClaimsError, load_claims
import pflrepro.reporting.report as RP
import pflrepro.reporting.flops as FL
from pflrepro.reporting.paper import PaperNumbersError, check_against_config, load_paper_numbers

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

# The papers' own numbers (config/paper_numbers.csv beside the Snakefile), checked before
# any job; they feed the paper-vs-ours tables. Every config is checked against the rows
# of the experiments it has: one that keeps a paper experiment but renames its method
# stops here naming the row; a config of other experiments tables none of them.
PAPER_NUMBERS_FILE = os.path.join(workflow.basedir, W.PAPER_NUMBERS_FILE)
try:
    PAPER_CELLS = load_paper_numbers(PAPER_NUMBERS_FILE)
except PaperNumbersError as err:
    raise WorkflowError(f"Invalid paper numbers file: {err}") from None
try:
    check_against_config(PAPER_CELLS, CFG, present_only=True, where=W.PAPER_NUMBERS_FILE)
except PaperNumbersError as err:
    raise WorkflowError(f"Invalid config: {err}") from None


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


# Every rule's command is cli(...) (this workflow's interpreter and source, then a
# `pflrepro` subcommand) and its params start with **P.cli (those two paths).
P = Rules(CFG, config, workflow=workflow, checkpoints=checkpoints, claims=CLAIMS,
          paper_cells=PAPER_CELLS, config_files=CONFIG_FILES, python=PFLREPRO_PYTHON,
          source=PFLREPRO_SRC)

# The report's captions: the templates read them as snakemake.config[RP.CAPTIONS_KEY]
# (written after the config was checked; jobs never see it).
config[RP.CAPTIONS_KEY] = RP.report_captions(
    CFG, CLAIMS, PAPER_CELLS, paper_tables=P.paper_tables,
    table_names=W.report_table_names(P.report_targets()))

# A file of another shipped config named (hints.smk): the names the loaded config lacks,
# and the input function that stops planning with the one-line hint.
OTHER_NAMES = OC.foreign_names(OC.shipped_configs(workflow.basedir),
                               [*CFG.experiments, *CFG.tables])


def other_config_hint(wildcards):
    raise WorkflowError(OC.hint(wildcards.other_config_target, OTHER_NAMES,
                                OC.profiles_of(workflow.basedir), P.loaded_config))


# Makes one training rule (train.smk calls it for each of P.training_rules). A function
# and not a loop's body: Snakemake evaluates a rule's shell expression again when the job
# runs, where a loop variable would hold its last value.
def training_rule(job):
    rule:
        name: job.name
        input:
            unpack(P.run_inputs(job)),
            unpack(P.run_selections(job)),
        output:
            *job.outputs,
        params:
            **P.run_params(job),
        wildcard_constraints:
            **job.wildcard_constraints,
        threads: 1
        resources:
            **P.run_resources(job),
        log:
            **job.logs,
        benchmark:
            job.benchmark
        conda:
            ENV
        shell:
            job.shell
