"""Command-line interface: the only entry point the Snakemake rules call.

Each subcommand does one stage and writes its outputs atomically::

    pflrepro prepare   --dataset digits --out results/data/digits --raw data/raw
    pflrepro partition --data results/data/digits --dataset digits --spec JSON --seed 0 --out P
    pflrepro train     --spec JSON --data DIR --partition P --out RUN.parquet
                       (several runs: --spec J1 J2 --partition P1 P2 --out R1 R2 --log L1 L2)
    pflrepro aggregate --out AGG.parquet RUN.parquet ...
    pflrepro table     --aggregate AGG.parquet --md T.md --tex T.tex --csv T.csv
    pflrepro partition-stats --data DIR --partition P --csv S.csv --md S.md
    pflrepro plot      KIND --aggregate AGG.parquet --pdf F.pdf --png F.png  (KIND: plot -h)
    pflrepro plot      labels --data DIR --partition P --pdf F.pdf --png F.png
    pflrepro claims    --claims config/claims.yaml --scale cpu --aggregate AGG.parquet ...
                       --config config.yaml (or --design JSON) --md C.md --csv C.csv
    pflrepro check-config config.yaml [my.yaml ...]
    pflrepro schema    [--write]
    pflrepro cost      --runs RUN... --benchmarks TSV... --logs LOG... --training JSON
                       --md C.md --csv C.csv [--project config.yaml --projection-csv P.csv]

For people rather than rules::

    pflrepro run       --method fedamp --dataset digits --partition practical --clients 8
                       --partition-option groups=2 --rounds 20 [--out RUN.parquet]
    pflrepro list      [methods|datasets|partitions]
    pflrepro status    [--results results --logs logs] [--config config.yaml]
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

log = logging.getLogger("pflrepro")
#: Every log line's format (a training run's own log file takes the same).
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def _partition(args: argparse.Namespace) -> None:
    from pflrepro.data.jobs import make_partition

    make_partition(args.data, args.dataset, json.loads(args.spec), args.seed, args.out)


def _partition_labels(data: str, partition: str) -> tuple[Any, Any, int]:
    """The partition table, the label vector (``target`` column applied) and #classes."""
    from pflrepro.data.partition import read_partition
    from pflrepro.data.store import load_dataset
    from pflrepro.data.transforms import partition_labels

    dataset = load_dataset(data)
    frame, _ = read_partition(partition)
    labels = partition_labels(dataset.y[:], frame, dataset.meta.num_classes)
    return frame, labels, dataset.meta.num_classes


def _partition_stats(args: argparse.Namespace) -> None:
    from pflrepro.data.stats import partition_stats, summary_stats
    from pflrepro.io import write_csv, write_text

    frame, labels, num_classes = _partition_labels(args.data, args.partition)
    per_client = partition_stats(frame, labels, num_classes)
    summary = summary_stats(per_client)
    write_csv(per_client, args.csv)
    lines = [f"# Partition statistics: {Path(args.partition).parent.name}, "
             f"{Path(args.partition).stem}", "",
             "| statistic | value |", "|:--|--:|"]
    lines += [f"| {k} | {_summary_value(v)} |" for k, v in summary.items()]
    write_text(args.md, "\n".join(lines) + "\n")


def _summary_value(value: Any) -> str:
    """A summary value for a Markdown cell; ``{0: 3, 1: 5}`` becomes ``0: 3, 1: 5``."""
    if isinstance(value, dict):
        return ", ".join(f"{k}: {v}" for k, v in value.items())
    return str(value)


def _public(args: argparse.Namespace) -> None:
    from pflrepro.data.jobs import make_public

    make_public(args.data, args.size, args.seed, args.out,
                exclude_partition=args.exclude_partition)


def _train(args: argparse.Namespace) -> None:
    from pflrepro.train_job import Member, train_jobs

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


def _positive_int(text: str) -> int:
    """The ``--threads`` type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _positive_minutes(text: str) -> float:
    """The ``--stale-after`` type: a finite number of minutes > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected minutes > 0, got {text!r}") from None
    if not (value > 0 and value < float("inf")):
        raise argparse.ArgumentTypeError(f"must be a finite number of minutes > 0, got "
                                         f"{text}")
    return value


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
    from pflrepro.single import SingleRun, single_run

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


