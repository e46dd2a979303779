"""Figure kinds: what each figure module declares, and the registry that finds them.

Every module of :mod:`pflrepro.reporting.figures` but :data:`NOT_KINDS` declares one
kind at top level, ``KIND = FigureKind(...)``: its name, file name, inputs, options,
report caption and which methods it applies to. The config check, the ``pflrepro
plot`` command, the output paths, the plot rules and the report captions are derived
from these declarations (see the package docstring).

The registry reads the declarations from the modules' source (:mod:`ast`), without
importing them: a figure module imports matplotlib, seaborn and pandas (seconds), and
parsing a config, building the CLI or planning the workflow should not. A
declaration's values are therefore literals or names imported from
:mod:`pflrepro.store.results` (metric names); anything else is an error of the scan. A test
checks that the scanned declaration equals the imported ``KIND`` of every module.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import pkgutil
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from pflrepro.store import results

#: The package of the figure modules, read from its source here (never imported: it is
#: :mod:`pflrepro.reporting`'s, a layer above this one).
FIGURES_PACKAGE = "pflrepro.reporting.figures"
FIGURES_DIR = Path(__file__).resolve().parents[1] / "reporting" / "figures"
#: Modules of the figures package that declare no kind.
NOT_KINDS = frozenset({"common"})
#: Where a figure's data comes from, i.e. the plot rule's input.
INPUTS = (
    "aggregate",  # the experiment's aggregate (every method)
    "method",  # the aggregate of method ``{method}`` (file name has ``{method}``)
    "recording",  # the aggregates of the methods that record ``records``
    "partition",  # a partition and its prepared data set (no plot rule of this module)
)
#: Options of ``pflrepro plot`` a kind may take: option -> (keyword of its draw
#: function, help). ``--aggregate``/``--labels``/``--pdf``/``--png`` are every kind's.
OPTIONS: Mapping[str, tuple[str, str]] = {
    "method": ("method", "method whose values to draw (a kind whose file names "
                         "{method})"),
    "methods": ("methods_order", "legend order"),
    "client": ("client", "client of a kind whose file names {client}"),
    "names": ("names", "JSON {index: name} of the architectures, for the legend"),
    "title": ("title", "figure title"),
}
#: What happens when none of an experiment's methods records ``records`` (a kind
#: without ``{method}``): the figure is left out, or the config is refused.
IF_NONE = ("skip", "error")
#: The prefix of the plot rules' names (``plot_accuracy``).
RULE_PREFIX = "plot_"


@dataclasses.dataclass(frozen=True)
class FigureKind:
    """One figure kind, declared by its module as ``KIND``."""

    #: The one spelling of the kind: the ``figures`` entry, ``pflrepro plot NAME`` and,
    #: with :data:`RULE_PREFIX`, the plot rule.
    name: str
    #: The ``{kind}`` part of ``figures/{experiment}-{kind}.{ext}``; ``{method}`` and
    #: ``{client}`` are wildcards of the plot rule.
    file: str
    #: The module's function that draws it: ``draw(data..., pdf, png, **options)``.
    draw: str
    #: What the report says of it (``{method}`` / ``{client}``: the wildcards).
    caption: str
    #: The report's label of the output.
    label: str
    #: Where its data comes from (:data:`INPUTS`).
    input: str = "aggregate"
    #: ``pflrepro plot`` options it takes (keys of :data:`OPTIONS`).
    options: tuple[str, ...] = ()
    #: A metric: the kind applies to the methods whose algorithm records it (one
    #: figure per method when ``file`` has ``{method}``); empty: to every method.
    records: str = ""
    #: When none of an experiment's methods records ``records`` (:data:`IF_NONE`).
    if_none: str = "skip"
    #: The ``figures`` entry that asks for it; the kind's own name unless it comes
    #: with another's (the cluster and FedMix figures come with ``weights``); empty:
    #: no entry (the partition figures, drawn for every partition).
    entry: str | None = None
    #: Drawn only when the experiment's clients run different architectures.
    heterogeneous: bool = False
    #: The plot rule's name, when not ``plot_<name>``.
    rule: str = ""
    #: The module that declares it (filled by the registry).
    module: str = ""

    def __post_init__(self) -> None:
        where = f"figure kind {self.name!r}"
        if self.input not in INPUTS:
            raise ValueError(f"{where}: input {self.input!r} is none of {list(INPUTS)}")
        unknown = sorted(set(self.options) - set(OPTIONS))
        if unknown:
            raise ValueError(f"{where}: unknown options {unknown}; known: {sorted(OPTIONS)}")
        if self.if_none not in IF_NONE:
            raise ValueError(f"{where}: if_none {self.if_none!r} is none of {list(IF_NONE)}")
        if self.input in ("method", "recording") and not self.records:
            raise ValueError(f"{where}: input {self.input!r} needs `records`")
        if (self.input == "method") != ("{method}" in self.file):
            raise ValueError(f"{where}: {{method}} in the file name goes with input 'method'")
        for wildcard in ("method", "client"):
            if (f"{{{wildcard}}}" in self.file) != (wildcard in self.options):
                raise ValueError(f"{where}: {{{wildcard}}} in the file name goes with "
                                 f"option {wildcard!r}")
        if self.entry is None:
            object.__setattr__(self, "entry", self.name)
        if not self.rule:
            object.__setattr__(self, "rule", RULE_PREFIX + self.name)

    @property
    def per_method(self) -> bool:
        """One figure per method (``{method}`` in the file name)."""
        return self.input == "method"

    def function(self) -> Callable[..., None]:
        """The draw function (imports the module: matplotlib and all)."""
        return getattr(importlib.import_module(self.module), self.draw)


def _value(node: ast.expr, names: Mapping[str, Any], where: str) -> Any:
    """A declaration's value: a literal, or a name imported from pflrepro.store.results."""
    if isinstance(node, ast.Name):
        if node.id not in names:
            raise ValueError(f"{where}: {node.id!r} is not imported from pflrepro.store.results")
        return names[node.id]
    if isinstance(node, ast.Tuple):
        return tuple(_value(e, names, where) for e in node.elts)
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise ValueError(f"{where}: {ast.unparse(node)!r} is neither a literal nor a "
                         f"name imported from pflrepro.store.results") from None


