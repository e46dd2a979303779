"""pflrepro.reporting.claims.power: the seed pairs a headline claim's verdict needs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from _claims_helpers import COMPARE, REPO, TIES, design_from, final_run

from pflrepro.reporting.claims.checks import evaluate_claims
from pflrepro.reporting.claims.parse import ClaimsError, load_claims, parse_claims
from pflrepro.reporting.claims.power import (
    UNDERPOWERED,
    pairs_to_decide,
    parse_power,
    power_status,
)
from pflrepro.reporting.claims.writer import write_claims

POWER = {"cap": 5, "reason": "the scale's time budget"}


def test_pairs_to_decide_by_hand() -> None:
    # half-width 2, margin 1, n 3: n (h / m)^2 = 12, so 13 pairs clear it
    assert pairs_to_decide(1.0, -1.0, 3.0, 3) == 13
    # half-width 1, margin 1: 3 (1/1)^2 = 3 -> 4
    assert pairs_to_decide(1.0, 0.0, 2.0, 3) == 4
    # a narrow interval still asks for one pair more than it has
    assert pairs_to_decide(-1.0, -1.2, -0.8, 3) == 4
    assert pairs_to_decide(0.0, -1.0, 1.0, 3) is None  # a margin of 0: never
    assert pairs_to_decide(1.0, float("nan"), float("nan"), 1) is None  # no interval


def test_power_status_of_each_case() -> None:
    assert power_status("holds", 1.0, 0.5, 1.5, 3, 5) == (None, "decided at n = 3")
    assert power_status("fails", -1.0, -1.5, -0.5, 4, 5) == (None, "decided at n = 4")
    need, text = power_status("undecidable", 0.0, 0.0, 0.0, 3, 5)
    assert need is None and text == "undecidable: seed pairs do not decide it"
    need, text = power_status("inconclusive", 1.0, 0.0, 2.0, 3, 5)
    assert need == 4 and text.startswith(UNDERPOWERED) and "about 4 seed pairs" in text
    need, text = power_status("inconclusive", 1.0, -1.0, 3.0, 3, 5)
    assert need == 13 and "above the cap of 5" in text and UNDERPOWERED not in text
    # at the cap every further pair is above it
    need, text = power_status("inconclusive", 1.0, 0.0, 2.0, 5, 5)
    assert need == 6 and "above the cap of 5" in text
    need, text = power_status("inconclusive", 0.0, -1.0, 1.0, 3, 5)
    assert need is None and "a margin of 0" in text


@pytest.mark.parametrize(("raw", "message"), [
    ({"cap": 1, "reason": "r"}, "cap: expected a whole number"),
    ({"cap": True, "reason": "r"}, "cap: expected a whole number"),
    ({"cap": "5", "reason": "r"}, "cap: expected a whole number"),
    ({"cap": 5, "reason": " "}, "reason: expected a non-empty text"),
    ({"cap": 5}, "expected the keys 'cap' and 'reason'"),
    ({"cap": 5, "reason": "r", "more": 1}, "expected the keys 'cap' and 'reason'"),
])
def test_parse_power_rejects(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_power(raw, "claims: power")


def _doc(headline: bool, power: dict[str, Any] | None = POWER) -> dict[str, Any]:
    claim = {"id": "c0", "paper": "FedeRiCo", "where": "Table 1", "claim": "claim 0",
             "experiments": {"paper": ["exp"], "cpu": []}, "check": dict(COMPARE),
             "headline": headline}
    out: dict[str, Any] = {"claims": [claim], "ties": TIES}
    if power is not None:
        out["power"] = power
    return out


def test_a_headline_claim_needs_the_power_block() -> None:
    with pytest.raises(ClaimsError, match="headline: a headline claim needs the file's 'power'"):
        parse_claims(_doc(True, None))
    with pytest.raises(ClaimsError, match="power.cap"):
        parse_claims(_doc(True, {"cap": 0, "reason": "r"}))
    assert parse_claims(_doc(True))[0].pair_cap == 5
    assert parse_claims(_doc(False))[0].pair_cap is None
    assert parse_claims(_doc(False, None))[0].pair_cap is None


def _three_pairs(gaps: list[float]) -> pd.DataFrame:
    """FedeRiCo 50 % + gap against Local's 50 % in each of three seed pairs."""
    return pd.concat([r for s, gap in enumerate(gaps)
                      for r in (final_run("federico", 0.5 + gap / 100, train_seed=s),
                                final_run("local", 0.5, train_seed=s))], ignore_index=True)


@pytest.mark.parametrize(("gaps", "power"), [
    # margins 2, 0, 1 pp: interval [0, 2] at n = 3, so 4 pairs would clear 0: underpowered
    ([2.0, 0.0, 1.0], "underpowered: about 4 seed pairs would decide it (n = 3, cap 5)"),
    # 3, -1, 1: [-1, 3], 13 pairs, above the cap
    ([3.0, -1.0, 1.0], "at n = 3, about 13 seed pairs would decide it, above the cap of 5"),
    ([2.0, 1.0, 3.0], "decided at n = 3"),
])
def test_a_headline_row_states_its_seed_pairs(tmp_path: Path, gaps: list[float],
                                             power: str) -> None:
    agg = _three_pairs(gaps)
    frame = evaluate_claims(parse_claims(_doc(True)), agg, "paper", design=design_from(agg))
    assert frame["power"].tolist() == [power]
    write_claims(frame, tmp_path / "c.md", tmp_path / "c.csv", scale="paper")
    md = (tmp_path / "c.md").read_text()
    assert "Headline rows (1; the claims the README leads with)" in md
    assert f"| {power} |" in md and md.index("Headline rows") < md.index("## Every claim")
    # a claim that is not a headline gets no power cell and no section
    plain = evaluate_claims(parse_claims(_doc(False)), agg, "paper", design=design_from(agg))
    assert plain["power"].tolist() == [""] and plain["pairs_needed"].isna().all()
    write_claims(plain, tmp_path / "p.md", tmp_path / "p.csv", scale="paper")
    assert "Headline rows" not in (tmp_path / "p.md").read_text()


def test_the_shipped_headline_claims_have_the_cap_and_cpu_experiments() -> None:
    claims = load_claims(REPO / "config/claims.yaml")
    heads = [c for c in claims if c.pair_cap is not None]
    assert {c.paper for c in heads} == {"FedeRiCo", "FedAMP", "PerFed-CKT", "FedMix"}
    assert all(c.pair_cap == 5 and c.experiments["cpu"] for c in heads)
    assert {"federico-best", "fedamp-best-on-practical", "perfedckt-near-fedfomo",
            "fedmix-beats-fedavg-rotation"} <= {c.id for c in heads}
