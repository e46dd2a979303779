"""Targets named on the command line that the loaded config cannot build: one line each.

Snakemake meets a wrong name in a target path (an experiment, method, partition or data
set the config does not have; the tuning of an experiment that does not tune) either
inside a rule's input function, where the error comes wrapped in its
``InputFunctionException`` and a traceback, or not at all ("No rule to produce"). The
workflow reads the named targets before it plans (``workflow/rules/hints.smk``) and stops
with the lines of :func:`target_problems`: the target, the name that is wrong, a near
miss and the names there are.

Only names are checked: a path whose names all exist is left to Snakemake, so a target
this module does not know the shape of is never refused here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Sequence

from pflrepro.choices import did_you_mean
from pflrepro.config import WorkflowConfig
from pflrepro.config.figure_kinds import KINDS
from pflrepro.pipeline.workflow.figures import recording
from pflrepro.pipeline.workflow.targets import partitions_by_dataset

#: How many names a line lists before it says how many there are.
LISTED = 12

_RUN = re.compile(r"results/runs/([^/]+)/([^/]+)/([^/]+)/split\d+-seed\d+\.parquet")
_METHOD_AGGREGATE = re.compile(r"results/aggregate/([^/]+)/([^/]+)\.parquet")
_AGGREGATE = re.compile(r"results/aggregate/([^/]+)\.parquet")
_PARTITION = re.compile(r"results/(?:partitions|public)/([^/]+)/([^/]+)/[^/]+")
_PARTITION_FIGURE = re.compile(r"figures/partitions/([^/]+)/([^/]+)-split\d+\.(?:pdf|png)")
_DATA = re.compile(r"results/data/([^/]+)/[^/]+")
_TUNING = re.compile(r"results/tuning/([^/]+)/(.+)")
_TUNING_TABLE = re.compile(r"([^/]+)\.(?:md|csv|json|tex)")
_TUNING_RUN = re.compile(r"runs/([^/]+)/([^/]+)/.+")
_TABLE = re.compile(r"results/tables/([^/]+)\.[a-z]+")
_FIGURE = re.compile(r"figures/([^/-]+)-([^/]+)\.(?:pdf|png)")


def _names(known: Iterable[str]) -> str:
    names = sorted(set(known))
    if len(names) <= LISTED:
        return ", ".join(names)
    return ", ".join(names[:LISTED]) + f", … ({len(names)} in all)"


def _unknown(what: str, value: str, known: Collection[str], where: str) -> str:
    return (f"{where} has no {what} {value!r}{did_you_mean(value, known)}; its {what}s: "
            f"{_names(known) or 'none'}")


class _Check:
    """The names of one config, and the line for a target that names one it lacks."""

    def __init__(self, cfg: WorkflowConfig, loaded: str, datasets: Collection[str],
                 outputs: Callable[[], Collection[str]]) -> None:
        self.cfg = cfg
        self.loaded = loaded
        self.datasets = datasets
        self._outputs = outputs
        self._built: Collection[str] | None = None

    @property
    def outputs(self) -> Collection[str]:
        """Every output of the config's rule ``all`` (computed once, when first needed)."""
        if self._built is None:
            self._built = set(self._outputs())
        return self._built

    def experiment(self, name: str) -> str | None:
        if name in self.cfg.experiments:
            return None
        return _unknown("experiment", name, self.cfg.experiments, self.loaded)

    def method(self, experiment: str, method: str) -> str | None:
        known = self.cfg.experiments[experiment].methods
        if method in known:
            return None
        return _unknown("method", method, known, f"experiment {experiment!r}")

    def partition(self, experiment: str, partition: str) -> str | None:
        known = [p.id for p in self.cfg.experiments[experiment].partitions]
        if partition in known:
            return None
        return _unknown("partition", partition, known, f"experiment {experiment!r}")

    def data_partition(self, dataset: str, partition: str) -> str | None:
        """A partition of ``dataset`` that no experiment of the config uses."""
        used = partitions_by_dataset(self.cfg)
        if dataset not in used:
            return (f"no experiment of {self.loaded} uses data set {dataset!r}"
                    f"{did_you_mean(dataset, used)}; its data sets: {', '.join(sorted(used))}")
        known = used[dataset]
        if partition in known:
            return None
        return (f"no experiment of {self.loaded} uses partition {partition!r} of {dataset}"
                f"{did_you_mean(partition, known)}; its partitions of {dataset}: "
                f"{', '.join(sorted(known))}")

    def dataset(self, name: str) -> str | None:
        if name in self.datasets:
            return None
        return _unknown("data set", name, self.datasets, "pflrepro")

    def tuning(self, experiment: str, rest: str) -> str | None:
        problem = self.experiment(experiment)
        if problem:
            return problem
        tune = self.cfg.experiments[experiment].tune
        if tune is None:
            tuned = [n for n, e in self.cfg.experiments.items() if e.tune is not None]
            return (f"experiment {experiment!r} of {self.loaded} tunes nothing (no `tune:` "
                    f"block); experiments that tune: {_names(tuned) or 'none'}")
        run = _TUNING_RUN.fullmatch(rest)
        table = _TUNING_TABLE.fullmatch(rest)
        if run:
            return (self.partition(experiment, run.group(1))
                    or self._tuned(experiment, run.group(2), tune.methods))
        return self._tuned(experiment, table.group(1), tune.methods) if table else None

    def _tuned(self, experiment: str, method: str, tuned: Collection[str]) -> str | None:
        if method in tuned:
            return None
        return _unknown("tuned method", method, tuned, f"experiment {experiment!r}")

    def table(self, target: str, name: str) -> str | None:
        # an experiment's own tables (``<experiment>[-<kind>]``, any scale) and the combined
        # tables are the config's by name; the others are known from rule ``all``
        if name.split("-", 1)[0] in self.cfg.experiments or name in self.cfg.tables:
            return None
        if target in self.outputs:
            return None
        known = {m.group(1) for t in self.outputs if (m := _TABLE.fullmatch(t))}
        if name in known:
            return None
        return _unknown("table", name, known, self.loaded)

    def _records(self, experiment: str, method: str, metric: str) -> str | None:
        if not metric or self.cfg.methods[method].algorithm in recording(metric):
            return None
        drawn = [m for m in self.cfg.experiments[experiment].methods
                 if self.cfg.methods[m].algorithm in recording(metric)]
        return (f"method {method!r} records no {metric!r}, which this figure draws; "
                f"methods of experiment {experiment!r} that do: {_names(drawn) or 'none'}")

    def figure(self, target: str, experiment: str, kind: str) -> str | None:
        problem = self.experiment(experiment)
        if problem or target in self.outputs:
            return problem
        exp = self.cfg.experiments[experiment]
        for declared in KINDS.values():
            pattern = re.escape(declared.file).replace(r"\{method\}", "(?P<method>[^/]+)")
            match = re.fullmatch(pattern.replace(r"\{client\}", r"(?P<client>\d+)"), kind)
            if not match:
                continue
            fields = match.groupdict()
            if "method" in fields:
                return (self.method(experiment, fields["method"])
                        or self._records(experiment, fields["method"], declared.records))
            clients = max(p.clients for p in exp.partitions)
            if "client" in fields and int(fields["client"]) >= clients:
                return (f"experiment {experiment!r} has {clients} clients (0..{clients - 1}), "
                        f"not client {fields['client']}")
            return None
        known = sorted({t.split("-", 1)[1].rsplit(".", 1)[0] for t in self.outputs
                        if t.startswith(f"figures/{experiment}-")})
        return _unknown("figure", kind, known, f"experiment {experiment!r}")

    def problem(self, target: str) -> str | None:
        """What is wrong with the names of ``target``, or None."""
        if m := _RUN.fullmatch(target):
            experiment, partition, method = m.groups()
            return (self.experiment(experiment) or self.partition(experiment, partition)
                    or self.method(experiment, method))
        if m := _METHOD_AGGREGATE.fullmatch(target):
            return self.experiment(m.group(1)) or self.method(*m.groups())
        if m := _AGGREGATE.fullmatch(target):
            return self.experiment(m.group(1))
        if m := _PARTITION.fullmatch(target) or _PARTITION_FIGURE.fullmatch(target):
            return self.data_partition(*m.groups())
        if m := _DATA.fullmatch(target):
            return self.dataset(m.group(1))
        if m := _TUNING.fullmatch(target):
            return self.tuning(*m.groups())
        if m := _TABLE.fullmatch(target):
            return self.table(target, m.group(1))
        if m := _FIGURE.fullmatch(target):
            return self.figure(target, *m.groups())
        return None


def target_problems(targets: Sequence[str], cfg: WorkflowConfig, loaded: str,
                    datasets: Collection[str],
                    outputs: Callable[[], Collection[str]]) -> list[str]:
    """One line per target of ``targets`` that names what ``cfg`` does not have.

    ``loaded``: the config file in force (the lines name it); ``datasets``: every data
    set there is; ``outputs``: the config's rule-``all`` outputs, asked for only when a
    table or figure target is not among the paths checked by name.
    """
    check = _Check(cfg, loaded, datasets, outputs)
    lines = []
    for target in targets:
        problem = check.problem(target.removeprefix("./"))
        if problem:
            lines.append(f"{target}: {problem}")
    return lines