def _list(args: argparse.Namespace) -> None:
    from pflrepro.listing import render

    cfg = None
    paths = args.config or (["config.yaml"] if Path("config.yaml").is_file()
                            and args.what == "hyperparameters" else [])
    if paths:
        from pflrepro.config import check_config_paths
        from pflrepro.schema import build_schema

        cfg = check_config_paths(paths, build_schema())
    sys.stdout.write(render(args.what, cfg))


def _status(args: argparse.Namespace) -> None:
    from pflrepro.status import format_status, iter_expected, job_status, tuning_warnings

    results = Path(args.results)
    if not results.is_dir():
        what = "is not a directory" if results.exists() else "does not exist"
        raise ValueError(f"--results {args.results}: {what} (the workflow's results "
                         f"directory, holding runs/)")
    expected: list[tuple[str, str, str, str]] = []
    if args.config:
        from pflrepro.config import check_config_paths
        from pflrepro.schema import build_schema

        cfg = check_config_paths(args.config, build_schema())
        expected = [k for name, e in cfg.experiments.items() if e.scale == cfg.scale
                    for k in iter_expected(cfg.runs(name))]
    jobs = job_status(args.results, args.logs, expected=expected,
                      stale_after_s=args.stale_after * 60.0)
    sys.stdout.write(format_status(jobs, tuning_warnings(args.results)))


def _cost(args: argparse.Namespace) -> None:
    from pflrepro.reporting.cost import cost_table, job_costs, projection, write_cost

    jobs = job_costs(args.runs, args.benchmarks, args.logs, json.loads(args.training))
    measured = cost_table(jobs, methods_order=args.methods or None)
    projected = None
    if args.project:
        from pflrepro.config import check_config_paths
        from pflrepro.schema import build_schema

        projected = projection(measured, check_config_paths(args.project, build_schema()),
                               scale=args.project_scale)
    write_cost(measured, projected, args.md, args.csv, args.projection_csv,
               experiment=args.experiment or "", tuning=_cost_tuning(args),
               missing=[b for b in dict.fromkeys(args.benchmarks) if not Path(b).is_file()])
    log.info("cost of %d job(s) -> %s, %s", len(jobs), args.md, args.csv)


def _cost_tuning(args: argparse.Namespace) -> list[str]:
    """The cost table's tuning sentences: its runs' params checked against the selections."""
    from pflrepro.tuning import notes_for

    if not args.tuning or not json.loads(args.tuning):
        return []
    import pandas as pd

    from pflrepro.results import read_table

    runs = pd.concat([read_table(p, columns=["experiment", "partition", "method",
                                             "split_seed", "params"]) for p in args.runs],
                     ignore_index=True)
    labels, experiment_labels = _labels(args.labels)
    return notes_for(args.tuning, runs, labels, experiment_labels)


def _aggregate(args: argparse.Namespace) -> None:
    from pflrepro.results import aggregate

    rows = aggregate(args.inputs, args.out)
    log.info("aggregated %d runs, %d rows -> %s", len(args.inputs), rows, args.out)


def _verify(args: argparse.Namespace) -> None:
    from pflrepro.verify import verify

    checked, findings = verify(args.results, adopt=args.adopt)
    for finding in findings:
        print(finding)
    bad = [f for f in findings if f.status in ("damaged", "undigested")]
    adopted = len(findings) - len(bad)
    print(f"{checked} stored file(s) under {args.results} checked: {len(bad)} damaged or "
          f"undigested" + (f", {adopted} adopted" if args.adopt else ""))
    if bad:
        raise ValueError(f"{len(bad)} stored file(s) damaged or without a digest record "
                         "(listed above); damaged ones are marked or set aside: rerun "
                         "snakemake to rebuild them")


def _read_aggregates(paths: Sequence[str]) -> Any:
    """Concatenate one or more aggregated Parquet files (each checked against its digest)."""
    import pandas as pd

    from pflrepro.results import read_table

    frames = [read_table(p) for p in paths]
    if not frames:
        raise ValueError("no aggregate given")
    return pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]


def _labels(text: str | None) -> tuple[dict[str, str], dict[str, str]]:
    """(partition labels, experiment labels) from the workflow's ``--labels`` JSON."""
    raw = json.loads(text) if text else {}
    unknown = set(raw) - {"partitions", "experiments"}
    if unknown:
        raise ValueError(f"--labels: unknown key(s) {sorted(unknown)}")
    return dict(raw.get("partitions", {})), dict(raw.get("experiments", {}))


