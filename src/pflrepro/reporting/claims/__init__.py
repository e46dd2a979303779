"""The papers' qualitative claims, checked against aggregated results.

Three parts: :mod:`.parse` reads a claims file (and the design a check expects,
from the config) into :class:`~.parse.Claim` objects; :mod:`.checks` evaluates them
against an aggregate into one row per claim and experiment, with a verdict;
:mod:`.writer` writes those rows as Markdown (opening with a summary) and CSV.
This file imports nothing.

A claims file (``config/claims.yaml``) states the tie tolerance of each unit
(``ties``, below) and lists each claim as data: the paper, where it is made, the claim
in our words, the experiments it applies to at each scale (``paper`` and ``cpu``, names
from ``config.yaml``), optionally what its row rests on (``by_design``, ``selected_by``:
below), and a *check*, one of a few typed predicates (nothing is evaluated as code):

``compare``
    method ``a`` ``op`` method ``b`` on an accuracy ``metric``, in every column (or,
    with ``quantifier: any``, in some column); ``tolerance`` in percentage points.
``above_all``
    each of ``methods`` above each of ``baselines`` (``op`` ``>``, the default, or
    ``>=``), per column; with ``pool: mean``, the mean of ``methods`` above the mean
    of ``baselines`` (a generic claim about two families of methods).
``within``
    ``|m - reference| <= tolerance`` for each of ``methods``, per column.
``trend``
    ``method``'s accuracy with the most distributions is below (``decreasing``) or
    above (``increasing``) its accuracy with the fewest, per experiment.
``weight_mass``
    the mean over clients of the share of a client's final-round *peer* weight
    (its weight on itself excluded) that is on peers of its own distribution is at
    least ``threshold``. Only clients with a group-mate (another client of their
    distribution) count: a client alone in its distribution has no such peer (it is
    ``self_weight``'s). A client with a group-mate but no weight on any peer (no
    collaboration) has share 0, so identity weights fail.
``self_weight``
    the mean over the clients alone in their distribution of the share of their
    final-round weight on themselves is at least ``threshold``. Only the runs that
    have such a client count (n is their number; they are resampled on their own);
    a column none of whose runs has one is left out, and the row is undecidable when
    no column has one.
``weight_support``
    each client needs few models: the mean over clients of the number of models
    (itself included) with final-round weight at least ``threshold`` is at most the
    mean size of the client's distribution (itself included). Unit ``models``.
``weight_distance``
    the mean over entries of ``|w_ij of a - w_ij of b|`` at the final round, per run
    (runs of ``a`` and ``b`` paired by seed pair), averaged over runs, is at most
    ``tolerance`` (in weight).
``group_contrast``
    the mean final-round weight ``w_ij`` (``i != j``) between clients of the same
    distribution is at least ``min_ratio`` (> 1) times the mean weight between
    clients of different ones, and exceeds it by at least ``min_gap`` (the contrast
    must be material: a near-identity matrix has a large ratio of weights it barely
    uses). Margin: the smaller of ``within - min_ratio * across`` and ``within -
    across - min_gap``; the numbers give the ratio and the gap.
``weight_compare``
    a weight ``statistic`` of method ``a`` ``op`` that of method ``b``: ``peak``
    (the mean over clients of the largest share of a client's final-round weight),
    ``variation`` (the sum over rounds of the mean ``|w_ij(t) - w_ij(t-1)|``) or
    ``same_share`` (``weight_mass``'s statistic: the share of peer weight on
    same-distribution peers, clients with a group-mate). ``peak
    a > b`` is undecidable in a column where ``b``'s peak is already 1 in every run.
``record_peak``
    the mean over the rows of a recorded matrix (``record``: ``weight``,
    ``gate_mass`` or ``expert_posterior``, FedMix's q(z | y = c), one row per class)
    of the row's largest share at the final round is at least ``threshold``.
``clusters_used``
    fewer distinct cluster ids at the last round (Clustered FL's ``cluster`` rows)
    than the run has distributions (margin: distributions - clusters - 1, since on whole
    counts "fewer" is "at most one fewer": all clusters used fails by one).
``across_experiments``
    ``|method in the first experiment - reference in the second| <= tolerance`` (pp,
    ``metric``) in each column (partition) of the first experiment, which the second
    must have too: e.g. a table with heterogeneous models against the same design's
    table with homogeneous ones. The claim names exactly two experiments per scale
    with ``scope: together``; their designs must have the same seed pairs, and the
    runs are paired by seed pair (one bootstrap draw for both experiments).
    ``reference`` defaults to ``method``.
``components_used``
    fewer distinct components are some client's largest final-round weight than the
    partition has distributions (FedEM's mixture weights); margin as ``clusters_used``.
``communication_across``
    as ``across_experiments`` (two experiments, runs paired by seed pair) for traffic:
    ``reference`` in the second experiment communicated ``op`` ``factor`` times as many
    scalars as ``method`` in the first; margin ``reference / method - factor``.
``unchecked``
    a claim the runs cannot check, with its ``reason``: ``undecidable`` (``missing``
    for a planned claim), never holds or fails.
``communication_ratio``
    each of ``baselines`` communicated at least ``factor`` times as many scalars as
    ``method`` (``op`` ``>=``; ``>``: more than), per column: the total of a run's
    ``comm_up`` and ``comm_down`` rows over clients and rounds
    (:mod:`pflrepro.reporting.communication`'s ``total``), mean over runs; margin
    ``baseline / method - factor`` (unit ``ratio``). Undecidable where ``method``
    communicated nothing.

A *column* is one partition of one experiment (a column of the paper's table); the
number of distributions of a column is the number of distinct non-negative client
``group`` ids of its runs, and ``distributions: [4]`` restricts a check to columns
with four. Accuracy metrics are those of :mod:`pflrepro.reporting.accuracy`:
``weighted_final``, ``mean_bmta`` and ``mean_final`` are the table cells (mean over
runs, in percent; the same function computes both, so the numbers agree), and
``weighted_at`` is the weighted accuracy at the first evaluated round at or after
``round_fraction`` of the run's last round (an early-accuracy reading of the
convergence-speed claims), averaged over runs. Weight statistics are computed per
run and averaged over the runs of a column.

Each claim gives one row per experiment at the chosen scale (``scope: each``, the
default) or one row for all of them together (``scope: together``, for claims about
a whole table such as "in some column"). A claim that names no experiment at a scale
(e.g. one about CIFAR-100, whose experiments exist only at the paper scale) gives no
row at that scale: it is not a claim about that scale's designs, so it is neither
checked nor counted there (it keeps its rows at the scales that name experiments). A
claim whose named experiments are not in the config is still a row, ``missing``.

The *design* (:class:`.parse.Design`, from the config: :func:`.parse.design_of`) says what a check
needs: each experiment's partitions (columns), methods and (split seed, training
seed) pairs. A check reads every designed column, never only those present. Each
term of a check (e.g. one method against one baseline in one column) pairs the runs
of its cells by seed pair; its margin is signed, in the unit of the check (``pp``:
percentage points of accuracy; ``weight``; ``components``), positive when the claim
holds by that much, and computed from the means over runs (the tables' numbers).
Within a comparison the margin is the worst column (``all``), the best (``any``) or,
for ``compare`` and ``above_all``, the mean over the columns (``mean``: e.g. "superior
on the table" read as better on the table's average); across comparisons, the worst.
A row's *verdict* (:data:`.parse.VERDICTS`) is

``missing``
    a designed column, cell or experiment the check needs has no runs;
``incomplete``
    every cell has runs, but some fewer than designed;
``undecidable``
    the data are complete but the check is not defined on them (no distribution
    ids, or a peak weight already at its bound), or the claim is ``unchecked`` (the
    runs do not record what it is about); the reason is in the row;
``undecidable`` (ceiling, floor)
    every compared value is at its metric's ceiling, or every one at its floor, in
    every run of every compared cell (accuracy 100 % or 0 %; a share 1 or 0): no
    difference can show, so the row neither holds nor fails;
``holds``
    with ``n`` >= 2 runs per cell, the whole :data:`.checks.LEVEL` interval of the margin is
    above zero (at or above it for a non-strict predicate): a paired percentile
    bootstrap that resamples the seed pairs of each experiment (the same draw for every
    cell of an experiment, so method ``a`` and method ``b`` stay paired),
    :data:`.checks.RESAMPLES` resamples from a generator seeded by the claim and its
    experiments (byte-identical output);
``fails``
    with ``n`` >= 2, the whole interval is below zero (its top ``< 0``);
``undecidable`` (tie)
    a strict predicate whose margin and whole interval are zero (within the tie
    tolerance): equal results neither show nor refute "more" or "less";
``inconclusive``
    otherwise: the interval contains the threshold, or ``n = 1``.

So absent or partial data never make a claim hold or fail. Strict predicates
(``>``, ``<``, ``group_contrast``, ``trend``) need a margin above zero; the others
hold at zero.

*Ties.* A margin or an end of its interval closer to zero than the tie tolerance of
its unit counts as zero. The claims file states each unit's tolerance with its reason
(``ties``: unit -> ``value``, ``reason``), at least the unit's resolution
(:data:`.parse.RESOLUTION`); for ``pp`` it is ``one test row`` of the column: 100 /
the column's test rows (its clients' ``n_test`` summed, the fewest over its runs), the
coarsest over the columns a row reads, so a difference of the means smaller than one
test row is a tie.

*Headline claims.* A claim marked ``headline: true`` backs a number the README leads
with; the file's ``power`` block (``cap``, ``reason``) caps its experiments' seed pairs.
Its rows get ``pairs_needed`` and ``power`` (:mod:`.power`): the seed pairs at which its
interval would clear the threshold at the spread observed, and whether its experiments
have them ("underpowered" when they have fewer and the rule asks for no more than the
cap); the Markdown lists the headline rows after the summary.

*Basis.* A row's ``basis`` (:data:`.parse.BASES`) says what its verdict rests on:
``independent``; ``by design``, when the protocol fixes the outcome whatever the runs
learn (the claim's ``by_design`` gives the arithmetic, which opens the row's numbers);
``selection``, when the claim's statement was used to choose a reading, default or
design (``selected_by`` names the choice and where it is). The summary counts the
verdicts of independent rows and the other two apart.
"""
