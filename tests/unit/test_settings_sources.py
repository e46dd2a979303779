"""pflrepro.config.settings_sources: an experiment's ``sources:`` per setting, checked."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import yaml

from pflrepro.config import ConfigError, load_config_file, parse
from pflrepro.config.settings_sources import (
    PAPERS,
    SETTINGS,
    doc_references,
    github_anchor,
    page_anchors,
    parse_setting_sources,
    source_paper,
    unresolved_references,
)
from pflrepro.reporting.claims.parse import PAPERS as CLAIM_PAPERS

REPO = Path(__file__).resolve().parents[2]
TINY = yaml.safe_load((REPO / "tests/workflow/config.yaml").read_text())


def test_sources_parse_into_the_experiment() -> None:
    raw = copy.deepcopy(TINY)
    raw["experiments"]["tiny"]["sources"] = {"rounds": "unstated: 3, a test's budget",
                                             "lr": "paper: Sec. 4, 'learning rate 0.01'"}
    exp = parse(raw).experiments["tiny"]
    assert exp.sources == {"rounds": "unstated: 3, a test's budget",
                           "lr": "paper: Sec. 4, 'learning rate 0.01'"}


def test_no_sources_is_an_empty_mapping() -> None:
    assert parse(copy.deepcopy(TINY)).experiments["tiny"].sources == {}


@pytest.mark.parametrize(("spec", "message"), [
    ({"round": "unstated: typo"}, "sources.round: not a setting"),
    ({"rounds": "ours: 3"}, "sources.rounds: must read 'paper: <where"),
    ({"rounds": "paper:   "}, "sources.rounds: must read"),
    ({"rounds": 3}, "sources.rounds: must read"),
    (["rounds"], "sources: a mapping setting"),
])
def test_bad_sources_name_the_key(spec: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        parse_setting_sources(spec, "experiments.tiny.sources")


def test_the_vocabulary_covers_what_a_setting_table_needs() -> None:
    # the settings a reader needs to rebuild an experiment (issue: clients, samples per
    # client, partition, test assignment, metric, model, optimiser, lr, batch, epochs,
    # rounds, participation), each with a description
    assert list(SETTINGS) == ["clients", "samples", "partition", "test", "metric", "model",
                              "optimizer", "lr", "batch_size", "local_epochs", "rounds",
                              "participation"]
    assert all(SETTINGS.values())


# --------------------------------------------------- pointers into the docs, papers

@pytest.mark.parametrize(("heading", "anchor"), [
    ("Choices in config.yaml", "choices-in-configyaml"),
    ("`estep_loss`", "estep_loss"),
    ("Client sizes (`label_groups`' `sizes`)", "client-sizes-label_groups-sizes"),
    ("The oracle: can grouping matter on the CPU design?",
     "the-oracle-can-grouping-matter-on-the-cpu-design"),
    ("The CPU design's Dirichlet α", "the-cpu-designs-dirichlet-α"),
    ("Splits by ε₁ (ε₂ = 1.6)", "splits-by-ε₁-ε₂--16"),
])
def test_anchors_are_made_as_github_makes_them(heading: str, anchor: str) -> None:
    assert github_anchor(heading) == anchor


def test_page_anchors_skip_code_fences_and_number_repeats() -> None:
    page = "# Top\n\n## Cost\n\n```yaml\n# not a heading\n```\n\n## Cost\n    # indented code\n"
    assert page_anchors(page) == {"top", "cost", "cost-1"}


def test_references_end_at_brackets_quotes_and_a_full_stop() -> None:
    text = ('see (docs/methods/fedamp.md#the-fedamp-entry). "x; docs/a.md#b_c", '
            "docs/settings.md and docs/methods/federico.md#mstep.")
    assert doc_references(text) == [("docs/methods/fedamp.md", "the-fedamp-entry"),
                                    ("docs/a.md", "b_c"), ("docs/settings.md", ""),
                                    ("docs/methods/federico.md", "mstep")]


def test_unresolved_references_name_a_missing_page_or_heading(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs/page.md").write_text("# Page\n\n## A choice\n")
    text = ("docs/page.md, docs/page.md#a-choice, docs/page.md#a-choise, "
            "docs/gone.md#a-choice")
    assert unresolved_references(text, tmp_path) == ["docs/page.md#a-choise: no such heading",
                                                     "docs/gone.md: no such page"]


@pytest.mark.parametrize(("text", "owner", "paper"), [
    ("paper: FedeRiCo footnote 3 runs FedEM's code", "clustered_fl", "FedeRiCo"),
    ("paper: Sec. 5, 'VGG11 is deployed for all clients'", "perfedckt_table2_cpu", "PerFed-CKT"),
    ("paper: Sec. 1, as FedAMP and then FedeRiCo say", "fedmix", "FedAMP"),
    ("paper: Sec. 4, 'learning rate 0.01'", "tiny", None),
])
def test_source_paper_is_the_paper_named_else_the_owners(text: str, owner: str,
                                                          paper: str | None) -> None:
    assert source_paper(text, owner) == paper


def test_the_papers_are_the_claims_papers() -> None:
    assert tuple(PAPERS) == CLAIM_PAPERS


#: Files whose ``docs/...md#anchor`` pointers must resolve: the config and its comments,
#: the claims, the package's docstrings and comments (hyperparameter docs included), the
#: README and the docs themselves.
POINTER_FILES = sorted([REPO / "config.yaml", *(REPO / "config").glob("*.yaml"),
                        REPO / "README.md", *(REPO / "docs").rglob("*.md"),
                        *(REPO / "src/pflrepro").rglob("*.py")])


def test_every_docs_pointer_of_the_project_resolves() -> None:
    missing = [f"{path.relative_to(REPO)}: {why}" for path in POINTER_FILES
               for why in unresolved_references(path.read_text(encoding="utf-8"), REPO)]
    assert missing == []


def _shipped_sources() -> list[tuple[str, str, str]]:
    """(owner, key, text) of every ``sources:`` entry of the shipped config; a method's
    owner is its algorithm, an experiment's its name."""
    cfg = parse(load_config_file(REPO / "config.yaml"))
    return ([(m.algorithm, key, text) for m in cfg.methods.values()
             for key, text in m.sources.items()]
            + [(name, key, text) for name, exp in cfg.experiments.items()
               for key, text in exp.sources.items()])


