"""What ``snakemake --report`` shows: categories, labels and captions, and HTML tables.

The workflow flags its tables and figures with Snakemake's ``report()``: a category
per paper (:func:`paper_of`), a subcategory per experiment or table, a label naming
the output, and a caption from ``workflow/report/*.rst``. The captions are Jinja
templates that print the texts :func:`report_captions` writes from the parsed config,
the claims file and the paper numbers (the workflow puts them under
``config[CAPTIONS_KEY]``, where the templates read them as
``snakemake.config[...]``): the experiment, its scale, data, partitions, seeds,
training settings and methods, and the papers' claims it tests. Tables are shown as
HTML pages written from their Markdown (:func:`markdown_to_html`), since the report
displays HTML, images and PDF, and offers other files only for download.

Commands: ``pflrepro report-html`` (Markdown table -> HTML page, with
:func:`markdown_to_html`) and ``pflrepro paper-vs-ours`` (:mod:`pflrepro.reporting.paper`),
both in :mod:`pflrepro.cli.tables`.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pflrepro.config.figure_kinds import KINDS
from pflrepro.reporting.claims.parse import CLAIMS_TABLES
from pflrepro.reporting.cost_projection import COST_PROJECTION
from pflrepro.reporting.flops import GRID_PROJECTION

if TYPE_CHECKING:
    from pflrepro.config import ExperimentConfig, WorkflowConfig
    from pflrepro.reporting.claims.parse import Claim
    from pflrepro.reporting.paper import PaperCell

#: Key of the workflow config under which the captions are handed to the templates.
CAPTIONS_KEY = "_report_captions"
#: Category of each paper, by the name part that marks its experiments.
PAPER_TOKENS: Mapping[str, str] = {"federico": "FedeRiCo", "fedamp": "FedAMP",
                                   "perfedckt": "PerFed-CKT", "fedmix": "FedMix"}
OTHER = "Other experiments"
CLAIMS_CATEGORY = "Claims"
COST_CATEGORY = "Cost"
#: The paper grid's projections (one table each for the whole grid), by table name.
PROJECTIONS: Mapping[str, str] = {
    COST_PROJECTION.rsplit("/", 1)[1].removesuffix(".{ext}"):
        "Projected cost of the paper-scale grid of config.yaml, priced at the rates the "
        "built experiments' training jobs measured (a count of work where those rates "
        "come from CPU-scale jobs, not GPU-hours).\n",
    GRID_PROJECTION.rsplit("/", 1)[1].removesuffix(".{ext}"):
        "Projected GPU-hours of the paper-scale grid of config.yaml from FLOPs counted per "
        "model and sample, at the stated fraction of the stated device peak: a projection, "
        "not a measurement.\n",
}
#: What each plot rule draws (``{method}`` / ``{client}``: its wildcards), by rule name:
#: the captions the figure modules declare (:mod:`pflrepro.config.figure_kinds`),
#: and the tuning stage's figure (drawn by ``tune_select``).
FIGURES: Mapping[str, str] = {
    **{kind.rule: kind.caption for kind in KINDS.values()},
    "tune_select": "Tuning of {method}: mean validation accuracy over the tuning seeds "
                   "against each value tried (log axis for a logarithmic grid; with "
                   "several keys, the others at their selected values), one line per "
                   "partition and split; the selected value ringed. Validation rows are "
                   "held out of each client's training rows; the test rows are never "
                   "read. Every value tried: results/tuning/<experiment>/<method>.md.",
}


# --------------------------------------------------------------------------- categories
def paper_of(name: str, claims: Sequence[Claim] = ()) -> str:
    """The paper an experiment or table belongs to (its report category).

    The paper of a claim naming the experiment, else the first part of the name that
    marks a paper (``demo_federico`` -> FedeRiCo), else :data:`OTHER`.
    """
    for claim in claims:
        if any(name in names for names in claim.experiments.values()):
            return claim.paper
    for part in re.split(r"[_\-]", name):
        if part in PAPER_TOKENS:
            return PAPER_TOKENS[part]
    return OTHER


def _rst(text: Any) -> str:
    """``text`` with reStructuredText's inline markup characters escaped."""
    return re.sub(r"([\\`*_|])", r"\\\1", str(text)).replace("\n", " ")


def _value(value: Any) -> str:
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    return str(value)


def _training(exp: ExperimentConfig) -> str:
    import dataclasses

    t = exp.training
    keys = ("rounds", "local_epochs", "local_steps", "batch_size", "optimizer", "lr",
            "momentum", "model", "model_options", "client_fraction", "architectures",
            "eval_every", "device")
    shown = {k: getattr(t, k) for k in keys if hasattr(t, k)}
    defaults = {f.name: f.default for f in dataclasses.fields(t)
                if f.default is not dataclasses.MISSING}
    for key in ("local_steps", "momentum", "architectures"):
        if key in shown and key in defaults and shown[key] == defaults[key]:
            del shown[key]
    if not shown.get("architectures"):
        shown.pop("architectures", None)
    return ", ".join(f"{k} {_value(v)}" for k, v in shown.items())


