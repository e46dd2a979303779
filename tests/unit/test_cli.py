import json
from pathlib import Path

import pandas as pd
import pytest

from pflrepro.cli import main

#: A one-round FedAvg run of a linear model on digits (the train command's --spec).
TINY_RUN = {"experiment": "e", "dataset": "digits", "partition": "p", "method": "fedavg",
            "algorithm": "fedavg", "params": {}, "split_seed": 0, "train_seed": 0,
            "training": {"rounds": 1, "model": "mlp", "model_options": {"hidden": []},
                         "device": "cpu"}}


@pytest.fixture(scope="module")
def digits(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("data") / "digits"
    assert main(["prepare", "--dataset", "digits", "--out", str(out), "--raw",
                 str(out.parent / "raw")]) == 0
    return out


def test_prepare_partition_train_aggregate_table(digits: Path, tmp_path: Path) -> None:
    part = tmp_path / "p.parquet"
    spec = {"scheme": "label_groups", "clients": 4, "groups": 2}
    assert main(["partition", "--data", str(digits / "meta.json"), "--dataset", "digits",
                 "--spec", json.dumps(spec), "--seed", "0", "--out", str(part)]) == 0
    frame = pd.read_parquet(part)
    assert sorted(frame["client"].unique()) == [0, 1, 2, 3]
    run_spec = TINY_RUN
    run = tmp_path / "run.parquet"
    assert main(["train", "--spec", json.dumps(run_spec), "--data", str(digits),
                 "--partition", str(part), "--out", str(run)]) == 0
    agg = tmp_path / "agg.parquet"
    assert main(["aggregate", "--out", str(agg), str(run)]) == 0
    assert len(pd.read_parquet(agg)) == len(pd.read_parquet(run))
    md, tex, csv = (tmp_path / f"t.{e}" for e in ("md", "tex", "csv"))
    assert main(["table", "--aggregate", str(agg), "--md", str(md), "--tex", str(tex),
                 "--csv", str(csv)]) == 0
    assert "| FedAvg |" in md.read_text()  # the paper's name; the CSV keeps the id


def test_known_errors_return_1_with_a_message(digits: Path, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["partition", "--data", str(digits), "--dataset", "digits", "--spec",
                 json.dumps({"scheme": "nope", "clients": 2}), "--seed", "0", "--out",
                 str(tmp_path / "x.parquet")])
    assert code == 1
    assert "unknown partition scheme 'nope'" in capsys.readouterr().err
    assert not (tmp_path / "x.parquet").exists()


def test_train_rejects_unknown_spec_key(digits: Path, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["train", "--spec", json.dumps({"bogus": 1}), "--data", str(digits),
                 "--partition", "x", "--out", str(tmp_path / "r.parquet")])
    assert code == 1
    assert "bogus" in capsys.readouterr().err


def test_unknown_dataset(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["prepare", "--dataset", "imagenet", "--out", str(tmp_path / "o"),
                 "--raw", str(tmp_path / "r")]) == 1
    assert "unknown data set 'imagenet'" in capsys.readouterr().err


def test_schema_prints_yaml(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema"]) == 0
    assert "additionalProperties: false" in capsys.readouterr().out


def test_public_set_avoids_client_rows(digits: Path, tmp_path: Path) -> None:
    part = tmp_path / "p.parquet"
    spec = {"scheme": "iid", "clients": 3, "max_samples": 1000}
    assert main(["partition", "--data", str(digits), "--dataset", "digits", "--spec",
                 json.dumps(spec), "--seed", "0", "--out", str(part)]) == 0
    out = tmp_path / "public.parquet"
    assert main(["public", "--data", str(digits), "--size", "700", "--seed", "0",
                 "--exclude-partition", str(part), "--out", str(out)]) == 0
    rows = set(pd.read_parquet(out)["index"])
    assert len(rows) == 700  # 1797 - 1000 client rows leaves 797 to draw from
    assert not rows & set(pd.read_parquet(part)["index"])
    assert main(["public", "--data", str(digits), "--size", "900", "--seed", "0",
                 "--exclude-partition", str(part), "--out", str(tmp_path / "x.parquet")]) == 1


def test_train_threads_write_the_same_bytes(digits: Path, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    # `pflrepro train --threads T` on the CPU: T client threads, the same Parquet bytes
    from pflrepro.store import results

    monkeypatch.setattr(results, "git_revision", lambda path=None: "pinned")
    part = tmp_path / "p.parquet"
    assert main(["partition", "--data", str(digits / "meta.json"), "--dataset", "digits",
                 "--spec", json.dumps({"scheme": "dirichlet", "clients": 5, "alpha": 0.5}),
                 "--seed", "0", "--out", str(part)]) == 0
    run_spec = {"experiment": "e", "dataset": "digits", "partition": "p", "method": "fedprox",
                "algorithm": "fedprox", "params": {"mu": 0.1}, "split_seed": 0,
                "train_seed": 0,
                "training": {"rounds": 2, "model": "cnn", "device": "cpu", "batch_size": 16}}
    outs = []
    for threads in (1, 2):
        out = tmp_path / f"run{threads}.parquet"
        assert main(["train", "--spec", json.dumps(run_spec), "--data", str(digits),
                     "--partition", str(part), "--out", str(out), "--threads",
                     str(threads)]) == 0
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]


@pytest.mark.parametrize("damage", ["flip_x", "zero_meta_sha"])
def test_partition_and_train_refuse_damaged_data(digits: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str],
                                                 damage: str) -> None:
    import shutil

    good_part = tmp_path / "good.parquet"
    assert main(["partition", "--data", str(digits), "--dataset", "digits", "--spec",
                 json.dumps({"scheme": "iid", "clients": 2}), "--seed", "0",
                 "--out", str(good_part)]) == 0
    data = tmp_path / "digits"
    shutil.copytree(digits, data)
    if damage == "flip_x":
        raw = bytearray((data / "x.npy").read_bytes())
        for i in range(16):
            raw[len(raw) // 2 + i] ^= 0xFF
        (data / "x.npy").write_bytes(bytes(raw))
    else:
        meta = json.loads((data / "meta.json").read_text())
        (data / "meta.json").write_text(json.dumps({**meta, "x_sha256": "0" * 64}))
        from pflrepro.store.io import write_digest

        write_digest(data / "meta.json")  # a meta.json whose record agrees: the sums count
    capsys.readouterr()
    part = tmp_path / "p.parquet"
    assert main(["partition", "--data", str(data / "meta.json"), "--dataset", "digits",
                 "--spec", json.dumps({"scheme": "iid", "clients": 2}), "--seed", "0",
                 "--out", str(part)]) == 1
    err = capsys.readouterr().err
    assert f"{data / 'x.npy'}: sha256" in err and f"delete the folder {data}/" in err
    assert not part.exists()
    run_spec = TINY_RUN
    out = tmp_path / "run.parquet"
    assert main(["train", "--spec", json.dumps(run_spec), "--data", str(data),
                 "--partition", str(good_part), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    # issue 27, item 4: the first job set the damaged x.npy aside (prepare_data reruns)
    assert f"{data / 'x.npy'}" in err and f"delete the folder {data}/" in err
    assert not out.exists()


def test_aggregate_of_a_truncated_run_names_it_and_sets_it_aside(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # issue 17, item 4: the error names the file, and the file is gone, so that the
    # next `snakemake` trains that run again instead of saying "Nothing to be done"
    from pflrepro.store.io import write_parquet

    run = tmp_path / "results/runs/tiny/p/fedavg/split0-seed0.parquet"
    write_parquet(pd.DataFrame({"round": [0, 1]}), run)
    run.write_bytes(run.read_bytes()[:-20])
    agg = tmp_path / "agg.parquet"
    assert main(["aggregate", "--out", str(agg), str(run)]) == 1
    err = capsys.readouterr().err
    assert f"{run} is damaged" in err and "rerun snakemake" in err
    # issue 27, item 8: the file stays (other jobs' input), dated 1970: rebuilt next time
    from pflrepro.store.io import DAMAGED_MTIME

    assert run.stat().st_mtime == DAMAGED_MTIME and not agg.exists()


@pytest.mark.parametrize("text, message", [
    ("training:\n  rounds: 3\n   lr: 0.1\n", ":3:6: YAML syntax error"),
    ("", ": the config file is empty"),
])
def test_check_config_names_file_and_line(tmp_path: Path, text: str, message: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    # Snakemake reads --configfile files before the workflow runs, and its message names
    # neither the file nor the line: `pflrepro check-config` does
    bad = tmp_path / "my.yaml"
    bad.write_text(text)
    assert main(["check-config", str(bad)]) == 1
    assert f"pflrepro check-config: error: {bad}{message}" in capsys.readouterr().err


def test_check_config_merges_files_in_order(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    base = Path(__file__).parents[1] / "workflow" / "config.yaml"
    override = tmp_path / "my.yaml"
    override.write_text("training:\n  lr: .inf\n")  # merged into base's training
    assert main(["check-config", str(base)]) == 0
    assert "valid (1 experiment(s) at the paper scale)" in capsys.readouterr().out
    assert main(["check-config", str(base), str(override)]) == 1
    assert "training.lr: must be a finite number" in capsys.readouterr().err


# ---- issue 27, item 11: bad arguments refused before any work, naming the path
def test_run_refuses_an_existing_directory_as_out(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    # was: a traceback after preparing, partitioning and training
    out = tmp_path / "runs"
    out.mkdir()
    data = tmp_path / "data"
    with pytest.raises(SystemExit) as exit_info:  # refused as the command line is read
        main(["run", "--method", "fedavg", "--dataset", "digits", "--partition", "iid",
              "--clients", "2", "--rounds", "1", "--model", "mlp", "--out", str(out),
              "--work", str(tmp_path / "w"), "--data-root", str(data)])
    assert exit_info.value.code == 2
    assert f"argument --out: {out} is a directory" in capsys.readouterr().err
    assert not data.exists() and not (tmp_path / "w").exists()  # refused before any work


@pytest.mark.parametrize("sub", ["", "sub"])
def test_run_refuses_a_file_as_work(tmp_path: Path, sub: str,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "work.txt"
    blocker.write_text("x")
    work = blocker / sub if sub else blocker
    assert main(["run", "--method", "fedavg", "--dataset", "digits", "--partition", "iid",
                 "--clients", "2", "--rounds", "1", "--model", "mlp", "--work", str(work),
                 "--data-root", str(tmp_path / "data")]) == 1
    assert f"{blocker} is a file, not a directory" in capsys.readouterr().err
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize("threads", ["0", "-1", "two"])
@pytest.mark.parametrize("command", [
    ["run", "--method", "fedavg", "--dataset", "digits", "--partition", "iid"],
    ["train", "--spec", "{}", "--data", "d", "--partition", "p", "--out", "o"],
])
def test_threads_must_be_at_least_one(command: list[str], threads: str,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main([*command, "--threads", threads])
    assert info.value.code == 2
    assert "--threads" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["missing", "file"])
def test_status_names_a_bad_results_directory(tmp_path: Path, kind: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    # was: exit 0 and an empty summary, the path never named
    results = tmp_path / "typo"
    if kind == "file":
        results.write_text("x")
    assert main(["status", "--results", str(results), "--logs", str(tmp_path)]) == 1
    what = "does not exist" if kind == "missing" else "is not a directory"
    assert f"--results {results}: {what}" in capsys.readouterr().err


@pytest.mark.parametrize("minutes", ["-5", "0", "nan", "inf"])
def test_status_refuses_stale_after_not_positive(tmp_path: Path, minutes: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["status", "--results", str(tmp_path), "--stale-after", minutes])
    assert info.value.code == 2
    assert "--stale-after" in capsys.readouterr().err


def test_check_config_names_a_binary_file(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    # was: "'utf-8' codec can't decode byte 0x80 ..." without the file's name
    binary = tmp_path / "model.pt"
    binary.write_bytes(b"\x80\x04\x95binary")
    assert main(["check-config", str(binary)]) == 1
    assert f"{binary}: not a text (UTF-8) config file" in capsys.readouterr().err


def test_require_source_refuses_another_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    # issue 27, item 6: a job run by another clone's code refuses, naming both sources
    import pflrepro

    own = Path(pflrepro.__file__).resolve().parent
    monkeypatch.delenv("PFLREPRO_ANY_SOURCE", raising=False)
    assert main(["--require-source", str(tmp_path / "src"), "list", "datasets"]) == 1
    err = capsys.readouterr().err
    assert f"runs pflrepro from {own}, not from the workflow's own source " \
           f"{tmp_path / 'src' / 'pflrepro'}" in err
    assert main(["--require-source", str(own.parent), "list", "datasets"]) == 0
    monkeypatch.setenv("PFLREPRO_ANY_SOURCE", "1")  # on purpose: as the workflow's check
    assert main(["--require-source", str(tmp_path / "src"), "list", "datasets"]) == 0


def _two_splits(digits: Path, tmp_path: Path) -> list[Path]:
    parts = []
    for split in (0, 1):
        part = tmp_path / f"split{split}.parquet"
        assert main(["partition", "--data", str(digits / "meta.json"), "--dataset", "digits",
                     "--spec", json.dumps({"scheme": "dirichlet", "clients": 4, "alpha": 0.5}),
                     "--seed", str(split), "--out", str(part)]) == 0
        parts.append(part)
    return parts


#: (split, seed) of the runs one job trains together in the tests below.
BATCH = [(0, 0), (0, 1), (1, 0)]


def _batch_spec(split: int, seed: int) -> str:
    return json.dumps({**TINY_RUN, "method": "federico", "algorithm": "federico",
                       "params": {"neighbors": 2}, "split_seed": split, "train_seed": seed,
                       "training": {**TINY_RUN["training"], "rounds": 3,
                                    "model_options": {"hidden": [16]}}})


def test_train_several_runs_write_the_bytes_of_each_run_trained_alone(
        digits: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # issue 28, item 2: one job trains several runs of one (experiment, partition,
    # method) in turn; each run's table, digest and log are its own, and the table's
    # bytes are those of the run trained by a job of its own
    from pflrepro.store import results
    from pflrepro.store.results import read_table

    monkeypatch.setattr(results, "git_revision", lambda path=None: "pinned")
    parts = _two_splits(digits, tmp_path)
    alone, together = tmp_path / "alone", tmp_path / "together"
    together.mkdir()
    for split, seed in BATCH:
        (alone / f"{split}-{seed}").mkdir(parents=True)
        assert main(["train", "--spec", _batch_spec(split, seed), "--data", str(digits),
                     "--partition", str(parts[split]), "--out",
                     str(alone / f"{split}-{seed}" / "run.parquet")]) == 0
    outs = [together / f"run{split}-{seed}.parquet" for split, seed in BATCH]
    logs = [together / f"run{split}-{seed}.log" for split, seed in BATCH]
    ckpts = [together / f"run{split}-{seed}.ckpt" for split, seed in BATCH]
    assert main(["train", "--spec", *(_batch_spec(s, t) for s, t in BATCH),
                 "--data", str(digits), "--partition", *(str(parts[s]) for s, _ in BATCH),
                 "--out", *map(str, outs), "--log", *map(str, logs),
                 "--checkpoint", *map(str, ckpts), "--checkpoint-every", "1",
                 "--progress-table"]) == 0
    for (split, seed), out, log in zip(BATCH, outs, logs, strict=True):
        assert out.read_bytes() == (alone / f"{split}-{seed}" / "run.parquet").read_bytes()
        read_table(out)  # checked against its own digest record
        text = log.read_text()
        assert text.count("federico: 3 rounds in") == 1 and f"wrote {out} " in text
        assert not [o for o in outs if o != out and str(o) in text]  # only its own lines
    # checkpoints and progress tables are gone once every table is written
    assert sorted(p.name for p in together.iterdir()) == sorted(
        [".digests", *(o.name for o in outs), *(g.name for g in logs)])
    assert sorted(p.name for p in (together / ".digests").iterdir()) == sorted(
        o.name + ".sha256" for o in outs)


def test_train_several_runs_stops_at_the_first_failure_leaving_no_half_file(
        digits: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pflrepro.store.results import read_table

    parts = _two_splits(digits, tmp_path)
    outs = [tmp_path / f"run{i}.parquet" for i in range(3)]
    logs = [tmp_path / f"run{i}.log" for i in range(3)]
    missing = tmp_path / "no-such-partition.parquet"
    code = main(["train", "--spec", *(_batch_spec(s, t) for s, t in BATCH),
                 "--data", str(digits), "--partition", str(parts[0]), str(missing),
                 str(parts[1]), "--out", *map(str, outs), "--log", *map(str, logs)])
    assert code == 1
    assert str(missing) in capsys.readouterr().err
    read_table(outs[0])  # the run before the failure is whole
    assert not outs[1].exists() and not outs[2].exists()
    assert "failed" in logs[1].read_text() and not logs[2].exists()
    assert not [p for p in tmp_path.iterdir() if ".tmp" in p.name]


def test_train_several_runs_needs_one_of_each_per_spec(digits: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    code = main(["train", "--spec", _batch_spec(0, 0), _batch_spec(0, 1), "--data",
                 str(digits), "--partition", "p", "--out", "a", "b"])
    assert code == 1
    assert "--partition: 1 given for 2 --spec" in capsys.readouterr().err


def test_the_wrong_kind_of_file_is_refused_and_left_alone(
        tmp_path: Path, digits: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # train --partition RUN, aggregate ... x.npy and table --aggregate ANY called good
    # files damaged, dated them 1970 and linked a .corrupt-1 beside them, outside results/
    part = tmp_path / "part.parquet"
    assert main(["partition", "--data", str(digits), "--dataset", "digits", "--spec",
                 json.dumps({"scheme": "iid", "clients": 2}), "--seed", "0",
                 "--out", str(part)]) == 0
    run = tmp_path / "results/runs/e/p/fedavg/split0-seed0.parquet"
    run.parent.mkdir(parents=True)
    assert main(["train", "--spec", json.dumps(TINY_RUN), "--data", str(digits),
                 "--partition", str(part), "--out", str(run)]) == 0
    notes = tmp_path / "notes.txt"
    notes.write_text("my own notes\n")
    files = [run, part, notes, digits / "x.npy"]
    before = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in files}
    capsys.readouterr()
    cases = [
        (["train", "--spec", json.dumps(TINY_RUN), "--data", str(digits), "--partition",
          str(run), "--out", str(tmp_path / "r2.parquet")], f"{run} is not a partition file"),
        (["aggregate", "--out", str(tmp_path / "agg.parquet"), str(digits / "x.npy")],
         f"{digits / 'x.npy'} is not a run or aggregate file written by the workflow"),
        (["table", "--aggregate", str(notes), "--md", str(tmp_path / "t.md"), "--tex",
          str(tmp_path / "t.tex"), "--csv", str(tmp_path / "t.csv")],
         f"{notes} is not a"),
        (["table", "--aggregate", str(part), "--md", str(tmp_path / "t.md"), "--tex",
          str(tmp_path / "t.tex"), "--csv", str(tmp_path / "t.csv")],
         f"{part} is not a run or aggregate file: it holds a partition"),
    ]
    for argv, message in cases:
        assert main(argv) == 1, argv
        err = capsys.readouterr().err
        assert message in err and "nothing was changed" in err, err
        assert err.count("\n") == 1, err  # one line
    assert {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in files} == before
    assert not list(tmp_path.rglob("*.corrupt-*")) and not list(digits.glob("*.corrupt-*"))
