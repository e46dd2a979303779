"""End to end: the Snakemake workflow on a tiny config in a temporary directory.

One module-scoped run builds everything; the tests then check outputs, dry runs after
changes (stale-only recompute), determinism and damaged outputs. The tests that need no
build (single-figure targets, config errors, ...) are in test_workflow_fresh.py. The
package source is copied into the temporary directory and put first on PYTHONPATH, so a
test can edit an algorithm's file without touching the repository.

The tests that change the build beyond a dry run or one training job (a batched
second build, the lock held by a forced retraining, a damaged partition rebuilt) are in
the ``workflow_full`` tier: ``pytest -m workflow_full`` (``.ci/run`` runs it).
"""

from __future__ import annotations

import os
import subprocess
import time
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
import yaml
from _wf import new_workdir, planned_jobs, snakemake, start_snakemake

from pflrepro.store.io import DAMAGED_MTIME, digest_path

TINY = Path(__file__).with_name("config.yaml")
RUNS = 2 * 4 * 1 * 2  # partitions x methods x split seeds x train seeds

pytestmark = pytest.mark.workflow


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = new_workdir(tmp_path_factory.mktemp("wf") / "run")
    snakemake(work)
    return work


def test_outputs_exist(built: Path) -> None:
    runs = sorted((built / "results/runs/tiny").rglob("*.parquet"))
    assert len(runs) == RUNS
    for name in ("tiny.md", "tiny.tex", "tiny.csv"):
        assert (built / "results/tables" / name).stat().st_size > 0
    for name in ("tiny-accuracy.pdf", "tiny-accuracy.png", "tiny-weights-federico.pdf",
                 "tiny-weights-federico.png"):
        assert (built / "figures" / name).stat().st_size > 0
    assert len(list((built / "results/partitions/digits").rglob("split0.parquet"))) == 2
    assert len(list((built / "results/partitions/digits").rglob("split0-clients.csv"))) == 2
    summaries = list((built / "results/partitions/digits").rglob("split0-summary.md"))
    assert len(summaries) == 2
    assert all("| empty_clients | 0 |" in p.read_text() for p in summaries)
    assert len(list((built / "figures/partitions/digits").glob("*.png"))) == 2
    publics = sorted((built / "results/public/digits").rglob("split0-digits100.parquet"))
    assert len(publics) == 2
    for public in publics:
        rows = set(pd.read_parquet(public)["index"])
        partition = built / "results/partitions/digits" / public.parent.name / "split0.parquet"
        clients = set(pd.read_parquet(partition)["index"])
        assert len(rows) == 100 and not rows & clients
    logs = list((built / "logs/train").rglob("*.log"))
    assert len(logs) == RUNS
    bench = list((built / "results/benchmarks/train").rglob("*.tsv"))
    assert len(bench) == RUNS



@pytest.mark.workflow_full
def test_runs_sharing_a_job_have_the_bytes_of_runs_trained_alone(built: Path,
                                                                 tmp_path: Path) -> None:
    # issue 28, item 2: runs_per_job 'all' trains both seeds of a method on a partition
    # in one job (rule train_s0t0_s0t1); every run's table is the one its own job wrote
    # in `built`, with its own digest record, log and a cost row
    config = yaml.safe_load(TINY.read_text())
    config["runs_per_job"] = {"paper": "all"}
    work = new_workdir(tmp_path / "batched", config)
    jobs = planned_jobs(snakemake(work, "-n"))
    rules = Counter(r for r, _ in jobs)
    assert rules["train_s0t0_s0t1"] == RUNS // 2 and "train" not in rules, rules
    snakemake(work)
    runs = sorted(p.relative_to(built) for p in (built / "results/runs/tiny").rglob("*.parquet"))
    assert len(runs) == RUNS
    for run in runs:
        assert (work / run).read_bytes() == (built / run).read_bytes(), run
        assert digest_path(work / run).exists()
        log = (work / "logs/train" / run.relative_to("results/runs")).with_suffix(".log")
        assert log.read_text().count(" rounds in ") == 1, log
    assert not list((work / "results/runs").rglob("*.ckpt"))
    assert len(list((work / "results/benchmarks/train").rglob("runs-s0t0_s0t1.tsv"))) == RUNS // 2
    cost = pd.read_csv(work / "results/tables/tiny-cost.csv")
    assert cost["jobs"].sum() == RUNS  # a row per run, as before
    again = snakemake(work, "-n")
    assert "Nothing to be done" in again.stdout + again.stderr

