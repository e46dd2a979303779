"""What every figure shares: its style, its layout, how it is saved, and run selection.

Figures are drawn on a :class:`matplotlib.figure.Figure` attached to the Agg canvas
directly (never through :mod:`matplotlib.pyplot`), so importing a figure module
changes no global backend or state and leaks no figures. Every figure is drawn and
saved inside one fixed style (:data:`STYLE`, seaborn ``whitegrid``/``paper`` with a
fixed font), and the PDF is saved without a creation date, so the same inputs and the
same library versions give byte-identical files. Both files are written atomically,
each with its digest record ``.digests/<file>.sha256`` beside it, which ``pflrepro verify``
checks (:mod:`pflrepro.inspect.verify`).

Layout: a figure is laid out by constrained layout, and :func:`finish` adds its
figure legends (:class:`LegendSpec`) so that they fit: it gives a legend below the
panels as many columns as the figure's width holds (wrapping its title when that is
wider), makes the figure taller (or wider, for a legend at the side) by the legend's
size so the panels keep theirs, and grows the figure until everything drawn lies on
the canvas.
"""

from __future__ import annotations

import math
import os
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import matplotlib
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.legend import Legend

from pflrepro.store.io import atomic_digested_path
from pflrepro.reporting.accuracy import RUN_KEYS, SETTING_KEYS
from pflrepro.store.results import GROUP

PathLike = str | os.PathLike[str]

#: rcParams every figure is drawn and saved under.
STYLE: dict[str, Any] = {
    **sns.axes_style("whitegrid"),
    **sns.plotting_context("paper"),
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans"],
    "pdf.fonttype": 42,
    "ps.fonttype": 42,
    "svg.hashsalt": "pflrepro",
    "figure.dpi": 100,
    "savefig.dpi": 200,
    "legend.frameon": False,
}
#: Colours of the methods, in order (seaborn's colour-blind safe palette).
METHOD_PALETTE = "colorblind"
#: Colours of the client distributions (groups); ``-1`` (no group) is grey.
GROUP_PALETTE = "Set2"
NO_GROUP_COLOUR = (0.8, 0.8, 0.8)
#: Saved-figure metadata: no creation date, so PDFs are reproducible.
PDF_METADATA: dict[str, Any] = {"CreationDate": None}
#: Free space kept at each edge of the canvas and beside each legend (inches).
MARGIN = 0.06


# --------------------------------------------------------------------------- figure
def new_figure(width: float, height: float) -> Figure:
    """Return a constrained-layout figure drawn by the Agg canvas (no pyplot).

    ``width`` and ``height`` are for the panels; :func:`finish` adds the legends' room.
    """
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


@dataclass(frozen=True)
class LegendSpec:
    """A figure legend that :func:`finish` places and fits.

    ``loc`` is an ``"outside ..."`` location of :meth:`matplotlib.figure.Figure.legend`:
    a legend below or above the panels (``"outside lower center"``) gets at most
    ``most_cols`` columns, as many as the figure's width holds; one at a side
    (``"outside right upper"``) has one column. ``options`` go to the legend as given.
    """

    handles: Sequence[Any]
    labels: Sequence[str]
    title: str
    loc: str = "outside lower center"
    most_cols: int = 6
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def at_side(self) -> bool:
        """Whether the legend sits left or right of the panels (else below or above)."""
        return self.loc.split()[1] in ("left", "right")


def save_figure(fig: Figure, pdf: PathLike, png: PathLike) -> None:
    """Save ``fig`` to ``pdf`` and ``png``, each atomically with its digest record.

    The metadata are reproducible (no creation date).
    """
    with matplotlib.rc_context(STYLE):
        with atomic_digested_path(pdf) as tmp:
            fig.savefig(tmp, format="pdf", metadata=PDF_METADATA)
        with atomic_digested_path(png) as tmp:
            fig.savefig(tmp, format="png")


