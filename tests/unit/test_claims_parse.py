"""pflrepro.reporting.claims.parse: the shipped claims file, the loader's errors, designs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from _claims_helpers import ACROSS, COMPARE, REPO, _claim, doc

import pflrepro.pipeline.workflow as W
from pflrepro.config import parse
from pflrepro.reporting.claims.checks import evaluate_claims
from pflrepro.reporting.claims.parse import (
    ClaimsError,
    design_json,
    design_of,
    load_claims,
    parse_claims,
    parse_design,
    row_keys,
)
from pflrepro.store import results as R

CLAIMS = REPO / W.CLAIMS_FILE


def raw_config() -> dict[str, Any]:
    return yaml.safe_load((REPO / "config.yaml").read_text())


# --------------------------------------------------------------------------- the shipped file
def test_shipped_claims_load_and_name_existing_experiments_and_methods() -> None:
    claims = load_claims(CLAIMS)
    raw = raw_config()
    experiments, methods = raw["experiments"], raw["methods"]
    papers = {c.paper for c in claims}
    assert papers == {"FedeRiCo", "FedAMP", "PerFed-CKT", "FedMix"}
    for claim in claims:
        for scale, names in claim.experiments.items():
            for name in names:
                if claim.planned:
                    assert name not in experiments, (
                        f"{claim.id}: {name} now exists in config.yaml; drop 'planned'")
                    continue
                assert name in experiments, f"{claim.id}: no experiment {name!r}"
                assert experiments[name].get("scale", "paper") == scale, (claim.id, name)
                for method in claim.check.method_names():
                    assert method in experiments[name]["methods"], (claim.id, name, method)
                    algorithm = methods[method]["algorithm"]
                    if claim.check.type in ("weight_mass", "group_contrast",
                                            "weight_compare", "components_used",
                                            "self_weight", "weight_support",
                                            "weight_distance"):
                        assert algorithm in W.recording(R.WEIGHT), method
                    if claim.check.type == "record_peak":
                        assert algorithm in W.recording(claim.check.record), method
                    if claim.check.type == "clusters_used":
                        assert algorithm in W.recording(R.CLUSTER), method


def test_row_keys_of_the_shipped_file() -> None:
    claims = load_claims(CLAIMS)
    keys = row_keys(claims, "cpu")
    assert len(keys) == len(set(keys))
    assert ("federico-best", "federico_table1_cpu_fashion") in keys
    assert ("federico-only-one-above-local",  # scope together: one row
            "federico_table1_cpu_fashion + federico_table1_cpu_digits") in keys
    # paper-only claims (cpu: [], e.g. CIFAR-100) are rows at the paper scale only
    paper_only = {c.id for c in claims if not c.experiments["cpu"]}
    assert {"fedem-fedfomo-worse-on-cifar100", "fine-tuning-not-enough-on-cifar100",
            "heurfedamp-better-with-deep-models"} <= paper_only
    assert not paper_only & {cid for cid, _ in keys}
    assert ("fedem-fedfomo-worse-on-cifar100", "federico_table1_cifar100") in row_keys(
        claims, "paper")
    assert len(keys) == sum(1 if c.scope == "together" else len(c.experiments["cpu"])
                            for c in claims if c.experiments["cpu"])
    raw = raw_config()
    cfg = parse({**raw, "scale": "cpu"})
    design = design_of(cfg, [e for c in claims for e in c.experiments["cpu"]])
    assert design["federico_table1_cpu_digits"].seeds == ((0, 0), (1, 1), (2, 2), (3, 3), (4, 4))
    assert parse_design(design_json(design)) == design
    frame = evaluate_claims(claims, None, "cpu", design=design)
    assert list(zip(frame["id"], frame["experiment"], strict=True)) == keys
    # no results at all: nothing holds or fails; the unchecked claims are undecidable
    # wherever they are not planned (they say why), the others missing
    unchecked = {c.id for c in claims if c.check.type == "unchecked" and not c.planned}
    assert unchecked and set(frame["verdict"]) == {"missing", "undecidable"}
    assert set(frame.loc[frame["verdict"] == "undecidable", "id"]) == unchecked
    assert frame["margin"].isna().all() and (frame["n"] == 0).all()


@pytest.mark.parametrize(("claim", "message"), [
    (_claim(extra=1), r"unknown key\(s\) \['extra'\]"),
    ({k: v for k, v in _claim().items() if k != "where"}, r"missing key\(s\) \['where'\]"),
    (_claim(paper="FedAvg"), "paper: 'FedAvg' is not one of"),
    (_claim(id="Bad Id"), "lower case"),
    (_claim(experiments={"paper": ["exp"]}), r"missing key\(s\) \['cpu'\]"),
    (_claim(experiments={"paper": [], "cpu": []}), "no experiment at any scale"),
    (_claim(experiments={"paper": ["a", "a"], "cpu": []}), "listed twice"),
    (_claim(scope="both"), "scope: 'both' is not one of"),
    (_claim(check={**COMPARE, "op": "=>"}), "op: '=>' is not one of"),
    (_claim(check={**COMPARE, "type": "eval"}), "type: 'eval' is not one of"),
    (_claim(check={**COMPARE, "threshold": 0.5}), r"unknown key\(s\) \['threshold'\]"),
    (_claim(check={k: v for k, v in COMPARE.items() if k != "b"}), r"missing key\(s\) \['b'\]"),
    (_claim(check={**COMPARE, "b": "federico"}), "same method"),
    (_claim(check={**COMPARE, "tolerance": -1}), "outside"),
    (_claim(check={**COMPARE, "tolerance": True}), "expected a number"),
    (_claim(check={**COMPARE, "metric": "weighted_at"}), "round_fraction is required"),
    (_claim(check={**COMPARE, "round_fraction": 0.5}), "round_fraction is required"),
    (_claim(check={**COMPARE, "distributions": [0]}), "positive integers"),
    (_claim(check={"type": "above_all", "metric": "mean_bmta", "methods": ["a"],
                   "baselines": ["a", "b"]}), r"\['a'\] both in methods and baselines"),
    (_claim(check={"type": "above_all", "metric": "mean_bmta", "methods": ["a"],
                   "baselines": ["b"], "op": "<"}), "above_all takes"),
    (_claim(check={"type": "weight_mass", "method": "f", "threshold": 1.5}), "outside"),
    (_claim(check={"type": "weight_distance", "a": "f", "b": "f", "tolerance": 0.1}),
     "same method"),
    (_claim(check={"type": "compare", "metric": "mean_bmta", "a": "a", "b": "b", "op": ">",
                   "pool": "mean"}), r"unknown key\(s\) \['pool'\]"),
    (_claim(check={"type": "above_all", "metric": "mean_bmta", "methods": ["a"],
                   "baselines": ["b"], "pool": "sum"}), "pool: 'sum' is not one of"),
    (_claim(check={"type": "record_peak", "method": "f", "record": "accuracy",
                   "threshold": 0.5}), "record: 'accuracy' is not one of"),
    (_claim(check={"type": "unchecked"}), r"missing key\(s\) \['reason'\]"),
    (_claim(check={"type": "unchecked", "reason": " "}), "non-empty string"),
    (_claim(check={"type": "communication_across", "method": "m", "factor": 1, "op": ">"},
            experiments={"paper": ["a", "b"], "cpu": []}), "needs scope: together"),
    (_claim(check={"type": "communication_across", "method": "m", "factor": 1, "op": "<"},
            scope="together", experiments={"paper": ["a", "b"], "cpu": []}),
     "communication_across takes"),
    (_claim(check=dict(ACROSS), scope="together",
            experiments={"paper": ["a", "b", "c"], "cpu": []}), "exactly two experiments"),
    (_claim(check=dict(ACROSS), experiments={"paper": ["a", "b"], "cpu": []}),
     "needs scope: together"),
    (_claim(check={**ACROSS, "op": ">"}, scope="together",
            experiments={"paper": ["a", "b"], "cpu": []}), r"unknown key\(s\) \['op'\]"),
])
def test_loader_rejects_malformed_claims(claim: dict[str, Any], message: str) -> None:
    with pytest.raises(ClaimsError, match=message):
        parse_claims(doc(claim))


def test_loader_rejects_duplicate_ids_and_bad_documents(tmp_path: Path) -> None:
    with pytest.raises(ClaimsError, match="used twice"):
        parse_claims(doc(_claim(), _claim()))
    with pytest.raises(ClaimsError, match="the keys 'claims' and 'ties'"):
        parse_claims({"claim": []})
    with pytest.raises(ClaimsError, match="non-empty list"):
        parse_claims(doc())
    bad = tmp_path / "c.yaml"
    bad.write_text("claims: [")
    with pytest.raises(ClaimsError, match="not valid YAML"):
        load_claims(bad)


# --------------------------------------------------------------------------- workflow
def tiny(**experiment: Any) -> dict[str, Any]:
    raw = yaml.safe_load((REPO / "tests/workflow/config.yaml").read_text())
    raw["experiments"]["tiny"].update(experiment)
    return raw


def test_claims_targets_inputs_and_scale() -> None:
    claims = parse_claims(doc(
        _claim(experiments={"paper": ["tiny", "absent"], "cpu": ["tiny_cpu"]})))
    cfg = parse(tiny())
    assert "results/tables/claims.md" in W.all_targets(cfg, claims)
    assert "results/tables/claims.csv" in W.all_targets(cfg, claims)
    assert not any("claims" in t for t in W.all_targets(cfg))  # no claims given
    assert W.claims_inputs(cfg, claims, "claims") == ["results/aggregate/tiny.parquet"]
    assert W.claims_inputs(cfg, claims, "claims_cpu") == []
    assert W.claims_scale("claims_cpu") == "cpu" and W.claims_scale("claims") == "paper"
    with pytest.raises(ValueError, match="unknown claims table"):
        W.claims_scale("claims_gpu")
    # the claims name no experiment of this config: no claims table
    other = parse_claims(doc(_claim()))
    assert W.claims_targets(cfg, other) == []
    # CPU scale: the cpu table
    raw = tiny(scale="cpu")
    raw["scale"] = "cpu"
    raw["experiments"]["tiny_cpu"] = raw["experiments"].pop("tiny")
    assert W.claims_targets(parse(raw), claims) == ["results/tables/claims_cpu.md",
                                                    "results/tables/claims_cpu.csv"]
    raw["experiments"]["claims_cpu"] = raw["experiments"]["tiny_cpu"]
    with pytest.raises(ValueError, match="reserved for the claims tables"):
        W.claims_targets(parse(raw), claims)


# --------------------------------------------------------------------------- CPU designs
def test_every_cpu_design_has_three_seed_pairs() -> None:
    # with one seed pair every claim on them was inconclusive (n = 1, no interval), with
    # two most of them
    cfg = parse({**raw_config(), "scale": "cpu"})
    names = [n for n, e in cfg.experiments.items() if e.scale == "cpu"]
    assert len(names) == 19 and all(n.startswith(("perfedckt_", "fedmix_", "federico_",
                                                  "fedamp_")) for n in names)
    for name in names:
        assert len(cfg.experiments[name].seed_pairs()) >= 3, name


def test_perfedckt_cpu_partition_leaves_local_a_task() -> None:
    """The CPU analogue's clients hold more than one class (Local cannot be trivially
    right): the median effective number of classes, exp(entropy) of a client's label
    counts, of the configured Dirichlet draw over 10 balanced classes is at least 2
    (alpha 0.01 gave 1.0: one class per client)."""
    from pflrepro.data.schemes.dirichlet import DirichletPartitioner

    spec = raw_config()["experiments"]["perfedckt_table1_cpu"]["partitions"][0]
    part = DirichletPartitioner(clients=spec["clients"], alpha=spec["alpha"],
                                min_samples=spec["min_samples"])
    per_class = spec["max_samples"] // 10
    for seed in range(3):
        table = part.draw_counts(np.full(10, per_class), seed).astype(float)
        shares = table[table.sum(axis=1) > 0]
        shares = shares / shares.sum(axis=1, keepdims=True)
        logs = np.log(np.where(shares > 0, shares, 1.0))
        effective = np.exp(-(shares * logs).sum(axis=1))
        assert np.median(effective) >= 2.0, (seed, np.median(effective))


def test_fedmix_headline_claims_test_the_papers_variant() -> None:
    # The README's FedMix headline (and the FedMix tables) show `fedmix`, q(z|y), as the
    # paper runs it ("we always use q(z|y)"); every FedMix-beats-FedAvg claim on a column
    # tests that variant, and the shard-conditioned reading is a claim of its own that
    # says it is ours.
    claims = [c for c in load_claims(REPO / "config/claims.yaml")
              if c.paper == "FedMix" and c.check.type == "compare" and c.check.b == "fedavg"]
    by_variant: dict[str | None, list[str]] = {}
    for c in claims:
        by_variant.setdefault(c.check.a, []).append(c.id)
    assert sorted(by_variant["fedmix"]) == ["fedmix-beats-fedavg-label-permutation",
                                            "fedmix-beats-fedavg-label-skew",
                                            "fedmix-beats-fedavg-rotation"]
    assert set(by_variant) == {"fedmix", "fedmix_shard"}
    (shard,) = [c for c in claims if c.check.a == "fedmix_shard"]
    assert "our reading" in shard.claim
