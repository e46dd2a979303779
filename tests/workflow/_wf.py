"""Helpers of the workflow tests: run Snakemake on a temporary copy of the project."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
TINY = Path(__file__).with_name("config.yaml")


def snakemake(workdir: Path, *args: str, check: bool = True,
              timeout: float = 900) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(workdir / "src")
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"),
           "--directory", str(workdir), "--configfile", str(workdir / "config.yaml"),
           "--replace-workflow-config", "--cores", "2", *args]
    proc = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True,
                          timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc


def new_workdir(tmp: Path, config: dict | None = None) -> Path:
    tmp.mkdir(parents=True, exist_ok=True)
    shutil.copytree(REPO / "src", tmp / "src", ignore=shutil.ignore_patterns("__pycache__"))
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
