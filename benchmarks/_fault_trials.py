"""The fault campaign's trials on files, links, nodes and inputs.

Each trial is a function of a :class:`_fault_core.Ctx` returning a
:class:`_fault_core.Verdict`, added to ``_fault_core.TRIALS`` by ``@trial``.
Files and nodes live in the trial's scratch folder; _fault_downloads.py holds the
trials on archives and servers, _fault_project.py those on a project's stored state,
configs and kills.
"""

from __future__ import annotations

import os
import socket
import tempfile
from collections.abc import Callable
from pathlib import Path

from _fault_core import (
    SHADOW,
    Ctx,
    Result,
    Verdict,
    judge,
    node_state,
    record,
    trial,
    worst,
)

AGG = "results/aggregate/tiny.parquet"
AGG_FEDAVG = "results/aggregate/tiny/fedavg.parquet"
META = "results/data/digits/meta.json"
X_NPY = "results/data/digits/x.npy"
SECRET = "CAMPAIGNSECRET"

def either(result: Result, needles: list[str], problems: list[str | None]) -> Verdict:
    """A refusal naming one of ``needles``, or a recovery: both hold, as the docs allow."""
    return judge(result, expect="recover" if result.code == 0 else "refuse",
                 needles=needles, problems=problems)


def changed(path: Path, before: tuple, what: str = "") -> str | None:
    try:
        after = node_state(path)
    except FileNotFoundError:
        return f"{what or path} is gone"
    return None if after == before else f"{what or path} changed ({before[:3]} -> {after[:3]})"


def quoted(result: Result) -> str | None:
    return "the output quotes the linked file's content" if SECRET in result.out else None


def keep_mtime(path: Path, make: Callable[[], None]) -> None:
    """Replace ``path`` by what ``make`` creates, giving it the old mtime (bit rot)."""
    st = os.lstat(path)
    make()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns), follow_symlinks=False)


def remove(path: Path) -> None:
    path.unlink()


def same_as_base(ctx: Ctx, project: Path, rel: str) -> str | None:
    path = project / rel
    if path.is_symlink() or not path.is_file():
        return f"{rel} is not a regular file afterwards"
    if path.read_bytes() != (ctx.base.path / rel).read_bytes():
        return f"{rel} differs from the uninterrupted build's"
    return None


def fedavg_run(ctx: Ctx) -> str:
    return ctx.base.run


def local_run(ctx: Ctx) -> str:
    return ctx.base.run.replace("/fedavg/", "/local/")


# --------------------------------------------------------------------------- writing through


def _write_special(kind: str, build: Callable[[Ctx, Path, str], list[str]]) -> Callable:
    def fn(ctx: Ctx) -> Verdict:
        nodes = ctx.specials()
        if kind not in nodes:
            return Verdict("unclear", "no device node (not run as root)")
        node = nodes[kind]
        before, siblings = node_state(node), sorted(os.listdir(node.parent))
        project = ctx.project()
        result = ctx.pf(*build(ctx, project, str(node)), cwd=project, timeout=90)
        extra = sorted(os.listdir(node.parent))
        return judge(result, needles=[str(node), node.name], problems=[
            changed(node, before), None if extra == siblings else f"new entries {extra}"])
    return fn


WRITERS: dict[str, Callable[[Ctx, Path, str], list[str]]] = {
    "schema --write --path": lambda c, p, n: ["schema", "--write", "--path", n],
    "table --md": lambda c, p, n: ["table", "--aggregate", AGG, "--md", n, "--tex", "t.tex",
                                   "--csv", "t.csv"],
    "plot accuracy --pdf --png": lambda c, p, n: ["plot", "accuracy", "--aggregate", AGG,
                                                  "--pdf", n, "--png", n],
    "aggregate --out": lambda c, p, n: ["aggregate", "--out", n, c.base.run],
    "tune-split --out": lambda c, p, n: ["tune-split", "--partition", c.base.part,
                                         "--seed", "0", "--out", n],
    "train --out": lambda c, p, n: _train(c, out=n),
    "train --log": lambda c, p, n: [*_train(c, out="results/x.parquet"), "--log", n],
    "communication --csv": lambda c, p, n: ["communication", "--aggregate", AGG, "--md",
                                            "c.md", "--csv", n],
}


def _train(ctx: Ctx, *, out: str | None = None, checkpoint: str | None = None,
           spec: str | None = None, partition: str | None = None) -> list[str]:
    """The fedavg run's train command with the arguments given here replaced."""
    args: list[str] = []
    given = {"--out": out, "--checkpoint": checkpoint, "--spec": spec, "--partition": partition}
    words = list(ctx.base.train_args)
    i = 0
    while i < len(words):
        if given.get(words[i]) is not None:
            args += [words[i], given[words[i]]]
            i += 2
            continue
        args.append(words[i])
        i += 1
    return ["train", *args]


