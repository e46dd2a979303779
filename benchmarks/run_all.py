"""Run every benchmark and compare the results with the issue's targets.

    python benchmarks/run_all.py            # full sizes (tens of minutes on 2 cores)
    python benchmarks/run_all.py --quick    # tiny sizes, 1 repeat, 2 threads
    python benchmarks/run_all.py --quick --skip paper_shapes   # all but one

Prints a machine line first, then each benchmark's table, then the targets (met or
not: reported, never asserted) and the correctness checks. Exits 1 only when a
correctness check fails or a benchmark errors (e.g. the engine and the reference
FedAvg disagree, the grid did not produce its table).
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Report, machine_line, median, mm_rate, table  # noqa: E402

ORDER = ("cell", "grid", "pairwise", "methods", "scale", "pipeline", "gpu", "paper_shapes")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true",
                   help="tiny sizes, 1 repeat, 2 threads: checks results, not speed")
    p.add_argument("--only", help=f"comma-separated subset of {','.join(ORDER)}")
    p.add_argument("--skip", help="comma-separated benchmarks to leave out (e.g. one that "
                   "CI runs in a stage of its own)")
    p.add_argument("--threads", type=int,
                   help="threads (default: 2 with --quick, else torch's default, the cores)")
    p.add_argument("--two-threads", action="store_true",
                   help="grid: also time one job at a time with 2 threads per job")
    a = p.parse_args(argv)
    import torch

    threads = a.threads or (2 if a.quick else None)
    if threads:
        torch.set_num_threads(threads)
    names = a.only.split(",") if a.only else list(ORDER)
    skipped = a.skip.split(",") if a.skip else []
    unknown = sorted((set(names) | set(skipped)) - set(ORDER))
    if unknown:
        p.error(f"unknown benchmark(s) {unknown}; known: {list(ORDER)}")
    names = [n for n in names if n not in skipped]
    start = time.perf_counter()
    print(machine_line(), flush=True)
    mm = mm_rate(repeats=3 if a.quick else 5)
    print(f"torch.mm 2048x2048 float32: median {median(mm):.1f} GFLOP/s, best "
          f"{max(mm):.1f} GFLOP/s ({torch.get_num_threads()} threads)", flush=True)
    print(f"mode: {'quick (tiny sizes; speed numbers are not meaningful)' if a.quick else 'full'}",
          flush=True)
    reports: list[Report] = []
    for name in names:
        print(flush=True)
        mod = importlib.import_module(f"bench_{name}")
        kwargs: dict = {"quick": a.quick}
        if name in ("scale", "methods", "paper_shapes"):
            kwargs["threads"] = threads
        if name == "grid":
            kwargs["two_threads"] = a.two_threads
        t = time.perf_counter()
        try:
            rep = mod.run(**kwargs)
        except Exception:  # noqa: BLE001 - report and carry on with the others
            traceback.print_exc()
            rep = Report(name)
            rep.check(f"{name} ran without error", False)
        rep.values["seconds"] = time.perf_counter() - t
        print(f"  ({name}: {rep.values['seconds']:.1f} s)", flush=True)
        reports.append(rep)

    print()
    print("== targets (reported, not asserted) ==")
    rows = [[what, measured, "met" if met else "NOT met"]
            for rep in reports for what, measured, met in rep.targets]
    for line in table(rows, ["target", "measured", ""]):
        print(line)
    if a.quick:
        print("  (quick mode: tiny sizes, speed targets are not meaningful)")
    checks = [(rep.name, what, ok) for rep in reports for what, ok in rep.checks]
    failed = [c for c in checks if not c[2]]
    print()
    print(f"== correctness checks: {len(checks) - len(failed)} of {len(checks)} passed ==")
    for name, what, _ in failed:
        print(f"  FAILED [{name}] {what}")
    print(f"\nload average at the end: {machine_line().rsplit('load average ', 1)[-1]}; "
          f"total {time.perf_counter() - start:.1f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
