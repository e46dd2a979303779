"""Every placeholder of every rule's shell command is quoted (``{x:q}``).

Issue 27, item 1: ``{output}`` and ``{log}`` reached the shell unquoted, so a config
value holding ``$(...)`` ran as a command. The rules' shell strings are read from the
rule files; each placeholder must carry ``:q`` and no template may quote by hand
(``'{x:q}'`` would unquote again). Formatted with Snakemake's own formatter and a
hostile value for every placeholder, each command splits into the words its template
has, the value intact, and ``pflrepro``'s CLI parses it (item 9: a table without a
caption gave ``--caption`` no value).
"""

from __future__ import annotations

import ast
import re
import shlex
import string
from pathlib import Path

import pytest
from snakemake.utils import format as snakemake_format

from pflrepro.cli import build_parser
from pflrepro.pipeline.workflow.training_rules import cli, train_command

REPO = Path(__file__).resolve().parents[2]
RULE_FILES = [*sorted((REPO / "workflow/rules").glob("*.smk")), REPO / "Snakefile"]

_RULE = re.compile(r"^(?:rule|checkpoint)\s+(\w+)\s*:")
#: A rule made in a loop: ``rule:`` then ``name: <expr>`` (report.smk's plot rules,
#: common.smk's training_rule); its template is listed under the expression.
_ANONYMOUS = re.compile(r"^\s+rule\s*:")
_NAME = re.compile(r"^\s+name:\s*(.+)$")
_SHELL = re.compile(r"^(\s+)shell:\s*(.*)$")

#: A value no shell word may split, expand or run (starts with a letter: no option).
HOSTILE = "a b;$(touch PWNED)`id`'q\"|&<>*\n$HOME"
SAFE = "SAFEWORD"


#: The training rules' one ``shell: job.shell`` (common.smk's training_rule): each kind's command.
TRAINING_TEMPLATES = {"train": train_command(False, False),
                      "train_<runs>": train_command(False, True),
                      "tune_train": train_command(True, False),
                      "tune_train_<runs>": train_command(True, True)}


def shell_templates(text: str) -> dict[str, str]:
    """Each rule's shell string: ``cli(...)`` of the string literals after ``shell:``, joined.

    The training rules' ``job.shell`` is listed as :data:`TRAINING_TEMPLATES`.
    """
    found: dict[str, str] = {}
    rule = None
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if m := _RULE.match(line):
            rule = m[1]
            continue
        if _ANONYMOUS.match(line):
            rule = None
            continue
        if (m := _NAME.match(line)) and rule is None:
            rule = m[1].strip()
            continue
        if not (m := _SHELL.match(line)) or rule is None:
            continue
        indent, body = len(m[1]), [m[2]] if m[2] else []
        for nxt in lines[i + 1:]:
            if nxt.strip() and len(nxt) - len(nxt.lstrip()) <= indent:
                break
            body.append(nxt.strip())
        code = "\n".join(b for b in body if b)
        if code == "job.shell":
            found.update(TRAINING_TEMPLATES)
            continue
        assert code.startswith("cli(") and code.endswith(")"), \
            f"rule {rule}: a shell command is cli(text): {code}"
        found[rule] = cli(ast.literal_eval(code[len("cli"):]))
    return found


def all_templates() -> dict[str, str]:
    out: dict[str, str] = {}
    for path in RULE_FILES:
        text = path.read_text()
        found = shell_templates(text)
        shells = len(re.findall(r"^\s+shell:", text, re.M))
        training = len(TRAINING_TEMPLATES) - 1 if "job.shell" in text else 0
        assert len(found) == shells + training, path
        out.update(found)
    return out


TEMPLATES = all_templates()


def fields(template: str) -> list[tuple[str, str]]:
    return [(name, spec) for _, name, spec, _ in string.Formatter().parse(template)
            if name is not None]


class Value:
    """A placeholder value whose attributes (``input.meta``) are the same value."""

    def __init__(self, value: str) -> None:
        self.value = value

    def __getattr__(self, name: str) -> str:
        if name.startswith("__"):
            raise AttributeError(name)
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


def render(template: str, value: str) -> str:
    v = Value(value)
    return snakemake_format(template, **{k: v for k in ("input", "output", "params",
                                                         "wildcards", "log", "threads")})


def test_the_scanner_finds_every_rule_shell() -> None:
    assert {"train", "prepare_data", "partition", "table_combined", "aggregate_method",
            "cost_table", "plot_partition", "report_table", "figure.rule",
            "train_<runs>", "tune_train", "tune_train_<runs>"} <= set(TEMPLATES)
    assert len(TEMPLATES) >= 20  # the plot rules and train_<runs>: a template each


@pytest.mark.parametrize("rule", sorted(TEMPLATES))
def test_every_placeholder_is_quoted(rule: str) -> None:
    template = TEMPLATES[rule]
    unquoted = [f"{{{name}{':' + spec if spec else ''}}}" for name, spec in fields(template)
                if not spec.endswith("q")]
    assert not unquoted, f"rule {rule}: unquoted {unquoted} in {template!r}"
    # quoting by hand around a quoted placeholder would undo it ('{x:q}')
    assert "'" not in template and '"' not in template, f"rule {rule}: {template!r}"


