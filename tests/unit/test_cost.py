import math
import os
from pathlib import Path

import pandas as pd
import pytest

from pflrepro.cli import main
from pflrepro.config import check
from pflrepro.config.schema import build_schema
from pflrepro.reporting.cost import (
    cost_table,
    job_costs,
    local_passes,
    projection,
    read_benchmark,
    read_log,
    write_cost,
)
from pflrepro.store import results as R
from pflrepro.store.io import write_parquet

PREFIX = "2026-01-01 10:00:00,000 INFO pflrepro.pipeline.train_job: "
HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"


def _job(root: Path, name: str, method: str, algorithm: str, *, rounds: int, n_train: list[int],
         train_s: float, wall_s: float, rss: str = "300.5", cpu: str = "7.5",
         resumed: int | None = None, device: str = "cpu",
         params: str = "{}") -> tuple[Path, Path, Path]:
    out = R.MetricLog()
    for k, n in enumerate(n_train):
        out.add(0, k, R.N_TRAIN, n)
    for rnd in range(1, rounds + 1):
        out.add(rnd, 0, R.TEST_ACCURACY, 0.5)
    config = {"experiment": "e", "dataset": "digits", "partition": "p", "method": method,
              "algorithm": algorithm, "params": params, "split_seed": 0, "train_seed": 0,
              "client_training": "loop", "package_version": "0", "git_revision": "x"}
    run = root / f"{name}.parquet"
    write_parquet(out.to_frame(config), run)
    bench = root / f"{name}.tsv"
    bench.write_text(HEADER + f"{wall_s}\t0:00:08\t{rss}\t900\t280\t290\t0\t0\t90\t{cpu}\n")
    log = root / f"{name}.log"
    lines = [PREFIX + f"device: {device} (torch 2.x, 1 torch thread(s))"]
    if device.startswith("cuda"):
        lines.insert(0, PREFIX + f"leased {device} (NVIDIA H200), slot 0: /tmp/lock")
    if resumed is not None:
        lines.append("2026-01-01 10:00:00,000 INFO pflrepro.store.checkpoint: resuming after round "
                     f"{resumed} from x.ckpt")
    lines.append(PREFIX + f"{method}: {rounds} rounds in {train_s} s")
    log.write_text("\n".join(lines) + "\n")
    return run, bench, log


def test_log_and_benchmark_parsing(tmp_path: Path) -> None:
    _, bench, log = _job(tmp_path, "a", "fedavg", "fedavg", rounds=10, n_train=[40, 60],
                         train_s=5.0, wall_s=8.0, device="cuda:1", resumed=4)
    facts = read_log(log)
    assert (facts.device, facts.device_name, facts.train_s, facts.resumed_after) == (
        "cuda:1", "NVIDIA H200", 5.0, 4)
    assert read_benchmark(bench) == {"s": 8.0, "max_rss": 300.5, "cpu_time": 7.5}
    (tmp_path / "na.tsv").write_text(HEADER + "2.0\t0:00:02\tNA\tNA\tNA\tNA\tNA\tNA\tNA\tNA\n")
    assert math.isnan(read_benchmark(tmp_path / "na.tsv")["max_rss"])


def test_cost_table_by_hand(tmp_path: Path) -> None:
    a = _job(tmp_path, "a", "fedavg", "fedavg", rounds=10, n_train=[40, 60], train_s=5.0,
             wall_s=8.0)
    b = _job(tmp_path, "b", "fedavg", "fedavg", rounds=10, n_train=[40, 60], train_s=3.0,
             wall_s=6.0, rss="500", resumed=4)  # ran 6 rounds in 3 s
    c = _job(tmp_path, "c", "local", "local", rounds=10, n_train=[50, 50], train_s=1.0,
             wall_s=3.0)
    jobs = job_costs(*zip(a, b, c, strict=True), training={"local_epochs": 2})
    table = cost_table(jobs, methods_order=["local", "fedavg"]).set_index("method")
    assert list(table.index) == ["local", "fedavg"]
    fedavg = table.loc["fedavg"]
    assert fedavg["jobs"] == 2 and fedavg["device"] == "cpu"
    assert fedavg["wall_s"] == 7.0 and fedavg["train_s"] == 4.0
    assert fedavg["s_per_round"] == pytest.approx(8.0 / 16)  # 5 + 3 s over 10 + 6 rounds
    assert fedavg["rounds_per_s"] == pytest.approx(2.0)
    # 8 s over (10 + 6) rounds x 2 epochs x 100 samples
    assert fedavg["s_per_sample"] == pytest.approx(8.0 / 3200)
    assert fedavg["overhead_s"] == 3.0 and fedavg["max_rss_mb"] == 500.0
    assert fedavg["cpu_s"] == 7.5
    assert table.loc["local", "s_per_round"] == pytest.approx(0.1)



