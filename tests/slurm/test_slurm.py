"""End to end on a real SLURM cluster: the workflow through profiles/slurm.

tests/slurm/cluster.sh brings up a one-node cluster (munge, slurmctld, slurmd, two
fake GPUs; needs root and Debian's `slurm-wlm munge`); the module fixture starts it and
always stops it. Snakemake runs in a temporary copy of the project (the package
source first on PYTHONPATH, as in tests/workflow; SLURM jobs run as root on this
machine and inherit the environment through the plugin's `--export=ALL`), with a copy
of the profile whose commented `slurm_partition` and `slurm_account` lines are filled
in with `debug` and `pfl_acct`, the way a user sets them (the cluster's default
partition is another one), and fast status checks (no accounting database: `squeue`,
with MinJobAge 3600 in the cluster's configuration). What SLURM ran is read from its
own job completion records (`sacct --completion`, jobcomp/filetxt in cluster.sh).

1. One config, every family of training rule: the demo (config/demo.yaml: both
   experiments, every partition and seed, their tables and figures) with three methods
   per experiment (`SLURM_METHODS`; what is tested is the cluster's plumbing, which
   every method shares, and CI's time), two runs per job at the CPU scale (the
   `train_<runs>` rules), demo_fedamp's `tune:` block for FedAMP alone on a smaller
   budget (`tune_train_<runs>` jobs, then the selection), and one paper-shaped
   experiment (`PAPER`: config.yaml's FedAMP IID MNIST, the paper's MLP and 20 clients,
   one round of FedAvg on generated MNIST archives served over loopback, as in the
   paper_smoke tier; one run per job at paper scale: the `train` rule), all with
   `gpu: 1`. Every job the workflow submitted ran in partition `debug` under account
   `pfl_acct` and completed; every training and tuning run ran inside a SLURM job that
   asked for one GPU; nothing was grouped (the config tunes: Snakemake regroups wrongly
   after a checkpoint, so the workflow groups nothing then, and says so; the grouping of
   a config without tuning is checked on Snakemake's own plan,
   tests/unit/test_cluster_settings.py); every output file exists in both runs and the
   run Parquet files, tuning runs and selection, aggregate tables and tables equal those
   of a local run of the same config (run meanwhile).
2. The same directory, two more experiments: one whose training raises at job time
   (device `cuda`, no CUDA here), one on the CPU (`gpu: 0`). Snakemake reports the
   failure, retries it once (the profile's `retries`), exits non-zero and still
   builds the other experiment (`keep-going`).
"""

from __future__ import annotations

import copy
import importlib.util
import json
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
from _paper_smoke import mirrors_overlay, serve, write_archives  # noqa: E402
from _slurm_profile import user_profile  # noqa: E402
from _wf import REPO, new_workdir, snakemake  # noqa: E402

CLUSTER = Path(__file__).with_name("cluster.sh")
PROFILE = REPO / "profiles" / "slurm" / "config.yaml"

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
#: The demo experiments kept here and the methods each keeps: the two baselines every
#: table has and the experiment's own method(s), whose figures (FedeRiCo's weights,
#: FedAMP's heatmaps) the demo draws; the demo's other experiments are left out (the
#: tier's time).
SLURM_METHODS = {"demo_federico": ["local", "fedavg", "federico"],
                 "demo_fedamp": ["fedavg", "fedamp", "heurfedamp"]}
ROUNDS = yaml.safe_load(DEMO.read_text())["training"]["rounds"]
#: Runs per training job at the CPU scale (the demo's experiments): the `train_<runs>` rules.
RUNS_PER_JOB = 2
#: The tuning kept here: FedAMP's grid in demo_fedamp, fewer points and rounds.
TUNE = {"rounds": 3, "sigma": {"log": [1.0e-5, 1.0e-1], "num": 2}, "prox": [0.1, 1]}
#: The paper-shaped experiment: config.yaml's, under this name, with these methods.
PAPER, PAPER_SOURCE, PAPER_METHODS = "paper_shape", "fedamp_iid_mnist", ["fedavg"]
PARTITION, ACCOUNT = "debug", "pfl_acct"
#: Targets of the main run: everything of the CPU scale, and the paper-scale experiment's
#: table (a config builds one scale by default; the other's experiments when named).
TARGETS = ("all", f"results/tables/{PAPER}.md")


