"""Every rule but `train` is local, declared one way: `localrule: True` in the rule.

Under profiles/slurm a rule that is not local is submitted as a cluster job; only
training belongs there. A second way of declaring it (a `localrules:` list in the
Snakefile) is refused, so the declaration lives beside each rule.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pflrepro.pipeline.workflow as W

REPO = Path(__file__).resolve().parents[2]
FILES = [REPO / "Snakefile", *sorted((REPO / "workflow/rules").glob("*.smk"))]
#: training jobs, the tuning runs too: common.smk's training_rule, made for each
#: training rule (``rule:`` then ``name: job.name``), one or several runs per job
CLUSTER_RULES = {"train", "train_<runs>", "tune_train", "tune_train_<runs>"}


#: Rules made in a loop (``rule:`` with ``name: <expr>``): the names each expression
#: takes, from the package the loop reads (report.smk: one plot rule per figure kind);
#: the training rules' names of several runs depend on the config, so they are listed
#: by their form.
GENERATED = {"figure.rule": lambda: [k.rule for k in W.figure_rule_kinds()],
             "job.name": lambda: sorted(CLUSTER_RULES)}


def rule_blocks(text: str) -> dict[str, list[str]]:
    """Rule name -> the lines of its block (up to the next statement as far out as it).

    A rule made in a loop (``rule:`` and ``name: figure.rule``) is listed under each
    name of :data:`GENERATED` its name expression takes.
    """
    blocks: dict[str, list[str]] = {}
    current: list[str] | None = None
    indent = 0
    for line in text.splitlines():
        match = re.match(r"^(\s*)rule(?:\s+(\w+))?\s*:", line)
        if match:
            indent = len(match.group(1))
            current = blocks.setdefault(match.group(2) or f"<anonymous {len(blocks)}>", [])
        elif (line.strip() and not line.lstrip().startswith("#")
              and len(line) - len(line.lstrip()) <= indent):
            current = None
        elif current is not None:
            current.append(line)
    named: dict[str, list[str]] = {}
    for name, block in blocks.items():
        given = [m.group(1) for line in block if (m := re.match(r"^\s*name:\s*(.+)$", line))]
        if not given:
            named[name] = block
            continue
        expr = given[0].strip()
        for each in (GENERATED[expr]() if expr in GENERATED else [ast.literal_eval(expr)]):
            named[each] = block
    return named


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
            "plot_architectures", "claims", "train_<runs>", "tune_train"} <= set(rules)
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


def test_a_rule_made_in_a_loop_is_found_under_each_name() -> None:
    text = ("for figure in W.figure_rule_kinds():\n    rule:\n        name: figure.rule\n"
            "        shell: 'x'\n\n\nrule b:\n    localrule: True\n    shell: 'y'\n"
            "\n\nfor x in y:\n    rule:\n        name: 'c'\n        localrule: True\n")
    blocks = rule_blocks(text)
    assert {"plot_accuracy", "plot_gates", "b", "c"} <= set(blocks)
    assert not is_local(blocks["plot_accuracy"]) and is_local(blocks["b"]) and is_local(blocks["c"])