def test_every_source_pointer_of_the_shipped_config_resolves() -> None:
    sources = _shipped_sources()
    assert any(doc_references(text) for _, _, text in sources)
    assert [(owner, key, why) for owner, key, text in sources
            for why in unresolved_references(text, REPO)] == []


#: Where a ``paper:`` source says the text states its value: a section, table, figure,
#: footnote, equation, appendix or algorithm, or a quote of at least four characters.
PLACE = re.compile(r"\b(Sec\.|Table|Fig\.|Figs\.|footnote|eq\.|Appendix|Algorithm)|'[^']{4,}'")


def test_every_paper_source_of_the_shipped_config_names_its_paper_and_place() -> None:
    papers = [(owner, key, text) for owner, key, text in _shipped_sources()
              if text.startswith("paper:")]
    assert len(papers) > 40
    assert [(owner, key) for owner, key, text in papers
            if source_paper(text, owner) is None or not PLACE.search(text)] == []


def test_an_unstated_choice_of_a_method_with_a_methods_page_points_into_it() -> None:
    # one home per unstated choice: where docs/methods/<algorithm>.md exists, each
    # `unstated:` source of that algorithm's entries points to its measurements there
    cfg = parse(load_config_file(REPO / "config.yaml"))
    checked, astray = 0, []
    for name, method in cfg.methods.items():
        page = f"docs/methods/{method.algorithm}.md"
        if not (REPO / page).is_file():
            continue
        for key, text in method.sources.items():
            if text.startswith("unstated:"):
                checked += 1
                if page not in [p for p, _ in doc_references(text)]:
                    astray.append((name, key))
    assert checked >= 10
    assert astray == []
