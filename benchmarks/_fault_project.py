"""The fault campaign's trials on a project's stored state, its config and kills.

Checkpoints outside and inside ``results/``, bit rot with the mtime kept, deleted and
garbled records, malformed configs, and Snakemake killed while training jobs start.
Each trial works on its own copy of the tiny project (benchmarks/fault_campaign.py).
"""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from _fault_core import (
    Ctx,
    Result,
    Verdict,
    judge,
    leftovers,
    node_state,
    record,
    run_command,
    snakemake_argv,
    trial,
    worst,
)
from _fault_downloads import FEMNIST, leaf_archive
from _fault_trials import AGG, META, X_NPY, _train, changed, local_run, same_as_base

# --------------------------------------------------------------------------- checkpoints


def _user_checkpoint(where: Callable[[Ctx, Path], Path]) -> Callable:
    def fn(ctx: Ctx) -> Verdict:
        project = ctx.project()
        path = where(ctx, project)
        path.parent.mkdir(exist_ok=True)
        path.write_text("my notes\n")
        before = node_state(path)
        result = ctx.pf(*_train(ctx, out="results/x.parquet", checkpoint=str(path)),
                        cwd=project, timeout=120)
        moved = sorted(p.name for p in path.parent.iterdir() if p.name.startswith(path.name
                                                                                 + "."))
        return judge(result, needles=[path.name], problems=[
            changed(path, before), f"set aside as {moved}" if moved else None])
    return fn


trial("user-file-moved", "train --checkpoint notes.txt (in the project, outside results/)",
      quick=True)(_user_checkpoint(lambda c, p: p / "notes.txt"))
trial("user-file-moved", "train --checkpoint ~/thesis.txt (outside the project)")(
    _user_checkpoint(lambda c, p: c.root / "home" / "thesis.txt"))


