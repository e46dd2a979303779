import copy
from pathlib import Path

import pytest
import yaml

from pflrepro.config import ConfigError, RunKey, parse
from pflrepro.config.codedigest import code_digest

REPO = Path(__file__).resolve().parents[2]
TINY = yaml.safe_load((REPO / "tests/workflow/config.yaml").read_text())


def test_parse_tiny_config() -> None:
    cfg = parse(TINY)
    exp = cfg.experiments["tiny"]
    assert exp.dataset == "digits"
    assert exp.methods == ("local", "fedavg", "fedavg_plus", "federico")
    assert [p.scheme for p in exp.partitions] == ["label_groups", "dirichlet"]
    assert exp.training.rounds == 3 and exp.training.model == "mlp"
    assert cfg.methods["federico"].params == {"beta": 0.6}
    # 2 partitions x 4 methods x 1 split x 2 seeds
    assert len(list(cfg.runs("tiny"))) == 16
    assert len(list(cfg.runs("tiny", "federico"))) == 4
    assert len(list(cfg.partitions())) == 2


def paired(split_seeds: list[int], train_seeds: list[int], pairing: str | None = "paired"
           ) -> dict:
    raw = copy.deepcopy(TINY)
    exp = raw["experiments"]["tiny"]
    exp.update(split_seeds=split_seeds, train_seeds=train_seeds)
    if pairing is not None:
        exp["seed_pairing"] = pairing
    return raw


def test_grid_pairing_is_the_default() -> None:
    cfg = parse(paired([0, 1], [5, 6, 7], pairing=None))
    exp = cfg.experiments["tiny"]
    assert exp.seed_pairing == "grid"
    assert exp.seed_pairs() == ((0, 5), (0, 6), (0, 7), (1, 5), (1, 6), (1, 7))
    assert parse(paired([0, 1], [5, 6, 7], "grid")).experiments["tiny"] == exp


def test_paired_seeds_run_the_zipped_pairs_only() -> None:
    cfg = parse(paired([0, 1, 2], [3, 4, 5]))
    exp = cfg.experiments["tiny"]
    assert exp.seed_pairs() == ((0, 3), (1, 4), (2, 5))
    pid = exp.partitions[0].id
    runs = [(k.split, k.seed) for k in cfg.runs("tiny", "federico") if k.partition == pid]
    assert runs == [(0, 3), (1, 4), (2, 5)]
    # 2 partitions x 4 methods x 3 pairs (a grid would be 2 x 4 x 9)
    assert len(list(cfg.runs("tiny"))) == 24
    # every split seed still gets its partition
    assert sorted(s for _, _, s in cfg.partitions()) == [0, 0, 1, 1, 2, 2]


@pytest.mark.parametrize(("split_seeds", "train_seeds"), [([0, 1, 2], [0]), ([0], [0, 1])])
def test_paired_seeds_need_equal_lengths(split_seeds: list[int], train_seeds: list[int]
                                         ) -> None:
    message = (rf"experiments\.tiny: seed_pairing 'paired' .* equal lengths; got "
               rf"{len(split_seeds)} split_seeds .* and {len(train_seeds)} train_seeds")
    with pytest.raises(ConfigError, match=message):
        parse(paired(split_seeds, train_seeds))


def test_unknown_seed_pairing_is_rejected() -> None:
    with pytest.raises(ConfigError, match=r"experiments\.tiny\.seed_pairing: 'zip'"):
        parse(paired([0], [0], "zip"))


def test_experiment_training_overrides_defaults() -> None:
    raw = copy.deepcopy(TINY)
    raw["experiments"]["tiny"]["training"] = {"rounds": 7}
    exp = parse(raw).experiments["tiny"]
    assert exp.training.rounds == 7
    assert exp.training.batch_size == 32  # from the defaults