CAPTIONS = {
    "weighted_final": "Final-round test accuracy (%) weighted by client test-set size, "
                      "mean ± std over runs.",
    "mean_bmta": "Best-over-rounds (BMTA) / final-round mean client test accuracy (%), "
                 "mean ± std over runs.",
}


def _table(args: argparse.Namespace) -> None:
    from pflrepro.reporting.tables import accuracy_table, write_table

    agg = _read_aggregates(args.aggregate)
    labels, experiment_labels = _labels(args.labels)
    table = accuracy_table(agg, methods_order=args.methods or None, labels=labels,
                           experiment_labels=experiment_labels, metric=args.metric,
                           experiments_order=args.experiments or None)
    caption = args.caption or CAPTIONS[args.metric]
    from pflrepro.tuning import notes_for

    tuning = notes_for(args.tuning, agg, labels, experiment_labels)
    write_table(table, args.md, args.tex, args.csv, caption=caption, tuning=tuning)


def _communication(args: argparse.Namespace) -> None:
    from pflrepro.reporting.communication import communication_table, write_communication

    agg = _read_aggregates(args.aggregate)
    from pflrepro.tuning import notes_for

    table = communication_table(agg, methods_order=args.methods or None)
    labels, experiment_labels = _labels(args.labels)
    write_communication(table, args.md, args.csv, caption=args.caption, labels=labels,
                        tuning=notes_for(args.tuning, agg, labels, experiment_labels))


def _plot(args: argparse.Namespace) -> None:
    from pflrepro.reporting.figures.kinds import OPTIONS, figure_kind

    kind = figure_kind(args.kind)
    needed = ("data", "partition") if kind.input == "partition" else ("aggregate",)
    missing = [f"--{n}" for n in needed if getattr(args, n) is None]
    if missing:
        raise ValueError(f"plot {args.kind} needs {' '.join(missing)}")
    given = {"methods": args.methods or None, "method": args.method, "client": args.client,
             "title": args.title,
             "names": {int(k): str(v) for k, v in json.loads(args.names or "{}").items()}}
    options = {OPTIONS[o][0]: given[o] for o in kind.options}
    if kind.input == "partition":
        frame, labels, num_classes = _partition_labels(args.data, args.partition)
        kind.function()(frame, labels, num_classes, args.pdf, args.png, **options)
        return
    agg = _read_aggregates(args.aggregate)
    labels, _ = _labels(args.labels)
    kind.function()(agg, args.pdf, args.png, labels=labels, **options)


def _claims(args: argparse.Namespace) -> None:
    from pflrepro.reporting.claims.checks import evaluate_claims
    from pflrepro.reporting.claims.parse import (
        claim_experiments,
        design_of,
        load_claims,
        parse_design,
    )
    from pflrepro.reporting.claims.writer import write_claims

    claims = load_claims(args.claims)
    if args.design is not None:
        design = parse_design(args.design)
    else:  # the experiments' design from the config files, merged as check-config does
        from pflrepro.config import check_config_paths
        from pflrepro.schema import build_schema

        design = design_of(check_config_paths(args.config, build_schema()),
                           claim_experiments(claims, args.scale))
    agg = _read_aggregates(args.aggregate) if args.aggregate else None
    labels, experiment_labels = _labels(args.labels)
    frame = evaluate_claims(claims, agg, args.scale, design=design, labels=labels,
                            experiment_labels=experiment_labels)
    write_claims(frame, args.md, args.csv, scale=args.scale)
    counts = frame["verdict"].value_counts().to_dict()
    log.info("claims (%s scale): %s -> %s, %s", args.scale, counts, args.md, args.csv)


def _schema(args: argparse.Namespace) -> None:
    from pflrepro.io import write_text
    from pflrepro.schema import SCHEMA_PATH, render

    text = render()
    if args.write:
        write_text(args.path or SCHEMA_PATH, text)
    else:
        sys.stdout.write(text)


def _check_config(args: argparse.Namespace) -> None:
    from pflrepro.config import check_config_paths
    from pflrepro.schema import build_schema

    cfg = check_config_paths(args.configs, build_schema())
    chosen = sum(e.scale == cfg.scale for e in cfg.experiments.values())
    print(f"{' + '.join(args.configs)}: valid ({chosen} experiment(s) at the {cfg.scale} "
          "scale)")