class Planted:
    """Unpickling this runs ``os.mkdir(path)``: code inside a checkpoint."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple:
        return (os.mkdir, (self.path,))


def _damaged_checkpoint(kind: str) -> Callable:
    def fn(ctx: Ctx) -> Verdict:
        project = ctx.project()
        rel = ctx.base.run
        (project / rel).unlink()
        ckpt = project / f"{rel}.ckpt"
        marker = ctx.root / "code-ran"
        if kind == "garbage":
            ckpt.write_bytes(bytes(range(256)) * 64)
        elif kind == "pickle with code":
            ckpt.write_bytes(pickle.dumps({"round": 1, "state": Planted(str(marker))}))
        else:  # a torch checkpoint cut in half
            import torch

            torch.save({"round": 1, "state": {"w": torch.zeros(1000)}}, ckpt)
            ckpt.write_bytes(ckpt.read_bytes()[: ckpt.stat().st_size // 2])
        build = ctx.snakemake(project, rel, timeout=180)
        return judge(build, expect="recover", problems=[
            same_as_base(ctx, project, rel),
            "the checkpoint's code ran" if marker.exists() else None])
    return fn


for _kind in ("garbage", "pickle with code", "truncated torch file"):
    trial("damaged-checkpoint", f"{_kind} at the run's .ckpt; snakemake",
          quick=_kind == "pickle with code")(_damaged_checkpoint(_kind))


# --------------------------------------------------------------------------- bit rot

DATA_SET = [META, X_NPY, "results/data/digits/y.npy"]


def _rot(rel_of: Callable[[Ctx], str]) -> Callable:
    def fn(ctx: Ctx) -> Verdict:
        project = ctx.project()
        rel = rel_of(ctx)
        path = project / rel

        def flip() -> None:
            data = bytearray(path.read_bytes())
            data[len(data) // 2] ^= 0x01
            path.write_bytes(bytes(data))

        st = os.stat(path)
        flip()
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        first = ctx.pf("verify", cwd=project)
        # a data set's files are built together: its three files are the targets
        targets = DATA_SET if rel in DATA_SET else [rel]
        build = ctx.snakemake(project, *targets, timeout=180)
        check = ctx.pf("verify", cwd=project)
        return worst(judge(first, needles=[path.name]),
                     judge(build, expect="recover",
                           problems=[same_as_base(ctx, project, t) for t in targets]),
                     judge(check, expect="recover"))
    return fn


for _name, _rel, _quick in (("a run", lambda c: c.base.run, True),
                            ("x.npy", lambda c: X_NPY, False),
                            ("meta.json", lambda c: META, False),
                            ("the aggregate", lambda c: AGG, False)):
    trial("bit-rot", f"one bit of {_name} flipped, mtime kept; verify, snakemake",
          quick=_quick)(_rot(_rel))


# --------------------------------------------------------------------------- records


def _deleted(rel_of: Callable[[Ctx], str]) -> Callable:
    def fn(ctx: Ctx) -> Verdict:
        project = ctx.project()
        path = project / rel_of(ctx)
        record(path).unlink()
        first = ctx.pf("verify", cwd=project)
        named = None if path.name in first.out else f"{path.name} is not named"
        adopt = ctx.pf("verify", "--adopt", cwd=project)
        check = ctx.pf("verify", cwd=project)
        return worst(judge(first, needles=["--adopt"], problems=[named]),
                     judge(adopt, expect="recover",
                           problems=[None if record(path).is_file() else "no record written"]),
                     judge(check, expect="recover"))
    return fn


trial("deleted-record", "a run's .sha256 deleted; verify, verify --adopt", quick=True)(
    _deleted(lambda c: c.base.run))
trial("deleted-record", "the aggregate's .sha256 deleted; verify, verify --adopt")(
    _deleted(lambda c: AGG))


@trial("garbled-records", "a non-UTF-8 first-use .sha256 beside the FEMNIST archive", quick=True)
def _garbled_tofu(ctx: Ctx) -> Verdict:
    raw = ctx.work / "raw"
    raw.mkdir()
    (raw / FEMNIST).write_bytes(leaf_archive())
    rec = raw / f"{FEMNIST}.sha256"
    rec.write_bytes(b"\xff\xfe garbage")
    result = ctx.pf("prepare", "--dataset", "femnist", "--out", "out", "--raw", "raw")
    return judge(result, needles=[rec.name], problems=[
        "the record's content is quoted" if "garbage" in result.out else None])


def _garbled_digest(make: Callable[[Path], None]) -> Callable:
    def fn(ctx: Ctx) -> Verdict:
        project = ctx.project()
        rec = record(project / ctx.base.run)
        rec.unlink()
        make(rec)
        result = ctx.pf("verify", cwd=project)
        return judge(result, needles=[rec.name, Path(ctx.base.run).name], problems=[
            "the record's content is quoted" if "garbage" in result.out else None])
    return fn


trial("garbled-records", "a run's .sha256 holding binary garbage; verify")(
    _garbled_digest(lambda r: r.write_bytes(b"\xff\xfe garbage \x00")))
trial("garbled-records", "a run's .sha256 that is a folder; verify")(
    _garbled_digest(lambda r: r.mkdir()))


@trial("garbled-records", "binary garbage in every .snakemake/metadata file; snakemake -n")
def _metadata(ctx: Ctx) -> Verdict:
    project = ctx.project()
    files = [p for p in (project / ".snakemake" / "metadata").iterdir() if p.is_file()]
    for p in files:
        p.write_bytes(b"\x00\xff garbage \x80" * 8)
    first = ctx.snakemake(project, "-n", timeout=120)
    second = ctx.snakemake(project, "-n", timeout=120)
    aside = (project / ".snakemake" / "metadata-damaged").is_dir()
    return worst(
        judge(first, expect="recover" if first.code == 0 else "refuse",
              needles=["metadata"], problems=[
                  None if first.code != 0 or aside else "nothing set aside or said"]),
        judge(second, expect="recover"))


# --------------------------------------------------------------------------- configs


def _config(old: str, new: str, needles: list[str], escape: str | None = None) -> Callable:
    def fn(ctx: Ctx) -> Verdict:
        project = ctx.project()
        config = project / "config.yaml"
        text = config.read_text()
        if old not in text:
            raise ValueError(f"{old!r} is not in the tiny config")
        config.write_text(text.replace(old, new, 1))
        result = ctx.snakemake(project, "-n", timeout=120)
        made = sorted(str(p) for p in ctx.root.rglob(escape)) if escape else []
        return judge(result, needles=needles, problems=[
            f"{made} was created" if made else None])
    return fn


CONFIG_CASES = [
    ("rounds: 2", "rounds: -1", ["rounds"], None, True),
    ("training:", "trainig:", ["trainig"], None, False),
    ("methods: [local, fedavg]", "methods: [local, nope]", ["nope"], None, False),
    ("  tiny:\n", "  x$(touch PWNED):\n", ["x$(touch PWNED)"], "PWNED*", True),
    ("  tiny:\n", "  ../../escape:\n", ["../../escape"], "escape*", False),
    ("clients: 3", "clients: 1000", ["clients", "max_samples"], None, False),
    ("train_seeds: [0]", "train_seeds: [4294967296]", ["train_seeds", "4294967296"], None,
     False),
    ("lr: 0.01", "lr: zebra", ["lr", "zebra"], None, False),
    ("  eval_every: 1\n", "  eval_every: 1\n  rounds: 3\n", ["rounds"], None, False),
]
for _old, _new, _needles, _escape, _quick in CONFIG_CASES:
    trial("malformed-config", f"{_new.strip()!r} (snakemake -n)", quick=_quick)(
        _config(_old, _new, _needles, _escape))


def _configfile(make: Callable[[Path], Path]) -> Callable:
    def fn(ctx: Ctx) -> Verdict:
        project = ctx.project()
        path = make(project)
        argv = snakemake_argv(project, "-n")
        argv[argv.index(str(project / "config.yaml"))] = str(path)
        result = run_command(argv, cwd=project, env=ctx.env, timeout=120)
        return judge(result, needles=[path.name])
    return fn


def _binary(project: Path) -> Path:
    (project / "binary.yaml").write_bytes(bytes(range(256)) * 4)
    return project / "binary.yaml"


def _folder(project: Path) -> Path:
    (project / "folder.yaml").mkdir()
    return project / "folder.yaml"


trial("snakemake-configfile", "a missing --configfile (Snakemake reads it)")(
    _configfile(lambda p: p / "missing.yaml"))
trial("snakemake-configfile", "a binary --configfile (Snakemake reads it)")(_configfile(_binary))
trial("snakemake-configfile", "a folder as --configfile (Snakemake reads it)")(_configfile(_folder))


# --------------------------------------------------------------------------- kills


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(
            errors="replace")
    except OSError:
        return ""


def _kill(sig: int, offset: float, whole_group: bool = False, full: bool = False) -> Callable:
    def fn(ctx: Ctx) -> Verdict:
        project = ctx.project()
        runs = [ctx.base.run, local_run(ctx)]
        for rel in runs:
            (project / rel).unlink()
        targets = [] if full else runs
        proc = subprocess.Popen(snakemake_argv(project, *targets), cwd=project, env=ctx.env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            if any(" train " in _cmdline(pid) for pid in leftovers(project, [proc.pid])):
                break
            time.sleep(0.02)
        if proc.poll() is not None:
            return Verdict("unclear", f"snakemake ended (exit {proc.returncode}) before a "
                                      "training job started: nothing was killed")
        time.sleep(offset)
        os.killpg(proc.pid, sig) if whole_group else os.kill(proc.pid, sig)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            return Verdict("stuck", f"snakemake still alive 60 s after signal {sig}")
        end = time.monotonic() + 30
        alive = leftovers(project)
        while alive and time.monotonic() < end:
            time.sleep(0.2)
            alive = leftovers(project)
        if alive:
            return Verdict("stuck", "alive 30 s after the kill: " + "; ".join(
                f"{pid} {_cmdline(pid)[:120]}" for pid in alive))
        unlock = ctx.snakemake(project, "--unlock", timeout=60)
        rerun = ctx.snakemake(project, *targets, "--rerun-incomplete", timeout=300)
        partial = project / "results" / "partial"
        unrecorded = sorted(p.name for p in partial.glob("*") if p.is_file()
                            and not record(p).is_file()) if partial.is_dir() else []
        return worst(judge(unlock, expect="recover"), judge(rerun, expect="recover", problems=[
            *(same_as_base(ctx, project, rel) for rel in runs),
            f"partial tables without records: {unrecorded}" if unrecorded else None]))
    return fn


for _sig, _offset, _group, _full, _quick in (
        (signal.SIGKILL, 0.0, False, False, False),
        (signal.SIGKILL, 0.1, False, False, False),
        (signal.SIGKILL, 0.25, False, False, False),
        (signal.SIGKILL, 0.5, False, False, True),
        (signal.SIGKILL, 1.0, False, False, False),
        (signal.SIGKILL, 1.5, False, False, False),
        (signal.SIGTERM, 0.5, False, False, False),
        (signal.SIGINT, 0.5, True, True, False)):
    _what = "Ctrl-C (SIGINT to the group)" if _group else signal.Signals(_sig).name
    trial("kills", f"{_what} to snakemake {_offset:g} s after a training job's shell "
                   f"starts; unlock, rerun{' everything' if _full else ''}",
          quick=_quick)(_kill(_sig, _offset, _group, _full))


# --------------------------------------------------------------------------- a second run


@trial("concurrent-snakemake", "a second snakemake while a first trains the same runs",
       quick=True)
def _second(ctx: Ctx) -> Verdict:
    project = ctx.project()
    runs = [ctx.base.run, local_run(ctx)]
    for rel in runs:
        (project / rel).unlink()
    first = subprocess.Popen(snakemake_argv(project, *runs), cwd=project, env=ctx.env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             start_new_session=True)
    deadline = time.monotonic() + 120
    while first.poll() is None and time.monotonic() < deadline:
        if any(" train " in _cmdline(pid) for pid in leftovers(project, [first.pid])):
            break
        time.sleep(0.02)
    second = ctx.snakemake(project, *runs, "--forcerun", "train", timeout=120)
    try:
        out, _ = first.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        os.killpg(first.pid, signal.SIGKILL)
        return Verdict("stuck", "the first snakemake ran past 240 s")
    done = Result(first.args, first.returncode, out, 0.0)
    return worst(judge(second, needles=["lock"]), judge(done, expect="recover", problems=[
        same_as_base(ctx, project, rel) for rel in runs]))
