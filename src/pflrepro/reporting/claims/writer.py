"""The claims table: an evaluated claims frame written as Markdown and CSV.

The frame is :func:`pflrepro.reporting.claims.checks.evaluate_claims`' (one row per
claim and experiment, :data:`~pflrepro.reporting.claims.parse.COLUMNS`). The Markdown
opens with a summary (:func:`summary_lines`): per paper, the independent rows by
verdict and the rows counted apart (``by design``, ``selection``), every failing
independent row with its margin and interval, the rows counted apart with theirs, and
the headline rows with their seed pairs against the rule of
:mod:`pflrepro.reporting.claims.power`; then every row.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from pflrepro.reporting.claims.checks import LEVEL, RESAMPLES
from pflrepro.reporting.claims.parse import BASES, COLUMNS, PAPERS, VERDICTS
from pflrepro.reporting.claims.power import UNDERPOWERED

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
    ``scope: together``). The verdict columns count the independent rows only; the rows
    whose outcome the protocol fixes (``by design``) or whose statement chose a reading
    or default (``selection``) are counted apart, in their own columns. The failing
    independent rows are listed in the table's order with their signed margin (how far
    from holding) and its interval; then the rows counted apart, with their verdicts.
    """
    apart = [b for b in BASES if b != "independent"]
    lines = ["## Summary", "",
             "Rows per paper and verdict (a claim gives one row per experiment it is "
             "checked on). The verdicts count the independent rows; rows by design (the "
             "protocol fixes the outcome) and selections (the claim chose a reading or "
             "default) are counted apart.", "",
             "| paper | rows | " + " | ".join([*VERDICTS, *apart]) + " |",
             "|:--|" + "--:|" * (len(VERDICTS) + len(apart) + 1)]
    papers = [p for p in PAPERS if (frame["paper"] == p).any()]
    papers += sorted(set(frame["paper"]) - set(papers))
    independent = frame["basis"] == "independent"
    for paper in [*papers, None]:
        mine = frame["paper"].notna() if paper is None else frame["paper"] == paper
        counts = [int((mine & independent & (frame["verdict"] == v)).sum()) for v in VERDICTS]
        counts += [int((mine & (frame["basis"] == b)).sum()) for b in apart]
        name = "**all**" if paper is None else _md(paper)
        lines.append(f"| {name} | {int(mine.sum())} | " + " | ".join(str(c) for c in counts)
                     + " |")
    failing = frame[independent & (frame["verdict"] == "fails")]
    lines.append("")
    if failing.empty:
        lines += ["No independent claim fails.", ""]
    else:
        lines += [f"Failing rows ({len(failing)}), with the margin by which each misses and "
                  f"its {LEVEL:.0%} interval:", "", *_rows_table(failing, False)]
    counted_apart = frame[~independent]
    if not counted_apart.empty:
        lines += [f"Rows counted apart ({len(counted_apart)}): by design or a selection, "
                  "with their verdicts:", "", *_rows_table(counted_apart, True)]
    return lines + _headline_lines(frame)


def _headline_lines(frame: pd.DataFrame) -> list[str]:
    """The headline rows' seed pairs against the rule of :mod:`pflrepro.reporting.claims.power`."""
    rows = frame[frame["power"].astype(str) != ""]
    if rows.empty:
        return []
    decided = int(rows["verdict"].isin(["holds", "fails"]).sum())
    lines = [f"Headline rows ({len(rows)}; the claims the README leads with): {decided} "
             "decided. Seed pairs: an inconclusive row's interval shrinks as 1/sqrt(n), so "
             "at the observed spread it clears the threshold once n' > n (half-width / "
             "|margin|)^2; a headline experiment gets those pairs up to the cap (the "
             "scale's time budget, config/claims.yaml `power`), and an inconclusive row "
             f"with fewer pairs than the rule asks within the cap is '{UNDERPOWERED}'.", "",
             "| id | paper | experiment | verdict | n | pairs the rule asks for | power |",
             "|:--|:--|:--|:--|--:|--:|:--|"]
    for row in rows.itertuples(index=False):
        need = float(row.pairs_needed)
        lines.append(f"| {_md(row.id)} | {_md(row.paper)} | {_md(row.experiment or '—')} "
                     f"| {row.verdict} | {int(row.n)} | {'—' if need != need else int(need)} "
                     f"| {_md(row.power)} |")
    return [*lines, ""]


def _rows_table(rows: pd.DataFrame, basis: bool) -> list[str]:
    """Summary rows: id, paper, experiment, (basis and verdict,) margin, interval, claim."""
    extra = "basis | verdict | " if basis else ""
    lines = [f"| id | paper | experiment | {extra}margin | interval | claim (our words) |",
             "|:--|:--|:--|" + (":--|:--|" if basis else "") + "--:|--:|:--|"]
    for row in rows.itertuples(index=False):
        extra = f"{row.basis} | {row.verdict} | " if basis else ""
        lines.append(f"| {_md(row.id)} | {_md(row.paper)} | {_md(row.experiment or '—')} "
                     f"| {extra}{_margin_text(float(row.margin), row.unit)} "
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
        if row.basis != "independent":
            verdict += f" ({row.basis})"
        cells = [row.id, row.paper, row.where, row.claim, row.experiment or "—",
                 row.predicate, row.numbers]
        lines.append("| " + " | ".join(_md(c) for c in cells)
                     + f" | {verdict} | {_margin_text(float(row.margin), row.unit)} "
                     f"| {int(row.n)} "
                     f"| {_ci_text(float(row.ci_low), float(row.ci_high), row.unit)} |")
    lines += ["", "Verdict: holds when the whole interval of the margin is above the "
              "threshold (at or above it for a non-strict predicate), fails when the whole "
              "interval is below it (n >= 2 runs per cell); inconclusive otherwise (and "
              "always with n = 1); missing when a column, cell or experiment the check "
              "needs has no runs; incomplete when a cell has fewer runs than the config "
              "designs; undecidable when the data are complete but the check is not "
              "defined on them, when every compared value is at the metric's ceiling or "
              "floor (ceiling, floor), when a strict predicate's margin and interval are "
              "all zero (tie), or when the runs do not record what the claim is about "
              "(the reason is given). Margins and bounds closer to zero than the tie "
              "tolerance of their unit (config/claims.yaml, ties: one test row of the "
              "column for accuracy) count as zero. Basis: by design (the protocol fixes "
              "the outcome; its arithmetic opens the numbers) and selection (the claim's "
              "statement chose a reading or default; the choice opens the numbers) are "
              "counted apart from the independent rows. Margin: signed, positive = "
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
