"""End to end on a real SLURM cluster: the workflow through profiles/slurm.

tests/slurm/cluster.sh brings up a one-node cluster (munge, slurmctld, slurmd, two
fake GPUs; needs root and Debian's `slurm-wlm munge`); the module fixture starts it and
always stops it. Snakemake runs in a temporary copy of the project (the package
source first on PYTHONPATH, as in tests/workflow; SLURM jobs run as root on this
machine and inherit the environment through the plugin's `--export=ALL`), with a copy
of the profile whose commented `slurm_partition` line is filled in with `debug`, the
way a user sets it (the cluster's default partition is another one), and fast status
checks (no accounting database: `squeue`, with MinJobAge 3600 in the cluster's
configuration).

1. The demo (config/demo.yaml: both experiments, every partition and seed, their
   tables and figures) with three methods per experiment (`SLURM_METHODS`: 24 training
   jobs of 30 rounds instead of 64; what is tested is the cluster's plumbing, which
   every method shares, and CI's 90 minutes) and `gpu: 1`, so that training goes to
   SLURM (the demo itself trains on the CPU). Every
   training job ran inside a SLURM job that asked for one GPU, in partition `debug`;
   jobs were grouped; every output file exists in both runs and the run Parquet
   files, aggregate tables and tables equal those of a local run of the same config
   (run meanwhile).
2. The same directory, two more experiments: one whose training raises at job time
   (device `cuda`, no CUDA here), one on the CPU (`gpu: 0`). Snakemake reports the
   failure, retries it once (the profile's `retries`), exits non-zero and still
   builds the other experiment (`keep-going`).
"""

from __future__ import annotations

import copy
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd
import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow"))
from _wf import REPO, new_workdir, snakemake  # noqa: E402

CLUSTER = Path(__file__).with_name("cluster.sh")
PROFILE = REPO / "profiles" / "slurm" / "config.yaml"
GROUP_SIZE = yaml.safe_load(PROFILE.read_text())["group-components"]["train"]

pytestmark = [
    pytest.mark.slurm,
    pytest.mark.skipif(shutil.which("sbatch") is None,
                       reason="SLURM is not installed (apt-get install slurm-wlm munge)"),
    pytest.mark.skipif(os.name != "posix" or os.geteuid() != 0,
                       reason="starting slurmctld, slurmd and munged needs root"),
    pytest.mark.skipif(importlib.util.find_spec("snakemake_executor_plugin_slurm") is None,
                       reason="snakemake-executor-plugin-slurm is not installed"),
]


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    try:
        subprocess.run(["bash", str(CLUSTER), "start"], check=True, timeout=180)
        yield
    finally:
        stop = subprocess.run(["bash", str(CLUSTER), "stop"], capture_output=True, text=True,
                              timeout=180)
        assert stop.returncode == 0, f"cluster.sh stop failed:\n{stop.stdout}\n{stop.stderr}"


DEMO = REPO / "config" / "demo.yaml"
#: The methods each demo experiment keeps here: the two baselines every table has and the
#: experiment's own method(s), whose figures (FedeRiCo's weights, FedAMP's heatmaps) the
#: demo draws.
SLURM_METHODS = {"demo_federico": ["local", "fedavg", "federico"],
                 "demo_fedamp": ["fedavg", "fedamp", "heurfedamp"]}
ROUNDS = yaml.safe_load(DEMO.read_text())["training"]["rounds"]


def demo_config() -> dict:
    """The demo's config with `SLURM_METHODS` only and a GPU request for every training job.

    And one run per job, as for GPU jobs on SLURM (profiles/slurm's resources and
    groups name the rule `train`; the demo's own `runs_per_job` batches its runs).
    Without the demo's FedAMP tuning stage (`tune:`): its runs are `train`-like cluster
    jobs the local tiers build (tests/workflow/test_tuning_workflow.py); here they
    would add half again to the cluster's jobs and to CI's time.
    """
    config = yaml.safe_load(DEMO.read_text())
    assert set(SLURM_METHODS) == set(config["experiments"]), "the demo's experiments changed"
    for name, exp in config["experiments"].items():
        assert set(SLURM_METHODS[name]) <= set(exp["methods"]), (name, exp["methods"])
        exp["methods"] = SLURM_METHODS[name]
        exp["resources"] = {**exp["resources"], "gpu": 1}
        exp.pop("tune", None)
    config["runs_per_job"] = {"cpu": 1}
    return config


