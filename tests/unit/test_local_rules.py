"""Every rule but `train` is local, declared one way: `localrule: True` in the rule.

Under profiles/slurm a rule that is not local is submitted as a cluster job; only
training belongs there. A second way of declaring it (a `localrules:` list in the
Snakefile) is refused, so the declaration lives beside each rule.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FILES = [REPO / "Snakefile", *sorted((REPO / "workflow/rules").glob("*.smk"))]
#: training jobs: the tuning runs too, and train.smk's train_<runs> (several runs per
#: job), defined in a loop (``rule:`` then ``name: _batch.rule``)
CLUSTER_RULES = {"train", "tune_train", "_batch.rule"}


def rule_blocks(text: str) -> dict[str, list[str]]:
    """Rule name -> the lines of its block (up to the next top-level statement)."""
    blocks: dict[str, list[str]] = {}
    current: list[str] | None = None
    lines = text.splitlines()
    for i, line in enumerate(lines):
        match = re.match(r"^rule (\w+):", line)
        if match:
            current = blocks.setdefault(match.group(1), [])
        elif re.match(r"^    rule\s*:", line):  # in a loop: named by its `name:` EXPR
            name = next(n.strip() for n in lines[i + 1:]
                        if n.strip() and not n.strip().startswith("name:"))
            current = blocks.setdefault(name, [])
        elif line and not line[0].isspace() and not line.startswith("#"):
            current = None
        elif current is not None:
            current.append(line)
    return blocks


def all_rules() -> dict[str, list[str]]:
    rules: dict[str, list[str]] = {}
    for path in FILES:
        for name, block in rule_blocks(path.read_text()).items():
            assert name not in rules, f"rule {name} defined twice"
            rules[name] = block
    return rules


def is_local(block: list[str]) -> bool:
    return any(line.strip() == "localrule: True" for line in block)


def test_the_parser_sees_every_rule() -> None:
    rules = all_rules()
    assert {"all", "train", "prepare_data", "communication_table", "plot_communication",
            "plot_architectures", "claims", "_batch.rule"} <= set(rules)
    assert len(rules) >= 25


def test_every_rule_but_train_is_local() -> None:
    not_local = sorted(name for name, block in all_rules().items()
                       if name not in CLUSTER_RULES and not is_local(block))
    assert not_local == [], f"rules not declared `localrule: True`: {not_local}"


def test_training_is_not_local() -> None:
    rules = all_rules()
    assert not any(is_local(rules[name]) for name in CLUSTER_RULES)


def test_local_rules_are_declared_one_way() -> None:
    for path in FILES:
        assert not re.search(r"^localrules\s*:", path.read_text(), re.M), path


def test_a_rule_without_the_declaration_is_found() -> None:
    text = "rule a:\n    localrule: True\n    shell: 'x'\n\n\nrule b:\n    shell: 'y'\n"
    blocks = rule_blocks(text)
    assert is_local(blocks["a"]) and not is_local(blocks["b"])