def test_aggregate_has_every_run_and_config_columns(built: Path) -> None:
    agg = pd.read_parquet(built / "results/aggregate/tiny.parquet")
    runs = agg.groupby(["partition", "method", "split_seed", "train_seed"]).ngroups
    assert runs == RUNS
    for col in ("experiment", "dataset", "partition", "method", "algorithm", "params",
                "split_seed", "train_seed", "client_training", "package_version",
                "git_revision"):
        assert col in agg.columns
        assert agg[col].notna().all()
    assert set(agg["client_training"]) == {"loop"}  # CPU: the per-client loop ran
    assert set(agg["method"]) == {"local", "fedavg", "fedavg_plus", "federico"}
    weights = agg[agg["metric"] == "weight"]
    assert set(weights["method"]) == {"federico"}
    # FedeRiCo's weights of each client sum to 1 at every logged round
    sums = weights.groupby(["partition", "train_seed", "round", "client"])["value"].sum()
    assert sums.sub(1).abs().max() < 1e-6
    table = pd.read_csv(built / "results/tables/tiny.csv")
    assert len(table) == 4 * 2
    assert (table["n"] == 2).all()


def test_nothing_to_do_after_a_full_run(built: Path) -> None:
    proc = snakemake(built, "-n")
    assert "Nothing to be done" in proc.stdout + proc.stderr


def test_a_deleted_meta_json_of_a_built_project_prepares_the_set_again(built: Path) -> None:
    """Every job made from the set is up to date, so only rule ``all`` naming meta.json
    makes Snakemake schedule ``prepare_data`` (and then what is made from it)."""
    import shutil

    meta = built / "results/data/digits/meta.json"
    keep = meta.with_name("meta.json.kept")
    shutil.copy2(meta, keep)
    try:
        meta.unlink()
        planned = Counter(rule for rule, _ in planned_jobs(snakemake(built, "-n")))
        assert planned["prepare_data"] == 1, planned
        assert planned["partition"] >= 1, planned
    finally:
        shutil.copy2(keep, meta)  # the bytes and the mtime it had: nothing to rebuild
        keep.unlink()
    proc = snakemake(built, "-n")
    assert "Nothing to be done" in proc.stdout + proc.stderr


def _assert_only_federico_reruns(proc: subprocess.CompletedProcess) -> None:
    jobs = planned_jobs(proc)
    rules = Counter(rule for rule, _ in jobs)
    assert rules["train"] == RUNS // 4, jobs
    assert {w["method"] for r, w in jobs if r == "train"} == {"federico"}
    assert {w["method"] for r, w in jobs if r == "aggregate_method"} == {"federico"}
    assert not {"prepare_data", "partition"} & set(rules), rules
    assert set(rules) <= {"train", "aggregate_method", "aggregate_experiment", "table",
                          "communication_table", "cost_table", "cost_projection",
                          "grid_projection", "report_table", "plot_accuracy", "plot_weights",
                          "all"}, rules
    assert not {"partition_stats", "plot_partition"} & set(rules), rules


def test_changing_a_federico_hyperparameter_reruns_only_federico(built: Path) -> None:
    original = (built / "config.yaml").read_text()
    config = yaml.safe_load(original)
    config["methods"]["federico"]["beta"] = 0.3
    (built / "config.yaml").write_text(yaml.safe_dump(config))
    try:
        _assert_only_federico_reruns(snakemake(built, "-n"))
    finally:
        (built / "config.yaml").write_text(original)
    proc = snakemake(built, "-n")
    assert "Nothing to be done" in proc.stdout + proc.stderr


