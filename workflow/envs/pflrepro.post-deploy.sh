#!/usr/bin/env bash
# Snakemake runs this once, in the freshly created conda environment of
# pflrepro.yaml, from the workflow's working directory (where the Snakefile is run).
# It installs this clone's package editable, without dependencies (the environment
# has them): the rules then run the workflow's own src/pflrepro, as the preflight
# check (workflow/rules/preflight.smk) requires of the Snakemake process itself.
set -euo pipefail
if [ ! -f pyproject.toml ] || [ ! -d src/pflrepro ]; then
    echo "pflrepro post-deploy: $(pwd) is not the pflrepro project root (no pyproject.toml" \
         "and src/pflrepro); run snakemake --use-conda from the directory of the Snakefile" >&2
    exit 1
fi
python -m pip install --no-deps --no-build-isolation -e .