def test_run_spec_holds_only_its_method() -> None:
    cfg = parse(TINY)
    pid = cfg.experiments["tiny"].partitions[0].id
    spec = cfg.run_spec(RunKey("tiny", pid, "federico", 0, 1))
    assert spec["algorithm"] == "federico" and spec["params"] == {"beta": 0.6}
    assert spec["train_seed"] == 1 and spec["training"]["rounds"] == 3
    other = cfg.run_spec(RunKey("tiny", pid, "fedavg", 0, 1))
    assert other["params"] == {}
    # changing FedeRiCo's hyperparameter leaves FedAvg's spec unchanged
    raw = copy.deepcopy(TINY)
    raw["methods"]["federico"]["beta"] = 0.1
    cfg2 = parse(raw)
    assert cfg2.run_spec(RunKey("tiny", pid, "fedavg", 0, 1)) == other
    assert cfg2.run_spec(RunKey("tiny", pid, "federico", 0, 1)) != spec


def test_code_digest_differs_by_algorithm_and_includes_bases() -> None:
    assert code_digest("federico") != code_digest("fedavg")
    assert code_digest("fedavg") == code_digest("fedavg")
    assert len(code_digest("local")) == 16


@pytest.mark.parametrize(("path", "value", "message"), [
    (("methods", "x"), {"algorithm": "nope"}, "methods.x"),
    (("methods", "federico"), {"algorithm": "federico", "epsilon": 3.0}, "epsilon"),
    (("experiments", "tiny", "dataset"), "imagenet", "experiments.tiny.dataset"),
    (("experiments", "tiny", "methods"), ["ghost"], "ghost"),
    (("experiments", "tiny", "partitions"), [{"scheme": "nope", "clients": 2}],
     "partitions[0]"),
    (("experiments", "tiny", "training"), {"rounds": 0}, "rounds"),
    (("experiments", "tiny", "training"), {"colour": 1}, "colour"),
    (("data",), {"mirrors": {"imagenet": ["x"]}}, "data.mirrors.imagenet"),
    (("data",), {"mirrors": {"mnist": "/x"}}, "data.mirrors.mnist: must be a list"),
    (("data",), {"checksums": {"mnist": {"x.gz": "ab" * 32}}}, "data.checksums.mnist.x.gz"),
])
def test_errors_name_the_key(path: tuple[str, ...], value: object, message: str) -> None:
    raw = copy.deepcopy(TINY)
    node = raw
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = value
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse(raw)


def test_duplicate_partition_rejected() -> None:
    raw = copy.deepcopy(TINY)
    p = raw["experiments"]["tiny"]["partitions"][0]
    raw["experiments"]["tiny"]["partitions"] = [p, dict(p)]
    with pytest.raises(ConfigError, match="twice"):
        parse(raw)


def test_repository_configs_parse() -> None:
    for path in ("config.yaml", "config/demo.yaml", "config/convergence_fashion.yaml"):
        cfg = parse(yaml.safe_load((REPO / path).read_text()))
        assert cfg.experiments


def test_public_set_config() -> None:
    cfg = parse(TINY)
    public = cfg.experiments["tiny"].public
    assert public is not None and (public.dataset, public.size) == ("digits", 100)
    raw = copy.deepcopy(TINY)
    raw["experiments"]["tiny"]["public"] = {"dataset": "digits", "size": 0}
    with pytest.raises(ConfigError, match="public.size"):
        parse(raw)
    raw["experiments"]["tiny"]["public"] = {"dataset": "imagenet", "size": 5}
    with pytest.raises(ConfigError, match="public.dataset"):
        parse(raw)


def test_method_sources_are_checked_and_kept_out_of_the_params() -> None:
    raw = copy.deepcopy(TINY)
    raw["methods"]["federico"]["sources"] = {"beta": "paper: FedeRiCo's default 0.6",
                                             "epsilon": "unstated: our reading"}
    cfg = parse(raw)
    assert cfg.methods["federico"].params == {"beta": 0.6}  # not a hyperparameter
    assert cfg.methods["federico"].sources == {"beta": "paper: FedeRiCo's default 0.6",
                                               "epsilon": "unstated: our reading"}
    spec = cfg.run_spec(next(iter(cfg.runs("tiny", "federico"))))
    assert spec["params"] == {"beta": 0.6}
    for bad, message in (({"colour": "paper: x"}, "not a hyperparameter of federico"),
                         ({"beta": "because"}, "must read 'paper: <where>'"),
                         ({"beta": "paper:  "}, "must read 'paper: <where>'")):
        raw["methods"]["federico"]["sources"] = bad
        with pytest.raises(ConfigError, match=message):
            parse(raw)


