"""pflrepro.pipeline.train_job: the run spec and one complete small run on the digits data set."""

import json

import numpy as np
import pandas as pd
import pytest
import torch

from pflrepro.data.datasets import prepare_dataset
from pflrepro.data.partition import from_spec, write_partition
from pflrepro.data.store import load_dataset
from pflrepro.pipeline import train_job as train_job_module
from pflrepro.pipeline.train_job import RunSpec, run
from pflrepro.store import results as R
from pflrepro.training.settings import TrainingConfig

CLIENTS = 4
ROUNDS = 2


def _spec_dict(**over):
    d = {"experiment": "unit", "dataset": "digits", "partition": "label_groups-test",
         "method": "fedavg_mlp", "algorithm": "fedavg", "params": {}, "split_seed": 0,
         "train_seed": 0,
         "training": {"rounds": ROUNDS, "batch_size": 32, "optimizer": "adam", "lr": 0.01,
                      "model": "mlp", "model_options": {"hidden": [16]}, "device": "cpu"}}
    d.update(over)
    return d


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    root = tmp_path_factory.mktemp("digits")
    prepare_dataset("digits", root / "data", root / "raw")
    ds = load_dataset(root / "data")
    part = from_spec({"scheme": "label_groups", "clients": CLIENTS, "groups": 2})
    frame = part.split(np.asarray(ds.y), ds.meta.num_classes, seed=0)
    path = root / "partition.parquet"
    write_partition(frame, str(path), partitioner=part, dataset="digits", seed=0)
    return root / "data", path, frame


@pytest.fixture(autouse=True)
def _restore_torch_globals():
    det = torch.are_deterministic_algorithms_enabled()
    warn = torch.is_deterministic_algorithms_warn_only_enabled()
    threads = torch.get_num_threads()
    yield
    torch.use_deterministic_algorithms(det, warn_only=warn)
    torch.set_num_threads(threads)


def _run(prepared, **over):
    data_dir, part_path, _ = prepared
    spec = RunSpec.from_json(json.dumps(_spec_dict(**over)))
    return run(spec, data_dir, part_path, threads=1)  # tiny ops: one thread is fastest


def test_from_json():
    spec = RunSpec.from_json(json.dumps({**_spec_dict(), "code": "abc123"}))
    assert isinstance(spec.training, TrainingConfig) and spec.training.rounds == ROUNDS
    assert spec.algorithm == "fedavg" and spec.train_seed == 0


def test_from_json_rejects_unknown_keys():
    with pytest.raises(ValueError, match="unknown key"):
        RunSpec.from_json(json.dumps({**_spec_dict(), "extra": 1}))
    bad = _spec_dict()
    bad["training"] = {**bad["training"], "epochs": 3}
    with pytest.raises(ValueError, match="unknown key"):
        RunSpec.from_json(json.dumps(bad))


def test_run_table(prepared, monkeypatch):
    _, _, partition = prepared
    frame = _run(prepared, algorithm="federico", method="federico",
                 params={"neighbors": 1})
    assert list(frame.columns) == [*R.VALUE_COLUMNS, *R.CONFIG_COLUMNS]
    dtypes = {c: str(t) for c, t in frame.dtypes.items()}
    assert dtypes["round"] == dtypes["client"] == dtypes["peer"] == "int32"
    assert dtypes["value"] == "float64"
    assert dtypes["split_seed"] == dtypes["train_seed"] == "int64"
    for col in ("metric", *(c for c in R.CONFIG_COLUMNS if "seed" not in c)):
        assert dtypes[col] == "string", col
    first = frame.iloc[0]
    assert first["experiment"] == "unit" and first["dataset"] == "digits"
    assert first["algorithm"] == "federico" and first["params"] == '{"neighbors": 1}'
    assert first["package_version"] == R.package_version() and first["git_revision"]
    for col in R.CONFIG_COLUMNS:
        assert frame[col].nunique() == 1
    # static facts at round 0, matching the partition file
    r0 = frame[frame["round"] == 0]
    counts = partition.groupby(["client", "split"]).size()
    for metric, split in ((R.N_TRAIN, "train"), (R.N_TEST, "test")):
        rows = r0[r0["metric"] == metric].sort_values("client")
        assert rows["client"].tolist() == list(range(CLIENTS))
        assert rows["value"].tolist() == [counts[(k, split)] for k in range(CLIENTS)]
    groups = r0[r0["metric"] == R.GROUP].sort_values("client")["value"].tolist()
    assert groups == [float(partition.loc[partition["client"] == k, "group"].iloc[0])
                      for k in range(CLIENTS)]
    acc = frame[frame["metric"] == R.TEST_ACCURACY]
    assert sorted(set(acc["round"])) == list(range(ROUNDS + 1))
    assert (acc.groupby("round").size() == CLIENTS).all()
    assert acc["value"].between(0, 1).all()
    loss = frame[frame["metric"] == R.TRAIN_LOSS]
    assert sorted(set(loss["round"])) == list(range(1, ROUNDS + 1))
    weights = frame[frame["metric"] == R.WEIGHT]
    assert len(weights) == (ROUNDS + 1) * CLIENTS * CLIENTS
    sums = weights.groupby(["round", "client"])["value"].sum()
    np.testing.assert_allclose(sums.to_numpy(), 1.0, atol=1e-9)
    # training learns something: mean accuracy after 2 rounds beats round 0
    mean_acc = acc.groupby("round")["value"].mean()
    assert mean_acc[ROUNDS] > mean_acc[0]


