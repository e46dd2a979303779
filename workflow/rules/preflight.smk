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

import os

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

import pflrepro.config as C

try:
    C.check_config_files([os.path.abspath("config.yaml")])
except C.ConfigError as err:
    raise WorkflowError(f"Invalid config: {err}") from None