def test_runs_sharing_a_job_split_its_wall_and_cpu_time(tmp_path: Path) -> None:
    # issue 28, item 2: two runs trained by one job (one benchmark record: 10 s wall,
    # 8 s CPU) in 3 s and 5 s: each gets its training time plus half of the 2 s outside
    # training, and CPU time in proportion; a run alone keeps its job's numbers
    a = _job(tmp_path, "a", "fedavg", "fedavg", rounds=10, n_train=[40, 60], train_s=3.0,
             wall_s=10.0, cpu="8.0")
    b = _job(tmp_path, "b", "fedavg", "fedavg", rounds=10, n_train=[40, 60], train_s=5.0,
             wall_s=10.0, cpu="8.0")
    c = _job(tmp_path, "c", "local", "local", rounds=10, n_train=[50, 50], train_s=1.0,
             wall_s=3.0)
    jobs = job_costs([a[0], b[0], c[0]], [a[1], a[1], c[1]], [a[2], b[2], c[2]],
                     training={"local_epochs": 1})
    assert list(jobs["wall_s"]) == [4.0, 6.0, 3.0]
    assert list(jobs["cpu_s"]) == pytest.approx([3.2, 4.8, 7.5])
    assert list(jobs["runs_in_job"]) == [2, 2, 1]
    table = cost_table(jobs).set_index("method")
    assert table.loc["fedavg", "overhead_s"] == 1.0 and table.loc["fedavg", "wall_s"] == 5.0

def test_local_passes() -> None:
    assert local_passes({"local_epochs": 3}, 100) == 3.0
    assert local_passes({"local_steps": 5, "batch_size": 20}, 50) == 2.0  # 100 of 50 samples


PAPER = {
    "training": {"rounds": 20, "model": "mlp", "local_epochs": 1},
    "methods": {"fedavg": {"algorithm": "fedavg"}, "ditto": {"algorithm": "ditto"}},
    "experiments": {
        "big": {"dataset": "digits", "scale": "paper", "methods": ["fedavg", "ditto"],
                "partitions": [{"scheme": "iid", "clients": 4}],
                "split_seeds": [0, 1], "train_seeds": [0]},
        "small": {"dataset": "digits", "scale": "cpu", "methods": ["fedavg"],
                  "partitions": [{"scheme": "iid", "clients": 4}]},
    },
}


def test_projection_by_hand() -> None:
    measured = pd.DataFrame([{"method": "fa", "algorithm": "fedavg", "device": "cpu",
                              "s_per_sample": 0.005, "overhead_s": 3.0}])
    frame = projection(measured, check(PAPER, build_schema())).set_index("method")
    assert list(frame.index) == ["fedavg", "ditto"]  # only the paper-scale experiment
    row = frame.loc["fedavg"]
    # 1797 digits, 80 % train, 1 epoch: 1437.6 samples a round; 2 runs of 20 rounds
    assert row["samples_per_round"] == pytest.approx(1437.6)
    assert row["runs"] == 2
    assert row["hours"] == pytest.approx(2 * (3.0 + 20 * 1437.6 * 0.005) / 3600)
    assert row["rate_from"] == "fa on cpu"
    assert math.isnan(frame.loc["ditto", "hours"])
    assert frame.loc["ditto", "note"] == "algorithm ditto not measured"


def test_cost_command_writes_tables_and_says_cpu_is_not_gpu(tmp_path: Path) -> None:
    run, bench, log = _job(tmp_path, "a", "fedavg", "fedavg", rounds=10, n_train=[40, 60],
                           train_s=5.0, wall_s=8.0)
    paper = tmp_path / "paper.yaml"
    import yaml

    paper.write_text(yaml.safe_dump(PAPER))
    md, csv, proj = tmp_path / "c.md", tmp_path / "c.csv", tmp_path / "p.csv"
    assert main(["cost", "--experiment", "e", "--runs", str(run), "--benchmarks", str(bench),
                 "--logs", str(log), "--training", '{"local_epochs": 1}', "--project",
                 str(paper), "--md", str(md), "--csv", str(csv), "--projection-csv",
                 str(proj)]) == 0
    text = md.read_text()
    assert "# Compute cost of e" in text and "NOT GPU-hours" in text
    # the paper experiment: fedavg priced (2 runs, 20 rounds, 1437.6 samples), ditto not
    hours = 2 * (3.0 + 20 * 1437.6 * (5.0 / (10 * 100))) / 3600
    assert f"| big | mlp | 2 | 1 | 2 | 20 | 1437.60 | {hours:.2f} |" in text
    assert "1 experiment × method pair(s) not priced" in text
    assert "| FedAvg | 1 | cpu | 10 | 2 | 8.00 | 5.00 | 0.50 | 2.00 | 300.50 | 7.50 |" in text
    assert pd.read_csv(csv)["method"].tolist() == ["fedavg"]
    assert pd.read_csv(proj)["method"].tolist() == ["fedavg", "ditto"]


def test_cost_needs_aligned_inputs(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="one of each per job"):
        job_costs(["a"], [], ["c"], {})


