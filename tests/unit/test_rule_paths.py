"""The rules take their file patterns from ``pflrepro.pipeline.workflow``, written there once."""

import re
from pathlib import Path

import pytest

import pflrepro.pipeline.workflow as W
from pflrepro.config import FIGURE_KINDS

REPO = Path(__file__).resolve().parents[2]
RULE_FILES = [*sorted((REPO / "workflow/rules").glob("*.smk")), REPO / "Snakefile"]
#: Rule directives that name files.
FILE_DIRECTIVES = ("input", "output", "log", "benchmark")

_RULE = re.compile(r"^(?:rule|checkpoint)\s+(\w+)\s*:")
_DIRECTIVE = re.compile(r"^    (\w+):(.*)$")
_STRING = re.compile(r"""[rRbBuUfF]{0,2}(["'])((?:\\.|(?!\1).)*)\1""")


def directive_literals(text: str) -> dict[tuple[str, str], list[str]]:
    """The quoted string literals of each ``(rule, directive)`` of a Snakemake file."""
    found: dict[tuple[str, str], list[str]] = {}
    rule = directive = None
    for line in text.splitlines():
        if match := _RULE.match(line):
            rule, directive = match[1], None
            continue
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if not line.startswith(" "):  # top-level code ends the rule
            rule = directive = None
            continue
        if rule is None:
            continue
        rest = line
        if match := _DIRECTIVE.match(line):
            directive, rest = match[1], match[2]
            found.setdefault((rule, directive), [])
        if directive is not None:
            found[(rule, directive)] += [m[2] for m in _STRING.finditer(rest)]
    return found


#: Where the workflow writes: a shell command naming one of these types a path.
WRITTEN_ROOTS = ("results/", "figures/", "logs/", "data/raw")


def written_paths(text: str) -> list[str]:
    """Path literals written in the rules: any path in a file directive (``input``,
    ``output``, ``log``, ``benchmark``), and a path under the workflow's folders in a
    ``shell`` command."""
    bad = []
    for (rule, directive), literals in directive_literals(text).items():
        for lit in literals:
            if ((directive in FILE_DIRECTIVES and "/" in lit)
                    or (directive == "shell" and any(r in lit for r in WRITTEN_ROOTS))):
                bad.append(f"{rule}.{directive}: {lit!r}")
    return bad


OLD_STYLE = '''
rule plot_accuracy:
    input:
        W.AGGREGATE,
    output:
        pdf="figures/{experiment}-accuracy.pdf",
        png=W.figure_pattern("accuracy", "png"),
    log:
        "logs/plot/{experiment}-accuracy.log",
    shell:
        "pflrepro plot accuracy --out results/x > {log} 2>&1"


def helper():
    return "results/not/a/rule.txt"
'''


def test_scanner_finds_a_pattern_written_again() -> None:
    found = directive_literals(OLD_STYLE)
    assert found[("plot_accuracy", "output")] == ["figures/{experiment}-accuracy.pdf",
                                                  "accuracy", "png"]
    assert written_paths(OLD_STYLE) == [
        "plot_accuracy.output: 'figures/{experiment}-accuracy.pdf'",
        "plot_accuracy.log: 'logs/plot/{experiment}-accuracy.log'",
        "plot_accuracy.shell: 'pflrepro plot accuracy --out results/x > {log} 2>&1'"]
    fixed = (OLD_STYLE.replace('"figures/{experiment}-accuracy.pdf"', "W.FIGURE")
             .replace('"logs/plot/{experiment}-accuracy.log"', "W.FIGURE_LOG")
             .replace("--out results/x", "--out {params.out}"))
    assert written_paths(fixed) == []


@pytest.mark.parametrize("path", RULE_FILES, ids=lambda p: p.name)
def test_rules_take_their_paths_from_the_workflow_module(path: Path) -> None:
    assert written_paths(path.read_text()) == []


def test_scanner_sees_every_rule_and_its_files() -> None:
    rules: set[str] = set()
    found: dict[tuple[str, str], list[str]] = {}
    for path in RULE_FILES:
        text = path.read_text()
        rules |= set(re.findall(r"^(?:rule|checkpoint) (\w+):", text, re.MULTILINE))
        found |= directive_literals(text)
    assert len(rules) > 15 and "tune_select" in rules
    assert {r for r, d in found if d == "output"} == rules - {"all"}
    assert {r for r, d in found if d == "log"} == rules - {"all"}
    # the training rules (common.smk's training_rule) take every path from
    # pflrepro.pipeline.workflow.training_rules: tests/unit/test_training_rules.py


def test_pattern_fills_named_fields_and_keeps_wildcards() -> None:
    assert W.pattern(W.FIGURE, kind="accuracy", ext="pdf") == "figures/{experiment}-accuracy.pdf"
    assert W.pattern(W.TABLE, ext="md") == "results/tables/{experiment}.md"
    assert W.pattern(W.DATA_META, dataset="{source}") == "results/data/{source}/meta.json"
    assert W.pattern(W.RUN) == W.RUN
    assert W.pattern("a/{x,[a-z]+}-{{lit}}-{y}.{ext}", y=3, ext="csv") == \
        "a/{x,[a-z]+}-{{lit}}-3.csv"
    with pytest.raises(KeyError, match="kind"):
        W.pattern(W.TABLE, kind="accuracy")  # TABLE has no kind: a typo
    with pytest.raises(KeyError, match="'x'"):
        W.pattern("a/{x,[a-z]+}", x="b")  # a field with a constraint is not filled
    with pytest.raises(KeyError):  # what str.format would do with the wildcards
        W.FIGURE.format(kind="accuracy", ext="pdf")


def test_derived_patterns_keep_the_wildcard_names() -> None:
    assert W.COMBINED_TABLE == "results/tables/{table}.{ext}"
    assert W.CLAIMS_TABLE == "results/tables/{claims}.{ext}"
    assert W.DATA_META == "results/data/{dataset}/meta.json"
    assert (W.DATA_X, W.DATA_Y) == ("results/data/{dataset}/x.npy", "results/data/{dataset}/y.npy")
    assert set(FIGURE_KINDS) <= {k.name for k in W.figure_rule_kinds()}
    assert W.figure_pattern("client_weights", "png") == \
        "figures/{experiment}-client{client}-weights.png"
    assert W.figure_pattern("weights", "pdf") == "figures/{experiment}-weights-{method}.pdf"
    assert W.figure_pattern("clusters", "png") == "figures/{experiment}-clusters-{method}.png"
    assert W.figure_pattern("gates", "pdf") == "figures/{experiment}-gates-{method}.pdf"
    assert W.figure_log("client_accuracy") == "logs/plot/{experiment}-client{client}-accuracy.log"
    assert W.COMBINED_TABLE_LOG == "logs/table/{table}.log"