def test_run_deterministic_and_seed_sensitive(prepared, monkeypatch):
    # pin the git revision: files edited between the two runs must not flip "+dirty"
    monkeypatch.setattr(R, "git_revision", lambda path=None: "pinned")
    a = _run(prepared)
    b = _run(prepared)
    pd.testing.assert_frame_equal(a, b)
    c = _run(prepared, train_seed=1)
    assert (c["train_seed"] == 1).all()
    va = a.loc[a["metric"] == R.TEST_LOSS, "value"].to_numpy()
    vc = c.loc[c["metric"] == R.TEST_LOSS, "value"].to_numpy()
    assert va.shape == vc.shape and not np.array_equal(va, vc)
    # the static facts do not depend on the training seed
    static = a["metric"].isin([R.N_TRAIN, R.N_TEST, R.GROUP])
    np.testing.assert_array_equal(a.loc[static, "value"], c.loc[static, "value"])


def test_run_rejects_partition_of_other_dataset(prepared):
    data_dir, part_path, _ = prepared
    spec = RunSpec.from_json(json.dumps(_spec_dict(dataset="mnist")))
    with pytest.raises(ValueError, match="is for data set 'digits'"):
        train_job_module.run(spec, data_dir, part_path)


@pytest.mark.parametrize("algorithm", ["fedavg", "federico", "fedem"])
def test_cpu_threads_give_the_same_table(prepared, monkeypatch, algorithm):
    # --threads T on the CPU: T client threads of one torch thread each, same bits
    monkeypatch.setattr(R, "git_revision", lambda path=None: "pinned")
    data_dir, part_path, _ = prepared
    spec = RunSpec.from_json(json.dumps(_spec_dict(algorithm=algorithm, method=algorithm)))
    torch.set_num_threads(2)
    one = run(spec, data_dir, part_path, threads=1)
    assert torch.get_num_threads() == 2  # restored after the run
    three = run(spec, data_dir, part_path, threads=3)
    pd.testing.assert_frame_equal(one, three, check_exact=True)


def test_a_public_set_reaches_the_method_and_must_match_the_spec(prepared, tmp_path):
    from pflrepro.data.public import public_split, write_public

    data_dir, part_path, frame = prepared
    ds = load_dataset(data_dir)
    rows = public_split(ds.meta.size, 40, seed=0)  # (the partition uses every row)
    public = tmp_path / "public.parquet"
    write_public(rows, str(public), dataset="digits", seed=0)
    spec = RunSpec.from_json(json.dumps(_spec_dict(
        method="ckt", algorithm="perfedckt", params={"clusters": 2},
        public={"dataset": "digits", "size": 40})))
    out = run(spec, data_dir, part_path, threads=1, public=(public, data_dir))
    up = out[(out["metric"] == R.COMM_UP) & (out["round"] == 1)]["value"]
    assert (up == 40 * 10).all()  # each client sent its soft decisions: |P| x N numbers
    with pytest.raises(ValueError, match="no --public file"):
        run(spec, data_dir, part_path, threads=1)
    wrong = RunSpec.from_json(json.dumps(_spec_dict(
        method="ckt", algorithm="perfedckt", public={"dataset": "digits", "size": 41})))
    with pytest.raises(ValueError, match="holds 40 rows"):
        run(wrong, data_dir, part_path, threads=1, public=(public, data_dir))
    with pytest.raises(ValueError, match="the run spec has no public set"):
        run(RunSpec.from_json(json.dumps(_spec_dict())), data_dir, part_path, threads=1,
            public=(public, data_dir))