def finish(fig: Figure, pdf: PathLike, png: PathLike,
           legends: Sequence[LegendSpec] = ()) -> None:
    """Add ``legends`` to ``fig``, fit everything on the canvas, and save it (PDF, PNG).

    Legends at a side come first and widen the figure by their width; legends below
    or above then get the columns the (final) width holds, their titles wrapped to it,
    and make the figure taller by their height. Finally the figure grows until every
    drawn artist lies on the canvas (a long panel label, a wide single legend entry).
    Text is measured as the PNG draws it and at the figure's own resolution: hinted
    glyphs do not scale exactly with the resolution.
    """
    with matplotlib.rc_context(STYLE):
        dpi = fig.dpi
        png_dpi = max(dpi, float(STYLE["savefig.dpi"]))
        fig.set_dpi(png_dpi)
        renderer = fig.canvas.get_renderer()
        ordered = sorted(legends, key=lambda spec: not spec.at_side)
        placed = [_place_legend(fig, spec, renderer) for spec in ordered]
        width, height = fig.get_size_inches()
        for side in ("left", "right"):
            boxes = [leg.get_window_extent(renderer) for leg, spec in zip(placed, ordered,
                                                                         strict=True)
                     if spec.at_side and spec.loc.split()[1] == side]
            if boxes:
                width += max(b.width for b in boxes) / fig.dpi + MARGIN
                height = max(height, sum(b.height / fig.dpi + MARGIN for b in boxes) + MARGIN)
        for leg, spec in zip(placed, ordered, strict=True):
            if not spec.at_side:
                height += leg.get_window_extent(renderer).height / fig.dpi + MARGIN
        fig.set_size_inches(width, height)
        for _ in range(3):  # what fits at one resolution may not quite fit at the other
            grown = False
            for resolution in (png_dpi, dpi):
                fig.set_dpi(resolution)
                grown |= _grow_to_fit(fig)
            if not grown:
                break
    save_figure(fig, pdf, png)


def _place_legend(fig: Figure, spec: LegendSpec, renderer: Any) -> Legend:
    """Add the legend of ``spec`` to ``fig``; one below or above fits the figure's width."""
    if spec.at_side:
        return fig.legend(spec.handles, spec.labels, loc=spec.loc, title=spec.title,
                          **spec.options)
    room = fig.bbox.width - 2 * MARGIN * fig.dpi
    cols = max(1, min(len(spec.labels), spec.most_cols))
    title = spec.title
    while True:
        legend = fig.legend(spec.handles, spec.labels, loc=spec.loc, ncols=cols, title=title,
                            **spec.options)
        if legend.get_window_extent(renderer).width <= room:
            return legend
        title_width = legend.get_title().get_window_extent(renderer).width
        if title_width > room and title == spec.title:
            longest = max(len(line) for line in title.splitlines())
            width = max(8, int(longest * room / title_width))  # each line of the title
            title = "\n".join(textwrap.fill(line, width) for line in title.splitlines())
        elif cols > 1:
            cols -= 1
        else:  # one entry wider than the figure: _grow_to_fit widens the figure
            return legend
        legend.remove()


def _grow_to_fit(fig: Figure, tries: int = 4) -> bool:
    """Enlarge ``fig`` until its tight bounding box (all drawn artists) is on the canvas.

    Returns whether the figure had to grow.
    """
    grown = False
    for _ in range(tries):
        fig.canvas.draw()
        box = fig.get_tightbbox(fig.canvas.get_renderer())
        width, height = fig.get_size_inches()
        more_x = max(0.0, -box.x0) + max(0.0, box.x1 - width)
        more_y = max(0.0, -box.y0) + max(0.0, box.y1 - height)
        if more_x <= 0 and more_y <= 0:
            break
        grown = True
        fig.set_size_inches(width + more_x + (2 * MARGIN if more_x else 0.0),
                            height + more_y + (2 * MARGIN if more_y else 0.0))
    return grown


# --------------------------------------------------------------------------- text, panels
def wrap(text: str, width: int = 34) -> str:
    """Wrap a long label (partition ids are long) after ``-`` or at spaces."""
    text = str(text)
    if len(text) <= width:
        return text
    lines = textwrap.wrap(text.replace("-", "- "), width, break_long_words=True)
    return "\n".join(line.replace("- ", "-") for line in lines)


def grid(n: int, max_cols: int = 3) -> tuple[int, int]:
    """Rows and columns of a facet grid holding ``n`` panels."""
    cols = max(1, min(n, max_cols))
    return math.ceil(n / cols), cols


