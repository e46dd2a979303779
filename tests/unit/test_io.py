import os
import stat
from pathlib import Path

import pandas as pd
import pytest

from pflrepro.store.io import (
    DAMAGED_MTIME,
    FILE_MODE,
    CorruptFileError,
    DamagedRecord,
    WrongFileError,
    atomic_digested_path,
    atomic_path,
    digest_path,
    expected_identity,
    legacy_digest_path,
    read_verified,
    recorded_digest,
    sha256_file,
    write_parquet,
    write_text,
)


def test_write_text_creates_parents_and_leaves_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b.txt"
    write_text(target, "hello")
    assert target.read_text() == "hello"
    assert [p.name for p in target.parent.iterdir()] == ["b.txt"]


def test_failure_leaves_old_file_untouched_and_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    target.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_text("half-writ")
            raise RuntimeError("job died")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_failure_without_previous_file_leaves_nothing(tmp_path: Path) -> None:
    target = tmp_path / "new.parquet"
    with pytest.raises(KeyboardInterrupt):
        with atomic_path(target) as tmp:
            tmp.write_bytes(b"PAR1")
            raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == []


def test_write_parquet_round_trip(tmp_path: Path) -> None:
    frame = pd.DataFrame({"a": [1, 2], "b": ["x", "y"]})
    write_parquet(frame, tmp_path / "f.parquet")
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "f.parquet"), frame,
                                  check_dtype=False)


def test_outputs_get_the_umask_mode_not_mkstemps_0600(tmp_path: Path) -> None:
    mask = os.umask(0)
    os.umask(mask)
    assert FILE_MODE == 0o666 & ~mask
    target = tmp_path / "table.md"
    write_text(target, "x")
    assert stat.S_IMODE(target.stat().st_mode) == FILE_MODE
    write_text(target, "y")  # replacing an output keeps it so
    assert stat.S_IMODE(target.stat().st_mode) == FILE_MODE


# ------------------------------------------------------------------ digests on read
def _parquet(path: Path) -> Path:
    write_parquet(pd.DataFrame({"a": range(1000), "b": ["x"] * 1000}), path)
    return path


def _owned(tmp_path: Path) -> Path:
    """A folder of the workflow's results tree (``results/aggregate/<experiment>/``):
    damaged files there are marked; files elsewhere are only named."""
    folder = tmp_path / "results/aggregate/tiny"
    folder.mkdir(parents=True)
    return folder


def test_digested_output_records_its_sha256(tmp_path: Path) -> None:
    path = _parquet(tmp_path / "run.parquet")
    assert digest_path(path).read_text() == f"{sha256_file(path)}  run.parquet\n"
    assert recorded_digest(path) == sha256_file(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".digests", "run.parquet"]
    assert digest_path(path) == tmp_path / ".digests" / "run.parquet.sha256"
    frame = read_verified(path, pd.read_parquet)
    assert len(frame) == 1000


def test_failed_digested_write_keeps_the_old_file_and_its_record(tmp_path: Path) -> None:
    path = _parquet(tmp_path / "run.parquet")
    before = digest_path(path).read_text()
    with pytest.raises(RuntimeError):
        with atomic_digested_path(path) as tmp:
            tmp.write_bytes(b"half")
            raise RuntimeError("job died")
    assert digest_path(path).read_text() == before
    assert read_verified(path, pd.read_parquet) is not None


