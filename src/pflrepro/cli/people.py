"""The commands for people.

What the package offers, what the workflow would run, which jobs finished, every stored
file against its digest, a config checked as the workflow does, and the config schema.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pflrepro.store.targets import output_file


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


def _list(args: argparse.Namespace) -> None:
    from pflrepro.pipeline.listing import render

    cfg = None
    paths = args.config or (["config.yaml"] if Path("config.yaml").is_file()
                            and args.what in ("hyperparameters", "settings") else [])
    if paths:
        from pflrepro.config import check_config_paths
        from pflrepro.config.schema import build_schema

        cfg = check_config_paths(paths, build_schema())
    sys.stdout.write(render(args.what, cfg, scale=args.scale))


def _positive_seconds(text: str) -> float:
    """The ``--watch`` type: a finite number of seconds > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds > 0, got {text!r}") from None
    if not (0 < value < float("inf")):
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds > 0, got {text}")
    return value


def _run_view(args: argparse.Namespace) -> None:
    from pflrepro.pipeline.watch import watch

    extra = args.snakemake[1:] if args.snakemake[:1] == ["--"] else args.snakemake
    if args.profile:
        extra = ["--profile", args.profile, *extra]
    watch(".", interval=args.watch, args=extra or None, use_plan=not args.no_plan,
          out=sys.stdout)


def _status(args: argparse.Namespace) -> None:
    from pflrepro.pipeline.status import format_status, iter_expected, job_status, tuning_warnings

    if args.watch is not None or args.run:
        _run_view(args)
        return
    results = Path(args.results)
    if not results.is_dir():
        what = "is not a directory" if results.exists() else "does not exist"
        raise ValueError(f"--results {args.results}: {what} (the workflow's results "
                         f"directory, holding runs/)")
    expected: list[tuple[str, str, str, str]] = []
    if args.config:
        from pflrepro.config import check_config_paths
        from pflrepro.config.schema import build_schema

        cfg = check_config_paths(args.config, build_schema())
        expected = [k for name, e in cfg.experiments.items() if e.scale == cfg.scale
                    for k in iter_expected(cfg.runs(name))]
    jobs = job_status(args.results, args.logs, expected=expected,
                      stale_after_s=args.stale_after * 60.0)
    sys.stdout.write(format_status(jobs, tuning_warnings(args.results)))


def _verify(args: argparse.Namespace) -> None:
    from pflrepro.pipeline.verify import default_figures, verify

    figures = args.figures or default_figures(args.results)
    checked, findings = verify(args.results, adopt=args.adopt, figures=figures)
    for finding in findings:
        print(finding)
    bad = [f for f in findings if f.status in ("damaged", "undigested")]
    adopted = len(findings) - len(bad)
    print(f"{checked} stored file(s) under {args.results} and {figures} checked: "
          f"{len(bad)} damaged or undigested"
          + (f", {adopted} adopted" if args.adopt else ""))
    damaged = sum(f.status == "damaged" for f in bad)
    parts = ([f"{damaged} damaged (marked or set aside: the next snakemake rebuilds them)"]
             if damaged else [])
    if len(bad) > damaged:
        parts.append(f"{len(bad) - damaged} without a digest record (snakemake does not "
                     "rebuild these: delete each so that the next snakemake writes it "
                     "again, or trust them as they are with `pflrepro verify --adopt`)")
    if bad:
        raise ValueError("stored files listed above: " + "; ".join(parts))


def _schema(args: argparse.Namespace) -> None:
    from pflrepro.config.schema import SCHEMA_PATH, render
    from pflrepro.store.io import write_text

    text = render()
    if args.write:
        write_text(args.path or SCHEMA_PATH, text)
    else:
        sys.stdout.write(text)


def _check_config(args: argparse.Namespace) -> None:
    from pflrepro.config import check_config_paths
    from pflrepro.config.schema import build_schema

    cfg = check_config_paths(args.configs, build_schema())
    chosen = sum(e.scale == cfg.scale for e in cfg.experiments.values())
    print(f"{' + '.join(args.configs)}: valid ({chosen} experiment(s) at the {cfg.scale} "
          "scale)")


def _plan(args: argparse.Namespace) -> None:
    from pflrepro.pipeline.plan import dry_run, parse_config, parse_dry_run, summary
    from pflrepro.pipeline.plan_cost import Device

    device = Device(args.device_name or (Device.name if args.device_tflops is None
                                         else "your device"),
                    Device.peak_tflops if args.device_tflops is None else args.device_tflops,
                    args.efficiency)
    device.rate  # noqa: B018 (checks the numbers before the dry run)
    extra = args.snakemake[1:] if args.snakemake[:1] == ["--"] else args.snakemake
    if args.profile:
        extra = ["--profile", args.profile, *extra]
    text, config = dry_run(extra)
    sys.stdout.write(summary(parse_dry_run(text), Path(args.projection),
                             config=parse_config(config), device=device))


