"""The commands for looking at the project (:mod:`pflrepro.inspect`).

``list`` (methods, data sets, partition schemes, hyperparameters and settings),
``plan`` (what the workflow would run), ``status`` (which jobs finished, run or failed;
with ``--run`` or ``--watch`` the whole Snakemake run) and ``verify`` (every stored file
against its digest).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pflrepro.cli.options import positive_minutes, positive_seconds


def _list(args: argparse.Namespace) -> None:
    from pflrepro.inspect.listing import render

    cfg = None
    paths = args.config or (["config.yaml"] if Path("config.yaml").is_file()
                            and args.what in ("hyperparameters", "settings") else [])
    if paths:
        from pflrepro.config import check_config_paths
        from pflrepro.config.schema import build_schema

        cfg = check_config_paths(paths, build_schema())
    sys.stdout.write(render(args.what, cfg, scale=args.scale))


def _run_view(args: argparse.Namespace) -> None:
    from pflrepro.inspect.watch import watch

    extra = args.snakemake[1:] if args.snakemake[:1] == ["--"] else args.snakemake
    if args.profile:
        extra = ["--profile", args.profile, *extra]
    watch(".", interval=args.watch, args=extra or None, use_plan=not args.no_plan,
          out=sys.stdout)


def _status(args: argparse.Namespace) -> None:
    from pflrepro.inspect.status import format_status, iter_expected, job_status, tuning_warnings

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
    from pflrepro.inspect.verify import default_figures, verify

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


def _plan(args: argparse.Namespace) -> None:
    from pflrepro.inspect.plan import dry_run, parse_config, parse_dry_run, summary
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
    """Add the commands for looking at the project to ``sub``."""
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
    p.add_argument("--stale-after", type=positive_minutes, default=60.0, metavar="MINUTES",
                   help="a job whose log has not changed for this long is 'stale'")
    p.add_argument("--run", action="store_true",
                   help="instead: the whole Snakemake run in this directory (its newest "
                   "log): jobs done, running, failed and left by stage, runs left, time left")
    p.add_argument("--watch", nargs="?", type=positive_seconds, const=5.0, metavar="SECONDS",
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
