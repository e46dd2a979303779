"""Reference text says what is, not what was: no history words in it.

Reference text: the comments of ``config.yaml`` and ``config/*.yaml``, ``README.md``
and every page under ``docs/`` but the dated logs of ``docs/log/``, and the comments
and string literals (docstrings, hyperparameter docs, messages) of ``src/pflrepro``.
A finding that belongs to a past state of the code goes to a dated
``docs/log/<yyyy>-<mm>-<dd>-<topic>.md`` page, or nowhere.

The phrases are narrow on purpose: "was" or "no longer" alone are present-tense
English too ("nothing was changed", "no longer finite"); each phrase below marks a
past state of this project in every place it is found.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

#: Phrases that date a text: each names a past state of the project.
HISTORY_PHRASES = (
    r"\bformer(ly)?\b",
    r"\bused to be\b",
    r"\bused before\b",
    r"\bwas changed (from|to)\b",
    r"\bpreviously\b",
    r"\bthis session\b",
    r"\bbefore this change\b",
    r"\(was\b",
    r"\b(old|earlier) (defaults?|behaviou?r|grid|versions?|code|design)\b",
    r"\bour (old|earlier)\b",
    r"\bnot re-measured\b",
    r"\bthe review found\b",
    r"\bnow also\b",
)
HISTORY = re.compile("|".join(HISTORY_PHRASES), re.IGNORECASE)


def yaml_comments(text: str) -> Iterator[tuple[int, str]]:
    """(line number, comment) of every YAML comment: a ``#`` at a line's start or after
    white space, outside a quoted string (``docs/x.md#anchor`` is no comment)."""
    for number, line in enumerate(text.splitlines(), 1):
        quote = None
        for i, ch in enumerate(line):
            if quote:
                quote = None if ch == quote else quote
            elif ch in "'\"" and (i == 0 or not line[i - 1].isalnum()):
                quote = ch
            elif ch == "#" and (i == 0 or line[i - 1].isspace()):
                yield number, line[i:]
                break


def python_text(text: str) -> Iterator[tuple[int, str]]:
    """(line number, line) of every comment and string literal of Python source."""
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type in (tokenize.COMMENT, tokenize.STRING):
            for k, line in enumerate(token.string.splitlines()):
                yield token.start[0] + k, line


def markdown_text(text: str) -> Iterator[tuple[int, str]]:
    yield from enumerate(text.splitlines(), 1)


def reference_files() -> list[tuple[Path, object]]:
    """Every reference file with the reader of its text."""
    files: list[tuple[Path, object]] = [(p, yaml_comments) for p in
                                        [REPO / "config.yaml",
                                         *sorted((REPO / "config").glob("*.yaml"))]]
    files += [(p, markdown_text) for p in [REPO / "README.md",
                                           *sorted((REPO / "docs").rglob("*.md"))]
              if not p.relative_to(REPO).as_posix().startswith("docs/log/")]
    files += [(p, python_text) for p in sorted((REPO / "src/pflrepro").rglob("*.py"))]
    return files


def history_hits(text: str, reader) -> list[str]:  # type: ignore[no-untyped-def]
    return [f"{number}: {match.group(0)!r} in {line.strip()}"
            for number, line in reader(text) for match in HISTORY.finditer(line)]


@pytest.mark.parametrize("text", [
    "0 is the former behaviour, bit for bit",
    "the value used before, PFLlib's default",
    "20 rounds (was 30): with 3 splits",
    "CIFAR-100 (lr 0.01, 100 rounds: not re-measured)",
    "did not fit this session",
    "the design before this change",
    "Named options that keep our earlier behaviour",
    "the old defaults `mean/epoch/all_to_all`",
    "the assignment of earlier versions of this scheme",
    "The review found the grid's sigma",
    "which now also lists",
    "Formerly the table was",
])
def test_a_history_phrase_is_found(text: str) -> None:
    assert history_hits(text, markdown_text) != []


@pytest.mark.parametrize("text", [
    "nothing was changed: name another file",
    "the model's parameters are no longer finite: the run diverged",
    "Once eps1 no longer binds, Fashion splits in round 21",
    "the old record is removed before the new file is renamed into place",
    "equals the permutation of an earlier group",
    "it was switched off",
    "the round it was reached",
    "performs worse (before tuning: see the table)",
])
def test_present_tense_text_is_not_a_hit(text: str) -> None:
    assert history_hits(text, markdown_text) == []


def test_yaml_values_and_pointers_are_not_comments() -> None:
    text = ('where: "a previously unseen client"  # our former default\n'
            "x: docs/a.md#formerly  # fine\n"
            "# (was 30)\n")
    assert [number for number, _ in yaml_comments(text)] == [1, 2, 3]
    assert [hit.split(":")[0] for hit in history_hits(text, yaml_comments)] == ["1", "3"]


def test_python_comments_and_strings_are_read_not_code() -> None:
    text = ('"""Docs: the former way."""\nformer = 1  # was it\n'
            'HELP = ("our old default")\n')
    assert history_hits(text, python_text) == [
        "1: 'former' in \"\"\"Docs: the former way.\"\"\"",
        "3: 'our old' in \"our old default\""]


def test_dated_logs_are_not_reference() -> None:
    paths = [path.relative_to(REPO).as_posix() for path, _ in reference_files()]
    assert "config.yaml" in paths and "README.md" in paths
    assert "src/pflrepro/config/settings_sources.py" in paths
    assert not any(p.startswith("docs/log/") for p in paths)


def test_reference_text_has_no_history_words() -> None:
    hits = [f"{path.relative_to(REPO)}:{hit}" for path, reader in reference_files()
            for hit in history_hits(path.read_text(encoding="utf-8"), reader)]
    assert hits == [], "history words in reference text (move them to docs/log/):\n" + \
        "\n".join(hits)