def add_subcommands(sub: argparse._SubParsersAction) -> None:  # noqa: SLF001
    """Add the people commands to ``sub``."""
    p = sub.add_parser("list", help="methods (hyperparameters, defaults, docs), data sets and "
                       "partition schemes (options, defaults)")
    p.add_argument("what", nargs="?", default="all",
                   choices=["all", "methods", "datasets", "partitions", "hyperparameters",
                            "settings"])
    p.add_argument("--config", nargs="+", metavar="FILE",
                   help="hyperparameters and settings: the config to list, merged in order "
                   "(default: ./config.yaml); hyperparameters: per value, stated by the "
                   "paper, set by us (why), tuned (by which experiments) or default; "
                   "settings: every setting of every experiment of --scale beside its "
                   "source (Markdown, as docs/settings.md)")
    p.add_argument("--scale", choices=["paper", "cpu"], default="paper",
                   help="settings: the experiments' scale (default paper)")
    p.set_defaults(func=_list)

    p = sub.add_parser("plan", help="what `snakemake -n` would run: jobs by rule and by "
                       "experiment, missing and stale ones and why, the projected training "
                       "time when a cost projection exists")
    p.add_argument("--profile", help="Snakemake profile (e.g. profiles/demo)")
    p.add_argument("--projection", default="results/tables/cost-projection.csv",
                   help="the measured cost projection pricing the training runs, if it exists")
    from pflrepro.reporting.flops import DEVICE, UTILISATION

    p.add_argument("--device-tflops", type=float, metavar="PEAK",
                   help=f"the device's dense peak in TFLOP/s that the GPU-hours are projected "
                   f"at (default: {DEVICE['name']}, {DEVICE['precision']}, "
                   f"{DEVICE['peak_tflops']})")
    p.add_argument("--efficiency", type=float, default=UTILISATION, metavar="FRACTION",
                   help=f"fraction of the peak assumed sustained (default {UTILISATION})")
    p.add_argument("--device-name", help="the device's name in the output")
    p.add_argument("snakemake", nargs=argparse.REMAINDER, metavar="-- ARGS",
                   help="further Snakemake arguments after `--` (--config scale=cpu, targets)")
    p.set_defaults(func=_plan)

    p = sub.add_parser("status", help="finished, running, failed (and, with --config, "
                       "pending) training jobs of a results directory")
    p.add_argument("--results", default="results", help="results directory (runs/ in it)")
    p.add_argument("--logs", default="logs", help="logs directory (train/ in it)")
    p.add_argument("--config", nargs="*", metavar="FILE",
                   help="config files (merged in order) whose jobs not yet started are "
                   "listed as pending")
    p.add_argument("--stale-after", type=_positive_minutes, default=60.0, metavar="MINUTES",
                   help="a job whose log has not changed for this long is 'stale'")
    p.add_argument("--run", action="store_true",
                   help="instead: the whole Snakemake run in this directory (its newest "
                   "log): jobs done, running, failed and left by stage, runs left, time left")
    p.add_argument("--watch", nargs="?", type=_positive_seconds, const=5.0, metavar="SECONDS",
                   help="--run, refreshed every SECONDS (default 5) until the run ends or "
                   "Ctrl-C")
    p.add_argument("--profile", help="--run/--watch: the run's Snakemake profile, for the "
                   "plan of the jobs left (default: the running Snakemake's own arguments)")
    p.add_argument("--no-plan", action="store_true",
                   help="--run/--watch: no dry run of the jobs left (their runs and FLOPs "
                   "then come from the jobs started so far)")
    p.add_argument("snakemake", nargs=argparse.REMAINDER, metavar="-- ARGS",
                   help="--run/--watch: Snakemake arguments of the plan after `--`")
    p.set_defaults(func=_status)

    p = sub.add_parser("verify", help="check every stored file's digest (bit rot); mark "
                                      "damaged ones for rebuilding")
    p.add_argument("--results", default="results", help="results directory (default: results)")
    p.add_argument("--figures", help="figures directory (default: figures beside the "
                   "results directory)")
    p.add_argument("--adopt", action="store_true",
                   help="write digest records for stored files that have none (files from "
                        "before records existed; trusts them as they are now)")
    p.set_defaults(func=_verify)

    p = sub.add_parser("check-config", help="check config files as the workflow does, with "
                       "file and line for YAML errors (Snakemake names neither for --configfile)")
    p.add_argument("configs", nargs="+", metavar="FILE",
                   help="config files, merged in order (config.yaml my.yaml: my.yaml merged "
                   "into config.yaml, as `snakemake --configfile my.yaml` does)")
    p.set_defaults(func=_check_config)

    p = sub.add_parser("schema", help="print or write the config schema")
    p.add_argument("--write", action="store_true")
    p.add_argument("--path", type=output_file)
    p.set_defaults(func=_schema)
