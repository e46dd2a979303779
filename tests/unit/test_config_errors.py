"""Malformed configs are rejected when the workflow is parsed, naming the key.

Each case mutates the tiny workflow config (``tests/workflow/config.yaml``) and runs
what ``common.smk`` runs: the schema check, then :func:`pflrepro.config.parse`.
Config files are re-read strictly: duplicate keys, syntax errors and empty files are
reported with file and line.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from pflrepro.algorithms.registry import INFOS
from pflrepro.config import ConfigError, check, check_config_files, load_config_file, parse
from pflrepro.config.schema import build_schema
from pflrepro.data.datasets import DATASETS

REPO = Path(__file__).resolve().parents[2]
TINY_PATH = REPO / "tests/workflow/config.yaml"
TINY = yaml.safe_load(TINY_PATH.read_text())
SCHEMA = REPO / "workflow/schemas/config.schema.yaml"

Mutate = Callable[[dict[str, Any]], None]


def _exp(c: dict[str, Any]) -> dict[str, Any]:
    return c["experiments"]["tiny"]


def _part(c: dict[str, Any], i: int = 0) -> dict[str, Any]:
    return c["experiments"]["tiny"]["partitions"][i]


def _scaffold_with(optimizer: str, momentum: float = 0.0) -> Mutate:
    def mutate(c: dict[str, Any]) -> None:
        c["methods"]["scaffold"] = {"algorithm": "scaffold"}
        _exp(c)["methods"].append("scaffold")
        c["training"].update(optimizer=optimizer, momentum=momentum)
    return mutate


CASES: list[tuple[str, Mutate, str]] = [
    # model options, checked against the model registry's declaration
    ("hidden_string", lambda c: c["training"]["model_options"].update(hidden="abc"),
     r"training\.model_options\.hidden \(model 'mlp'\): must be a list of integers"),
    ("hidden_zero", lambda c: c["training"]["model_options"].update(hidden=[0]),
     r"training\.model_options\.hidden .*must be >= 1"),
    ("hidden_float_item", lambda c: c["training"]["model_options"].update(hidden=[1.5]),
     r"training\.model_options\.hidden"),
    ("unknown_model_option", lambda c: c["training"]["model_options"].update(depth=3),
     r"training\.model_options\.depth: model 'mlp' has no option 'depth'"),
    ("cnn_option_on_mlp", lambda c: c["training"]["model_options"].update(kernel_size=3),
     r"model_options\.kernel_size"),
    ("cnn_channels_length",
     lambda c: c["training"].update(model="cnn", model_options={"channels": [8]}),
     r"training\.model_options\.channels \(model 'cnn'\): must list exactly 2"),
    ("cnn_hidden_negative",
     lambda c: c["training"].update(model="cnn", model_options={"hidden": -4}),
     r"training\.model_options\.hidden \(model 'cnn'\): must be >= 1"),
    # a model that cannot take the data set's images (VGG's five max-pools need 32x32)
    ("vgg_on_8x8_digits", lambda c: c["training"].update(model="vgg11", model_options={}),
     r"experiments\.tiny\.training\.model \(data set digits\): model 'vgg11' needs images "
     r"of at least 32x32, these are 8x8; models that take them: cnn, mlp"),
    ("vgg_architecture_on_8x8_digits",
     lambda c: c["training"].update(architectures=[{"model": "vgg13", "model_options": {}}]),
     r"experiments\.tiny\.training\.architectures\[0\]\.model \(data set digits\)"),
    ("model_options_in_experiment",
     lambda c: _exp(c).update(training={"model_options": {"hidden": "abc"}}),
     r"experiments\.tiny\.training\.model_options\.hidden"),
    # finite, positive training numbers
    ("lr_inf", lambda c: c["training"].update(lr=float("inf")),
     r"^training\.lr: must be a finite number, got inf"),
    ("lr_nan", lambda c: c["training"].update(lr=float("nan")),
     r"training\.lr: must be a finite number"),
    ("lr_zero", lambda c: c["training"].update(lr=0), r"training\.lr"),
    ("lr_negative", lambda c: c["training"].update(lr=-0.1), r"training\.lr"),
    ("lr_string", lambda c: c["training"].update(lr="fast"), r"training\.lr"),
    ("momentum_inf", lambda c: c["training"].update(momentum=float("inf")),
     r"training\.momentum: must be a finite number"),
    ("rounds_bool", lambda c: c["training"].update(rounds=True), r"training\.rounds"),
    ("hyper_inf", lambda c: c["methods"]["federico"].update(epsilon=float("inf")),
     r"methods\.federico"),
    ("hyper_nan", lambda c: c["methods"].update(apfl={"algorithm": "apfl",
                                                      "alpha_lr": float("nan")}),
     r"methods\.apfl\.alpha_lr: must be a finite number"),
    # duplicates in an experiment's lists
    ("methods_twice", lambda c: _exp(c).update(methods=["fedavg", "fedavg"]),
     r"experiments\.tiny\.methods: 'fedavg' is listed twice"),
    ("train_seeds_twice", lambda c: _exp(c).update(train_seeds=[0, 0]),
     r"experiments\.tiny\.train_seeds: 0 is listed twice"),
    ("split_seeds_twice", lambda c: _exp(c).update(split_seeds=[3, 1, 3]),
     r"experiments\.tiny\.split_seeds: 3 is listed twice"),
    ("negative_seed", lambda c: _exp(c).update(train_seeds=[-1]),
     r"experiments\.tiny\.train_seeds"),
    # the selected scale has no experiment
    ("scale_without_experiments", lambda c: c.update(scale="cpu"),
     r"scale: no experiment has scale 'cpu'.*tiny: paper"),
    ("experiment_scale_mismatch", lambda c: (c.update(scale="cpu"), _exp(c).update(scale="paper")),
     r"scale: no experiment has scale 'cpu'"),
    # sizes and labels from the data set catalog
    ("max_samples_below_clients", lambda c: _part(c).update(max_samples=3),
     r"experiments\.tiny\.partitions\[0\]\.max_samples: 3 samples cannot give 4 clients"),
    ("max_samples_below_two_per_client", lambda c: _part(c, 1).update(max_samples=7),
     r"experiments\.tiny\.partitions\[1\]\.max_samples"),
    ("more_clients_than_samples",
     lambda c: _exp(c).update(partitions=[{"scheme": "iid", "clients": 1000}]),
     r"experiments\.tiny\.partitions\[0\]\.clients: data set 'digits' has 1797 samples"),
    ("dirichlet_min_samples", lambda c: _part(c, 1).update(min_samples=500, max_samples=0),
     r"experiments\.tiny\.partitions\[1\]\.clients: .*500 each"),
    ("more_label_groups_than_labels",
     lambda c: _exp(c).update(partitions=[{"scheme": "label_groups", "clients": 12,
                                           "groups": 11}]),
     r"experiments\.tiny\.partitions\[0\]\.groups: 11 exceeds the 10 labels of data set "
     r"'digits'"),
    ("classes_per_client_above_labels",
     lambda c: _exp(c).update(partitions=[{"scheme": "pathological", "clients": 4,
                                           "classes_per_client": 11}]),
     r"partitions\[0\]\.classes_per_client: 11 exceeds the 10 labels"),
    ("practical_groups_above_labels",
     lambda c: _exp(c).update(partitions=[{"scheme": "practical", "clients": 12,
                                           "groups": 11}]),
     r"partitions\[0\]\.groups: 11 exceeds"),
    # a method that requires plain SGD, declared in the algorithm registry
    ("scaffold_adam", _scaffold_with("adam"),
     r"experiments\.tiny\.training\.optimizer: method 'scaffold' \(algorithm scaffold\) "
     r"requires plain SGD"),
    ("scaffold_momentum", _scaffold_with("sgd", 0.9), r"requires plain SGD.*momentum 0.9"),
    # client sampling only for the methods that train the round's participants
    ("client_fraction_federico", lambda c: c["training"].update(client_fraction=0.5),
     r"training\.client_fraction: method 'federico' \(algorithm federico\) trains every "
     r"client every round .* methods that do: \[.*'fedavg'"),
    ("perfedckt_without_public",
     lambda c: (c["methods"].update(ckt={"algorithm": "perfedckt", "clusters": 1}),
                _exp(c)["methods"].append("ckt"), _exp(c).pop("public", None)),
     r"experiments\.tiny\.public: method 'ckt' \(algorithm perfedckt\) distills on an "
     r"unlabeled public set"),
    # model heterogeneity only for the methods that accept several architectures
    ("architectures_federico",
     lambda c: c["training"].update(architectures=[{"model": "mlp"},
                                                   {"model": "mlp",
                                                    "model_options": {"hidden": [4]}}]),
     r"training\.architectures: method '\w+' \(algorithm \w+\) needs one "
     r"architecture for every client .* accept several: \[.*'feddf'.*'perfedckt'"),
    ("architecture_bad_option",
     lambda c: c["training"].update(architectures=[{"model": "mlp",
                                                    "model_options": {"hidden": "x"}}]),
     r"training\.architectures\[0\]: model_options\.hidden"),
    ("architecture_unknown_model",
     lambda c: c["training"].update(architectures=[{"model": "vgg19"}]),
     r"architectures"),
    ("architecture_assignment_unknown",
     lambda c: c["training"].update(architecture_assignment="random"),
     r"architecture_assignment"),
    ("client_fraction_zero", lambda c: c["training"].update(client_fraction=0.0),
     r"client_fraction must lie in \(0, 1\]"),
    # schema errors: short, naming the key
    ("unknown_top_level_key", lambda c: c.update(colour="blue"),
     r"^unknown key 'colour' at config top level; known: allow_huge, data, experiments, "
     r"methods, runs_per_job, scale, tables, training$"),
    ("runs_per_job_zero", lambda c: c.update(runs_per_job={"cpu": 0}), r"runs_per_job"),
    ("runs_per_job_unknown_scale", lambda c: c.update(runs_per_job={"gpu": 1}),
     r"unknown key 'gpu' at runs_per_job"),
    ("unknown_training_key", lambda c: c["training"].update(learning_rate=0.1),
     r"^unknown key 'learning_rate' at training; known: "),
    ("unknown_experiment_key", lambda c: _exp(c).update(seeds=[0]),
     r"^unknown key 'seeds' at experiments\.tiny; known: "),
    ("unknown_hyperparameter", lambda c: c["methods"]["federico"].update(gamma=1.0),
     r"unknown key 'gamma' at methods\.federico"),
    ("hyper_above_maximum", lambda c: c["methods"]["federico"].update(epsilon=2.0),
     r"methods\.federico\.epsilon: 2\.0 is greater than the maximum"),
    ("rounds_string", lambda c: c["training"].update(rounds="ten"),
     r"training\.rounds: 'ten' is not of type 'integer'"),
    ("unknown_dataset", lambda c: _exp(c).update(dataset="imagenet"),
     r"experiments\.tiny\.dataset: 'imagenet' is not one of"),
    ("unknown_optimizer", lambda c: c["training"].update(optimizer="rmsprop"),
     r"training\.optimizer: 'rmsprop' is not one of adam, sgd"),
    ("unknown_model", lambda c: c["training"].update(model="resnet"),
     r"training\.model: 'resnet' is not one of"),
    ("missing_methods", lambda c: c.pop("methods"),
     r"config top level: 'methods' is a required property"),
]


@pytest.mark.parametrize(("mutate", "message"), [(m, msg) for _, m, msg in CASES],
                         ids=[name for name, _, _ in CASES])
def test_malformed_config_is_rejected_naming_the_key(mutate: Mutate, message: str) -> None:
    raw = copy.deepcopy(TINY)
    mutate(raw)
    with pytest.raises(ConfigError) as info:
        check(raw, SCHEMA)
    text = str(info.value)
    assert re.search(message, text), text
    assert len(text.splitlines()) < 5, text


def test_enough_cases() -> None:
    assert len(CASES) >= 30


def test_the_tiny_config_passes() -> None:
    assert check(copy.deepcopy(TINY), SCHEMA).experiments["tiny"]


def test_unknown_top_level_key_message_is_short() -> None:
    raw = {**copy.deepcopy(TINY), "colour": "blue"}
    with pytest.raises(ConfigError) as info:
        check(raw, build_schema())  # the schema built from the registries
    assert len(str(info.value).splitlines()) < 5
    assert len(str(info.value)) < 300


def test_sgd_requirement_is_declared_in_the_registry() -> None:
    assert INFOS["scaffold"].requires_plain_sgd
    assert not INFOS["fedavg"].requires_plain_sgd
    raw = copy.deepcopy(TINY)
    _scaffold_with("sgd")(raw)
    assert "scaffold" in parse(raw).experiments["tiny"].methods


def test_catalog_declares_sizes_where_fixed() -> None:
    assert (DATASETS["digits"].num_samples, DATASETS["digits"].num_classes) == (1797, 10)
    assert DATASETS["cifar100"].num_classes == 100
    assert DATASETS["femnist"].num_samples is None  # built by hand: checked at job time


def test_unknown_size_is_left_to_the_job() -> None:
    raw = copy.deepcopy(TINY)
    _exp(raw).update(dataset="femnist", public=None,
                     partitions=[{"scheme": "natural", "clients": 100000}])
    del _exp(raw)["public"]
    assert parse(raw).experiments["tiny"].partitions[0].clients == 100000


# ------------------------------------------------------------------- config files
def _write(tmp_path: Path, text: str, name: str = "config.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_duplicate_key_names_file_and_line(tmp_path: Path) -> None:
    text = TINY_PATH.read_text().replace("  rounds: 3\n", "  rounds: 3\n  rounds: 30\n")
    path = _write(tmp_path, text)
    assert yaml.safe_load(text)["training"]["rounds"] == 30  # plain YAML: last one wins
    line = text.splitlines().index("  rounds: 30") + 1
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(path))}:{line}:3: duplicate key "
                                          rf"'rounds' \(first at line {line - 1}\)"):
        load_config_file(path)


def test_duplicate_top_level_key(tmp_path: Path) -> None:
    path = _write(tmp_path, TINY_PATH.read_text() + "\nmethods:\n  fedavg: {}\n")
    with pytest.raises(ConfigError, match=rf"{re.escape(str(path))}:\d+:1: duplicate key "
                                          r"'methods'"):
        check_config_files([path])


def test_merge_keys_are_not_duplicates(tmp_path: Path) -> None:
    path = _write(tmp_path, "base: &b {x: 1, y: 2}\nother:\n  <<: *b\n  x: 3\n")
    assert load_config_file(path)["other"] == {"x": 3, "y": 2}


def test_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "training:\n  rounds: [3\nmethods: {}\n")
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(path))}:3:\d+: YAML syntax error"):
        load_config_file(path)


def test_tab_indentation_names_file_and_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "training:\n\trounds: 3\n")
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(path))}:2:1: YAML syntax error"):
        load_config_file(path)


@pytest.mark.parametrize("text", ["", "# only a comment\n"])
def test_empty_file_is_named(tmp_path: Path, text: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(path))}: the config file is empty"):
        load_config_file(path)


def test_non_mapping_file_is_named(tmp_path: Path) -> None:
    path = _write(tmp_path, "- a\n- b\n")
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(path))}: .*must be a mapping"):
        load_config_file(path)


def test_missing_files_are_skipped(tmp_path: Path) -> None:
    check_config_files([tmp_path / "absent.yaml", TINY_PATH])


def test_repository_config_files_read_strictly() -> None:
    for path in ("config.yaml", "config/demo.yaml", "config/convergence_fashion.yaml",
                 "tests/workflow/config.yaml"):
        assert load_config_file(REPO / path) == yaml.safe_load((REPO / path).read_text())
        check(load_config_file(REPO / path), SCHEMA)


def test_config_paths_merge_as_snakemake_does(tmp_path: Path) -> None:
    from pflrepro.config import check_config_paths, merge_configs

    assert merge_configs({"a": {"x": 1, "y": 2}, "b": [1]}, {"a": {"y": 3}, "b": [2]}) == {
        "a": {"x": 1, "y": 3}, "b": [2]}
    override = _write(tmp_path, "training:\n  rounds: 7\n")
    cfg = check_config_paths([TINY_PATH, override], SCHEMA)
    assert cfg.experiments["tiny"].training.rounds == 7
    with pytest.raises(ConfigError, match="no config file given"):
        check_config_paths([], SCHEMA)


def test_files_in_force_put_the_command_lines_files_last() -> None:
    from pflrepro.config import files_in_force

    # Snakemake lists the --configfile files first, then the Snakefile's own
    loaded = ["/w/mine.yaml", "/w/more.yaml", "/w/config.yaml"]
    given = ["/w/mine.yaml", "/w/more.yaml"]
    assert files_in_force(loaded, given) == ["/w/config.yaml", "/w/mine.yaml", "/w/more.yaml"]
    assert files_in_force(loaded, given, replace=True) == ["/w/mine.yaml", "/w/more.yaml"]
    assert files_in_force(["/w/config.yaml"], []) == ["/w/config.yaml"]


def _set(path: tuple[Any, ...], value: Any) -> Mutate:
    def mutate(raw: dict[str, Any]) -> None:
        node = raw
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    return mutate


@pytest.mark.parametrize(("mutate", "suggestion"), [
    (_set(("experiments", "tiny", "methods"), ["fedavgg"]), "did you mean 'fedavg'?"),
    (_set(("experiments", "tiny", "dataset"), "digit"), "did you mean 'digits'?"),
    (_set(("experiments", "tiny", "split_seed"), [0]), "did you mean 'split_seeds'?"),
    (_set(("experiments", "tiny", "partitions", 0, "scheme"), "dirichlett"),
     "did you mean 'dirichlet'?"),
    (_set(("training", "optimiser"), "sgd"), "did you mean 'optimizer'?"),
])
def test_a_near_miss_name_gets_a_did_you_mean(mutate: Mutate, suggestion: str) -> None:
    raw = copy.deepcopy(TINY)
    mutate(raw)
    with pytest.raises(ConfigError) as info:
        check(raw, SCHEMA)
    assert suggestion in str(info.value)
    assert "\n" not in str(info.value)


def test_a_name_far_from_every_known_one_gets_no_guess() -> None:
    raw = copy.deepcopy(TINY)
    raw["experiments"]["tiny"]["methods"] = ["zzzzzz"]
    with pytest.raises(ConfigError) as info:
        check(raw, SCHEMA)
    assert "did you mean" not in str(info.value)