def slurm_profile(work: Path) -> Path:
    """The profile with its commented partition line filled in, as a user would."""
    text, n = re.subn(r"(?m)^(\s*)#\s*slurm_partition:\s*(\"[^\"]*\"|\S+)",
                      lambda m: m.group(1) + "slurm_partition: \"'debug'\"", PROFILE.read_text())
    assert n == 1, "profiles/slurm/config.yaml has no commented `slurm_partition:` line"
    assert yaml.safe_load(text)["set-resources"]["train"]["slurm_partition"] == "'debug'"
    (work / "profile").mkdir()
    (work / "profile" / "config.yaml").write_text(text)
    return work / "profile"


def run_slurm(work: Path, *args: str, limit: int) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_", "SRUN_"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(work / "src")
    cmd = ["timeout", "-k", "30", str(limit), sys.executable, "-m", "snakemake",
           "--snakefile", str(work / "Snakefile"), "--directory", str(work),
           "--configfile", str(work / "config.yaml"), "--replace-workflow-config",
           "--profile", str(work / "profile"),
           "--slurm-init-seconds-before-status-checks", "1",
           "--slurm-status-command", "squeue", "--slurm-keep-successful-logs", *args]
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True,
                          timeout=limit + 60)
    print(f"snakemake on SLURM {' '.join(args)}: rc {proc.returncode}, "
          f"{time.monotonic() - start:.0f} s")
    assert proc.returncode not in (124, 137), f"timed out:\n{proc.stdout}\n{proc.stderr}"
    return proc


def submitted_jobs(proc: subprocess.CompletedProcess) -> dict[str, dict[str, str]]:
    """`scontrol show job` fields of every SLURM job of this Snakemake run, by job id."""
    m = re.search(r"SLURM run ID: (\S+)", proc.stdout + proc.stderr)
    assert m, proc.stderr
    out = subprocess.run(["scontrol", "show", "job", "-o"], capture_output=True, text=True,
                         check=True).stdout
    jobs = {}
    for line in out.splitlines():
        fields = dict(re.findall(r"([\w/:]+)=(\S*)", line))
        if fields.get("JobName") == m.group(1):
            jobs[fields["JobId"]] = fields
    assert jobs, out
    return jobs


def runs_by_slurm_job(work: Path) -> dict[str, set[str]]:
    """Ids of the SLURM jobs that ran each training job, from the kept SLURM logs."""
    found: dict[str, set[str]] = {}
    for log in (work / ".snakemake" / "slurm_logs").rglob("*.log"):
        for line in re.findall(r"output: (.*)", log.read_text()):
            for path in line.split(", "):
                if path.startswith("results/runs/"):
                    found.setdefault(path, set()).add(log.stem)
    return found


def asks_gpu(job: dict[str, str]) -> bool:
    return bool(re.search(r"gpu(:\w+)?[:=]1\b", job.get("TresPerJob", "")))


def files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for d in ("results", "figures")
            for p in (root / d).rglob("*") if p.is_file()}


def same_table(a: Path, b: Path) -> None:
    left, right = pd.read_parquet(a), pd.read_parquet(b)
    pd.testing.assert_frame_equal(left.drop(columns="git_revision"),
                                  right.drop(columns="git_revision"))


@pytest.fixture(scope="module")
def built(cluster: None, tmp_path_factory: pytest.TempPathFactory):
    """(SLURM run's directory, its process, a local run's directory) of one config."""
    root = tmp_path_factory.mktemp("slurm")
    local = new_workdir(root / "local", demo_config())
    work = new_workdir(root / "cluster", demo_config())
    slurm_profile(work)
    with ThreadPoolExecutor(1) as pool:  # the local run overlaps the SLURM run
        reference = pool.submit(snakemake, local, timeout=1500)
        proc = run_slurm(work, limit=900)
        reference.result()
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}"
    return work, proc, local


def test_every_training_job_ran_in_a_gpu_job(built) -> None:
    work, proc, _ = built
    jobs = submitted_jobs(proc)
    writers = runs_by_slurm_job(work)
    runs = sorted(p.relative_to(work).as_posix()
                  for p in (work / "results/runs").rglob("*.parquet"))
    assert runs and sorted(writers) == runs, (sorted(writers), runs)
    train_jobs = set()
    for run in runs:
        assert len(writers[run]) == 1, (run, writers[run])
        (job_id,) = writers[run]
        job = jobs[job_id]
        assert job["Comment"].startswith("rule_train"), job
        assert asks_gpu(job), job
        assert job["CpusPerTres"] == "gres:gpu:1", job  # cpus_per_gpu: 1
        assert job["Partition"] == "debug", job
        assert job["JobState"] == "COMPLETED", job
        train_jobs.add(job_id)
    # grouped: up to N training jobs per submission (a group holds the jobs that were
    # ready together, so some hold fewer)
    members = [sum(writers[r] == {j} for r in runs) for j in train_jobs]
    assert max(members) == GROUP_SIZE and len(train_jobs) < len(runs) / 2, members
    # any other rule that was submitted (not in `localrules`) asked for no GPU
    for job_id, job in jobs.items():
        if job_id not in train_jobs:
            assert not asks_gpu(job), job


