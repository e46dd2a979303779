"""Every job that trains gets the SLURM profile's cluster settings, whatever its rule.

profiles/slurm sets partition, account, ``slurm_extra``, ``cpus_per_gpu`` and the group
once, for ``train``; the Snakefile hands them to every rule Snakemake would submit
(pflrepro.pipeline.workflow.cluster). Here Snakemake itself plans the workflow (a dry
run, ``-n -p``, with a copy of the profile whose partition and account lines are filled
in as a user would) for the demo config (several runs per job and a ``tune:`` block:
``train_<runs>`` and ``tune_train_<runs>`` rules), config.yaml at CPU scale (the same
families) and at paper scale (``train`` and ``tune_train``, GPU jobs). The jobs that
train are found by what they run (a shell command running ``pflrepro ... train``), not
by rule name, so a new rule family that trains is checked as soon as it exists; each
must carry the profile's partition, account and ``slurm_extra``, and its group (none in
a config that tunes: ``cluster.grouping_safe``; the demo without its ``tune:`` block is
grouped), and no other job may join a group. The requeue flag is the executor's own
(``slurm-requeue``), read here as Snakemake reads the profiles. The demo's dry run
without the SLURM profile shows neither groups nor cluster settings: local runs are
unchanged.
"""

from __future__ import annotations

import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from _slurm_profile import user_profile
from _wf import REPO, new_workdir, snakemake

pytestmark = pytest.mark.workflow

PARTITION, ACCOUNT = "gpu_part", "proj_acct"
#: A job's shell command that trains: the package's CLI with its `train` command.
TRAINS = re.compile(r"-m pflrepro\b.*?\strain\s")
TUNING_OUTPUTS = "results/tuning/"


@dataclass
class Job:
    rule: str
    group: str | None
    outputs: list[str] = field(default_factory=list)
    resources: dict[str, str] = field(default_factory=dict)
    shell: str = ""


def planned(text: str) -> list[Job]:
    """The jobs of a dry run's output (``-n -p``), with their group, if any."""
    jobs: list[Job] = []
    group = None
    for line in text.splitlines():
        if m := re.search(r"\] Group job (\S+) \(", line):
            group = m.group(1)
        elif m := re.match(r"^(\s*)(?:local)?(?:rule|checkpoint) (\S+):$", line):
            if not m.group(1):
                group = None
            jobs.append(Job(m.group(2), group))
        elif jobs and (m := re.match(r"^\s+output: (.*)$", line)):
            jobs[-1].outputs = m.group(1).split(", ")
        elif jobs and (m := re.match(r"^\s+resources: (.*)$", line)):
            jobs[-1].resources = dict(kv.split("=", 1) for kv in m.group(1).split(", "))
        elif jobs and line.startswith("Shell command: "):
            jobs[-1].shell = line
    return jobs


def dry_run(root: Path, name: str, config: dict, *args: str) -> list[Job]:
    work = new_workdir(root / name, config)
    proc = snakemake(work, "-n", "-p", *args, timeout=600)
    jobs = planned(proc.stdout + proc.stderr)
    assert jobs, proc.stdout
    return jobs


@pytest.fixture(scope="module")
def plans(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Job]]:
    root = tmp_path_factory.mktemp("cluster")
    profile = str(user_profile(root / "profile", PARTITION, ACCOUNT))
    demo = yaml.safe_load((REPO / "config/demo.yaml").read_text())
    full = yaml.safe_load((REPO / "config.yaml").read_text())
    untuned = yaml.safe_load((REPO / "config/demo.yaml").read_text())
    for exp in untuned["experiments"].values():
        exp.pop("tune", None)
    runs = {"demo": (demo, "--profile", profile),
            "demo_untuned": (untuned, "--profile", profile),
            "cpu": (full, "--profile", profile, "--config", "scale=cpu"),
            "paper": (full, "--profile", profile),
            "demo_local": (demo, "--profile", str(REPO / "profiles/demo"))}
    with ThreadPoolExecutor(2) as pool:
        futures = {k: pool.submit(dry_run, root, k, *v) for k, v in runs.items()}
        return {k: f.result() for k, f in futures.items()}


def training(jobs: list[Job]) -> list[Job]:
    return [j for j in jobs if TRAINS.search(j.shell)]


@pytest.mark.parametrize("name", ["demo", "cpu", "paper", "demo_untuned"])
def test_every_job_that_trains_gets_the_profiles_settings(plans, name: str) -> None:
    jobs = plans[name]
    trains = training(jobs)
    assert trains, name
    for job in trains:
        settings = {k: job.resources.get(k) for k in ("slurm_partition", "slurm_account",
                                                      "slurm_extra", "cpus_per_gpu")}
        assert settings == {"slurm_partition": PARTITION, "slurm_account": ACCOUNT,
                            "slurm_extra": "--signal=TERM@120", "cpus_per_gpu": "1"}, job
        # a config that tunes groups nothing (Snakemake regroups wrongly after the
        # tune_select checkpoint: cluster.grouping_safe); one that does not, as the profile
        assert job.group == (None if name != "demo_untuned" else "train"), job
    # no other job is bundled with them (the other rules are local: test_local_rules.py)
    assert not [j.rule for j in jobs if j.group and j not in trains]


def test_the_plans_hold_every_family_of_training_rule(plans) -> None:
    """One run or several per job, final or tuning: each kind is among the jobs checked."""
    kinds = {}
    for name in ("demo", "cpu", "paper"):
        for job in training(plans[name]):
            kind = (all(o.startswith(TUNING_OUTPUTS) for o in job.outputs),
                    len(job.outputs) > 1)
            kinds.setdefault(kind, set()).add(job.rule)
    assert set(kinds) == {(False, False), (False, True), (True, False), (True, True)}, kinds
    # paper scale: the tuning runs ask for a GPU, as the final runs do
    paper = training(plans["paper"])
    assert any(TUNING_OUTPUTS in j.outputs[0] for j in paper)
    assert all(j.resources.get("gpu") == "1" for j in paper), {
        j.rule for j in paper if j.resources.get("gpu") != "1"}


def test_the_profile_requeues_every_submitted_job(tmp_path: Path) -> None:
    """As Snakemake reads the profiles: slurm-requeue is on, the executor is SLURM."""
    profile = user_profile(tmp_path / "profile", PARTITION, ACCOUNT)
    code = ("import sys; from snakemake.cli import parse_args;"
            " _, a = parse_args(sys.argv[1:]);"
            " print(a.executor, a.slurm_requeue, dict(a.groups), dict(a.group_components))")
    out = subprocess.run([__import__("sys").executable, "-c", code, "--snakefile",
                          str(REPO / "Snakefile"), "--profile", str(profile), "-n"],
                         cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert out.split("\n")[-2] == "slurm True {'training': 'train'} {'train': 4}", out


def test_local_runs_have_no_groups_or_cluster_settings(plans) -> None:
    jobs = plans["demo_local"]
    trains = training(jobs)
    assert trains
    assert all(j.group is None and not any(k.startswith("slurm") for k in j.resources)
               for j in jobs), [j for j in jobs if j.group or "slurm_partition" in j.resources]