@pytest.mark.parametrize("damage", ["truncate", "flip"])
def test_damaged_file_is_marked_and_named(tmp_path: Path, damage: str) -> None:
    tmp_path = _owned(tmp_path)
    path = _parquet(tmp_path / "run.parquet")
    data = bytearray(path.read_bytes())
    if damage == "truncate":
        del data[len(data) // 2:]
    else:  # bytes flipped inside the data pages: a Parquet reader may not notice
        data[len(data) // 3] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptFileError) as info:
        read_verified(path, pd.read_parquet)
    text = str(info.value)
    assert text.startswith(f"{path} is damaged: its SHA-256 differs from the one recorded in "
                           ".digests/run.parquet.sha256; a copy kept as run.parquet.corrupt-1, "
                           "the file "
                           "dated 1970-01-01. Fix: rerun snakemake")
    aside = tmp_path / "run.parquet.corrupt-1"
    assert aside.read_bytes() == bytes(data)
    # issue 27, item 8: the file stays (other jobs' declared input) but is older than
    # any input, so Snakemake rebuilds it
    assert path.exists() and path.stat().st_mtime == DAMAGED_MTIME and digest_path(path).exists()
    with pytest.raises(CorruptFileError, match="corrupt-1"):  # a second reader: same copy
        read_verified(path, pd.read_parquet)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".digests", "run.parquet", "run.parquet.corrupt-1"]
    _parquet(path)  # rebuilt; damaged again: the second copy goes beside the first
    path.write_bytes(b"PAR1")
    with pytest.raises(CorruptFileError, match="corrupt-2"):
        read_verified(path, pd.read_parquet)
    assert aside.read_bytes() == bytes(data)


def test_file_without_record_is_damaged(tmp_path: Path) -> None:
    tmp_path = _owned(tmp_path)
    # issue 27, item 3: a file without its record was trusted when it parsed; one
    # flipped bit often still parses
    path = _parquet(tmp_path / "old.parquet")
    digest_path(path).unlink()
    with pytest.raises(CorruptFileError, match=r"old\.parquet is damaged: it has no digest "
                                               r"record \.digests/old\.parquet\.sha256.*Either "
                                               r"delete .*old\.parquet so that snakemake "
                                               r"rebuilds it, or trust it as it is with "
                                               r"`pflrepro verify --adopt`"):
        read_verified(path, pd.read_parquet)
    assert path.stat().st_mtime == DAMAGED_MTIME and (tmp_path / "old.parquet.corrupt-1").exists()


def test_record_of_another_file_is_damage(tmp_path: Path) -> None:
    tmp_path = _owned(tmp_path)
    # issue 27, item 7: a file swapped in with its own record
    other = _parquet(tmp_path / "other.parquet")
    path = tmp_path / "run.parquet"
    path.write_bytes(other.read_bytes())
    digest_path(path).write_bytes(digest_path(other).read_bytes())
    with pytest.raises(CorruptFileError, match=r"its record \.digests/run\.parquet\.sha256 is that "
                                               r"of another file \('other\.parquet'\)"):
        read_verified(path, pd.read_parquet)


def _run_frame(method: str, seed: int = 0) -> pd.DataFrame:
    return pd.DataFrame({"value": [0.5], "experiment": ["tiny"], "partition": ["p"],
                         "method": [method], "split_seed": [0], "train_seed": [seed]})


def test_expected_identity_from_the_layout() -> None:
    assert expected_identity("/w/results/runs/tiny/p/fedavg/split0-seed1.parquet") == {
        "kind": "run", "experiment": "tiny", "partition": "p", "method": "fedavg",
        "split": "0", "seed": "1"}
    assert expected_identity("results/aggregate/tiny.parquet") == {
        "kind": "experiment_aggregate", "experiment": "tiny"}
    assert expected_identity("results/aggregate/tiny/fedavg.parquet") == {
        "kind": "method_aggregate", "experiment": "tiny", "method": "fedavg"}
    assert expected_identity("results/public/digits/p/split2-digits100.parquet") == {
        "kind": "public", "split": "2", "set": "digits100"}
    assert expected_identity("elsewhere/run.parquet") is None


def test_another_runs_file_with_its_record_is_named(tmp_path: Path) -> None:
    # issue 27, item 7: another run's Parquet with a matching record failed downstream
    # ("'test_accuracy' given twice") naming no file
    runs = tmp_path / "results/runs/tiny/p"
    fedavg = runs / "fedavg/split0-seed0.parquet"
    write_parquet(_run_frame("fedavg"), fedavg)
    assert len(read_verified(fedavg, pd.read_parquet, kinds=("run",))) == 1
    local = runs / "local/split0-seed0.parquet"
    local.parent.mkdir(parents=True)
    local.write_bytes(fedavg.read_bytes())
    digest_path(local).parent.mkdir(exist_ok=True)
    digest_path(local).write_bytes(digest_path(fedavg).read_bytes())  # same file name
    with pytest.raises(CorruptFileError) as info:
        read_verified(local, pd.read_parquet, kinds=("run",))
    assert str(info.value).startswith(
        f"{local} is damaged: it holds a run (experiment=tiny, partition=p, method=fedavg, "
        "split=0, seed=0), but its path is that of a run (experiment=tiny, partition=p, "
        "method=local, split=0, seed=0)")
    assert local.stat().st_mtime == DAMAGED_MTIME


def test_a_run_where_a_partition_belongs_is_named(tmp_path: Path) -> None:
    # issue 27, item 7: a partition replaced by a run failed with KeyError: 'index'
    path = tmp_path / "results/partitions/digits/p/split0.parquet"
    write_parquet(_run_frame("fedavg"), path)
    with pytest.raises(CorruptFileError, match=r"it holds a run \(.*method=fedavg.*\), but "
                                               r"its path is that of a partition"):
        read_verified(path, pd.read_parquet, kinds=("partition",))
    assert path.stat().st_mtime == DAMAGED_MTIME


def test_a_whole_file_of_another_kind_is_refused_and_left_alone(tmp_path: Path) -> None:
    # a good run given where a partition belongs (train --partition RUN), or a file the
    # workflow never wrote (aggregate x.npy), was called damaged, linked aside and dated
    # 1970, outside results/ too
    run = tmp_path / "results/runs/tiny/p/fedavg/split0-seed0.parquet"
    write_parquet(_run_frame("fedavg"), run)
    mine = tmp_path / "mine.parquet"
    write_parquet(_run_frame("fedavg"), mine)
    npy = tmp_path / "x.npy"
    npy.write_bytes(b"\x93NUMPY")
    before = {p: p.stat().st_mtime for p in (run, mine, npy)}
    with pytest.raises(WrongFileError, match=r"split0-seed0\.parquet is not a partition file: "
                                             r"it holds a run \(.*\); nothing was changed"):
        read_verified(run, pd.read_parquet, kinds=("partition",))
    with pytest.raises(WrongFileError, match="mine.parquet is not a partition file"):
        read_verified(mine, pd.read_parquet, kinds=("partition",))
    with pytest.raises(WrongFileError, match=r"x\.npy is not a run file written by the "
                                             r"workflow: it has no digest record"):
        read_verified(npy, pd.read_parquet, kinds=("run",))
    mine.write_bytes(mine.read_bytes()[:-9])  # damage outside the results tree: named only
    with pytest.raises(CorruptFileError, match="left as it is"):
        read_verified(mine, pd.read_parquet, kinds=("run",))
    assert {p: p.stat().st_mtime for p in (run, mine, npy)} == {**before,
                                                                 mine: mine.stat().st_mtime}
    assert not list(tmp_path.rglob("*.corrupt-*"))


@pytest.mark.parametrize("record, why", [
    (b"\xe1\xff\x00 run.parquet\n", "is not UTF-8 text"),
    (b"", "does not hold a SHA-256 and a file name"),
    (b"not-a-hash  run.parquet\n", "does not hold a SHA-256 and a file name"),
])
def test_damaged_record_is_named_and_marks_the_file(tmp_path: Path, record: bytes,
                                                    why: str) -> None:
    # a non-UTF-8 record stopped readers with "'utf-8' codec can't decode byte 0xe1"
    # naming no file; an empty one was "that of another file ('')"
    path = _parquet(_owned(tmp_path) / "run.parquet")
    digest_path(path).write_bytes(record)
    with pytest.raises(CorruptFileError) as info:
        read_verified(path, pd.read_parquet)
    text = str(info.value)
    assert f"its digest record is damaged: the record {digest_path(path)} {why}" in text
    assert path.stat().st_mtime == DAMAGED_MTIME


def test_a_symlinked_output_is_marked_without_touching_its_target(tmp_path: Path) -> None:
    # a run replaced by a link to another run: the backdating went through the link to
    # the good file, and the link, newer than its inputs, was never rebuilt
    folder = _owned(tmp_path)
    good = _parquet(folder / "good.parquet")
    good_mtime = good.stat().st_mtime
    link = folder / "run.parquet"
    link.symlink_to(good.name)
    digest_path(link).write_bytes(digest_path(good).read_bytes())
    with pytest.raises(CorruptFileError, match="that of another file"):
        read_verified(link, pd.read_parquet)
    assert good.stat().st_mtime == good_mtime and recorded_digest(good) == sha256_file(good)
    assert link.is_symlink() and os.lstat(link).st_mtime == DAMAGED_MTIME
    aside = folder / "run.parquet.corrupt-1"
    assert aside.is_symlink() and os.readlink(aside) == good.name
    assert not (folder / "good.parquet.corrupt-1").exists()


def test_verified_file_that_fails_to_parse_is_kept(tmp_path: Path) -> None:
    path = _parquet(tmp_path / "run.parquet")

    def broken_reader(p: Path) -> None:
        raise ValueError("reader bug")

    with pytest.raises(ValueError, match="reader bug"):
        read_verified(path, broken_reader)
    assert path.exists() and digest_path(path).exists()


def test_missing_file_is_not_damage(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_verified(tmp_path / "none.parquet", pd.read_parquet)
    assert list(tmp_path.iterdir()) == []


def test_marking_forgets_snakemakes_record_of_the_file(tmp_path: Path, monkeypatch) -> None:
    # issue 27, item 8: with its record (its inputs' checksums) Snakemake did not
    # rebuild an output dated older than its unchanged inputs
    import base64

    monkeypatch.chdir(tmp_path)
    path = _parquet(tmp_path / "results/aggregate/x.parquet")
    record = tmp_path / ".snakemake/metadata" / base64.urlsafe_b64encode(
        b"results/aggregate/x.parquet").decode()
    record.parent.mkdir(parents=True)
    record.write_text("{}")
    path.write_bytes(b"PAR1")
    with pytest.raises(CorruptFileError):
        read_verified(path, pd.read_parquet)
    assert not record.exists() and path.stat().st_mtime == DAMAGED_MTIME


def test_a_fifo_or_folder_where_a_run_belongs_is_set_aside_unopened(tmp_path: Path) -> None:
    # reading a FIFO at a run's path waited for a writer forever
    folder = _owned(tmp_path)
    fifo, directory = folder / "run.parquet", folder / "other.parquet"
    os.mkfifo(fifo)
    directory.mkdir()
    for path, kind in ((fifo, "a FIFO"), (directory, "a directory")):
        with pytest.raises(CorruptFileError, match=f"it is {kind}, not a regular file; set "
                                                   f"aside as {path.name}.corrupt-1"):
            read_verified(path, pd.read_parquet)
        assert not os.path.lexists(path)


def test_a_record_beside_its_file_moves_out_of_sight_on_first_read(tmp_path: Path) -> None:
    # a project built when records lay beside their files: nothing is rebuilt, the first
    # read moves the record into .digests/ (its bytes and date kept)
    tmp_path = _owned(tmp_path)
    path = _parquet(tmp_path / "run.parquet")
    record = digest_path(path)
    legacy = legacy_digest_path(path)
    record.rename(legacy)
    (tmp_path / ".digests").rmdir()
    stat = legacy.stat()
    assert read_verified(path, pd.read_parquet) is not None  # no damage: the record moved
    assert record.read_text() == f"{sha256_file(path)}  run.parquet\n"
    assert record.stat().st_mtime_ns == stat.st_mtime_ns and not legacy.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [".digests", "run.parquet"]
    _parquet(path)  # a rewrite leaves no record beside the file either
    assert not legacy.exists()


def test_a_records_folder_that_is_a_link_is_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / ".digests").symlink_to(elsewhere)
    with pytest.raises(DamagedRecord, match="is not a folder of digest records"):
        _parquet(tmp_path / "out" / "run.parquet")
    assert list(elsewhere.iterdir()) == []  # nothing written through the link
