"""One client's weights ``w_ij`` against round (FedeRiCo Fig. 7), per method and partition."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import matplotlib
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from pflrepro.reporting.figures.common import (
    STYLE,
    LegendSpec,
    PathLike,
    check_client,
    finish,
    first_run_rows,
    grid,
    group_colours,
    new_figure,
    run_groups,
    run_mask,
    wrap,
)
from pflrepro.config.figure_kinds import FigureKind
from pflrepro.reporting.accuracy import check_aggregate, run_label
from pflrepro.reporting.ordering import display_labels, order_values
from pflrepro.reporting.names import method_name
from pflrepro.store.results import WEIGHT

KIND = FigureKind(
    name="client_weights", file="client{client}-weights", draw="plot_client_weights_over_rounds",
    caption="Weights client {client} gives its peers over rounds, one panel per method.",
    label="client {client} weights", input="recording", options=("client", "methods"),
    records=WEIGHT)


@dataclass(frozen=True)
class ClientWeightSeries:
    """The data of one panel of :func:`plot_client_weights_over_rounds`."""

    method: str
    partition: str
    #: Config of the run shown (the lowest split seed, then train seed).
    run: dict[str, Any]
    #: The client ``i`` whose weights are shown.
    client: int
    #: Its distribution id (``-1``: none or unknown).
    client_group: int
    #: ``w_ij`` per round: index = rounds (ascending), columns = peer ids ``j``.
    weights: pd.DataFrame
    #: Distribution id of each column, or ``None`` when peers are not clients.
    peer_groups: list[int] | None
    #: Whether the client and every peer that is a client had a ``group`` row.
    groups_known: bool


def client_weight_series(agg: pd.DataFrame, client: int = 0, *,
                         methods_order: Sequence[str] | None = None, metric: str = WEIGHT,
                         partitions_order: Sequence[str] | None = None,
                         peers_are_clients: bool | None = None,
                         ) -> list[list[ClientWeightSeries | None]]:
    """Return client ``i``'s weights ``w_ij`` over rounds, per partition and method.

    The result has one list per partition (``partitions_order``, then natural order)
    holding one entry per method with ``metric`` rows (``methods_order``, then natural
    order): the weights of the run with the lowest split seed, then train seed, of that
    (method, partition), or ``None`` when the method has no run there. Peers that are
    clients (``peers_are_clients``; default: whether the run's peer ids equal its
    client ids) are ordered by (group, id) when every group is known, else by id.

    Raises ``ValueError`` naming the method when ``methods_order`` names a method
    without ``metric`` rows or the aggregate has none at all, naming the client when
    it has no rows in a run shown, and when a (method, partition) mixes settings or a
    (round, peer) is given twice.
    """
    what = "plot_client_weights_over_rounds"
    check_aggregate(agg, (), what)
    client = check_client(client, what)
    rows = agg[(agg["metric"] == metric) & (agg["client"] >= 0) & (agg["peer"] >= 0)]
    having = sorted({str(m) for m in rows["method"].unique()})
    if methods_order is not None and not isinstance(methods_order, str):
        lacking = [str(m) for m in methods_order if str(m) not in having]
        if lacking:
            raise ValueError(f"{what}: no {metric!r} rows for method(s) {lacking} (methods "
                             f"with {metric!r} rows: {having})")
    if rows.empty:
        methods_present = sorted({str(m) for m in agg["method"].dropna().unique()})
        raise ValueError(f"{what}: no {metric!r} rows for any method (methods in the "
                         f"aggregate: {methods_present})")
    methods = order_values(having, methods_order, f"{what} methods")
    partitions = order_values(rows["partition"], partitions_order, f"{what} partitions")
    groups_all = run_groups(agg)

    out: list[list[ClientWeightSeries | None]] = []
    for partition in partitions:
        line: list[ClientWeightSeries | None] = []
        for method in methods:
            prow = rows[(rows["method"] == method) & (rows["partition"] == partition)]
            if prow.empty:
                line.append(None)
                continue
            run, mine = first_run_rows(prow, what, method, partition)
            rows_i = mine[mine["client"] == client]
            if rows_i.empty:
                have = sorted(int(c) for c in mine["client"].unique())
                raise ValueError(f"{what}: no {metric!r} rows for client {client} in the "
                                 f"run shown of method {method!r} ({run_label(run)}; "
                                 f"clients with rows: {have})")
            dup = rows_i.duplicated(["round", "peer"])
            if dup.any():
                row = rows_i[dup].iloc[0]
                raise ValueError(f"{what}: {metric!r} of client {client}, peer "
                                 f"{int(row['peer'])} is given twice at round "
                                 f"{int(row['round'])} of method {method!r}, partition "
                                 f"{partition!r}")
            weights = rows_i.pivot(index="round", columns="peer", values="value")
            weights = weights.sort_index()
            weights.index = weights.index.astype("int64")
            clients = {int(c) for c in mine["client"].unique()}
            peers = sorted(int(p) for p in weights.columns)
            as_clients = (set(peers) == clients if peers_are_clients is None
                          else bool(peers_are_clients))
            grp = groups_all[run_mask(groups_all, run)]
            groups = {int(c): int(g) for c, g in zip(grp["client"], grp["group"], strict=True)}
            known = client in groups and (not as_clients or all(p in groups for p in peers))
            if as_clients and known:
                peers = sorted(peers, key=lambda p: (groups[p] < 0, groups[p], p))
            weights = weights.reindex(columns=peers)
            weights.index.name, weights.columns.name = "round", "peer"
            line.append(ClientWeightSeries(
                method=method, partition=partition, run=run, client=client,
                client_group=groups.get(client, -1), weights=weights,
                peer_groups=[groups.get(p, -1) for p in peers] if as_clients else None,
                groups_known=known))
        out.append(line)
    return out


def spread(ys: Sequence[float], gap: float) -> list[float]:
    """Positions near sorted ``ys``, at least ``gap`` apart, each crowd centred on its ys."""
    crowds: list[list[float]] = []  # original ys of labels placed as one evenly spaced run

    def start(crowd: list[float]) -> float:
        return sum(crowd) / len(crowd) - gap * (len(crowd) - 1) / 2

    for y in ys:
        crowds.append([y])
        while len(crowds) > 1 and (start(crowds[-1])
                                   < start(crowds[-2]) + gap * len(crowds[-2]) - 1e-12):
            last = crowds.pop()
            crowds[-1].extend(last)
    return [start(c) + gap * k for c in crowds for k in range(len(c))]


def _label_line_ends(ax: Any, x: float, ends: Sequence[tuple[float, str, Any]],
                     gap: float) -> None:
    """Write labels right of ``x`` near heights ``ends`` (y, text, colour), ``gap`` apart."""
    ends = sorted(ends, key=lambda e: e[0])
    for (_, text, colour), y_text in zip(ends, spread([e[0] for e in ends], gap), strict=True):
        ax.annotate(text, xy=(x, y_text), xytext=(4, 0), textcoords="offset points",
                    fontsize=6.5, color=colour, va="center", ha="left",
                    annotation_clip=False)


def _draw_series(ax: Any, s: ClientWeightSeries, colours: Mapping[int, Any],
                 comp_colours: Mapping[int, Any], unit: bool) -> None:
    """Draw one panel: a line per peer ``j``, the line ends labelled with ``j``."""
    x = s.weights.index.to_numpy()
    ends = []
    peers = [int(p) for p in s.weights.columns]
    peer_group = dict(zip(peers, s.peer_groups or [-1] * len(peers), strict=True))
    # draw same-distribution peers over the others, and the client itself on top
    order = sorted(peers, key=lambda p: (p == s.client, s.peer_groups is not None
                                         and peer_group[p] == s.client_group))
    for peer in order:
        y = s.weights[peer].to_numpy(dtype=float)
        if s.peer_groups is None:
            colour, style, lw = comp_colours[peer], "-", 1.3
        else:
            g = peer_group[peer]
            same = s.groups_known and g == s.client_group and g >= 0
            colour = "black" if peer == s.client else colours[g]
            style = "-" if peer == s.client or same else "--"
            lw = 2.0 if peer == s.client else (1.6 if same else 1.0)
        ax.plot(x, y, color=colour, ls=style, lw=lw, marker="o" if len(x) <= 12 else None,
                ms=2.5)
        last = y[~np.isnan(y)]
        if len(last) and last[-1] >= 0.05:
            ends.append((float(last[-1]), str(int(peer)), colour))
    if unit:
        ax.set_ylim(-0.03, 1.03)
    width = float(x.max() - x.min()) if len(x) > 1 else 1.0
    ax.set_xlim(float(x.min()) - 0.02 * width, float(x.max()) + 0.10 * width)
    _label_line_ends(ax, float(x.max()), ends, gap=0.06 if unit else 0.0)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    where = (f"client {s.client}: distribution {s.client_group}"
             if s.client_group >= 0 else f"client {s.client}")
    ax.set_title(f"{method_name(s.method)}\n{where}; seeds {s.run['split_seed']}/{s.run['train_seed']}")


def plot_client_weights_over_rounds(agg: pd.DataFrame, pdf: PathLike, png: PathLike,
                                    client: int = 0, *,
                                    methods_order: Sequence[str] | None = None,
                                    metric: str = WEIGHT,
                                    partitions_order: Sequence[str] | None = None,
                                    peers_are_clients: bool | None = None,
                                    labels: Mapping[str, str] | None = None) -> None:
    """Plot client ``i``'s weights ``w_ij`` against round, one line per peer ``j``.

    FedeRiCo Fig. 7 style (data from :func:`client_weight_series`): one panel per
    method with ``metric`` rows (e.g. the β variants), one row of panels per partition
    (a single partition's panels wrap at four per row); each panel shows the run with
    the lowest split seed, then train seed. When the peers are clients, lines are
    coloured by the peer's distribution (``group``): solid for peers of the client's
    own distribution, dashed for the others, and black for ``j = i``; otherwise
    (mixture components, e.g. FedEM; ``peers_are_clients`` as in
    :func:`client_weight_series`) each peer has its own colour. Lines ending at 0.05
    or more are labelled with ``j``. ``labels`` maps partition ids to display labels.

    Raises ``ValueError`` as :func:`client_weight_series` does (naming the method
    without ``metric`` rows, or the missing client).
    """
    by_partition = client_weight_series(agg, client, methods_order=methods_order,
                                        metric=metric, partitions_order=partitions_order,
                                        peers_are_clients=peers_are_clients)
    partitions = [next(s for s in line if s is not None).partition for line in by_partition]
    methods = [next(line[k] for line in by_partition if line[k] is not None).method
               for k in range(len(by_partition[0]))]
    shown = display_labels(partitions, labels, "plot_client_weights_over_rounds labels")
    series = [s for line in by_partition for s in line if s is not None]
    all_groups = sorted({g for s in series if s.peer_groups is not None for g in s.peer_groups}
                        | {s.client_group for s in series if s.peer_groups is not None},
                        key=lambda g: (g < 0, g))
    colours = group_colours(all_groups)
    components = sorted({int(p) for s in series if s.peer_groups is None
                         for p in s.weights.columns})
    comp_colours = dict(zip(components, sns.color_palette("tab10", max(len(components), 1)),
                            strict=False))
    values = np.concatenate([s.weights.to_numpy(dtype=float).ravel() for s in series])
    unit = bool(np.nanmin(values) >= 0.0 and np.nanmax(values) <= 1.0)
    symbol = f"$w_{{{client}j}}$" if metric == WEIGHT else f"{metric} ({client}, j)"

    if len(by_partition) == 1:
        cells = [(k // min(len(methods), 4), k % min(len(methods), 4), by_partition[0][k])
                 for k in range(len(methods))]
        n_rows, n_cols = grid(len(methods), 4)
    else:
        cells = [(r, c, by_partition[r][c]) for r in range(len(by_partition))
                 for c in range(len(methods))]
        n_rows, n_cols = len(by_partition), len(methods)

    with matplotlib.rc_context(STYLE):
        width = max(3.3 * n_cols, 6.0)
        fig = new_figure(width, 2.7 * n_rows + 0.4)
        axes = fig.subplots(n_rows, n_cols, sharey=unit, squeeze=False)
        for r, c, s in cells:
            ax = axes[r][c]
            if s is None:
                ax.text(0.5, 0.5, f"no {method_name(methods[c])} run", ha="center", va="center",
                        transform=ax.transAxes, color="0.4")
                ax.set_xticks([])
                ax.set_yticks([])
                if c == 0:
                    ax.set_ylabel(wrap(shown[partitions[r]]))
                continue
            _draw_series(ax, s, colours, comp_colours, unit)
            if c == 0:
                ax.set_ylabel(symbol if len(by_partition) == 1
                              else f"{wrap(shown[s.partition])}\n{symbol}")
            last_row = len(by_partition) == 1 and (r + 1) * n_cols + c >= len(methods)
            if r == n_rows - 1 or last_row:
                ax.set_xlabel("round")
        for k in range(len(cells), n_rows * n_cols):
            axes[k // n_cols][k % n_cols].remove()
        title = f"weights {symbol} of client {client} over rounds (seeds: split/train)"
        if len(by_partition) == 1:
            title = f"{shown[partitions[0]]}: {title}"
        fig.suptitle(wrap(title, int(width * 13)))
    handles: list[Any] = []
    names: list[str] = []
    if any(s.peer_groups is not None for s in series):
        handles += [Line2D([], [], color="black", lw=2.0),
                    Line2D([], [], color="0.45", lw=1.6),
                    Line2D([], [], color="0.45", lw=1.0, ls="--")]
        names += [f"j = {client} (the client itself)", "same distribution as the client",
                  "other distribution"]
        handles += [Patch(facecolor=colours[g]) for g in all_groups]
        names += [f"peer in distribution {g}" if g >= 0 else "peer distribution unknown"
                  for g in all_groups]
    if components:
        handles += [Line2D([], [], color=comp_colours[p], lw=1.3) for p in components]
        names += [f"component {p}" for p in components]
    finish(fig, pdf, png, [LegendSpec(handles, names, f"peer j (line ends: j where the final "
                                                      f"{symbol} ≥ 0.05)", most_cols=4)])