for _kind in ("fifo", "device", "folder", "socket"):
    trial("write-special", f"schema --write --path <{_kind}>", quick=_kind in {"fifo", "device"})(
        _write_special(_kind, WRITERS["schema --write --path"]))
for _name, _kind in (("table --md", "device"), ("plot accuracy --pdf --png", "fifo"),
                     ("aggregate --out", "fifo"), ("tune-split --out", "device"),
                     ("train --out", "folder"), ("train --log", "fifo"),
                     ("communication --csv", "socket")):
    trial("write-special", f"{_name} <{_kind}>", quick=_name == "table --md")(
        _write_special(_kind, WRITERS[_name]))


def _outside(args: Callable[[str], list[str]]) -> Callable:
    def fn(ctx: Ctx) -> Verdict:
        project = ctx.project()
        target = ctx.root / "nowhere"
        result = ctx.pf(*args(str(target)), cwd=project)
        return judge(result, needles=["nowhere", "create it first"], problems=[
            f"{target} was created" if target.exists() else None])
    return fn


trial("folders-outside", "schema --write --path /nonexistent/x.yaml", quick=True)(
    _outside(lambda t: ["schema", "--write", "--path", f"{t}/x.yaml"]))
trial("folders-outside", "table --md /nonexistent/deep/t.md")(
    _outside(lambda t: ["table", "--aggregate", AGG, "--md", f"{t}/deep/t.md", "--tex",
                        "t.tex", "--csv", "t.csv"]))
trial("folders-outside", "plot --pdf/--png /nonexistent/")(
    _outside(lambda t: ["plot", "accuracy", "--aggregate", AGG, "--pdf", f"{t}/a.pdf",
                        "--png", f"{t}/a.png"]))


@trial("folders-outside", "schema --write into a new folder inside the project (control)")
def _inside(ctx: Ctx) -> Verdict:
    project = ctx.project()
    result = ctx.pf("schema", "--write", "--path", "newdir/x.yaml", cwd=project)
    made = project / "newdir" / "x.yaml"
    return judge(result, expect="recover", problems=[
        None if made.is_file() and made.stat().st_size else "newdir/x.yaml was not written"])


# --------------------------------------------------------------------------- links


def _link_out(target_of: Callable[[Ctx], Path], args: Callable[[str], list[str]]) -> Callable:
    def fn(ctx: Ctx) -> Verdict:
        project = ctx.project()
        target = target_of(ctx)
        before = node_state(target) if target.exists() else None
        link = project / "out.txt"
        link.symlink_to(target)
        result = ctx.pf(*args("out.txt"), cwd=project)
        problems = [changed(target, before) if before else
                    (f"{target} was created" if os.path.lexists(target) else None),
                    f"{ctx.root / 'ghost'} was created" if (ctx.root / "ghost").exists()
                    else None]
        if result.code == 0:
            problems.append(None if link.is_file() and not link.is_symlink()
                            else "the link was not replaced by a regular file")
        return either(result, ["out.txt"], problems)
    return fn


trial("link-at-output", "schema --write --path <link to shadow>", quick=True)(
    _link_out(lambda c: c.shadow(), lambda p: ["schema", "--write", "--path", p]))
trial("link-at-output", "table --md <link to shadow>")(
    _link_out(lambda c: c.shadow(), lambda p: ["table", "--aggregate", AGG, "--md", p,
                                               "--tex", "t.tex", "--csv", "t.csv"]))
trial("link-at-output", "schema --write --path <link to a FIFO>")(
    _link_out(lambda c: c.specials()["fifo"], lambda p: ["schema", "--write", "--path", p]))
trial("link-at-output", "schema --write --path <dangling link into a missing folder>")(
    _link_out(lambda c: c.root / "ghost" / "x.yaml",
              lambda p: ["schema", "--write", "--path", p]))


def _record_link(rel: Callable[[Ctx], str], verify: bool = True) -> Callable:
    def fn(ctx: Ctx) -> Verdict:
        project, shadow = ctx.project(), ctx.shadow()
        rec = record(project / rel(ctx))
        rec.unlink()
        rec.symlink_to(shadow)
        result = ctx.pf("verify", cwd=project)
        return judge(result, needles=[rec.name, Path(rel(ctx)).name], problems=[
            quoted(result), None if shadow.read_text() == SHADOW else "the shadow changed"])
    return fn


trial("read-through-link", "a run's record -> shadow; verify", quick=True)(
    _record_link(fedavg_run))
trial("read-through-link", "an aggregate's record -> shadow; verify")(
    _record_link(lambda c: AGG))
trial("read-through-link", "meta.json's record -> shadow; verify")(_record_link(lambda c: META))