def test_editing_federico_source_reruns_only_federico(built: Path) -> None:
    source = built / "src/pflrepro/algorithms/federico.py"
    original = source.read_text()
    source.write_text(original + "\n# an edit\n")
    try:
        _assert_only_federico_reruns(snakemake(built, "-n"))
    finally:
        source.write_text(original)


def test_same_seed_gives_identical_parquet(built: Path) -> None:
    target = "results/runs/tiny/" + next(
        p.relative_to(built / "results/runs/tiny").as_posix()
        for p in sorted((built / "results/runs/tiny").rglob("federico/split0-seed0.parquet")))
    first = (built / target).read_bytes()
    snakemake(built, "--force", target, "--allowed-rules", "train")
    assert (built / target).read_bytes() == first


@pytest.mark.workflow_full
def test_a_second_snakemake_on_a_running_directory_is_refused(built: Path) -> None:
    # the fault campaign: two runs at once on one results directory. Snakemake's lock
    # refuses the second before it plans a job; the first finishes, its output unchanged.
    runs = sorted(p.relative_to(built).as_posix()
                  for p in (built / "results/runs/tiny").rglob("*.parquet"))
    assert len(runs) == RUNS
    before = {run: (built / run).read_bytes() for run in runs}
    # every training job again: the first run holds its lock for a while
    first = start_snakemake(built, "--force", *runs, "--allowed-rules", "train")
    try:
        locks = built / ".snakemake/locks"
        deadline = time.monotonic() + 120
        while not (locks.is_dir() and any(locks.iterdir())):
            assert first.poll() is None, first.communicate()[0]
            assert time.monotonic() < deadline, "the first run never took its lock"
            time.sleep(0.05)
        # a second run that would write the same file (Snakemake locks files, not the
        # directory: a run with other outputs, or with nothing to do, may go ahead)
        second = snakemake(built, "--force", runs[-1], "--allowed-rules", "train",
                           check=False)
        out = second.stdout + second.stderr
        assert second.returncode != 0, out
        assert "cannot be locked" in out, out
        assert "rule train" not in out, out
    finally:
        text, _ = first.communicate(timeout=600)
    assert first.returncode == 0, text
    assert {run: (built / run).read_bytes() for run in runs} == before


