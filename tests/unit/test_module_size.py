"""No module of the package is over 500 lines: a file holds one concern a reader can
take in at once (split a growing module where its concerns part)."""

from __future__ import annotations

from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "pflrepro"
LIMIT = 500


def test_every_module_is_at_most_500_lines() -> None:
    sizes = {path.relative_to(SRC).as_posix(): len(path.read_text().splitlines())
             for path in SRC.rglob("*.py")}
    assert len(sizes) > 50  # the package was found
    over = {name: n for name, n in sizes.items() if n > LIMIT}
    assert not over, f"modules over {LIMIT} lines: {over}"