def slurm_config(mirrors: dict) -> dict:
    """The demo's config with `SLURM_METHODS`, the smaller tuning and `PAPER`; all on GPUs.

    `mirrors`: the `data:` block of the generated archives (`mirrors_overlay`).
    """
    config = yaml.safe_load(DEMO.read_text())
    assert set(SLURM_METHODS) <= set(config["experiments"]), "the demo's experiments changed"
    config["experiments"] = {name: exp for name, exp in config["experiments"].items()
                             if name in SLURM_METHODS}
    for name, exp in config["experiments"].items():
        assert set(SLURM_METHODS[name]) <= set(exp["methods"]), (name, exp["methods"])
        exp["methods"] = SLURM_METHODS[name]
        exp["resources"] = {**exp["resources"], "gpu": 1}
    tune = config["experiments"]["demo_fedamp"]["tune"]
    assert "fedamp" in tune["methods"], tune
    tune["rounds"] = TUNE["rounds"]
    tune["methods"] = {"fedamp": {k: TUNE[k] for k in ("sigma", "prox")}}
    full = yaml.safe_load((REPO / "config.yaml").read_text())
    paper = copy.deepcopy(full["experiments"][PAPER_SOURCE])
    assert paper.get("scale", "paper") == "paper" and paper["resources"]["gpu"] == 1, paper
    paper.update(methods=PAPER_METHODS, split_seeds=paper["split_seeds"][:1],
                 train_seeds=paper["train_seeds"][:1],
                 training={**paper.get("training", {}), "rounds": 1},
                 description=f"SLURM test: {PAPER_SOURCE}'s shape, 1 round, generated data")
    paper.pop("tune", None)
    paper.pop("label", None)
    config["experiments"][PAPER] = paper
    config["methods"].update({m: full["methods"][m] for m in PAPER_METHODS
                              if m not in config["methods"]})
    config["runs_per_job"] = {"cpu": RUNS_PER_JOB, "paper": 1}
    config["data"] = {**config.get("data", {}), **mirrors["data"]}
    return config


def slurm_profile(work: Path) -> Path:
    """The profile with its commented partition and account lines filled in."""
    return user_profile(work / "profile", PARTITION, ACCOUNT)


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
    """SLURM's completion records of every job of this Snakemake run, by job id.

    The run's jobs are those named after its SLURM run ID that slurmctld still holds
    (MinJobAge: cluster.sh); each one's record is read with `sacct --completion`
    (jobcomp/filetxt), which lists a job once it has ended.
    """
    m = re.search(r"SLURM run ID: (\S+)", proc.stdout + proc.stderr)
    assert m, proc.stderr
    held = subprocess.run(["scontrol", "show", "job", "-o"], capture_output=True, text=True,
                          check=True).stdout
    ids = {f["JobId"] for f in (dict(re.findall(r"([\w/:]+)=(\S*)", line))
                                for line in held.splitlines()) if f.get("JobName") == m.group(1)}
    assert ids, held
    fields = ["JobID", "JobName", "Partition", "Account", "State"]
    for _ in range(30):
        out = subprocess.run(["sacct", "--completion", "-P", "-n", "-S", "2000-01-01",
                              "--format", ",".join(fields)],
                             capture_output=True, text=True, check=True).stdout
        jobs = {job["JobID"]: job for job in (dict(zip(fields, line.split("|"), strict=True))
                                              for line in out.splitlines())
                if job["JobID"] in ids}
        if set(jobs) == ids:
            return jobs
        time.sleep(1)
    raise AssertionError(f"SLURM jobs {sorted(ids - set(jobs))} have no completion record:\n{out}")


def job_details(job_id: str) -> dict[str, str]:
    """`scontrol show job` fields of one job (its request: GPUs, CPUs per GPU, comment)."""
    out = subprocess.run(["scontrol", "show", "job", "-o", job_id], capture_output=True,
                         text=True, check=True).stdout
    return dict(re.findall(r"([\w/:]+)=(\S*)", out))


def runs_by_slurm_job(work: Path) -> dict[str, set[str]]:
    """Ids of the SLURM jobs that ran each training job, from the kept SLURM logs."""
    found: dict[str, set[str]] = {}
    for log in (work / ".snakemake" / "slurm_logs").rglob("*.log"):
        for line in re.findall(r"output: (.*)", log.read_text()):
            for path in line.split(", "):
                if path.startswith(("results/runs/", "results/tuning/")) and "/runs/" in path:
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
    sums = write_archives(root / "archives", only=("mnist",))
    with serve(root / "archives") as url:
        config = slurm_config(mirrors_overlay(url, sums))
        local = new_workdir(root / "local", config)
        work = new_workdir(root / "cluster", config)
        slurm_profile(work)
        with ThreadPoolExecutor(1) as pool:  # the local run overlaps the SLURM run
            reference = pool.submit(snakemake, local, *TARGETS, timeout=1500)
            proc = run_slurm(work, *TARGETS, limit=900)
            reference.result()
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}"
    return work, proc, local