def test_lint_is_clean(built: Path) -> None:
    proc = snakemake(built, "--lint", check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "Congratulations" in out and "Lints for" not in out, out


# ------------------------------------------------- issue 17: damaged outputs, foreign code
def _damage_and_rebuild(built: Path, path: Path) -> subprocess.CompletedProcess:
    """Truncate ``path``; the next run names it and marks it damaged, the one after rebuilds.

    Returns the failing run. Leaves ``built`` as complete as before (and the aside gone).
    """
    original = path.read_bytes()
    table = (built / "results/tables/tiny.csv").read_bytes()
    path.write_bytes(original[: len(original) // 2])
    # newer than every output even where file times are coarse, as a later edit would be
    later = (built / "results/tables/tiny.csv").stat().st_mtime_ns + 2_000_000_000
    os.utime(path, ns=(later, later))
    failed = snakemake(built, check=False)
    assert failed.returncode != 0, failed.stdout + failed.stderr
    aside = path.with_name(path.name + ".corrupt-1")
    assert aside.read_bytes() == original[: len(original) // 2]
    # the damaged file stays in place, dated at the epoch (pflrepro.store.io.mark_damaged), so
    # that jobs reading it fail naming it instead of Snakemake's "Missing files"
    assert path.stat().st_mtime == DAMAGED_MTIME
    snakemake(built)  # the damaged file is older than its inputs now: this rebuilds it
    aside.unlink()
    assert path.read_bytes() == original  # the same bytes: seeded, deterministic
    assert (built / "results/tables/tiny.csv").read_bytes() == table
    proc = snakemake(built, "-n")
    assert "Nothing to be done" in proc.stdout + proc.stderr
    return failed


def test_truncated_run_is_named_set_aside_and_rebuilt(built: Path) -> None:
    # item 4: aggregation named no file, and the next run said "Nothing to be done"
    run = sorted((built / "results/runs/tiny").rglob("federico/split0-seed0.parquet"))[0]
    failed = _damage_and_rebuild(built, run)
    out = failed.stdout + failed.stderr
    assert f"{run.relative_to(built)} is damaged" in out, out
    assert "rerun snakemake" in out, out


@pytest.mark.workflow_full
def test_truncated_partition_is_named_set_aside_and_rebuilt(built: Path) -> None:
    # item 5: every job reading it failed, and the next run did not write it again
    partition = sorted((built / "results/partitions/digits").rglob("split0.parquet"))[0]
    failed = _damage_and_rebuild(built, partition)
    out = failed.stdout + failed.stderr
    assert f"{partition.relative_to(built)} is damaged" in out, out


def test_a_figure_with_bit_rot_is_found_by_verify_and_redrawn(built: Path,
                                                               monkeypatch: pytest.MonkeyPatch
                                                               ) -> None:
    # a figure is read by no job: only its digest record shows a byte changed with the
    # mtime kept; verify marks it as it marks a table, and the next snakemake redraws it
    from pflrepro.inspect.verify import verify

    figures = [built / "figures/tiny-accuracy.png",
               sorted((built / "figures/partitions/digits").glob("*.pdf"))[0]]
    original = {path: path.read_bytes() for path in figures}
    for path in figures:
        stat = path.stat()
        data = bytearray(original[path])
        data[len(data) // 2] ^= 0x01
        path.write_bytes(bytes(data))
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert "Nothing to be done" in "".join(snakemake(built, "-n").stdout)  # mtimes kept
    monkeypatch.chdir(built)  # as a user runs it: Snakemake's records are found from here
    _, findings = verify(built / "results")
    assert sorted((f.status, f.path) for f in findings) == sorted(
        ("damaged", path) for path in figures), findings
    planned = {rule for rule, _ in planned_jobs(snakemake(built, "-n"))}
    assert {"plot_accuracy", "plot_partition"} <= planned, planned
    assert not {"train", "aggregate_method", "partition"} & planned, planned
    snakemake(built)
    for path in figures:
        assert path.read_bytes() == original[path]  # redrawn byte-identical
        path.with_name(path.name + ".corrupt-1").unlink()
    assert verify(built / "results")[1] == []
    proc = snakemake(built, "-n")
    assert "Nothing to be done" in proc.stdout + proc.stderr


# ------------------------------------------------- every stored file under a digest
#: Files the workflow writes under results/ and figures/ without a digest record of their
#: own (paths relative to the working directory, fnmatch patterns), and why.
UNRECORDED = {
    # a prepared data set's arrays: their SHA-256 are in meta.json, which has a record
    # (verify checks the set as one folder)
    "results/data/*/*.npy",
    # the partial tables of a failed run (the onerror handler, no rule): read by people,
    # by no job, and written again after the next failure
    "results/partial/*",
}


def test_every_stored_file_has_a_record_that_verify_checks(built: Path,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    # a new kind of output without a digest record fails here: give it a record (written
    # with the file, or by pflrepro.store.records) and a check in pflrepro verify
    from fnmatch import fnmatch

    from pflrepro.inspect.verify import verify
    from pflrepro.store.io import DIGEST_SUFFIX, digest_path

    stored = sorted(p.relative_to(built).as_posix() for folder in ("results", "figures")
                    for p in (built / folder).rglob("*") if p.is_file()
                    and not p.name.endswith(DIGEST_SUFFIX))
    unrecorded = [p for p in stored if not digest_path(built / p).exists()
                  and not any(fnmatch(p, pattern) for pattern in UNRECORDED)]
    assert unrecorded == [], unrecorded
    kinds = {p.split("/")[1] if p.startswith("results/") else "figures" for p in stored}
    assert {"runs", "aggregate", "tables", "partitions", "public", "data", "benchmarks",
            "figures"} <= kinds, kinds
    # verify checks each recorded file once (a data set as its folder, for its meta.json)
    monkeypatch.chdir(built)
    checked, findings = verify(built / "results")
    assert findings == []
    assert checked == sum(digest_path(built / p).exists() for p in stored)