def experiment_caption(cfg: WorkflowConfig, name: str, claims: Sequence[Claim] = (),
                       cells: Sequence[PaperCell] = ()) -> str:
    """The reStructuredText caption of an experiment: what it is, and what it tests."""
    exp = cfg.experiments[name]
    pairs = exp.seed_pairs()
    seeds = (f"split seeds {list(exp.split_seeds)} x training seeds {list(exp.train_seeds)}"
             f" ({exp.seed_pairing}): {len(pairs)} run(s) per method and partition")
    parts = []
    for p in exp.partitions:
        spec = {k: v for k, v in p.spec().items() if k != "scheme"}
        label = exp.partition_labels.get(p.id, p.id)
        args = ", ".join(f"{k} {_value(v)}" for k, v in spec.items())
        parts.append(f"{label} = {p.scheme}({args})")
    methods = []
    for m in exp.methods:
        method = cfg.methods[m]
        params = ", ".join(f"{k} {_value(v)}" for k, v in method.params.items())
        methods.append(f"{m} = {method.algorithm}" + (f"({params})" if params else ""))
    data = exp.dataset + (f" (public set: {exp.public.size} samples of {exp.public.dataset})"
                          if exp.public else "")
    tested = [c for c in claims if name in c.experiments.get(exp.scale, ())]
    numbers = sorted({f"{c.paper} {c.table}" for c in cells
                      if name in (c.experiment, c.cpu_experiment)})
    lines = [f"**{_rst(name)}**: {_rst(exp.description)}", "",
             f"- **paper**: {_rst(paper_of(name, claims))}",
             f"- **scale**: {_rst(exp.scale)}" + (
                 " (a CPU-scale design analogue: other data, model and rounds than the "
                 "paper; not expected to match its numbers)" if exp.scale == "cpu" else ""),
             f"- **data**: {_rst(data)}",
             f"- **partitions**: {_rst('; '.join(parts))}",
             f"- **seeds**: {_rst(seeds)}",
             f"- **training**: {_rst(_training(exp))}",
             f"- **methods**: {_rst('; '.join(methods))}"]
    if tested:
        lines.append("- **claims it tests** (config/claims.yaml, results/tables/"
                     f"{_rst('claims' if exp.scale == 'paper' else 'claims_cpu')}.md):")
        lines += [f"  - {_rst(c.id)} ({_rst(c.paper)}, {_rst(c.where)}): {_rst(c.claim)}"
                  for c in tested]
    else:
        lines.append("- **claims it tests**: none in config/claims.yaml")
    if numbers:
        lines.append(f"- **paper numbers** (config/paper\\_numbers.csv): "
                     f"{_rst(', '.join(numbers))}")
    return "\n".join(lines) + "\n"


def _split(name: str, cfg: WorkflowConfig) -> tuple[str, str]:
    """(experiment or table, kind suffix) of a table file name, e.g. ``x-communication``."""
    if name in cfg.experiments or name in cfg.tables:
        return name, ""
    base, _, suffix = name.rpartition("-")
    if base and (base in cfg.experiments or base in cfg.tables or suffix == "paper"):
        return base, suffix
    return name, ""


def table_label(name: str, cfg: WorkflowConfig) -> str:
    """What a table file of the report is (its ``output`` label)."""
    base, suffix = _split(name, cfg)
    if suffix == "paper":
        return "paper vs ours"
    if suffix:
        return f"{suffix.replace('_', ' ')} table"
    if base in cfg.tables:
        return "combined table"
    if base in cfg.experiments:
        return "accuracy table"
    if base in PROJECTIONS:
        return "cost projection"
    if base in CLAIMS_TABLES.values():
        return "claims table"
    return "table"


def table_category(name: str, cfg: WorkflowConfig, claims: Sequence[Claim] = (),
                   cells: Sequence[PaperCell] = ()) -> tuple[str, str]:
    """(category, subcategory) of a table file of the report."""
    base, suffix = _split(name, cfg)
    if suffix == "paper":
        paper = next((c.paper for c in cells
                      if base in (c.table_id, f"{c.table_id}_cpu")), OTHER)
        return paper, "paper vs ours"
    if base in cfg.tables:
        return paper_of(cfg.tables[base].experiments[0], claims), f"table {base}"
    if base in cfg.experiments:
        return paper_of(base, claims), base
    if name in PROJECTIONS:
        return COST_CATEGORY, name
    if name in CLAIMS_TABLES.values():
        return CLAIMS_CATEGORY, name
    return OTHER, name