def test_outputs_equal_a_local_run(built) -> None:
    work, _, local = built
    assert files(work) == files(local)
    runs = list((local / "results/runs").rglob("*.parquet"))
    config = demo_config()
    assert len(runs) == sum(len(e["partitions"]) * len(e["methods"]) * len(e["split_seeds"])
                            * len(e["train_seeds"]) for e in config["experiments"].values())
    for run in runs:
        same_table(run, work / run.relative_to(local))
        assert pd.read_parquet(run, columns=["round"])["round"].max() == ROUNDS
    for exp in config["experiments"]:
        same_table(local / f"results/aggregate/{exp}.parquet",
                   work / f"results/aggregate/{exp}.parquet")
    tables = [p.relative_to(local) for p in (local / "results/tables").iterdir()]
    assert len(tables) >= 3 * (len(config["experiments"]) + len(config["tables"]))
    for name in tables:
        # measured wall and CPU times (and the projection priced at them): the same jobs,
        # not the same seconds
        if "-cost" in name.name or name.name.startswith("cost-projection"):
            if name.suffix == ".csv":
                ours, theirs = pd.read_csv(work / name), pd.read_csv(local / name)
                keys = [c for c in ("experiment", "method", "algorithm", "jobs", "runs",
                                    "device", "rounds", "clients") if c in ours.columns]
                assert ours[keys].equals(theirs[keys]), name
            continue
        assert (work / name).read_text() == (local / name).read_text(), name
    assert list((work / "figures").rglob("*.pdf"))


def test_a_failing_job_is_reported_and_the_rest_completes(built) -> None:
    work, _, _ = built
    config = yaml.safe_load((work / "config.yaml").read_text())
    base = config["experiments"]["demo_federico"]
    for name, method, training, gpu in (("broken", "fedavg", {"device": "cuda"}, 1),
                                        ("extra", "local", {}, 0)):
        exp = copy.deepcopy(base)
        exp.update(description=f"SLURM test: {name}", methods=[method], training=training,
                   partitions=[{"scheme": "iid", "clients": 4}], split_seeds=[0],
                   train_seeds=[0],
                   resources={**base["resources"], "gpu": gpu})
        config["experiments"][name] = exp
    (work / "config.yaml").write_text(yaml.safe_dump(config))
    before = {p: p.stat().st_mtime_ns for p in (work / "results/runs").rglob("*.parquet")}

    # no grouping here: a failing member would fail its whole group (see the profile)
    proc = run_slurm(work, "--group-components", "train=1", limit=420)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "Error in group train" in out, out
    assert "no CUDA device is available" in out, out  # the job's log, shown
    assert "Trying to restart job" in out, out  # the profile's retries: 1
    logs = list((work / "logs/train/broken").rglob("*.log"))
    assert logs and "no CUDA device is available" in logs[0].read_text()
    assert not list((work / "results/runs/broken").rglob("*.parquet"))
    assert not (work / "results/tables/broken.md").exists()
    # keep-going: the independent experiment is complete; nothing else was redone
    for name in ("results/aggregate/extra.parquet", "results/tables/extra.md",
                 "figures/extra-accuracy.pdf"):
        assert (work / name).stat().st_size > 0, name
    assert {p: p.stat().st_mtime_ns for p in before} == before
    jobs = submitted_jobs(proc)
    writers = runs_by_slurm_job(work)
    (extra,) = [p for p in writers if p.startswith("results/runs/extra/")]
    (job_id,) = writers[extra]
    assert not asks_gpu(jobs[job_id]), jobs[job_id]  # gpu: 0 -> no GPU request
    assert jobs[job_id]["Partition"] == "debug", jobs[job_id]
    (broken,) = [p for p in writers if p.startswith("results/runs/broken/")]
    assert len(writers[broken]) == 2, writers[broken]  # tried twice
    for job_id in writers[broken]:
        assert asks_gpu(jobs[job_id]) and jobs[job_id]["JobState"] == "FAILED", jobs[job_id]