def read_kind(path: Path, module: str) -> FigureKind:
    """The ``KIND = FigureKind(...)`` a module's source declares (without importing it)."""
    tree = ast.parse(path.read_text(), str(path))
    names: dict[str, Any] = {}
    found: list[ast.Call] = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "pflrepro.store.results":
            names.update({a.asname or a.name: getattr(results, a.name) for a in node.names})
        elif (isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == ["KIND"]
              and isinstance(node.value, ast.Call)
              and ast.unparse(node.value.func) == "FigureKind"):
            found.append(node.value)
    if len(found) != 1:
        raise ValueError(f"{path}: declares {len(found)} `KIND = FigureKind(...)`, not one")
    call = found[0]
    if call.args:
        raise ValueError(f"{path}: FigureKind(...) takes keyword arguments only")
    values = {k.arg: _value(k.value, names, str(path)) for k in call.keywords}
    return FigureKind(**values, module=module)


class _Registry(Mapping[str, FigureKind]):
    """Name -> :class:`FigureKind`, read on first use from the package's modules."""

    def __init__(self) -> None:
        self._kinds: dict[str, FigureKind] | None = None

    def _load(self) -> dict[str, FigureKind]:
        if self._kinds is None:
            kinds: dict[str, FigureKind] = {}
            for info in sorted(pkgutil.iter_modules([str(FIGURES_DIR)]), key=lambda m: m.name):
                if info.name in NOT_KINDS:
                    continue
                path = FIGURES_DIR / f"{info.name}.py"
                kind = read_kind(path, f"{FIGURES_PACKAGE}.{info.name}")
                if kind.name in kinds:
                    raise ValueError(f"figure kind {kind.name!r} declared by "
                                     f"{kinds[kind.name].module} and {kind.module}")
                kinds[kind.name] = kind
            self._kinds = kinds
        return self._kinds

    def __getitem__(self, name: str) -> FigureKind:
        return self._load()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._load())

    def __len__(self) -> int:
        return len(self._load())


#: Every figure kind by name, in the order of its module's name.
KINDS: Mapping[str, FigureKind] = _Registry()


def figure_kind(name: str) -> FigureKind:
    """The declared kind ``name`` (a clear error for unknown names)."""
    if name not in KINDS:
        raise ValueError(f"unknown figure kind {name!r}; known: {sorted(KINDS)}")
    return KINDS[name]


def entries() -> tuple[str, ...]:
    """The names an experiment's ``figures`` list may hold."""
    return tuple(k.name for k in KINDS.values() if k.entry == k.name)


def kinds_of_entry(entry: str) -> list[FigureKind]:
    """The kinds a ``figures`` entry asks for: its own first, then those that come with it."""
    own = [k for k in KINDS.values() if k.name == entry and k.entry == entry]
    return own + [k for k in KINDS.values() if k.entry == entry and k.name != entry]


def rule_kinds() -> list[FigureKind]:
    """The kinds drawn by the generic plot rule (from aggregates, one rule each)."""
    return [k for k in KINDS.values() if k.input != "partition"]


def rule_options(kind: FigureKind) -> tuple[str, ...]:
    """The options a plot rule gives ``pflrepro plot`` beyond every kind's own."""
    return tuple(o for o in kind.options if o != "title")
