"""The training commands: ``train`` and ``run``.

``train``: a workflow's training job (several runs in one process,
:mod:`pflrepro.pipeline.train_job`); ``run``: one run for people, with no config file
(:mod:`pflrepro.pipeline.single`).
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pflrepro.cli.options import output_file, positive_int

log = logging.getLogger("pflrepro")


def _train(args: argparse.Namespace) -> None:
    from pflrepro.pipeline.train_job import Member, train_jobs

    n = len(args.spec)
    for flag, values in (("--partition", args.partition), ("--out", args.out),
                         ("--checkpoint", args.checkpoint), ("--public", args.public),
                         ("--log", args.log)):
        if values is not None and len(values) != n:
            raise ValueError(f"{flag}: {len(values)} given for {n} --spec; one per run, "
                             "in the order of --spec")
    if args.public and not args.public_data:
        raise ValueError("--public needs --public-data (the public set's data set)")
    members = [Member(spec, args.partition[i], args.out[i],
                      args.checkpoint[i] if args.checkpoint else None,
                      (args.public[i], args.public_data) if args.public else None,
                      args.log[i] if args.log else None)
               for i, spec in enumerate(args.spec)]
    train_jobs(members, args.data, threads=args.threads, progress=args.progress,
               checkpoint_every=args.checkpoint_every,
               progress_tables=args.progress_table)


def _key_values(pairs: Sequence[str] | None, flag: str) -> dict[str, Any]:
    """``["k=v", ...]`` as a dict, each value read as YAML (``3`` int, ``[64]`` list)."""
    import yaml

    out: dict[str, Any] = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"{flag} {pair!r}: expected KEY=VALUE")
        out[key.strip()] = yaml.safe_load(value)
    return out


def _blocking_file(path: Path) -> Path | None:
    """The first of ``path`` and its parents that exists and is not a directory."""
    for p in (path, *path.parents):
        if p.exists() or p.is_symlink():
            return None if p.is_dir() else p
    return None


def _check_run_paths(out: str | None, work: str) -> None:
    """Refuse ``run``'s --out and --work before any data is prepared or trained on."""
    blocker = _blocking_file(Path(work))
    if blocker is not None:
        raise ValueError(f"--work {work}: {blocker} is a file, not a directory (partitions "
                         f"and runs are written under --work)")
    if out is None:
        return
    if Path(out).is_dir():
        raise ValueError(f"--out {out}: is a directory; give the run table's file name, "
                         f"e.g. {Path(out) / 'run.parquet'}")
    blocker = _blocking_file(Path(out).parent)
    if blocker is not None:
        raise ValueError(f"--out {out}: {blocker} is a file, not a directory")


def _run(args: argparse.Namespace) -> None:
    from pflrepro.pipeline.single import SingleRun, single_run

    _check_run_paths(args.out, args.work)
    log.info("pflrepro run writes prepared data under %s, partitions and public sets under "
             "%s, the run table to %s", Path(args.data_root).resolve(),
             Path(args.work).resolve(), Path(args.out).resolve() if args.out else
             f"{Path(args.work).resolve()}/runs/...")

    options = _key_values(args.partition_option, "--partition-option")
    if args.clients is not None:
        options["clients"] = args.clients
    training = _key_values(args.training, "--training")
    for key in ("rounds", "device", "model"):
        if getattr(args, key) is not None:
            training[key] = getattr(args, key)
    training.setdefault("rounds", 10)
    req = SingleRun(method=args.method, dataset=args.dataset, scheme=args.partition,
                    partition_options=options, params=_key_values(args.param, "--param"),
                    training=training, split_seed=args.split_seed
                    if args.split_seed is not None else args.seed,
                    train_seed=args.seed, public_size=args.public_size)
    out = single_run(req, out=args.out, work=args.work, data_root=args.data_root,
                     raw_root=args.raw, mirrors=tuple(args.mirror or ()),
                     threads=args.threads, progress=args.progress)
    print(out)