@trial("read-through-link", "a run -> shadow (a link out of the project); verify")
def _run_link(ctx: Ctx) -> Verdict:
    project, shadow = ctx.project(), ctx.shadow()
    run = project / ctx.base.run
    keep_mtime(run, lambda: (run.unlink(), run.symlink_to(shadow)))
    result = ctx.pf("verify", cwd=project)
    return judge(result, needles=[run.name], problems=[
        quoted(result), None if shadow.read_text() == SHADOW else "the shadow changed"])


@trial("read-through-link", "a partition -> shadow; train reads it")
def _partition_link(ctx: Ctx) -> Verdict:
    project, shadow = ctx.project(), ctx.shadow()
    part = project / ctx.base.part
    part.unlink()
    part.symlink_to(shadow)
    result = ctx.pf(*_train(ctx, out="results/x.parquet"), cwd=project)
    return judge(result, needles=[part.name], problems=[
        quoted(result), None if shadow.read_text() == SHADOW else "the shadow changed"])


# --------------------------------------------------------------------------- non-regular outputs


def _make(kind: str, path: Path) -> Callable[[], None]:
    def make() -> None:
        path.unlink()
        if kind == "folder":
            path.mkdir()
            (path / "inside").write_text("x")
        elif kind == "fifo":
            os.mkfifo(path)
        else:  # bound under a short name (AF_UNIX paths are short), then moved in place
            short = Path(tempfile.mkdtemp(prefix="s", dir="/tmp")) / "s"
            with socket.socket(socket.AF_UNIX) as sock:
                sock.bind(str(short))
            os.replace(short, path)
            short.parent.rmdir()
    return make


def _non_regular(kind: str, rel: Callable[[Ctx], str], mtime_kept: bool) -> Callable:
    """``rel`` made a ``kind``; with its mtime kept, ``verify`` then ``snakemake rel``;
    with a new one, ``snakemake`` of the experiment's aggregate, which reads it."""
    def fn(ctx: Ctx) -> Verdict:
        project = ctx.project()
        path = project / rel(ctx)
        if mtime_kept:
            keep_mtime(path, _make(kind, path))
            first = ctx.pf("verify", cwd=project)
            steps = [judge(first, needles=[path.name])]
            target = rel(ctx)
        else:
            _make(kind, path)()
            steps, target = [], AGG
        build = ctx.snakemake(project, target, timeout=180)
        steps.append(either(build, [path.name], []))
        if build.code != 0:  # a refusal that set it aside: the next run builds it
            build = ctx.snakemake(project, target, timeout=180)
        check = ctx.pf("verify", cwd=project)
        steps += [judge(build, expect="recover", problems=[
            same_as_base(ctx, project, rel(ctx)), same_as_base(ctx, project, target)]),
                  judge(check, expect="recover")]
        return worst(*steps)
    return fn


for _kind, _rel, _kept, _quick in (("folder", fedavg_run, True, True),
                                   ("fifo", fedavg_run, True, False),
                                   ("socket", local_run, True, False),
                                   ("fifo", lambda c: AGG_FEDAVG, False, False),
                                   ("folder", lambda c: AGG_FEDAVG, False, False),
                                   ("fifo", lambda c: AGG_FEDAVG, True, False)):
    trial("non-regular-outputs",
          f"{'a run' if _rel in (fedavg_run, local_run) else 'an aggregate'} -> {_kind}"
          f" ({'mtime kept; verify, snakemake' if _kept else 'new mtime; its reader'})",
          quick=_quick)(_non_regular(_kind, _rel, _kept))


@trial("non-regular-outputs", "a table -> fifo (new mtime; its reader, report-html)")
def _table_fifo(ctx: Ctx) -> Verdict:
    project = ctx.project()
    report, table_md = "results/report/tiny.html", project / "results/tables/tiny.md"
    first = ctx.snakemake(project, report, timeout=180)
    made = table_md.read_bytes() if table_md.is_file() else b""
    _make("fifo", table_md)()
    (project / report).unlink(missing_ok=True)
    build = ctx.snakemake(project, report, timeout=120)
    steps = [judge(first, expect="recover"), either(build, [table_md.name], [])]
    if build.code != 0:  # set aside: the next run builds it
        build = ctx.snakemake(project, report, timeout=120)
    steps.append(judge(build, expect="recover", problems=[
        None if table_md.is_file() and not table_md.is_symlink()
        and table_md.read_bytes() == made else "the table is not rebuilt as it was",
        None if (project / report).is_file() else "no report page"]))
    return worst(*steps, judge(ctx.pf("verify", cwd=project), expect="recover"))


# --------------------------------------------------------------------------- tracebacks


def _bad_input(args: Callable[[Ctx, Path], list[str]], needles: list[str]) -> Callable:
    def fn(ctx: Ctx) -> Verdict:
        project = ctx.project()
        (project / "empty").write_bytes(b"")
        (project / "binary.bin").write_bytes(bytes(range(256)) * 4)
        (project / "folder").mkdir()
        return judge(ctx.pf(*args(ctx, project), cwd=project), needles=needles)
    return fn