def facets(n: int, width: float, height: float, **subplots: Any) -> tuple[Figure, list[Any], int]:
    """A figure of ``n`` panels on a :func:`grid`, each ``width`` x ``height`` inches.

    Returns the figure, its ``n`` axes in reading order (the grid's unused cells
    removed) and the number of columns; ``subplots`` go to
    :meth:`matplotlib.figure.Figure.subplots` (e.g. ``sharey=True``).
    """
    rows, cols = grid(n)
    fig = new_figure(width * cols, height * rows)
    axes = list(fig.subplots(rows, cols, squeeze=False, **subplots).ravel())
    for ax in axes[n:]:
        ax.remove()
    return fig, axes[:n], cols


def group_colours(groups: Sequence[int]) -> dict[int, tuple[float, float, float]]:
    """Map each distribution id to a colour (``-1``: grey), stable for a given set of ids."""
    real = sorted({g for g in groups if g >= 0})
    palette = sns.color_palette(GROUP_PALETTE, max(len(real), 1))
    colours = {g: tuple(palette[i % len(palette)]) for i, g in enumerate(real)}
    colours[-1] = NO_GROUP_COLOUR
    return colours


def strip(ax: Any, codes: np.ndarray, colours: Mapping[int, Any], vertical: bool) -> None:
    """Draw a one-cell-wide strip coloured by group ids ``codes`` on ``ax``."""
    keys = sorted(colours)
    cmap = ListedColormap([colours[g] for g in keys])
    index = np.array([keys.index(int(g)) for g in codes], dtype=float)
    n = len(codes)
    if vertical:
        ax.pcolormesh(np.arange(2), np.arange(n + 1), index[:, None], cmap=cmap,
                      vmin=-0.5, vmax=len(keys) - 0.5, edgecolors="white", linewidth=0.5)
        ax.set_xlim(0, 1)
        ax.set_ylim(n, 0)
    else:
        ax.pcolormesh(np.arange(n + 1), np.arange(2), index[None, :], cmap=cmap,
                      vmin=-0.5, vmax=len(keys) - 0.5, edgecolors="white", linewidth=0.5)
        ax.set_xlim(0, n)
        ax.set_ylim(1, 0)
    ax.grid(False)
    for spine in ax.spines.values():
        spine.set_visible(False)
    ax.set_xticks([])
    ax.set_yticks([])


# --------------------------------------------------------------------------- runs
def check_client(client: Any, what: str) -> int:
    """Return ``client`` as an int, raising ``ValueError`` unless it is a client id >= 0."""
    if isinstance(client, bool) or not isinstance(client, int | np.integer) or client < 0:
        raise ValueError(f"{what}: client must be a client id (an int >= 0), got {client!r}")
    return int(client)


def run_groups(agg: pd.DataFrame) -> pd.DataFrame:
    """Each client's distribution id per run: config columns, ``client``, ``group``."""
    rows = agg[(agg["metric"] == GROUP) & (agg["client"] >= 0) & (agg["peer"] < 0)]
    rows = rows.drop_duplicates([*RUN_KEYS, "client"])
    return rows[[*RUN_KEYS, "client", "value"]].rename(columns={"value": "group"})


def run_mask(frame: pd.DataFrame, run: Mapping[str, Any]) -> pd.Series:
    """Boolean mask of the rows of ``frame`` that belong to ``run``."""
    mask = pd.Series(True, index=frame.index)
    for key in RUN_KEYS:
        mask &= frame[key] == run[key]
    return mask


def first_run_rows(prow: pd.DataFrame, what: str, method: str,
                   partition: str) -> tuple[dict[str, Any], pd.DataFrame]:
    """The first run of one (method, partition) and its rows; mixed settings raise.

    The first run is the one with the lowest split seed, then train seed (then the
    other config columns).
    """
    settings = prow[list(SETTING_KEYS)].drop_duplicates()
    if len(settings) > 1:
        raise ValueError(f"{what}: method {method!r}, partition {partition!r} mixes "
                         f"settings {settings.to_dict('records')}; filter the aggregate")
    runs = prow[list(RUN_KEYS)].drop_duplicates()
    runs = runs.sort_values(["split_seed", "train_seed",
                             *[k for k in RUN_KEYS if k not in ("split_seed", "train_seed")]])
    run = runs.iloc[0].to_dict()
    return run, prow[run_mask(prow, run)]
