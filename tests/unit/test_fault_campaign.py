"""The fault campaign's machinery (benchmarks/fault_campaign.py, _fault_core.py): judging trials.

The campaign itself runs in tier ``workflow_full`` (tests/workflow/test_fault_campaign.py);
here each verdict rule is checked on hand-made results, with the cases that must not
count as held (exit 0 with a hostile effect, a refusal naming nothing, a timeout, a
traceback, a process left alive).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO / "benchmarks") not in sys.path:
    sys.path.insert(0, str(REPO / "benchmarks"))

import _fault_core as core  # noqa: E402
import _fault_downloads as FD  # noqa: E402
import _fault_project  # noqa: E402, F401 (adds its trials)
import _fault_trials as FT  # noqa: E402
import fault_campaign as FC  # noqa: E402


def result(code: int | None, out: str = "") -> core.Result:
    return core.Result(["pflrepro", "x"], code, out, 0.1, timeout=5)


def test_a_refusal_holds_only_when_it_names_what_is_wrong() -> None:
    said = "pflrepro schema: error: argument --path: /t/fifo is a FIFO, not a regular file"
    assert core.judge(result(2, said), needles=["/t/fifo"]) == core.Verdict("held", said)
    assert core.judge(result(2, "error: something"), needles=["/t/fifo"]).kind == "unclear"
    assert core.judge(result(0, "done"), needles=["/t/fifo"]).kind == "silent"


def test_a_hostile_effect_makes_an_exit_0_silent_and_a_refusal_unclear() -> None:
    effect = ["/t/fifo changed"]
    assert core.judge(result(0), expect="recover", problems=effect).kind == "silent"
    assert core.judge(result(2, "error: /t/fifo"), needles=["fifo"], problems=effect).kind == \
        "unclear"
    assert core.judge(result(0), expect="recover", problems=[None, ""]).kind == "held"
    assert core.judge(result(1), expect="recover").kind == "unclear"


def test_timeouts_and_tracebacks_come_first() -> None:
    assert core.judge(result(None, "partial"), expect="recover").kind == "stuck"
    trace = "Traceback (most recent call last):\n  File x\nKeyError: 'training'"
    assert core.judge(result(1, trace), needles=["training"]).kind == "traceback"
    held, stuck = core.Verdict("held", ""), core.Verdict("stuck", "")
    silent, unclear = core.Verdict("silent", ""), core.Verdict("unclear", "")
    assert core.worst(held, unclear, silent) is silent
    assert core.worst(silent, stuck, held) is stuck
    with pytest.raises(ValueError, match="unknown verdict"):
        core.Verdict("fine", "")
    with pytest.raises(ValueError, match="expect must be"):
        core.judge(result(0), expect="pass")


def test_first_error_picks_the_error_line() -> None:
    assert core.first_error("Using profile\npflrepro x: error: bad --y\n\n") == \
        "pflrepro x: error: bad --y"
    assert core.first_error("one\ntwo\n") == "two"
    assert core.first_error("") == ""


def test_run_command_kills_the_whole_session_at_the_timeout(tmp_path: Path) -> None:
    start = time.monotonic()
    got = core.run_command(["bash", "-c", "sleep 30 & sleep 30"], cwd=tmp_path,
                         env=dict(os.environ), timeout=1)
    assert got.code is None and time.monotonic() - start < 10
    assert core.judge(got, expect="recover").kind == "stuck"
    done = core.run_command(["bash", "-c", "echo hi; exit 3"], cwd=tmp_path,
                          env=dict(os.environ), timeout=10)
    assert (done.code, done.out) == (3, "hi\n")


def test_leftovers_finds_a_process_working_under_the_folder(tmp_path: Path) -> None:
    (tmp_path / "inside").mkdir()
    proc = subprocess.Popen(["sleep", "30"], cwd=tmp_path / "inside")
    try:
        assert proc.pid in core.leftovers(tmp_path)
        assert proc.pid not in core.leftovers(tmp_path, exclude=[proc.pid])
        assert proc.pid not in core.leftovers(tmp_path / "elsewhere")
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert proc.pid not in core.leftovers(tmp_path)


def test_a_trial_that_leaves_a_process_is_stuck(tmp_path: Path) -> None:
    def leaves_one(ctx: core.Ctx) -> core.Verdict:
        subprocess.Popen(["sleep", "30"], cwd=ctx.work, start_new_session=True)
        return core.Verdict("held", "refused")

    base = core.Base(tmp_path / "base", [], "run", "part")
    (tmp_path / "base" / "src").mkdir(parents=True)
    outcome = FC.run_trial(core.Trial("kills", "leaves one", leaves_one), tmp_path, base)
    assert outcome.verdict.kind == "stuck" and len(outcome.extra) == 1
    time.sleep(0.2)
    assert core.leftovers(tmp_path) == []  # killed by its pid


def test_node_state_tells_a_replaced_node(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    before = core.node_state(fifo)
    assert FT.changed(fifo, before) is None
    fifo.unlink()
    fifo.write_text("60 KB of schema")
    assert "changed" in FT.changed(fifo, before)
    fifo.unlink()
    assert FT.changed(fifo, before) == f"{fifo} is gone"


def test_the_table_counts_verdicts_per_group() -> None:
    trial = core.Trial("kills", "x", lambda ctx: core.Verdict("held", ""))
    other = core.Trial("bit-rot", "y", lambda ctx: core.Verdict("held", ""))
    outcomes = [FC.Outcome(trial, core.Verdict("held", ""), 1.0),
                FC.Outcome(trial, core.Verdict("stuck", ""), 1.0),
                FC.Outcome(other, core.Verdict("silent", ""), 1.0)]
    lines = FC.table(outcomes, {"kills": "`t.py`"})
    assert lines[2] == "| kills | 2 | 1 | 0 | 1 | 0 | 0 | `t.py` |"
    assert lines[3] == "| bit-rot | 1 | 0 | 1 | 0 | 0 | 0 |  |"
    assert lines[4] == "| **all** | 3 | 1 | 1 | 1 | 0 | 0 | |"


def test_every_group_names_its_test_and_has_a_quick_trial() -> None:
    groups = {t.group for t in core.TRIALS}
    assert groups == set(core.TESTS)
    # Snakemake's own --configfile tracebacks are no trial of the quick subset, which
    # must end in 0 tracebacks (tests/workflow/test_fault_campaign.py)
    assert groups - {"snakemake-configfile"} == {t.group for t in core.TRIALS if t.quick}
    names = [(t.group, t.name) for t in core.TRIALS]
    assert len(names) == len(set(names))
    with pytest.raises(ValueError, match="names no test"):
        core.trial("nowhere", "x")(lambda ctx: core.Verdict("held", ""))


def test_train_arguments_are_replaced_one_by_one() -> None:
    base = core.Base(Path("b"), ["--spec", "{}", "--data", "m.json", "--partition", "p",
                               "--checkpoint", "r.ckpt", "--threads", "1", "--progress-table",
                               "--out", "r.parquet"], "r.parquet", "p")
    ctx = type("C", (), {"base": base})()
    assert FT._train(ctx, out="x.parquet", checkpoint="notes.txt") == [
        "train", "--spec", "{}", "--data", "m.json", "--partition", "p", "--checkpoint",
        "notes.txt", "--threads", "1", "--progress-table", "--out", "x.parquet"]


def test_hostile_members_are_what_they_say(tmp_path: Path) -> None:
    data = FD.tar_gz([(FD.member("a/link", tarfile.SYMTYPE, "/etc/passwd"), None),
                      (FD.member("../../up.txt"), b"x"),
                      (FD.member("dev", tarfile.CHRTYPE), None)])
    (tmp_path / "a.tar.gz").write_bytes(data)
    with tarfile.open(tmp_path / "a.tar.gz") as tf:
        link, up, dev = tf.getmembers()
    assert link.issym() and link.linkname == "/etc/passwd"
    assert up.name == "../../up.txt" and up.size == 1
    assert dev.ischr() and (dev.devmajor, dev.devminor) == (1, 7)


def test_planted_finds_what_a_hostile_archive_leaves(tmp_path: Path) -> None:
    base = core.Base(tmp_path / "base", [], "run", "part")
    (tmp_path / "base" / "src").mkdir(parents=True)
    ctx = core.Ctx(tmp_path / "trial", base)
    shadow = ctx.shadow()
    (ctx.work / "raw").mkdir()
    (ctx.work / "raw" / "a.txt").write_text("fine")
    assert FD.planted(ctx) is None
    os.link(shadow, ctx.work / "raw" / "b.txt")
    assert FD.planted(ctx) == "left behind: ['a hard link to the shadow']"
    (ctx.work / "raw" / "b.txt").unlink()
    (ctx.work / "raw" / "c").symlink_to("/etc/passwd")
    assert FD.planted(ctx) == "left behind: ['work/raw/c']"
