# Checks that come before anything else of the workflow runs (included first by the
# Snakefile, before its `configfile:`).
#
# 1. The `pflrepro` package Python imports must be this workflow's own src/pflrepro.
#    With another clone's install (a shared venv, a non-editable `pip install .`) the
#    workflow would digest and run that code: edits here would neither take effect nor
#    rerun the jobs they change. This check is written here, not in the package,
#    because the package found may be another version of it. PFLREPRO_ANY_SOURCE=1
#    skips it (e.g. a container that installs the package non-editably on purpose).
# 2. config.yaml is read strictly before Snakemake's `configfile:` reads it: Snakemake
#    reports a YAML syntax error or an empty file naming neither the file nor the line.
#    (Files given with --configfile are read by Snakemake before any of this runs;
#    `pflrepro check-config FILE...` reports their errors with file and line.)
# 3. The jobs run this workflow's code too: every rule calls `{params.python:q} -m pflrepro
#    --require-source {params.source:q} ...` with PFLREPRO_PYTHON and PFLREPRO_SRC below,
#    not whichever `pflrepro` comes first on the job's PATH (another clone's wrapper there
#    would pass check 1, which sees only Snakemake's own Python). PFLREPRO_PYTHON is the
#    interpreter running Snakemake (the one check 1 vouched for); under --use-conda or
#    --use-apptainer it is the job environment's `python` (conda's env has this clone
#    installed by workflow/envs/pflrepro.post-deploy.sh), and --require-source makes
#    the job refuse, naming both paths, when that Python imports pflrepro from anywhere
#    but PFLREPRO_SRC. Both are Path objects: Snakemake records and compares only plain
#    params (str, numbers, containers) for its params rerun trigger, so a moved venv or
#    clone reruns no job.
# 4. A file where the workflow writes a directory (results/, results/runs, figures/,
#    logs/, data/raw) is refused here, naming it, before Snakemake meets it as a bare
#    NotADirectoryError.
# 5. A lock on this directory (.snakemake/locks): say whether a Snakemake still runs
#    here (wait) or none does (then --unlock is safe), before Snakemake's own message,
#    which advises --unlock either way (pflrepro.store.locks). Only the main process says it.
# 6. Snakemake's records of outputs (.snakemake/metadata) that are no JSON are moved to
#    .snakemake/metadata-damaged/, named here; Snakemake would fail every run on them
#    with a traceback naming no file (pflrepro.store.damage). Main process only.

import os
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError

import pflrepro

_OWN_SOURCE = os.path.realpath(os.path.join(workflow.basedir, "src", "pflrepro"))
_IMPORTED_SOURCE = os.path.realpath(os.path.dirname(pflrepro.__file__))
if _IMPORTED_SOURCE != _OWN_SOURCE and os.environ.get("PFLREPRO_ANY_SOURCE") != "1":
    raise WorkflowError(
        f"Python imports pflrepro from {_IMPORTED_SOURCE}, not from this workflow's own "
        f"source {_OWN_SOURCE}: its jobs would run that other code. Install this clone into "
        f"the environment with `pip install -e {workflow.basedir}` (or put "
        f"{os.path.dirname(_OWN_SOURCE)} first on PYTHONPATH); to run another source on "
        "purpose, set PFLREPRO_ANY_SOURCE=1."
    )

from snakemake_interface_executor_plugins.settings import DeploymentMethod

_JOB_ENVS = {DeploymentMethod.CONDA, DeploymentMethod.APPTAINER}
PFLREPRO_PYTHON = Path(
    "python" if _JOB_ENVS & set(workflow.deployment_settings.deployment_method)
    else sys.executable)
PFLREPRO_SRC = Path(os.path.dirname(_OWN_SOURCE))

import pflrepro.config as C
import pflrepro.pipeline.workflow as W


for _dir in W.output_dirs():
    for _part in [Path(_dir), *Path(_dir).parents][::-1]:
        if str(_part) != "." and (_part.exists() or _part.is_symlink()) and not _part.is_dir():
            raise WorkflowError(
                f"{os.path.abspath(_part)} is a file, but the workflow writes the directory "
                f"{_dir} there: move it away (or run in another working directory, -d)")

try:
    C.check_config_files([os.path.abspath("config.yaml")])
except C.ConfigError as err:
    raise WorkflowError(f"Invalid config: {err}") from None

from pflrepro.store.locks import lock_note

if getattr(workflow, "is_main_process", True) and (_note := lock_note(os.getcwd())):
    print(_note, file=sys.stderr)

from pflrepro.store.damage import set_aside_unreadable_records

if getattr(workflow, "is_main_process", True):
    for _record in set_aside_unreadable_records(os.getcwd()):
        print(f"pflrepro: a record of Snakemake's in .snakemake/metadata was no JSON (damaged); "
              f"moved to {_record}: its output is judged by dates alone", file=sys.stderr)