def runs_of(root: Path) -> list[str]:
    """Every training and tuning run's table under ``root``."""
    return sorted(p.relative_to(root).as_posix() for d in ("results/runs", "results/tuning")
                  for p in (root / d).rglob("*.parquet") if "/runs/" in p.as_posix())


def family(run: str) -> str:
    """The kind of rule that trains ``run``: tuning, paper-shaped (`train`), or several per job."""
    if run.startswith("results/tuning/"):
        return "tune_train_<runs>"
    return "train" if f"/{PAPER}/" in run else "train_<runs>"


def test_every_job_ran_in_the_profiles_partition_and_account(built) -> None:
    work, proc, _ = built
    jobs = submitted_jobs(proc)
    writers = runs_by_slurm_job(work)
    runs = runs_of(work)
    assert runs and sorted(writers) == runs, (sorted(writers), runs)
    # SLURM's own records: every job of the run, whatever its rule
    for job in jobs.values():
        assert (job["Partition"], job["Account"], job["State"]) == (
            PARTITION, ACCOUNT, "COMPLETED"), job
    seen: dict[str, str] = {}
    for run in runs:
        assert len(writers[run]) == 1, (run, writers[run])
        (job_id,) = writers[run]
        assert job_id in jobs, (run, job_id)
        details = job_details(job_id)
        assert asks_gpu(details), details
        assert details["CpusPerTres"] == "gres:gpu:1", details  # cpus_per_gpu: 1
        seen.setdefault(family(run), job_id)
    assert set(seen) == {"train", "train_<runs>", "tune_train_<runs>"}, seen
    for name, job_id in sorted(seen.items()):
        print(f"{name}: sacct --completion: {jobs[job_id]}")
    # the config tunes, so nothing is grouped (Snakemake regroups wrongly after the
    # tune_select checkpoint, submitting some jobs twice: cluster.grouping_safe): each
    # SLURM job ran one Snakemake job of up to RUNS_PER_JOB runs, and the run says so
    per_job = [sum(writers[r] == {j} for r in runs) for j in set().union(*writers.values())]
    assert max(per_job) <= RUNS_PER_JOB, per_job
    assert "training jobs are not grouped" in proc.stdout + proc.stderr


def test_outputs_equal_a_local_run(built) -> None:
    work, _, local = built
    assert files(work) == files(local)
    runs = runs_of(local)
    config = yaml.safe_load((local / "config.yaml").read_text())
    final = [r for r in runs if r.startswith("results/runs/")]
    assert len(final) == sum(len(e["partitions"]) * len(e["methods"]) * len(e["split_seeds"])
                             * len(e["train_seeds"]) for e in config["experiments"].values())
    assert len(runs) > len(final)  # the tuning runs
    for run in runs:
        same_table(local / run, work / run)
    for run in final:
        rounds = 1 if f"/{PAPER}/" in run else ROUNDS
        assert pd.read_parquet(local / run, columns=["round"])["round"].max() == rounds
    # the tuning's selection, table of every value tried, and the tables that use it
    selection = "results/tuning/demo_fedamp/fedamp.json"
    assert json.loads((work / selection).read_text()) == json.loads(
        (local / selection).read_text())
    for ext in ("md", "csv"):
        name = f"results/tuning/demo_fedamp/fedamp.{ext}"
        assert (work / name).read_text() == (local / name).read_text(), name
    for exp in config["experiments"]:
        same_table(local / f"results/aggregate/{exp}.parquet",
                   work / f"results/aggregate/{exp}.parquet")
    # the tables and their digest records (in the folder's hidden .digests/)
    tables = [p.relative_to(local) for p in (local / "results/tables").rglob("*")
              if p.is_file()]
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

    proc = run_slurm(work, limit=420)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert re.search(r"Error in (rule|group) train", out), out
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
    assert not asks_gpu(job_details(job_id)), job_details(job_id)  # gpu: 0 -> no GPU
    assert (jobs[job_id]["Partition"], jobs[job_id]["Account"]) == (PARTITION, ACCOUNT)
    (broken,) = [p for p in writers if p.startswith("results/runs/broken/")]
    assert len(writers[broken]) == 2, writers[broken]  # tried twice
    for job_id in writers[broken]:
        assert asks_gpu(job_details(job_id)) and jobs[job_id]["State"] == "FAILED", jobs[job_id]