TRACEBACK_CASES = [
    ("train --spec '{\"algorithm\":\"fedavg\"}'", True,
     lambda c, p: _train(c, spec='{"algorithm": "fedavg"}', out="results/x.parquet"),
     ["--spec", "training"]),
    ("train --spec '[1,2]'", False, lambda c, p: _train(c, spec="[1, 2]", out="x.parquet"),
     ["spec"]),
    ("train --spec '{\"scheme\": ' (broken JSON)", False,
     lambda c, p: _train(c, spec='{"scheme": ', out="x.parquet"), ["spec", "JSON"]),
    ("partition --spec '[1,2]'", True,
     lambda c, p: ["partition", "--data", META, "--dataset", "digits", "--spec", "[1, 2]",
                   "--seed", "0", "--out", "p.parquet"], ["spec"]),
    ("partition --spec with clients -3", False,
     lambda c, p: ["partition", "--data", META, "--dataset", "digits", "--spec",
                   '{"scheme": "dirichlet", "clients": -3, "alpha": 0.5}', "--seed", "0",
                   "--out", "p.parquet"], ["clients", "--spec"]),
    ("train --partition <binary file>", False,
     lambda c, p: _train(c, partition="binary.bin", out="x.parquet"), ["binary.bin"]),
    ("table --aggregate <binary file>", False,
     lambda c, p: ["table", "--aggregate", "binary.bin", "--md", "t.md", "--tex", "t.tex",
                   "--csv", "t.csv"], ["binary.bin"]),
    ("plot accuracy --aggregate <folder>", False,
     lambda c, p: ["plot", "accuracy", "--aggregate", "folder", "--pdf", "a.pdf", "--png",
                   "a.png"], ["folder"]),
    ("aggregate <empty file>", False, lambda c, p: ["aggregate", "--out", "a.parquet",
                                                    "empty"], ["empty"]),
    ("verify --results <a file>", False, lambda c, p: ["verify", "--results", "binary.bin"],
     ["binary.bin"]),
    ("check-config <binary file>", False, lambda c, p: ["check-config", "binary.bin"],
     ["binary.bin"]),
    ("tune-split --partition <a run table>", False,
     lambda c, p: ["tune-split", "--partition", c.base.run, "--seed", "0", "--out",
                   "v.parquet"], ["split0-seed0.parquet", "--partition"]),
    ("prepare --dataset nope", False, lambda c, p: ["prepare", "--dataset", "nope", "--out",
                                                    "o", "--raw", "r"], ["nope"]),
    ("status --results <binary file>", False, lambda c, p: ["status", "--results",
                                                             "binary.bin"], ["binary.bin"]),
]
for _name, _quick, _args, _needles in TRACEBACK_CASES:
    trial("tracebacks", _name, quick=_quick)(_bad_input(_args, _needles))


# --------------------------------------------------------------------------- YAML values


def _config_value(old: str, new: str, how: str) -> Callable:
    def fn(ctx: Ctx) -> Verdict:
        project = ctx.project()
        config = project / "config.yaml"
        text = config.read_text()
        assert old in text, old
        config.write_text(text.replace(old, new, 1))
        if how == "check-config":
            result = ctx.pf("check-config", "config.yaml", cwd=project)
        else:
            result = ctx.snakemake(project, "-n", timeout=120)
        key = new.split(":")[0].strip(" -{")
        return judge(result, needles=[key, new.split(":", 1)[1].strip()])
    return fn


for _old, _new, _how, _quick in (("rounds: 2", "rounds: 010", "check-config", True),
                                 ("rounds: 2", "rounds: 010", "snakemake -n", False),
                                 ("clients: 3", "clients: 03", "check-config", False),
                                 ("rounds: 2", "rounds: 1:30", "check-config", False),
                                 ("rounds: 2", "rounds: +010", "check-config", False),
                                 ("rounds: 2", "rounds: 0o10", "check-config", False)):
    trial("yaml-values", f"{_new} ({_how})", quick=_quick)(_config_value(_old, _new, _how))


def _fraction(value: str) -> Callable:
    def fn(ctx: Ctx) -> Verdict:
        project = ctx.project()
        result = ctx.pf("tune-split", "--partition", ctx.base.part, "--fraction", value,
                        "--seed", "0", "--out", "v.parquet", cwd=project)
        return judge(result, needles=["--fraction"], problems=[
            "v.parquet was written" if (project / "v.parquet").exists() else None])
    return fn


for _value in ("2", "0", "1", "nan", "-0.5"):
    trial("yaml-values", f"tune-split --fraction {_value}", quick=_value == "2")(
        _fraction(_value))
