"""The claims table: an evaluated claims frame written as Markdown and CSV.

The frame is :func:`pflrepro.reporting.claims.checks.evaluate_claims`' (one row per
claim and experiment, :data:`~pflrepro.reporting.claims.parse.COLUMNS`). The Markdown
opens with a summary (:func:`summary_lines`): per paper, the rows by verdict, and
every failing row with its margin and interval; then every row.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from pflrepro.reporting.claims.checks import LEVEL, RESAMPLES
from pflrepro.reporting.claims.parse import COLUMNS, PAPERS, VERDICTS

if TYPE_CHECKING:
    import pandas as pd

# --------------------------------------------------------------------------- writing
def _md(text: Any) -> str:
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _margin_text(margin: float, unit: str) -> str:
    if margin != margin:  # NaN
        return "—"
    if unit == "weight":
        return f"{margin:+.3g} {unit}"
    return f"{margin:+.2f} {unit}"


def _ci_text(low: float, high: float, unit: str) -> str:
    if low != low or high != high:  # NaN
        return "—"
    if unit == "weight":
        return f"[{low:+.3g}, {high:+.3g}]"
    return f"[{low:+.2f}, {high:+.2f}]"


def summary_lines(frame: pd.DataFrame) -> list[str]:
    """The summary a reader sees first: verdict counts per paper, then the failing rows.

    Counts are of rows (a claim gives one row per experiment, or one for several with
    ``scope: together``); the failing rows are listed in the table's order with their
    signed margin (how far from holding) and its interval.
    """
    lines = ["## Summary", "",
             "Rows per paper and verdict (a claim gives one row per experiment it is "
             "checked on).", "",
             "| paper | rows | " + " | ".join(VERDICTS) + " |",
             "|:--|" + "--:|" * (len(VERDICTS) + 1)]
    papers = [p for p in PAPERS if (frame["paper"] == p).any()]
    papers += sorted(set(frame["paper"]) - set(papers))
    for paper in [*papers, None]:
        rows = frame if paper is None else frame[frame["paper"] == paper]
        counts = [int((rows["verdict"] == v).sum()) for v in VERDICTS]
        name = "**all**" if paper is None else _md(paper)
        lines.append(f"| {name} | {len(rows)} | " + " | ".join(str(c) for c in counts) + " |")
    failing = frame[frame["verdict"] == "fails"]
    lines.append("")
    if failing.empty:
        lines += ["No claim fails.", ""]
        return lines
    lines += [f"Failing rows ({len(failing)}), with the margin by which each misses and its "
              f"{LEVEL:.0%} interval:", "",
              "| id | paper | experiment | margin | interval | claim (our words) |",
              "|:--|:--|:--|--:|--:|:--|"]
    for row in failing.itertuples(index=False):
        lines.append(f"| {_md(row.id)} | {_md(row.paper)} | {_md(row.experiment or '—')} "
                     f"| {_margin_text(float(row.margin), row.unit)} "
                     f"| {_ci_text(float(row.ci_low), float(row.ci_high), row.unit)} "
                     f"| {_md(row.claim)} |")
    return [*lines, ""]


def write_claims(frame: pd.DataFrame, md_path: str | os.PathLike[str],
                 csv_path: str | os.PathLike[str], *, scale: str) -> None:
    """Write an :func:`evaluate_claims` frame as Markdown and CSV, atomically."""
    from pflrepro.store.io import write_text

    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"write_claims: the frame lacks column(s) {missing}")
    lines = [f"# The papers' claims against our results ({scale} scale)", "",
             *summary_lines(frame), "## Every claim", "",
             "| id | paper | where | claim (our words) | experiment | predicate "
             f"| our numbers | verdict | margin | n | {LEVEL:.0%} interval |",
             "|:--|:--|:--|:--|:--|:--|:--|:--|--:|--:|--:|"]
    for row in frame.itertuples(index=False):
        verdict = f"**{row.verdict}**" if row.verdict == "fails" else row.verdict
        cells = [row.id, row.paper, row.where, row.claim, row.experiment or "—",
                 row.predicate, row.numbers]
        lines.append("| " + " | ".join(_md(c) for c in cells)
                     + f" | {verdict} | {_margin_text(float(row.margin), row.unit)} "
                     f"| {int(row.n)} "
                     f"| {_ci_text(float(row.ci_low), float(row.ci_high), row.unit)} |")
    lines += ["", "Verdict: holds / fails only when the whole interval of the margin is on "
              "one side of the threshold (n >= 2 runs per cell); inconclusive otherwise "
              "(and always with n = 1); missing when a column, cell or experiment the "
              "check needs has no runs; incomplete when a cell has fewer runs than the "
              "config designs; undecidable when the data are complete but the check is "
              "not defined on them, or when the runs do not record what the claim is "
              "about (the reason is given). Margin: signed, positive = "
              "holds by that much (worst column; best column for 'some column'); pp = "
              "percentage points of accuracy (the tables' numbers: mean over runs); "
              "weight = learned client weights at the final round, or their change summed "
              "over rounds (variation), or shares of a recorded matrix's rows (FedMix's q), "
              "mean over runs; models, components, clusters: counts; ratio: of "
              "scalars communicated. n: runs "
              "(seed pairs) per cell. "
              f"Interval: {LEVEL:.0%} paired percentile bootstrap of the margin over the "
              f"(split, training) seed pairs, {RESAMPLES} resamples with a fixed seed.", ""]
    write_text(md_path, "\n".join(lines))
    write_text(csv_path, frame[list(COLUMNS)].to_csv(index=False, lineterminator="\n"))
