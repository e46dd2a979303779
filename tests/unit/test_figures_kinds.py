"""Figure kinds: one declaration per module, and everything derived from it."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

import pflrepro.pipeline.workflow as W
from pflrepro.cli import build_parser
from pflrepro.config import FIGURE_KINDS
from pflrepro.config import figure_kinds as kinds
from pflrepro.config.figure_kinds import KINDS, FigureKind, figure_kind, read_kind
from pflrepro.reporting import report
from pflrepro.store import results

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "src/pflrepro/reporting/figures"


def test_every_module_but_the_shared_ones_declares_one_kind() -> None:
    modules = sorted(p.stem for p in PACKAGE.glob("*.py")
                     if p.stem not in kinds.NOT_KINDS and p.stem != "__init__")
    assert sorted(k.module.rsplit(".", 1)[1] for k in KINDS.values()) == modules
    assert {"accuracy", "weights", "clusters", "gates", "posterior", "labels"} <= set(KINDS)


@pytest.mark.parametrize("name", sorted(KINDS))
def test_the_scanned_declaration_is_the_imported_one(name: str) -> None:
    kind = KINDS[name]
    module = importlib.import_module(kind.module)
    assert module.KIND == kinds.dataclasses.replace(kind, module="")
    assert callable(kind.function()) and kind.function() is getattr(module, kind.draw)


@pytest.mark.parametrize("name", sorted(KINDS))
def test_every_kind_has_its_test_file(name: str) -> None:
    assert (REPO / f"tests/unit/test_figures_{name}.py").is_file()


def test_one_spelling_everywhere() -> None:
    # the CLI took `client-accuracy`, the config `client_accuracy`
    args = build_parser().parse_args(["plot", "client_accuracy", "--aggregate", "a.parquet",
                                      "--pdf", "f.pdf", "--png", "f.png", "--client", "3"])
    assert (args.kind, args.client) == ("client_accuracy", 3)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["plot", "client-accuracy", "--pdf", "f", "--png", "f"])
    for name in KINDS:
        assert build_parser().parse_args(["plot", name, "--pdf", "f", "--png", "f"]).kind == name
    assert {"accuracy", "architectures", "client_accuracy", "client_weights", "communication",
            "distances", "weights"} <= set(FIGURE_KINDS) <= set(KINDS)
    assert not {"clusters", "gates", "posterior", "labels"} & set(FIGURE_KINDS)  # no entries
    assert all(name.isidentifier() for name in KINDS)  # one spelling: no `client-accuracy`


def test_report_captions_cover_every_rule() -> None:
    # `communication` and `architectures` were missing from the package's table; the
    # captions are now the declarations'
    assert set(report.FIGURES) == {k.rule for k in KINDS.values()} | {"tune_select"}
    assert report.FIGURES["plot_partition"] == KINDS["labels"].caption
    assert "{client}" in report.FIGURES["plot_client_weights"]


def test_paths_come_from_the_declarations() -> None:
    assert W.figure_pattern("posterior", "png") == "figures/{experiment}-posterior-{method}.png"
    assert W.figure_pattern("client_accuracy", "pdf") == \
        "figures/{experiment}-client{client}-accuracy.pdf"
    assert W.figure_log("weights") == "logs/plot/{experiment}-weights-{method}.log"
    assert [k.rule for k in W.figure_rule_kinds()] == [
        f"plot_{name}" for name in KINDS if name != "labels"]  # labels: plot_partition
    assert W.plot_input("weights") == W.METHOD_AGGREGATE
    assert W.plot_input("client_weights") is None  # the aggregates of weight learners


def test_kinds_that_come_with_weights() -> None:
    assert [k.name for k in kinds.kinds_of_entry("weights")] == [
        "weights", "clusters", "gates", "posterior"]
    assert [k.name for k in kinds.kinds_of_entry("accuracy")] == ["accuracy"]
    assert kinds.kinds_of_entry("labels") == []  # drawn per partition, not an entry


def test_fedmix_metric_names_live_in_results() -> None:
    from pflrepro.algorithms.fedmix import FedMix

    assert (results.GATE_MASS, results.EXPERT_POSTERIOR) == ("gate_mass", "expert_posterior")
    assert FedMix.records == (results.GATE_MASS, results.EXPERT_POSTERIOR)
    assert (KINDS["gates"].records, KINDS["posterior"].records) == FedMix.records


def test_unknown_kind_is_named() -> None:
    with pytest.raises(ValueError, match="unknown figure kind 'nope'"):
        figure_kind("nope")


@pytest.mark.parametrize("bad, message", [
    (dict(file="x-{method}"), "{method} in the file name"),
    (dict(input="method", options=("method",)), "needs `records`"),
    (dict(options=("colour",)), "unknown options"),
    (dict(input="somewhere"), "input 'somewhere'"),
    (dict(file="client{client}-x"), "option 'client'"),
    (dict(if_none="warn"), "if_none"),
])
def test_inconsistent_declarations_are_refused(bad: dict, message: str) -> None:
    fields = dict(name="x", file="x", draw="f", caption="c", label="l") | bad
    with pytest.raises(ValueError, match=message.replace("{", r"\{").replace("}", r"\}")):
        FigureKind(**fields)


def test_defaults_of_a_declaration() -> None:
    kind = FigureKind(name="x", file="x", draw="f", caption="c", label="l")
    assert (kind.entry, kind.rule, kind.per_method) == ("x", "plot_x", False)


def _module(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "mod.py"
    path.write_text("from pflrepro.config.figure_kinds import FigureKind\n"
                    "from pflrepro.store.results import WEIGHT as W2\n" + body)
    return path


def test_read_kind_resolves_metric_names_without_importing(tmp_path: Path) -> None:
    path = _module(tmp_path, 'import no_such_module\nKIND = FigureKind(name="x", file="x-{method}",'
                   ' draw="f", caption="c", label="l", input="method", options=("method",),'
                   ' records=W2)\n')
    kind = read_kind(path, "mod")  # the module itself could not be imported
    assert (kind.records, kind.module, kind.per_method) == ("weight", "mod", True)


@pytest.mark.parametrize("body, message", [
    ('KIND = FigureKind(name=NAME, file="x", draw="f", caption="c", label="l")\n',
     "'NAME' is not imported"),
    ('KIND = FigureKind(name="x" + "y", file="x", draw="f", caption="c", label="l")\n',
     "neither a literal"),
    ("X = 1\n", "declares 0"),
    ('KIND = FigureKind("x", file="x", draw="f", caption="c", label="l")\n', "keyword"),
])
def test_read_kind_refuses_what_it_cannot_read(tmp_path: Path, body: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        read_kind(_module(tmp_path, body), "mod")
