"""``pflrepro verify``: bit rot with the mtime unchanged is found (issue 27, item 5)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from pflrepro.cli import main
from pflrepro.data.store import write_dataset
from pflrepro.inspect.verify import verify
from pflrepro.store.io import DAMAGED_MTIME, digest_path, sha256_file, write_parquet


def _results(tmp_path: Path) -> Path:
    results = tmp_path / "results"
    for method in ("fedavg", "local"):
        frame = pd.DataFrame({"value": [0.5], "experiment": ["tiny"], "partition": ["p"],
                              "method": [method], "split_seed": [0], "train_seed": [0]})
        write_parquet(frame, results / f"runs/tiny/p/{method}/split0-seed0.parquet")
    x = np.arange(4 * 16, dtype=np.uint8).reshape(4, 1, 4, 4)
    write_dataset(results / "data/toy", x, np.arange(4) % 2, name="toy", num_classes=2,
                  max_value=255, source="test")
    return results


def _flip_keep_mtime(path: Path) -> None:
    """One flipped bit, the modification time put back (what Snakemake cannot see)."""
    stat = path.stat()
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def test_clean_results_pass(tmp_path: Path, capsys) -> None:
    results = _results(tmp_path)
    assert verify(results) == (3, [])
    assert main(["verify", "--results", str(results)]) == 0
    assert "3 stored file(s) under" in capsys.readouterr().out


def test_bit_rot_is_found_and_marked(tmp_path: Path, capsys) -> None:
    results = _results(tmp_path)
    run = results / "runs/tiny/p/local/split0-seed0.parquet"
    _flip_keep_mtime(run)
    _flip_keep_mtime(results / "data/toy/x.npy")
    assert main(["verify", "--results", str(results)]) == 1
    out = capsys.readouterr().out
    assert f"damaged: {run}: its SHA-256 differs" in out
    assert f"damaged: {results / 'data/toy'}: {results / 'data/toy/x.npy'}: sha256" in out
    assert run.stat().st_mtime == DAMAGED_MTIME  # the next snakemake rebuilds it
    assert not (results / "data/toy/x.npy").exists()  # prepare_data reruns
    assert (results / "data/toy/x.npy.corrupt-1").exists()


def test_swapped_run_is_found(tmp_path: Path) -> None:
    results = _results(tmp_path)
    fedavg = results / "runs/tiny/p/fedavg/split0-seed0.parquet"
    local = results / "runs/tiny/p/local/split0-seed0.parquet"
    local.write_bytes(fedavg.read_bytes())
    digest_path(local).write_bytes(digest_path(fedavg).read_bytes())
    _, findings = verify(results)
    assert [(f.status, f.path) for f in findings] == [("damaged", local)]
    assert "method=fedavg, split=0, seed=0), but its path is that of a run" in findings[0].detail


def test_undigested_files_are_reported_and_adopted_only_on_request(tmp_path: Path) -> None:
    results = _results(tmp_path)
    run = results / "runs/tiny/p/local/split0-seed0.parquet"
    digest_path(run).unlink()
    _, findings = verify(results)
    assert [(f.status, f.path) for f in findings] == [("undigested", run)]
    assert not digest_path(run).exists() and run.stat().st_mtime > DAMAGED_MTIME  # left alone
    _, findings = verify(results, adopt=True)
    assert [(f.status, f.path) for f in findings] == [("adopted", run)]
    assert verify(results) == (3, [])


# ------------------------------------------------------------------ every file written
# The campaign's silent cases: meta.json's normalisation constants and class count, a
# deleted meta.json, tables, partition reports and benchmark records changed with the
# mtime kept all passed verify; a non-UTF-8 record stopped it at the first one.


def _edit_keep_mtime(path: Path, old: str, new: str) -> None:
    stat = path.stat()
    path.write_text(path.read_text().replace(old, new))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def test_edited_or_deleted_meta_json_is_found(tmp_path: Path) -> None:
    results = _results(tmp_path)
    meta = results / "data/toy/meta.json"
    _edit_keep_mtime(meta, '"num_classes": 2', '"num_classes": 3')
    _, findings = verify(results)
    assert [(f.status, f.path) for f in findings] == [("damaged", results / "data/toy")]
    assert "meta.json: its SHA-256 differs" in findings[0].detail
    assert not (results / "data/toy/x.npy").exists()  # a target of the workflow: prepared again
    meta.unlink()
    _, findings = verify(results)
    assert [(f.status, f.path) for f in findings] == [("damaged", results / "data/toy")]
    assert "meta.json is missing" in findings[0].detail


def _written_by_commands(results: Path) -> dict[str, Path]:
    """A table and a partition report, written as their commands write them."""
    from pflrepro.store.io import write_text
    from pflrepro.store.records import record_outputs

    table = results / "tables/tiny.md"
    clients = results / "partitions/toy/p/split0-clients.csv"
    write_text(table, "| method | accuracy |\n| fedavg | 87.1 |\n")
    write_text(clients, "client,n\n0,87\n")
    assert record_outputs([str(table), None]) == [table]  # table's --tex, --csv not given
    assert record_outputs([clients, results / "none.md"]) == [clients]  # no file: no record
    return {"table": table, "clients": clients}


def test_tables_and_partition_reports_carry_digests(tmp_path: Path) -> None:
    results = _results(tmp_path)
    files = _written_by_commands(results)
    assert verify(results) == (5, [])
    _edit_keep_mtime(files["table"], "87.1", "97.1")
    _edit_keep_mtime(files["clients"], "87", "97")
    _, findings = verify(results)
    assert sorted((f.status, f.path) for f in findings) == sorted(
        ("damaged", p) for p in files.values())
    for path in files.values():  # rebuilt by the next snakemake
        assert path.stat().st_mtime == DAMAGED_MTIME
        assert path.with_name(path.name + ".corrupt-1").exists()
    digest_path(files["table"]).unlink()
    (files["table"]).write_text("by hand\n")
    _, findings = verify(results)
    assert ("undigested", files["table"]) in [(f.status, f.path) for f in findings]


def test_benchmark_records_are_recorded_then_checked(tmp_path: Path) -> None:
    results = _results(tmp_path)
    bench = results / "benchmarks/train/tiny/p/fedavg/split0-seed0.tsv"
    bench.parent.mkdir(parents=True)
    bench.write_text("s\th:m:s\tmax_rss\tcpu_time\n12.5\t0:00:12\t300\t11.0\n")
    _, findings = verify(results)
    assert [(f.status, f.path) for f in findings] == [("recorded", bench)]
    assert verify(results) == (4, [])
    _edit_keep_mtime(bench, "12.5", "1.5")
    _, findings = verify(results)
    assert [(f.status, f.path) for f in findings] == [("damaged", bench)]
    assert not bench.exists() and bench.with_name(bench.name + ".corrupt-1").exists()


def test_a_benchmark_written_again_by_its_rerun_job_is_recorded_again(tmp_path: Path) -> None:
    # a job that reruns (a damaged run rebuilt, --forcerun) gets its benchmark file written
    # again by Snakemake, newer than the record of the earlier one: not damage
    from pflrepro.store.records import checked_benchmark

    results = _results(tmp_path)
    bench = results / "benchmarks/train/tiny/p/fedavg/split0-seed0.tsv"
    bench.parent.mkdir(parents=True)
    bench.write_text("s\th:m:s\tmax_rss\tcpu_time\n12.5\t0:00:12\t300\t11.0\n")
    assert checked_benchmark(bench) == bench and digest_path(bench).exists()
    bench.write_text("s\th:m:s\tmax_rss\tcpu_time\n13.5\t0:00:13\t300\t12.0\n")
    later = digest_path(bench).stat().st_mtime_ns + 2_000_000_000
    os.utime(bench, ns=(later, later))
    _, findings = verify(results)
    assert [(f.status, f.path) for f in findings] == [("recorded", bench)]
    assert verify(results) == (4, []) and checked_benchmark(bench) == bench


def test_a_non_utf8_record_is_named_and_the_rest_still_checked(tmp_path: Path, capsys) -> None:
    results = _results(tmp_path)
    fedavg = results / "runs/tiny/p/fedavg/split0-seed0.parquet"
    local = results / "runs/tiny/p/local/split0-seed0.parquet"
    digest_path(fedavg).write_bytes(b"\xe1\xff\x00\n")
    _flip_keep_mtime(local)
    assert main(["verify", "--results", str(results)]) == 1
    out = capsys.readouterr().out
    assert f"damaged: {fedavg}: its digest record is damaged: the record " in out
    assert "is not UTF-8 text" in out
    assert f"damaged: {local}: its SHA-256 differs" in out


def test_a_meta_json_from_before_records_is_reported_then_adopted(tmp_path: Path) -> None:
    # data sets prepared before meta.json carried a record: reported, left alone (a job
    # would prepare the set again, and rebuild everything made from it), adopted on request
    results = _results(tmp_path)
    folder = results / "data/toy"
    digest_path(folder / "meta.json").unlink()
    _, findings = verify(results)
    assert [(f.status, f.path) for f in findings] == [("undigested", folder)]
    assert (folder / "x.npy").exists() and not list(folder.glob("*.corrupt-*"))
    _, findings = verify(results, adopt=True)
    assert [(f.status, f.path) for f in findings] == [("adopted", folder)]
    assert verify(results) == (3, [])


def _figure(figures: Path) -> dict[str, Path]:
    """A figure written as every figure kind writes it (PDF and PNG)."""
    from pflrepro.reporting.figures.common import new_figure, save_figure

    fig = new_figure(2.0, 1.5)
    fig.add_subplot().plot([0, 1, 2], [0.2, 0.5, 0.4])
    files = {"pdf": figures / "tiny-accuracy.pdf", "png": figures / "partitions/toy/p-split0.png"}
    save_figure(fig, files["pdf"], files["png"])
    return files


def test_figures_carry_digests_and_bit_rot_is_found(tmp_path: Path, capsys) -> None:
    results = _results(tmp_path)
    files = _figure(tmp_path / "figures")  # beside the results directory, as the rules write
    for path in files.values():
        assert digest_path(path).read_text().split() == [sha256_file(path), path.name]
    assert verify(results) == (5, [])
    _flip_keep_mtime(files["png"])
    _flip_keep_mtime(files["pdf"])
    assert main(["verify", "--results", str(results)]) == 1
    out = capsys.readouterr().out
    for path in files.values():
        assert f"damaged: {path}: its SHA-256 differs" in out
        assert path.stat().st_mtime == DAMAGED_MTIME  # the next snakemake redraws it
        assert path.with_name(path.name + ".corrupt-1").exists()
    assert verify(results, figures=tmp_path / "elsewhere") == (3, [])


def test_outputs_that_are_no_regular_files_are_set_aside(tmp_path: Path) -> None:
    # a run replaced by a folder, a FIFO or a link out of the project, mtimes kept:
    # verify called them clean (it looked at regular files only) and Snakemake saw
    # nothing to do; a FIFO hung every job that read it
    results = _results(tmp_path)
    runs = {m: results / f"runs/tiny/p/{m}/split0-seed0.parquet" for m in ("fedavg", "local")}
    runs["fedavg"].unlink()
    runs["fedavg"].mkdir()
    runs["local"].unlink()
    os.mkfifo(runs["local"])
    outside = tmp_path.parent / f"{tmp_path.name}-secret.parquet"
    outside.write_bytes(b"not yours")
    table = results / "aggregate/tiny/fedavg.parquet"
    table.parent.mkdir(parents=True)
    table.symlink_to(outside)
    checked, findings = verify(results)
    damaged = {f.path: f.detail for f in findings if f.status == "damaged"}
    assert "a directory, not a regular file" in damaged[runs["fedavg"]]
    assert "a FIFO, not a regular file" in damaged[runs["local"]]
    assert "a link that leads out of the project" in damaged[table]
    assert not any(os.path.lexists(p) for p in (*runs.values(), table))  # built again
    assert (runs["local"].parent / "split0-seed0.parquet.corrupt-1").exists()
    assert outside.read_bytes() == b"not yours"


def test_a_record_linked_to_another_file_is_not_read(tmp_path: Path) -> None:
    results = _results(tmp_path)
    run = results / "runs/tiny/p/local/split0-seed0.parquet"
    secret = tmp_path.parent / f"{tmp_path.name}-shadow"  # outside the project
    secret.write_text("root:$6$secret-hash:19000:0:99999:7:::\n")
    digest_path(run).unlink()
    digest_path(run).symlink_to(secret)
    _, findings = verify(results)
    detail = next(f.detail for f in findings if f.path == run)
    assert "is not a digest record: it is a link that leads out of the project" in detail
    assert "secret-hash" not in detail and "root:" not in detail


def test_a_damaged_record_is_named_never_quoted(tmp_path: Path) -> None:
    results = _results(tmp_path)
    run = results / "runs/tiny/p/local/split0-seed0.parquet"
    digest_path(run).write_text("root:$6$secret-hash:19000:0:99999:7:::\n")
    _, findings = verify(results)
    detail = next(f.detail for f in findings if f.path == run)
    assert "does not hold a SHA-256 and a file name (39 bytes)" in detail
    assert "secret-hash" not in detail


def test_the_last_line_says_what_snakemake_rebuilds(tmp_path: Path, capsys) -> None:
    # it said "rerun snakemake to rebuild them" of a deleted record, which snakemake
    # never rebuilds
    results = _results(tmp_path)
    digest_path(results / "runs/tiny/p/fedavg/split0-seed0.parquet").unlink()
    _flip_keep_mtime(results / "runs/tiny/p/local/split0-seed0.parquet")
    assert main(["verify", "--results", str(results)]) == 1
    err = capsys.readouterr().err
    assert "1 damaged (marked or set aside: the next snakemake rebuilds them)" in err
    assert "1 without a digest record (snakemake does not rebuild these" in err
