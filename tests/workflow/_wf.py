"""Helpers of the workflow tests: run Snakemake on a temporary copy of the project.

The copy holds the workflow (Snakefile, rule files, schema, claims, profiles) and the
package source, and that source goes first on PYTHONPATH: a test can edit the source
without touching the repository, and the workflow checks that the package it imports
is its own ``src/pflrepro`` (``workflow/rules/preflight.smk``), as for a user.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
TINY = Path(__file__).with_name("config.yaml")
#: What a working copy of the project holds besides ``src`` and its config.
WORKFLOW_FILES = ("Snakefile", "workflow", "config", "profiles", "environment.yml")


def _command(workdir: Path, args: tuple[str, ...], configfile: bool,
             env: Mapping[str, str] | None) -> tuple[list[str], dict[str, str]]:
    """The Snakemake command line and environment of :func:`snakemake`."""
    environ = dict(os.environ)
    environ.pop("PFLREPRO_ANY_SOURCE", None)
    environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{environ.get('PATH', '')}"
    environ["PYTHONPATH"] = str(workdir / "src")
    environ.update(env or {})
    config = (["--configfile", str(workdir / "config.yaml"), "--replace-workflow-config"]
              if configfile else [])
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(workdir / "Snakefile"),
           "--directory", str(workdir), *config, "--cores", "2", *args]
    return cmd, environ


def snakemake(workdir: Path, *args: str, check: bool = True, timeout: float = 900,
              configfile: bool = True, env: Mapping[str, str] | None = None
              ) -> subprocess.CompletedProcess:
    """Run Snakemake on the copy in ``workdir``; ``env`` overrides environment variables.

    ``configfile=False`` leaves out ``--configfile``: the Snakefile's own
    ``configfile: "config.yaml"`` reads the config.
    """
    cmd, environ = _command(workdir, args, configfile, env)
    proc = subprocess.run(cmd, cwd=workdir, env=environ, capture_output=True, text=True,
                          timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc


def new_workdir(tmp: Path, config: dict | None = None) -> Path:
    tmp.mkdir(parents=True, exist_ok=True)
    shutil.copytree(REPO / "src", tmp / "src", ignore=shutil.ignore_patterns("__pycache__"))
    for name in WORKFLOW_FILES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, tmp / name,
                            ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(REPO / name, tmp / name)
    if config is None:
        shutil.copy(TINY, tmp / "config.yaml")
    else:
        (tmp / "config.yaml").write_text(yaml.safe_dump(config))
    return tmp


def planned_jobs(proc: subprocess.CompletedProcess) -> list[tuple[str, dict[str, str]]]:
    """(rule, wildcards) of every job in a dry run's output."""
    jobs: list[tuple[str, dict[str, str]]] = []
    text = proc.stdout + proc.stderr
    for block in re.split(r"\n(?=(?:local)?rule \w+:)", text):
        m = re.match(r"(?:local)?rule (\w+):", block.strip())
        if not m:
            continue
        wc = re.search(r"wildcards: (.*)", block)
        wildcards = dict(kv.split("=", 1) for kv in wc.group(1).split(", ")) if wc else {}
        jobs.append((m.group(1), wildcards))
    return jobs


def start_snakemake(workdir: Path, *args: str) -> subprocess.Popen:
    """Start Snakemake as :func:`snakemake` would run it, without waiting (text pipes)."""
    cmd, environ = _command(workdir, args, True, None)
    return subprocess.Popen(cmd, cwd=workdir, env=environ, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)

