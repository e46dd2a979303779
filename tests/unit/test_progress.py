import json
import logging
from pathlib import Path

import pandas as pd
import pytest

from pflrepro.cli import main
from pflrepro.store import results as R
from pflrepro.store.progress import RoundProgress, format_duration, progress_table_path


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def _log_with_round(rnd: int, acc: tuple[float, float], loss: tuple[float, float]
                    ) -> R.MetricLog:
    out = R.MetricLog()
    for k, n in enumerate((10, 30)):
        out.add(0, k, R.N_TEST, n)
    for k in range(2):
        out.add(rnd, k, R.TRAIN_LOSS, 9.0)
        out.add(rnd, k, R.TEST_ACCURACY, acc[k])
        out.add(rnd, k, R.TEST_LOSS, loss[k])
    return out


def test_a_round_line_by_hand(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock(100.0)
    bar = RoundProgress(5, "fedavg", clock=clock)
    clock.t = 110.0
    assert list(bar.rounds(1)) == [1, 2, 3, 4, 5]
    clock.t = 130.0  # round 1 took 20 s: 4 rounds left, 80 s
    with caplog.at_level(logging.INFO, logger="pflrepro.store.progress"):
        summary = bar.round_done(1, _log_with_round(1, (0.5, 1.0), (1.0, 3.0)))
    assert summary is not None
    # mean (0.5 + 1) / 2; weighted by n_test 10 and 30: (5 + 30) / 40; loss (1 + 3) / 2
    assert summary.line() == ("round 1/5: mean acc 0.7500, weighted acc 0.8750, "
                              "loss 2.0000, elapsed 30.0s, left ~0:01:20")
    assert caplog.messages == [summary.line()]


def test_a_resumed_run_paces_from_its_own_rounds() -> None:
    clock = Clock(0.0)
    bar = RoundProgress(10, clock=clock)
    list(bar.rounds(7))  # resumed after round 6
    clock.t = 30.0  # rounds 7 and 8 in 30 s: 15 s each, 2 left
    summary = bar.round_done(8, _log_with_round(8, (1.0, 1.0), (0.0, 0.0)))
    assert summary is not None and summary.left_s == 30.0


def test_unevaluated_rounds_log_nothing_and_flushes_follow_flush_every() -> None:
    flushed: list[int] = []
    bar = RoundProgress(6, flush=lambda out: flushed.append(max(out.rounds)),
                        flush_every=2)
    out = R.MetricLog()
    for rnd in bar.rounds(1):
        out.add(rnd, 0, R.TRAIN_LOSS, 1.0)  # no evaluation
        assert bar.round_done(rnd, out) is None
    assert flushed == [2, 4]  # not the last round: the run's own table follows it


def test_format_duration_and_progress_table_path() -> None:
    assert format_duration(12.34) == "12.3s"
    assert format_duration(3725) == "1:02:05"
    assert format_duration(float("inf")) == "?"
    assert progress_table_path("a/split0-seed1.parquet") == Path("a/split0-seed1.partial.parquet")


TINY = {"experiment": "e", "dataset": "digits", "partition": "p", "method": "fedavg",
        "algorithm": "fedavg", "params": {}, "split_seed": 0, "train_seed": 0,
        "training": {"rounds": 3, "model": "mlp", "model_options": {"hidden": []},
                     "device": "cpu"}}


def test_train_logs_each_round_and_flushes_then_removes_the_progress_table(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    import pflrepro.pipeline.train_job as train_job_module

    data = tmp_path / "digits"
    assert main(["prepare", "--dataset", "digits", "--out", str(data), "--raw",
                 str(tmp_path / "raw")]) == 0
    part = tmp_path / "p.parquet"
    assert main(["partition", "--data", str(data), "--dataset", "digits", "--spec",
                 json.dumps({"scheme": "iid", "clients": 3}), "--seed", "0",
                 "--out", str(part)]) == 0
    written: list[tuple[int, int]] = []
    real = train_job_module.write_progress_table

    def spy(frame: pd.DataFrame, path: Path) -> None:
        real(frame, path)
        back = pd.read_parquet(path)  # a readable table with the config columns
        assert list(back.columns) == list(R.VALUE_COLUMNS + R.CONFIG_COLUMNS)
        written.append((int(back["round"].max()), len(back)))

    monkeypatch.setattr(train_job_module, "write_progress_table", spy)
    out = tmp_path / "run.parquet"
    with caplog.at_level(logging.INFO, logger="pflrepro.store.progress"):
        assert main(["train", "--spec", json.dumps(TINY), "--data", str(data), "--partition",
                     str(part), "--checkpoint", str(out) + ".ckpt", "--checkpoint-every",
                     "1", "--progress-table", "--out", str(out)]) == 0
    assert [r for r, _ in written] == [1, 2]  # each checkpoint but the last round's
    lines = [m for m in caplog.messages if m.startswith("round ")]
    assert [m.split(":")[0] for m in lines] == ["round 1/3", "round 2/3", "round 3/3"]
    final = pd.read_parquet(out)
    acc = final[(final["metric"] == R.TEST_ACCURACY) & (final["round"] == 3)]["value"]
    assert f"mean acc {acc.mean():.4f}" in lines[-1]
    assert not progress_table_path(out).exists() and out.exists()
    assert not Path(str(out) + ".ckpt").exists()
