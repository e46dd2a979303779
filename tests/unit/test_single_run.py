"""`pflrepro run` (one method, one partition, from flags), `pflrepro list`, and the errors a
new user meets first, each naming its fix."""

import copy
import json
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml

from pflrepro.algorithms.registry import INFOS
from pflrepro.cli import main
from pflrepro.config import ConfigError, RunKey, canonical_json, check
from pflrepro.config.schema import build_schema
from pflrepro.data.datasets import DATASETS
from pflrepro.data.partition import PARTITIONERS
from pflrepro.pipeline.single import SingleRun, single_run_config

ROOT = Path(__file__).resolve().parents[2]
FLAGS = ["--dataset", "digits", "--partition", "practical", "--clients", "4",
         "-o", "groups=2", "--rounds", "2", "--model", "mlp",
         "-t", "model_options={hidden: [16]}", "-t", "optimizer=sgd", "-t", "lr=0.05"]


@pytest.fixture(scope="module")
def dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("cli")
    return {"--work": str(root / "work"), "--data-root": str(root / "data"),
            "--raw": str(root / "raw")}


def _args(dirs: dict[str, str]) -> list[str]:
    return [x for kv in dirs.items() for x in kv]


def test_run_writes_the_same_table_as_the_workflow_train_job(
        dirs: dict[str, str], tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    out = tmp_path / "one.parquet"
    with caplog.at_level("INFO", logger="pflrepro"):
        assert main(["run", "--method", "fedamp", *FLAGS, "-p", "lam=0.0001", "--seed", "1",
                     "--out", str(out), *_args(dirs)]) == 0
    # it said where it writes (results/ in the current directory, unannounced, before)
    assert (f"pflrepro run writes prepared data under {Path(dirs['--data-root']).resolve()}, "
            f"partitions and public sets under {Path(dirs['--work']).resolve()}, the run "
            f"table to {out.resolve()}") in caplog.text
    table = pd.read_parquet(out)
    assert set(table["experiment"]) == {"run"} and set(table["method"]) == {"fedamp"}
    assert json.loads(table["params"].iloc[0]) == {"lam": 0.0001}
    assert table["train_seed"].iloc[0] == 1 and table["split_seed"].iloc[0] == 1
    assert table["round"].max() == 2
    # the same spec through `pflrepro train`, as a workflow job runs it: the same bytes
    req = SingleRun("fedamp", "digits", "practical", {"clients": 4, "groups": 2},
                    {"lam": 0.0001}, {"rounds": 2, "model": "mlp",
                                   "model_options": {"hidden": [16]}, "optimizer": "sgd",
                                   "lr": 0.05}, split_seed=1, train_seed=1)
    cfg = check(single_run_config(req), build_schema())
    pid = cfg.experiments["run"].partitions[0].id
    assert set(table["partition"]) == {pid}
    spec = canonical_json(cfg.run_spec(RunKey("run", pid, "fedamp", 1, 1)))
    part = Path(dirs["--work"]) / "partitions/digits" / pid / "split1.parquet"
    again = tmp_path / "again.parquet"
    assert main(["train", "--spec", spec, "--data", str(Path(dirs["--data-root"]) / "digits"),
                 "--partition", str(part), "--out", str(again)]) == 0
    drop = ["git_revision"]
    pd.testing.assert_frame_equal(table.drop(columns=drop),
                                  pd.read_parquet(again).drop(columns=drop))


def test_run_of_a_method_that_distills_on_a_public_set(dirs: dict[str, str]) -> None:
    name = next(n for n, i in INFOS.items() if i.needs_public)
    flags = ["--dataset", "digits", "--partition", "iid", "--clients", "3", "-o",
             "max_samples=300", "--rounds", "1", "--model", "mlp"]
    assert main(["run", "--method", name, *flags, "--public-size", "50", *_args(dirs)]) == 0
    runs = list((Path(dirs["--work"]) / "runs/digits").rglob(f"{name}/split0-seed0.parquet"))
    assert len(runs) == 1


def test_list_shows_every_method_data_set_and_scheme(capsys: pytest.CaptureFixture[str]
                                                     ) -> None:
    assert main(["list"]) == 0
    text = capsys.readouterr().out
    for name in [*INFOS, *DATASETS, *PARTITIONERS]:
        assert f"- {name}: " in text or f"- {name} (" in text, name
    assert "- digits (1797 samples, 10 classes)" in text
    # the details are behind the subcommands: each hyperparameter with its doc after
    assert main(["list", "methods"]) == 0
    assert "  - lam: float, default 1e-07 (>= 0.0)." in capsys.readouterr().out  # FedAMP's λ
    assert main(["list", "partitions"]) == 0
    assert "  - groups: default (required)." in capsys.readouterr().out
    assert main(["list", "datasets"]) == 0
    assert "## " not in capsys.readouterr().out


# ------------------------------------------------------------- first errors, and fixes
@pytest.mark.parametrize(("flags", "message"), [
    (["--method", "fedfoo", *FLAGS],
     r"unknown method 'fedfoo'; known: \[.*\] \(`pflrepro list methods` shows them"),
    (["--method", "fedavg", *FLAGS[:3], "nope", *FLAGS[4:]],
     r"unknown partition scheme 'nope'.*`pflrepro list partitions`"),
    (["--method", "fedavg", "--dataset", "imagenet", *FLAGS[2:]],
     r"unknown data set 'imagenet'.*`pflrepro list datasets`"),
    (["--method", "fedavg", *FLAGS, "-p", "mu=1"],
     r"--param: algorithm 'fedavg': unknown hyperparameter\(s\) \['mu'\].*"
     r"`pflrepro list methods`"),
    (["--method", "fedavg", *FLAGS, "-o", "colour=red"],
     r"--clients/--partition-option: partition scheme 'practical': unknown key\(s\) "
     r"\['colour'\].*`pflrepro list partitions`"),
    (["--method", "scaffold", *FLAGS[:-2], "-t", "optimizer=adam"],
     r"method 'scaffold' \(algorithm scaffold\) requires plain SGD"),
])
def test_run_errors_name_the_fix(flags: list[str], message: str, dirs: dict[str, str],
                                 capsys: pytest.CaptureFixture[str]) -> None:
    import re

    assert main(["run", *flags, *_args(dirs)]) == 1
    assert re.search(message, capsys.readouterr().err)


def test_a_partition_error_gives_its_hint_once(dirs: dict[str, str],
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """A scheme's own message already names `pflrepro list partitions`: not said twice."""
    flags = ["--method", "fedavg", "--dataset", "digits", "--partition", "dirichlet",
             "--clients", "4"]
    assert main(["run", *flags, *_args(dirs)]) == 1
    err = capsys.readouterr().err
    assert "needs alpha" in err
    assert err.count("pflrepro list partitions") == 1


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_asked_for_without_cuda(dirs: dict[str, str],
                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--method", "fedavg", *FLAGS, "--device", "cuda", *_args(dirs)]) == 1
    err = capsys.readouterr().err
    assert "no CUDA device is available" in err
    assert "set training.device: auto (or cpu)" in err


def test_a_data_set_not_downloaded_and_no_network(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "mirror"
    empty.mkdir()
    assert main(["prepare", "--dataset", "mnist", "--out", str(tmp_path / "out"), "--raw",
                 str(tmp_path / "raw"), "--mirror", str(empty)]) == 1
    err = capsys.readouterr().err
    assert "could not fetch train-images-idx3-ubyte.gz" in err
    assert "Fix: data set 'mnist' is not downloaded yet" in err
    assert "data.mirrors.mnist" in err and "--mirror DIR" in err
    assert not (tmp_path / "out" / "meta.json").exists()


@pytest.mark.parametrize("key", ["methods", "partitions", "split_seeds", "train_seeds"])
def test_an_empty_experiment_names_the_key_and_the_fix(key: str) -> None:
    raw = yaml.safe_load((ROOT / "config/demo.yaml").read_text())
    raw["experiments"]["demo_federico"][key] = []
    with pytest.raises(ConfigError) as info:
        check(copy.deepcopy(raw), ROOT / "workflow/schemas/config.schema.yaml")
    assert str(info.value).startswith(f"experiments.demo_federico.{key} is empty: give it at "
                                      "least 1 entry (config/demo.yaml has complete")


def test_no_experiment_at_all_names_the_fix() -> None:
    raw = yaml.safe_load((ROOT / "config/demo.yaml").read_text())
    raw["experiments"] = {}
    with pytest.raises(ConfigError, match=r"^experiments is empty: give it at least 1 key"):
        check(raw, ROOT / "workflow/schemas/config.schema.yaml")