def test_write_cost_labels_gpu_measurements_as_gpu_hours(tmp_path: Path) -> None:
    measured = pd.DataFrame([{"method": "fedavg", "jobs": 1, "device": "NVIDIA H200",
                              "rounds": 1, "clients": 1, "wall_s": 1.0, "train_s": 1.0,
                              "s_per_round": 1.0, "rounds_per_s": 1.0, "max_rss_mb": 1.0,
                              "cpu_s": 1.0}])
    projected = pd.DataFrame([{"experiment": "x", "method": "fedavg", "model": "cnn",
                               "runs": 1, "rounds": 1, "samples_per_round": 1.0,
                               "rate_from": "fedavg", "hours": 2.5, "note": ""}])
    write_cost(measured, projected, tmp_path / "a.md", tmp_path / "a.csv")
    text = (tmp_path / "a.md").read_text()
    assert "Total: 2.5 hours (GPU-hours) for the methods priced; 0 experiment" in text
    assert "| x | cnn | 1 | 1 | 1 | 1 | 1.00 | 2.50 |" in text


#: A table job's --tuning (pflrepro.pipeline.workflow.table_tuning_json) for fedamp of experiment e.
TUNING = [{"experiment": "e", "method": "fedamp", "algorithm": "fedamp", "fixed": {},
           "clients": {"p": 2}, "grids": {"sigma": [1e-5, 1e-3]}, "log": [],
           "criterion": "best_mean", "rounds": 2, "seeds": [0], "fraction": 0.2,
           "labels": {}, "selection": {"p": {"0": {"point": {"sigma": 1e-3},
                                                   "params": {"sigma": 1e-3}}}}}]


def test_cost_command_says_how_tuned_values_were_chosen(tmp_path: Path) -> None:
    import json

    run, bench, log = _job(tmp_path, "a", "fedamp", "fedamp", rounds=2, n_train=[40, 60],
                           train_s=1.0, wall_s=2.0, params='{"sigma": 0.001}')
    md, csv = tmp_path / "c.md", tmp_path / "c.csv"
    args = ["cost", "--experiment", "e", "--runs", str(run), "--benchmarks", str(bench),
            "--logs", str(log), "--training", "{}", "--md", str(md), "--csv", str(csv),
            "--labels", json.dumps({"partitions": {"p": "shown p"}})]
    assert main([*args, "--tuning", json.dumps(TUNING)]) == 0
    paragraphs = md.read_text().split("\n\n")
    assert paragraphs[-1].startswith(
        "FedAMP: chosen on validation, shown p: sigma=0.001 (the grid's highest value) "
        "(every value tried: results/tuning/e/fedamp.md).")
    csv_bytes = csv.read_bytes()
    # no tuned method, no sentence; the CSV is the same either way
    assert main([*args, "--tuning", "[]"]) == 0
    assert "chosen on validation" not in md.read_text()
    assert csv.read_bytes() == csv_bytes
    # runs that did not train with the selection are refused: the note would be false
    other, bench2, log2 = _job(tmp_path, "b", "fedamp", "fedamp", rounds=2, n_train=[40, 60],
                               train_s=1.0, wall_s=2.0, params='{"sigma": 1e-05}')
    wrong = ["cost", "--runs", str(other), "--benchmarks", str(bench2), "--logs", str(log2),
             "--training", "{}", "--md", str(md), "--csv", str(csv),
             "--tuning", json.dumps(TUNING)]
    assert main(wrong) == 1


def test_a_missing_or_damaged_benchmark_record_is_named_and_the_table_written(
        tmp_path: Path) -> None:
    # a job's shell killed: the benchmark TSV was never written and every later run
    # failed in cost_table with "No such file or directory: ...tsv"
    from pflrepro.store.io import digest_path

    a = _job(tmp_path, "a", "fedavg", "fedavg", rounds=10, n_train=[40, 60], train_s=5.0,
             wall_s=8.0)
    b = _job(tmp_path, "b", "fedavg", "fedavg", rounds=10, n_train=[40, 60], train_s=5.0,
             wall_s=9.0)
    c = _job(tmp_path, "c", "local", "local", rounds=10, n_train=[40, 60], train_s=5.0,
             wall_s=9.0)
    b[1].unlink()
    assert read_benchmark(a[1])["s"] == 8.0 and digest_path(a[1]).exists()  # first reader
    stat = a[1].stat()
    a[1].write_text(a[1].read_text().replace("8.0", "1.0"))  # damaged after it was read,
    os.utime(a[1], ns=(stat.st_atime_ns, stat.st_mtime_ns))  # its mtime kept (bit rot)
    md, csv = tmp_path / "c.md", tmp_path / "c.csv"
    assert main(["cost", "--experiment", "e", "--runs", str(a[0]), str(b[0]), str(c[0]),
                 "--benchmarks", str(a[1]), str(b[1]), str(c[1]), "--logs", str(a[2]),
                 str(b[2]), str(c[2]), "--training", '{"local_epochs": 1}', "--md", str(md),
                 "--csv", str(csv)]) == 0
    text = md.read_text()
    assert "No benchmark record for 2 job(s)" in text
    assert str(a[1]) in text and str(b[1]) in text and str(c[1]) not in text
    assert (tmp_path / "a.tsv.corrupt-1").exists()  # set aside, not backdated
    frame = pd.read_csv(csv).set_index("method")
    assert math.isnan(frame.loc["fedavg", "wall_s"]) and frame.loc["local", "wall_s"] == 9.0