#: What ``pflrepro --help`` says first (the commands follow, grouped).
DESCRIPTION = ("The reproducibility pipeline's command line: commands for people, and the "
               "job commands the Snakemake rules run, one stage each.")


#: ``--tuning`` of the commands that write a table from runs (table, communication, cost,
#: paper-vs-ours).
TUNING_HELP = ("JSON: the tuned methods' grids and selections "
               "(pflrepro.workflow.table_tuning_json); the note says how each value was "
               "chosen, and the runs must carry the selected values")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = argparse.ArgumentParser(prog="pflrepro", description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument("--require-source", metavar="SRC",
                        help="refuse to run unless the pflrepro package imported is "
                        "SRC/pflrepro (the workflow's jobs pass their own src/); implies "
                        "--exit-with-parent")
    parser.add_argument("--exit-with-parent", action="store_true",
                        help="end (SIGTERM: a training job saves its checkpoint) when the "
                        "job's shell or the Snakemake running it ends (Linux)")
    sub = parser.add_subparsers(dest="command", required=True)

    from pflrepro.commands import add_subcommands as add_commands  # prepare, grid-projection

    add_commands(sub)
    p = sub.add_parser("partition", help="partition a prepared data set among clients")
    p.add_argument("--data", required=True)
    p.add_argument("--dataset", required=True)
    p.add_argument("--spec", required=True, help="partition spec as JSON")
    p.add_argument("--seed", type=int, required=True, help="split seed")
    p.add_argument("--out", required=True)
    p.set_defaults(func=_partition)

    p = sub.add_parser("public", help="draw an unlabeled public set (distillation)")
    p.add_argument("--data", required=True, help="prepared data set the rows come from")
    p.add_argument("--size", type=int, required=True)
    p.add_argument("--seed", type=int, required=True, help="split seed")
    p.add_argument("--exclude-partition", help="partition whose rows to avoid (same data set)")
    p.add_argument("--out", required=True)
    p.set_defaults(func=_public)

    p = sub.add_parser(
        "train", help="run a training job: one run, or several in turn in one process",
        description="Several runs: give --spec, --partition, --out (and --checkpoint, "
        "--public, --log when used) once per run, in the same order; the runs are trained "
        "one after another, each exactly as alone, each writing its own table.")
    p.add_argument("--spec", required=True, nargs="+", help="run spec(s) as JSON")
    p.add_argument("--data", required=True)
    p.add_argument("--partition", required=True, nargs="+", help="partition file per run")
    p.add_argument("--out", required=True, nargs="+", help="run table per run")
    p.add_argument("--threads", type=_positive_int, default=1,
                   help="CPU: clients run side by side on this many threads, one core each "
                   "(same results for any value); GPU: torch's CPU threads")
    p.add_argument("--progress", action="store_true", help="show a progress bar")
    p.add_argument("--checkpoint", nargs="+", help="checkpoint file per run: resume from it "
                   "if it holds this spec, save to it every --checkpoint-every rounds and on "
                   "SIGTERM, delete it once every run's results are written")
    p.add_argument("--checkpoint-every", type=int, default=10, metavar="ROUNDS")
    p.add_argument("--public", nargs="+",
                   help="public set file per run (methods that distill on one)")
    p.add_argument("--public-data", help="the public set's prepared data set (meta.json)")
    p.add_argument("--log", nargs="+", help="log file per run: that run's lines only "
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
    p.add_argument("--out", help="run table (default: under --work)")
    p.add_argument("--work", default="results/cli",
                   help="where partitions, public sets and (by default) the run go")
    p.add_argument("--data-root", default="results/data",
                   help="prepared data sets (the workflow's; prepared there if missing)")
    p.add_argument("--raw", default="data/raw", help="raw downloads, one folder per data set")
    p.add_argument("--mirror", action="append", help="mirror to try first (repeatable)")
    p.add_argument("--threads", type=_positive_int, default=1, help="as for train")
    p.add_argument("--progress", action="store_true", help="show a progress bar")
    p.set_defaults(func=_run)

    p = sub.add_parser("list", help="methods (hyperparameters, defaults, docs), data sets and "
                       "partition schemes (options, defaults)")
    p.add_argument("what", nargs="?", default="all",
                   choices=["all", "methods", "datasets", "partitions", "hyperparameters"])
    p.add_argument("--config", nargs="+", metavar="FILE",
                   help="hyperparameters: the config whose method variants to list, merged "
                   "in order (default: ./config.yaml): per value, stated by the paper, set "
                   "by us (why), tuned (by which experiments) or default")
    p.set_defaults(func=_list)

    p = sub.add_parser("status", help="finished, running, failed (and, with --config, "
                       "pending) training jobs of a results directory")
    p.add_argument("--results", default="results", help="results directory (runs/ in it)")
    p.add_argument("--logs", default="logs", help="logs directory (train/ in it)")
    p.add_argument("--config", nargs="*", metavar="FILE",
                   help="config files (merged in order) whose jobs not yet started are "
                   "listed as pending")
    p.add_argument("--stale-after", type=_positive_minutes, default=60.0, metavar="MINUTES",
                   help="a job whose log has not changed for this long is 'stale'")
    p.set_defaults(func=_status)

    p = sub.add_parser("cost", help="compute cost per method from benchmark records and "
                       "logs, and a projection of a config's paper-scale grid")
    p.add_argument("--experiment", help="experiment name (the table's title)")
    p.add_argument("--runs", nargs="+", required=True, help="run tables, one per job")
    p.add_argument("--benchmarks", nargs="+", required=True,
                   help="Snakemake benchmark records, aligned with --runs")
    p.add_argument("--logs", nargs="+", required=True, help="train logs, aligned with --runs")
    p.add_argument("--training", required=True, help="the experiment's training settings "
                   "(JSON)")
    p.add_argument("--methods", nargs="*", help="row order")
    p.add_argument("--project", nargs="*", metavar="FILE",
                   help="config files whose --project-scale grid to project")
    p.add_argument("--project-scale", default="paper", choices=["paper", "cpu"])
    p.add_argument("--md", required=True)
    p.add_argument("--csv", required=True)
    p.add_argument("--projection-csv")
    p.add_argument("--labels", help='JSON {"partitions": {id: label}, ...} (the tuning note)')
    p.add_argument("--tuning", help=TUNING_HELP)
    p.set_defaults(func=_cost)

    p = sub.add_parser("aggregate", help="concatenate run tables")
    p.add_argument("--out", required=True)
    p.add_argument("inputs", nargs="*")
    p.set_defaults(func=_aggregate)

    p = sub.add_parser("verify", help="check every stored file's digest (bit rot); mark "
                                      "damaged ones for rebuilding")
    p.add_argument("--results", default="results", help="results directory (default: results)")
    p.add_argument("--adopt", action="store_true",
                   help="write digest records for stored files that have none (files from "
                        "before records existed; trusts them as they are now)")
    p.set_defaults(func=_verify)

    p = sub.add_parser("table", help="final-accuracy table (Markdown, LaTeX, CSV)")
    p.add_argument("--aggregate", required=True, nargs="+", help="aggregated runs")
    p.add_argument("--md", required=True)
    p.add_argument("--tex", required=True)
    p.add_argument("--csv", required=True)
    p.add_argument("--caption", help="table caption (default: says what the metric is)")
    p.add_argument("--methods", nargs="*", help="row order")
    p.add_argument("--experiments", nargs="*", help="column-group order (several experiments)")
    p.add_argument("--labels", help='JSON {"partitions": {id: label}, "experiments": {...}}')
    p.add_argument("--metric", default="weighted_final", choices=["weighted_final", "mean_bmta"],
                   help="weighted final accuracy (FedeRiCo) or BMTA and final mean (FedAMP)")
    p.add_argument("--tuning", help=TUNING_HELP)
    p.set_defaults(func=_table)

    p = sub.add_parser("communication", help="communication cost per method (Markdown, CSV)")
    p.add_argument("--aggregate", required=True, nargs="+", help="aggregated runs")
    p.add_argument("--md", required=True)
    p.add_argument("--csv", required=True)
    p.add_argument("--methods", nargs="*", help="row order")
    p.add_argument("--labels", help='JSON {"partitions": {id: label}, ...}')
    p.add_argument("--tuning", help=TUNING_HELP)
    p.add_argument("--caption", default="Communication per method: scalars sent and "
                   "received, and final accuracy.")
    p.set_defaults(func=_communication)

    p = sub.add_parser("partition-stats", help="per-client sizes and label counts")
    p.add_argument("--data", required=True)
    p.add_argument("--partition", required=True)
    p.add_argument("--csv", required=True, help="per-client table")
    p.add_argument("--md", required=True, help="summary table")
    p.set_defaults(func=_partition_stats)

    from pflrepro.reporting.figures.kinds import KINDS, OPTIONS

    p = sub.add_parser("plot", help="draw a figure from an aggregate (or a partition)")
    p.add_argument("kind", choices=list(KINDS), help="the figure kind (one module of "
                   "pflrepro.reporting.figures each)")
    p.add_argument("--aggregate", nargs="+", help="aggregated runs (all kinds but labels)")
    p.add_argument("--labels", help='JSON {"partitions": {id: label}, "experiments": {...}}')
    p.add_argument("--data", help="prepared data set (labels)")
    p.add_argument("--partition", help="partition file (labels)")
    p.add_argument("--pdf", required=True)
    p.add_argument("--png", required=True)

    def kinds_with(option: str) -> str:
        return ", ".join(k.name for k in KINDS.values() if option in k.options)

    p.add_argument("--client", type=int, default=0,
                   help=f"{OPTIONS['client'][1]} ({kinds_with('client')})")
    p.add_argument("--title", help=f"{OPTIONS['title'][1]} ({kinds_with('title')})")
    p.add_argument("--method", default="federico",
                   help=f"{OPTIONS['method'][1]} ({kinds_with('method')})")
    p.add_argument("--methods", nargs="*",
                   help=f"{OPTIONS['methods'][1]} ({kinds_with('methods')})")
    p.add_argument("--names", help=f"{OPTIONS['names'][1]} ({kinds_with('names')})")
    p.set_defaults(func=_plot)

    p = sub.add_parser("claims", help="check the papers' claims against aggregates")
    p.add_argument("--claims", required=True, help="claims file (config/claims.yaml)")
    p.add_argument("--scale", required=True, choices=["paper", "cpu"],
                   help="whose experiments the claims are checked on")
    p.add_argument("--aggregate", nargs="*", default=[],
                   help="aggregated runs (none: every claim is missing)")
    p.add_argument("--labels", help='JSON {"partitions": {id: label}, "experiments": {...}}')
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--config", nargs="+", metavar="FILE",
                       help="config file(s) whose experiments' partitions, methods and seeds "
                       "a claim needs (merged in order, as check-config does)")
    which.add_argument("--design", help="the same as JSON (the workflow passes it): "
                       '{experiment: {"partitions": [...], "methods": [...], '
                       '"seeds": [[split, train], ...]}}')
    p.add_argument("--md", required=True)
    p.add_argument("--csv", required=True)
    p.set_defaults(func=_claims)

    p = sub.add_parser("check-config", help="check config files as the workflow does, with "
                       "file and line for YAML errors (Snakemake names neither for --configfile)")
    p.add_argument("configs", nargs="+", metavar="FILE",
                   help="config files, merged in order (config.yaml my.yaml: my.yaml merged "
                   "into config.yaml, as `snakemake --configfile my.yaml` does)")
    p.set_defaults(func=_check_config)

    p = sub.add_parser("schema", help="print or write the config schema")
    p.add_argument("--write", action="store_true")
    p.add_argument("--path", type=Path)
    p.set_defaults(func=_schema)

    from pflrepro.reporting.report import add_subcommands  # report-html, paper-vs-ours

    add_subcommands(sub)
    from pflrepro.tuning_jobs import add_subcommands as add_tuning  # tune-split, tune-select

    add_tuning(sub)
    from pflrepro.extra_commands import add_subcommands as add_extra  # other-config, ...

    add_extra(sub)
    from pflrepro.cli_support import group_help

    group_help(parser, sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; known input errors print one line and return 1."""
    from pflrepro.checkpoint import Interrupted
    from pflrepro.cli_support import check_source, run_command
    from pflrepro.records import record_outputs

    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format=LOG_FORMAT)
    logging.getLogger("fontTools").setLevel(logging.WARNING)  # PDF font subsetting chatter

    def command(args: argparse.Namespace) -> None:
        if args.require_source is not None:
            check_source(args.require_source)
        if args.require_source is not None or args.exit_with_parent:  # a workflow job
            from pflrepro.lifeline import exit_with_parent

            exit_with_parent()
        args.func(args)
        record_outputs(args)

    return run_command(args, command, Interrupted)


if __name__ == "__main__":
    raise SystemExit(main())