@pytest.mark.parametrize("rule", sorted(TEMPLATES))
def test_a_hostile_value_stays_one_intact_word(rule: str) -> None:
    template = TEMPLATES[rule]
    safe = shlex.split(render(template, SAFE))
    hostile = shlex.split(render(template, HOSTILE))
    assert hostile == [w.replace(SAFE, HOSTILE) for w in safe]
    assert sum(w.count(HOSTILE) for w in hostile) == len(fields(template))


#: Values a CLI option checks (an int, a choice) and the params that are several
#: arguments (lists, one quoted word each, as the adapter P gives them); all others get
#: HOSTILE.
_TYPED: dict[str, object] = {
    "wildcards.split": "0", "wildcards.seed": "0", "wildcards.client": "0",
    "wildcards.size": "10", "threads": "1", "params.metric": "weighted_final",
    "params.scale": "paper", "params.fraction": "0.2", "params.methods": [HOSTILE, HOSTILE],
    "params.experiments": [HOSTILE], "params.mirrors": ["--mirror", HOSTILE],
    "params.public": ["--public", HOSTILE, "--public-data", HOSTILE],
    "params.exclude": ["--exclude-partition", HOSTILE],
    "params.args": ["--benchmarks", HOSTILE, "--logs", HOSTILE, "--training", HOSTILE],
    "params.kind": "client_weights",
    "params.options": ["--client", "0", "--methods", HOSTILE, HOSTILE]}
#: The same for the training rules of several runs in one job: one word per run,
#: as many as params.spec has, and the runs' outputs.
_BATCH_TYPED: dict[str, object] = {
    **_TYPED, "params.spec": [HOSTILE, HOSTILE], "params.partitions": [HOSTILE, HOSTILE],
    "params.checkpoints": [HOSTILE, HOSTILE], "params.logs": [HOSTILE, HOSTILE],
    "output": [HOSTILE, HOSTILE]}


def cli_args(template: str, caption: str = HOSTILE,
             typed: dict[str, object] = _TYPED) -> list[str]:
    """The formatted command's words after ``python -m pflrepro --require-source SRC``,
    up to the redirection."""
    values: dict[str, object] = {name: typed.get(name, HOSTILE)
                                 for name, _ in fields(template)}

    class Ns:
        def __init__(self, prefix: str) -> None:
            self.prefix = prefix

        def __getattr__(self, name: str) -> object:
            if self.prefix == "params" and name == "caption":
                return caption
            return values.get(f"{self.prefix}.{name}", HOSTILE)

        def __format__(self, spec: str) -> str:
            return format(values.get(self.prefix, HOSTILE), spec)

    ns = {k: Ns(k) for k in ("input", "output", "params", "wildcards", "log")}
    assert template.startswith(PREFIX), template
    words = shlex.split(snakemake_format(template[len(PREFIX):], threads=1, **ns))
    return words[:words.index(">")]


#: How every rule runs the package: this workflow's interpreter, refusing any other
#: source (preflight.smk; issue 27 item 6).
PREFIX = "{params.python:q} -m pflrepro --require-source {params.source:q} "


@pytest.mark.parametrize("rule", sorted(TEMPLATES))
def test_every_rule_runs_this_workflows_own_package(rule: str) -> None:
    # a bare `pflrepro ...` runs whichever pflrepro comes first on the job's PATH
    assert TEMPLATES[rule].startswith(PREFIX), TEMPLATES[rule]


def test_the_scanner_refuses_a_command_without_the_prefix() -> None:
    text = 'rule a:\n    shell:\n        cli(" table --md {output:q}")\n'
    assert shell_templates(text) == {"a": PREFIX + "table --md {output:q}"}
    with pytest.raises(AssertionError, match="cli"):
        shell_templates('rule b:\n    shell:\n        "pflrepro table"\n')


@pytest.mark.parametrize("rule", sorted(TEMPLATES))
def test_every_rule_command_parses_with_the_cli(rule: str) -> None:
    args = build_parser().parse_args(
        cli_args(TEMPLATES[rule], typed=_BATCH_TYPED if rule.endswith("<runs>") else _TYPED))
    parsed = [v for v in vars(args).values()]
    flat = [x for v in parsed for x in (v if isinstance(v, list) else [v])]
    assert any(isinstance(x, str) and HOSTILE in x for x in flat), rule


@pytest.mark.parametrize("caption", ["", "FedAMP Table 1: mean (std) 'best'"])
def test_a_table_without_caption_still_parses(caption: str) -> None:
    # `--caption {params.caption:q}` with an empty caption left `--caption` without a value
    # (Snakemake's :q writes nothing for ""): "--caption: expected one argument"
    args = build_parser().parse_args(cli_args(TEMPLATES["table_combined"], caption=caption))
    assert args.caption == caption