def report_captions(cfg: WorkflowConfig, claims: Sequence[Claim] = (),
                    cells: Sequence[PaperCell] = (), *, table_names: Iterable[str] = (),
                    paper_tables: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Captions of every report entry, as the templates under ``workflow/report`` read them.

    ``{"experiments": {name: rst}, "tables": {table file name: rst}, "figures":
    {plot rule: text}}``, for the tables ``table_names`` (file names without ``.md``:
    experiments' tables and their ``-<kind>`` tables, the config's combined tables, the
    claims tables, and the paper-vs-ours tables ``<name>-paper`` of ``paper_tables``,
    output name -> table id).
    """
    from pflrepro.config import SCALES
    from pflrepro.reporting.paper import SCALE_NOTES

    experiments = {n: experiment_caption(cfg, n, claims, cells) for n in cfg.experiments}
    kinds = {"": "Accuracy table: mean ± std over runs, per method (rows) and partition "
                 "(columns).",
             "communication": "Communication table: scalars each method's clients sent "
                              "and received, beside its accuracy."}
    tables: dict[str, str] = {}
    for name in table_names:
        base, suffix = _split(name, cfg)
        if suffix == "paper":
            table_id = (paper_tables or {}).get(base, base)
            rows = [c for c in cells if c.table_id == table_id]
            scale = next((s for s in SCALES if base == table_id + ("" if s == "paper"
                                                                     else f"_{s}")), "paper")
            what = f"{rows[0].paper} {rows[0].table}" if rows else table_id
            given = sum(c.value is not None for c in rows)
            tables[name] = (
                f"**Paper vs ours: {_rst(what)}** ({_rst(scale)} scale). The numbers the "
                f"paper's text gives (config/paper\\_numbers.csv: {given} of {len(rows)} "
                "cells have one), ours as mean ± std over runs, the difference and whether "
                f"it is inside our std. {_rst(SCALE_NOTES[scale])}.\n")
        elif base in cfg.tables:
            table = cfg.tables[base]
            body = "\n".join(experiments[e] for e in table.experiments if e in experiments)
            tables[name] = (f"**{_rst(base)}**: {_rst(table.caption)} (metric "
                            f"{_rst(table.metric)}, {_rst(table.scale)} scale; experiments "
                            f"{_rst(', '.join(table.experiments))})\n\n{body}")
        elif base in cfg.experiments:
            kind = kinds.get(suffix, f"{suffix.replace('_', ' ').capitalize()} table.")
            tables[name] = f"{kind}\n\n{experiments[base]}"
        elif name in PROJECTIONS:
            tables[name] = PROJECTIONS[name]
        else:
            tables[name] = ("The papers' qualitative claims (config/claims.yaml) checked "
                            "against our results. The page opens with a summary: per "
                            "paper, how many rows hold, fail, are inconclusive, "
                            "undecidable, incomplete or missing at this scale, and every "
                            "failing row with its margin and interval; then each claim "
                            "with its verdict, signed margin, n and interval.\n")
    return {"experiments": experiments, "tables": tables, "figures": dict(FIGURES)}


# --------------------------------------------------------------------------- HTML
_STYLE = ("body{font-family:sans-serif;margin:1em}table{border-collapse:collapse}"
          "td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}"
          "td.r,th.r{text-align:right}")


def _inline(text: str) -> str:
    out = html.escape(text, quote=False)
    out = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", out)
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", out)


def _cells(line: str) -> list[str]:
    """The cells of a Markdown table row (a backslash-escaped bar is a literal one)."""
    inner = line.strip()
    inner = inner[1:] if inner.startswith("|") else inner
    inner = inner[:-1] if inner.endswith("|") and not inner.endswith("\\|") else inner
    parts = re.split(r"(?<!\\)\|", inner)
    return [p.strip().replace("\\|", "|").replace("\\\\", "\\") for p in parts]


def _align(align: Sequence[str], j: int) -> str:
    return ' class="r"' if j < len(align) and align[j] == "r" else ""


def markdown_to_html(text: str, title: str) -> str:
    """An HTML page of the Markdown the table writers produce.

    Handles what they write: ``#`` headings, pipe tables (the ``|:--|--:|`` line sets
    left / right alignment), paragraphs, ``**bold**`` and ``code``; everything else is
    escaped text.
    """
    body: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.lstrip().startswith("|"):
            block = []
            while i < len(lines) and lines[i].lstrip().startswith("|"):
                block.append(lines[i])
                i += 1
            rows = [_cells(r) for r in block]
            align: list[str] = []
            if len(rows) > 1 and all(re.fullmatch(r":?-+:?", c) for c in rows[1] if c):
                align = ["r" if c.endswith(":") and not c.startswith(":") else ""
                         for c in rows[1]]
                rows = [rows[0], *rows[2:]]
            out = ["<table>"]
            for k, row in enumerate(rows):
                tag = "th" if k == 0 else "td"
                cells = [f"<{tag}{_align(align, j)}>{_inline(c)}</{tag}>"
                         for j, c in enumerate(row)]
                out.append("<tr>" + "".join(cells) + "</tr>")
            body.append("\n".join(out) + "\n</table>")
            continue
        if line.startswith("#"):
            level = min(len(line) - len(line.lstrip("#")), 6)
            body.append(f"<h{level}>{_inline(line.lstrip('#').strip())}</h{level}>")
        elif line.strip():
            para = [line.strip()]
            while (i + 1 < len(lines) and lines[i + 1].strip()
                   and not lines[i + 1].lstrip().startswith(("|", "#"))):
                i += 1
                para.append(lines[i].strip())
            body.append(f"<p>{_inline(' '.join(para))}</p>")
        i += 1
    return ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head>\n<body>\n"
            + "\n".join(body) + "\n</body></html>\n")