def add_subcommands(sub: argparse._SubParsersAction) -> None:  # noqa: SLF001
    """Add the training commands to ``sub``."""
    p = sub.add_parser(
        "train", help="run a training job: one run, or several in turn in one process",
        description="Several runs: give --spec, --partition, --out (and --checkpoint, "
        "--public, --log when used) once per run, in the same order; the runs are trained "
        "one after another, each exactly as alone, each writing its own table.")
    p.add_argument("--spec", required=True, nargs="+", help="run spec(s) as JSON")
    p.add_argument("--data", required=True)
    p.add_argument("--partition", required=True, nargs="+", help="partition file per run")
    p.add_argument("--out", type=output_file, required=True, nargs="+", help="run table per run")
    p.add_argument("--threads", type=positive_int, default=1,
                   help="CPU: clients run side by side on this many threads, one core each "
                   "(same results for any value); GPU: torch's CPU threads")
    p.add_argument("--progress", action="store_true", help="show a progress bar")
    p.add_argument("--checkpoint", type=output_file, nargs="+",
                   help="checkpoint file per run: resume from it "
                   "if it holds this spec, save to it every --checkpoint-every rounds and on "
                   "SIGTERM, delete it once every run's results are written")
    p.add_argument("--checkpoint-every", type=int, default=10, metavar="ROUNDS")
    p.add_argument("--public", nargs="+",
                   help="public set file per run (methods that distill on one)")
    p.add_argument("--public-data", help="the public set's prepared data set (meta.json)")
    p.add_argument("--log", type=output_file, nargs="+",
                   help="log file per run: that run's lines only "
                   "(all lines still go to stderr)")
    p.add_argument("--progress-table", action="store_true",
                   help="write each run's progress table (its table so far, for a running "
                   "job's curve) to <out>.partial.parquet at every checkpoint, or every "
                   "--checkpoint-every rounds; deleted once its --out is written")
    p.set_defaults(func=_train)

    p = sub.add_parser(
        "run", help="one method on one partition of one data set: prepares the data, "
        "partitions it and trains, as the workflow does (`pflrepro list` shows the choices)",
        description="Example: pflrepro run --method fedamp --dataset digits --partition "
        "practical --clients 8 --partition-option groups=2 --rounds 20 --model mlp "
        "--training model_options='{hidden: [64]}' --training optimizer=sgd "
        "--training lr=0.05")
    p.add_argument("--method", required=True, help="algorithm (pflrepro list methods)")
    p.add_argument("--dataset", required=True, help="data set (pflrepro list datasets)")
    p.add_argument("--partition", required=True, metavar="SCHEME",
                   help="partition scheme (pflrepro list partitions)")
    p.add_argument("--clients", type=int, help="number of clients (the scheme's 'clients')")
    p.add_argument("--partition-option", "-o", action="append", metavar="KEY=VALUE",
                   help="a partition option, e.g. groups=2 (repeatable; YAML values)")
    p.add_argument("--param", "-p", action="append", metavar="KEY=VALUE",
                   help="a hyperparameter of the method, e.g. lam=1.0 (repeatable)")
    p.add_argument("--training", "-t", action="append", metavar="KEY=VALUE",
                   help="a training setting (the config's training keys), e.g. lr=0.05")
    p.add_argument("--rounds", type=int, help="communication rounds (default 10)")
    p.add_argument("--model", help="model (training.model; default cnn)")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], help="training.device")
    p.add_argument("--seed", type=int, default=0, help="training seed")
    p.add_argument("--split-seed", type=int, help="split seed (default: --seed)")
    p.add_argument("--public-size", type=int, default=500,
                   help="public-set rows, for methods that distill on one")
    p.add_argument("--out", type=output_file, help="run table (default: under --work)")
    p.add_argument("--work", default="results/cli",
                   help="where partitions, public sets and (by default) the run go")
    p.add_argument("--data-root", default="results/data",
                   help="prepared data sets (the workflow's; prepared there if missing)")
    p.add_argument("--raw", default="data/raw", help="raw downloads, one folder per data set")
    p.add_argument("--mirror", action="append", help="mirror to try first (repeatable)")
    p.add_argument("--threads", type=positive_int, default=1, help="as for train")
    p.add_argument("--progress", action="store_true", help="show a progress bar")
    p.set_defaults(func=_run)