#: Unstated values that move results (issue 24), by algorithm: every paper-scale
#: experiment of config.yaml selects them on validation (its `tune:` block).
UNSTATED = {"fedamp": {"sigma", "prox"}, "heurfedamp": {"sigma", "prox", "self_attention"},
            "fedprox": {"mu"}, "fedprox_ft": {"mu"}, "ditto": {"lam"},
            "per_fedavg": {"alpha"}, "perfedckt": {"lam"}}


def test_paper_scale_experiments_tune_the_unstated_values_that_move_results() -> None:
    cfg = parse(yaml.safe_load((REPO / "config.yaml").read_text()))
    seen = set()
    for name, exp in cfg.experiments.items():
        if exp.scale != "paper":
            continue
        for method in exp.methods:
            keys = UNSTATED.get(cfg.methods[method].algorithm, set())
            if not keys:
                continue
            assert exp.tune is not None, f"{name} has {method} but no tune block"
            tuned = {g.key for g in exp.tune.methods.get(method, ())}
            assert keys <= tuned, (name, method, sorted(keys - tuned))
            # the value is not fixed in the method entry (that would turn tuning off),
            # and its source says it is unstated
            assert not keys & set(cfg.methods[method].params), (name, method)
            assert all(cfg.methods[method].sources[k].startswith("unstated:") for k in keys)
            seen.add(cfg.methods[method].algorithm)
    assert seen == set(UNSTATED)


def test_fedamp_before_after_config_adds_the_hand_set_rows() -> None:
    """config/fedamp_before_after.yaml merged over config.yaml, as Snakemake merges it."""
    from pflrepro.config import check_config_paths

    files = [REPO / "config.yaml", REPO / "config/fedamp_before_after.yaml"]
    schema = REPO / "workflow/schemas/config.schema.yaml"
    cfg = check_config_paths(files, schema)
    own = check_config_paths(files[:1], schema)
    hand = {"fedamp_hand", "heurfedamp_hand", "fedprox_hand", "fedprox_ft_hand"}
    # each experiment keeps config.yaml's rows, in order, and adds the hand-set ones
    for name in ("fedamp_iid_fashion", "fedamp_practical_fashion", "fedamp_iid_fashion_cpu",
                 "fedamp_patho_fashion_cpu", "fedamp_practical_fashion_cpu"):
        methods = cfg.experiments[name].methods
        assert tuple(m for m in methods if m not in hand | {"ditto_hand"}) == \
            own.experiments[name].methods
    # the values config.yaml held by hand before the tune blocks (lam/alpha = 1)
    assert dict(cfg.methods["fedamp_hand"].params) == {
        "init": "shared", "distance": "mean", "sigma": 1e-5, "alpha": 5e-7, "lam": 5e-7}
    assert dict(cfg.methods["heurfedamp_hand"].params) == {
        "init": "shared", "sigma": 50.0, "self_attention": 0.5, "lam": 1.0, "alpha": 1.0}
    assert cfg.methods["fedprox_hand"].params["mu"] == 0.01
    for name in ("fedamp_iid_fashion", "fedamp_practical_fashion"):
        exp = cfg.experiments[name]
        assert hand <= set(exp.methods) and {"fedamp", "heurfedamp"} <= set(exp.methods)
        assert exp.train_seeds == (0,) and exp.training.device == "cpu"
        assert exp.resources["gpu"] == 0
        # the paper-scale settings themselves are config.yaml's
        assert (exp.training.rounds, exp.training.lr, exp.tune.rounds) == (200, 0.1, 50)
        assert not hand & set(exp.tune.methods)  # hand rows fix their values: untuned
    cpu = cfg.experiments["fedamp_practical_fashion_cpu"]
    assert hand | {"ditto_hand"} <= set(cpu.methods)
    assert cpu.train_seeds == own.experiments["fedamp_practical_fashion_cpu"].train_seeds
