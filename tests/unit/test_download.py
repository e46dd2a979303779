"""Verified, resumable fetching from mirrors and safe archive extraction (loopback only)."""

from __future__ import annotations

import gzip
import hashlib
import io
import socket
import stat
import tarfile
import threading
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from pflrepro.data.download import (
    DamagedArchiveError,
    DownloadError,
    Limits,
    RemoteFile,
    UnsafeArchiveError,
    check_readable,
    fetch,
    safe_extract,
)

PAYLOAD = bytes(range(256)) * 400 + b"tail"  # 102,404 bytes


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --------------------------------------------------------------------------- loopback server


@dataclass
class ServerState:
    """What the loopback server serves and what it saw."""

    files: dict[str, bytes] = field(default_factory=dict)
    drop_after: dict[str, int] = field(default_factory=dict)  # path -> bytes before a drop
    ranges: bool = True
    trickle: dict[str, float] = field(default_factory=dict)  # path -> seconds between bytes
    stall: dict[str, float] = field(default_factory=dict)  # path -> seconds of silence
    requests: list[tuple[str, str | None]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class Server:
    """A loopback HTTP server with Range support and simulated interruptions."""

    def __init__(self) -> None:
        self.state = ServerState()
        state = self.state

        class Handler(BaseHTTPRequestHandler):
            timeout = 5  # socket timeout: a stuck client cannot hang the server

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                pass

            def do_GET(self) -> None:  # noqa: N802
                path = self.path.split("?")[0]
                rng = self.headers.get("Range")
                with state.lock:
                    state.requests.append((path, rng))
                    drop = state.drop_after.pop(path, None)
                data = state.files.get(path)
                if data is None:
                    self.send_error(404, "Not Found")
                    return
                start = 0
                if rng and state.ranges:
                    start = int(rng.removeprefix("bytes=").split("-")[0])
                    if start >= len(data):
                        self.send_response(416)
                        self.send_header("Content-Range", f"bytes */{len(data)}")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                else:
                    self.send_response(200)
                body = data[start:]
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Accept-Ranges", "bytes" if state.ranges else "none")
                self.end_headers()
                if drop is not None:  # send part of the body, then cut the connection
                    self.wfile.write(body[:drop])
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if path in state.stall:  # headers, then silence
                    time.sleep(state.stall[path])
                    return
                gap = state.trickle.get(path)
                if gap is not None:  # one byte at a time, for at most 10 s
                    for i in range(min(len(body), int(10 / gap))):
                        try:
                            self.wfile.write(body[i:i + 1])
                            self.wfile.flush()
                        except OSError:  # the client gave up
                            return
                        time.sleep(gap)
                    return
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever,
                                       kwargs={"poll_interval": 0.05}, daemon=True)
        # Bounded: whatever happens, the server stops itself after a minute.
        self.watchdog = threading.Timer(60.0, self.httpd.shutdown)
        self.watchdog.daemon = True

    def start(self) -> Server:
        self.thread.start()
        self.watchdog.start()
        return self

    def stop(self) -> None:
        self.watchdog.cancel()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


@pytest.fixture
def server() -> Iterator[Server]:
    srv = Server().start()
    try:
        yield srv
    finally:
        srv.stop()


def refused_url() -> str:
    """A loopback URL on a port nothing listens on (connection refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/data"


# --------------------------------------------------------------------------- fetching


def test_fetch_over_http(server: Server, tmp_path: Path) -> None:
    server.state.files["/data/blob.bin"] = PAYLOAD
    spec = RemoteFile("blob.bin", sha(PAYLOAD), len(PAYLOAD))
    out = fetch(spec, [server.url + "/data/"], tmp_path)
    assert out == tmp_path / "blob.bin"
    assert out.read_bytes() == PAYLOAD
    assert not (tmp_path / "blob.bin.part").exists()
    assert server.state.requests == [("/data/blob.bin", None)]


def test_fetch_from_file_url_and_local_dir(tmp_path: Path) -> None:
    src = tmp_path / "mirror dir"
    src.mkdir()
    (src / "blob.bin").write_bytes(PAYLOAD)
    spec = RemoteFile("blob.bin", sha(PAYLOAD))
    a = fetch(spec, [src.as_uri()], tmp_path / "a")
    b = fetch(spec, [str(src)], tmp_path / "b")
    assert a.read_bytes() == PAYLOAD and b.read_bytes() == PAYLOAD


def test_wrong_checksum_deletes_and_names_everything(server: Server, tmp_path: Path) -> None:
    server.state.files["/blob.bin"] = PAYLOAD
    wrong = "0" * 64
    with pytest.raises(DownloadError) as info:
        fetch(RemoteFile("blob.bin", wrong), [server.url], tmp_path)
    message = str(info.value)
    assert "blob.bin" in message and wrong in message and sha(PAYLOAD) in message
    assert not (tmp_path / "blob.bin").exists()
    assert not (tmp_path / "blob.bin.part").exists()


def test_truncated_file_is_rejected(server: Server, tmp_path: Path) -> None:
    server.state.files["/blob.bin"] = PAYLOAD[:1000]  # a complete transfer of a short file
    with pytest.raises(DownloadError, match="checksum mismatch"):
        fetch(RemoteFile("blob.bin", sha(PAYLOAD), len(PAYLOAD)), [server.url], tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_truncated_final_file_is_replaced(server: Server, tmp_path: Path) -> None:
    server.state.files["/blob.bin"] = PAYLOAD
    (tmp_path / "blob.bin").write_bytes(PAYLOAD[:500])  # e.g. copied by hand, incomplete
    out = fetch(RemoteFile("blob.bin", sha(PAYLOAD)), [server.url], tmp_path)
    assert out.read_bytes() == PAYLOAD


def test_interrupted_download_resumes_in_the_same_call(server: Server, tmp_path: Path) -> None:
    server.state.files["/blob.bin"] = PAYLOAD
    server.state.drop_after["/blob.bin"] = 30_000
    out = fetch(RemoteFile("blob.bin", sha(PAYLOAD)), [server.url], tmp_path)
    assert out.read_bytes() == PAYLOAD
    assert server.state.requests == [("/blob.bin", None), ("/blob.bin", "bytes=30000-")]


def test_interrupted_download_resumes_on_a_later_run(server: Server, tmp_path: Path) -> None:
    server.state.files["/blob.bin"] = PAYLOAD
    server.state.drop_after["/blob.bin"] = 40_000
    spec = RemoteFile("blob.bin", sha(PAYLOAD))
    with pytest.raises(DownloadError, match="40000 of"):
        fetch(spec, [server.url], tmp_path, attempts=1)
    part = tmp_path / "blob.bin.part"
    assert part.stat().st_size == 40_000 and not (tmp_path / "blob.bin").exists()
    out = fetch(spec, [server.url], tmp_path)
    assert out.read_bytes() == PAYLOAD and not part.exists()
    assert server.state.requests[-1] == ("/blob.bin", "bytes=40000-")


def test_resume_without_range_support_restarts(server: Server, tmp_path: Path) -> None:
    server.state.files["/blob.bin"] = PAYLOAD
    server.state.ranges = False
    (tmp_path / "blob.bin.part").write_bytes(PAYLOAD[:1234])
    out = fetch(RemoteFile("blob.bin", sha(PAYLOAD)), [server.url], tmp_path)
    assert out.read_bytes() == PAYLOAD
    assert server.state.requests == [("/blob.bin", "bytes=1234-")]  # asked, got a plain 200


def test_stale_part_from_other_bytes_is_redone_whole(server: Server, tmp_path: Path) -> None:
    server.state.files["/blob.bin"] = PAYLOAD
    (tmp_path / "blob.bin.part").write_bytes(b"x" * 1000)  # not a prefix of PAYLOAD
    out = fetch(RemoteFile("blob.bin", sha(PAYLOAD)), [server.url], tmp_path)
    assert out.read_bytes() == PAYLOAD
    assert server.state.requests == [("/blob.bin", "bytes=1000-"), ("/blob.bin", None)]


def test_complete_part_is_accepted_after_416(server: Server, tmp_path: Path) -> None:
    server.state.files["/blob.bin"] = PAYLOAD
    (tmp_path / "blob.bin.part").write_bytes(PAYLOAD)
    out = fetch(RemoteFile("blob.bin", sha(PAYLOAD)), [server.url], tmp_path)
    assert out.read_bytes() == PAYLOAD


def test_missing_mirrors_fall_through(server: Server, tmp_path: Path) -> None:
    server.state.files["/good/blob.bin"] = PAYLOAD
    mirrors = [refused_url(), server.url + "/missing", str(tmp_path / "nope"), server.url + "/good"]
    out = fetch(RemoteFile("blob.bin", sha(PAYLOAD)), mirrors, tmp_path / "dest")
    assert out.read_bytes() == PAYLOAD
    assert ("/missing/blob.bin", None) in server.state.requests


def test_all_mirrors_failing_lists_each(server: Server, tmp_path: Path) -> None:
    server.state.files["/bad/blob.bin"] = b"not it"
    refused = refused_url()
    mirrors = [refused, server.url + "/missing", server.url + "/bad", str(tmp_path / "nope")]
    with pytest.raises(DownloadError) as info:
        fetch(RemoteFile("blob.bin", sha(PAYLOAD)), mirrors, tmp_path / "dest", timeout=5)
    err = info.value
    assert [m for m, _ in err.failures] == mirrors
    text = str(err)
    assert "4 mirror(s)" in text and "HTTP 404" in text and "checksum mismatch" in text
    assert all(m in text for m in mirrors)
    assert not (tmp_path / "dest" / "blob.bin").exists()


def test_offline_with_file_in_place(server: Server, tmp_path: Path) -> None:
    (tmp_path / "blob.bin").write_bytes(PAYLOAD)
    out = fetch(RemoteFile("blob.bin", sha(PAYLOAD)), [server.url, refused_url()], tmp_path)
    assert out.read_bytes() == PAYLOAD
    assert server.state.requests == []


def test_recompressed_gzip_verifies_by_content(tmp_path: Path) -> None:
    original = gzip.compress(PAYLOAD, mtime=0)
    recompressed = gzip.compress(PAYLOAD, compresslevel=1, mtime=12345)
    assert original != recompressed
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "blob.gz").write_bytes(recompressed)
    spec = RemoteFile("blob.gz", sha(original), len(original), content_sha256=sha(PAYLOAD))
    out = fetch(spec, [str(mirror)], tmp_path / "dest")
    assert gzip.decompress(out.read_bytes()) == PAYLOAD
    (mirror / "blob.gz").write_bytes(gzip.compress(PAYLOAD[:-1]))
    with pytest.raises(DownloadError, match="content sha256"):
        fetch(spec, [str(mirror)], tmp_path / "other")


def test_trust_on_first_use_records_and_enforces(tmp_path: Path) -> None:
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "blob.bin").write_bytes(PAYLOAD)
    spec = RemoteFile("blob.bin", None)
    dest = tmp_path / "dest"
    fetch(spec, [str(mirror)], dest)
    record = dest / "blob.bin.sha256"
    assert record.read_text().split()[0] == sha(PAYLOAD)
    (dest / "blob.bin").unlink()
    (mirror / "blob.bin").write_bytes(PAYLOAD + b"changed")
    with pytest.raises(DownloadError, match="recorded on first use"):
        fetch(spec, [str(mirror)], dest)


def test_no_mirrors_and_no_file(tmp_path: Path) -> None:
    with pytest.raises(DownloadError, match="no mirrors"):
        fetch(RemoteFile("blob.bin", sha(PAYLOAD)), [], tmp_path)


def test_remote_file_validation() -> None:
    with pytest.raises(ValueError):
        RemoteFile("../evil", None)
    with pytest.raises(ValueError):
        RemoteFile("ok.bin", "abc")


# --------------------------------------------------------------------------- extraction


def make_tar(path: Path, members: list[tarfile.TarInfo], data: bytes = b"hello") -> Path:
    with tarfile.open(path, "w:gz") as tf:
        for info in members:
            if info.isreg():
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
            else:
                tf.addfile(info)
    return path


def reg(name: str) -> tarfile.TarInfo:
    return tarfile.TarInfo(name)


def test_safe_extract_tar_and_zip(tmp_path: Path) -> None:
    tar = make_tar(tmp_path / "ok.tar.gz", [reg("top/a.txt"), reg("./top/sub/b.txt")])
    out = safe_extract(tar, tmp_path / "t")
    assert (out / "top" / "a.txt").read_bytes() == b"hello"
    assert (out / "top" / "sub" / "b.txt").read_bytes() == b"hello"
    assert stat.S_IMODE((out / "top" / "a.txt").stat().st_mode) == 0o644
    zpath = tmp_path / "ok.zip"
    with zipfile.ZipFile(zpath, "w") as zf:
        zf.writestr("dir/", "")
        zf.writestr("dir/c.txt", "zip")
        zf.writestr("other.txt", "skip me")
    out = safe_extract(zpath, tmp_path / "z", members=["dir/c.txt"])
    assert (out / "dir" / "c.txt").read_text() == "zip"
    assert not (out / "other.txt").exists()
    with pytest.raises(FileExistsError):
        safe_extract(zpath, tmp_path / "z")


@pytest.mark.parametrize("name", ["../evil.txt", "a/../../evil.txt", "/tmp/evil.txt"])
def test_tar_path_traversal_refused(tmp_path: Path, name: str) -> None:
    tar = make_tar(tmp_path / "bad.tar.gz", [reg("fine.txt"), reg(name)])
    with pytest.raises(UnsafeArchiveError, match="evil"):
        safe_extract(tar, tmp_path / "out" / "t")
    assert not (tmp_path / "out" / "t").exists()
    assert not (tmp_path / "evil.txt").exists() and not (tmp_path / "out" / "evil.txt").exists()
    assert list((tmp_path / "out").iterdir()) == []  # no temporary leftovers


@pytest.mark.parametrize("kind", [tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.CHRTYPE,
                                  tarfile.FIFOTYPE])
def test_tar_links_and_devices_refused(tmp_path: Path, kind: bytes) -> None:
    link = tarfile.TarInfo("inner")
    link.type = kind
    link.linkname = "/etc/passwd"
    tar = make_tar(tmp_path / "bad.tar", [reg("fine.txt"), link])
    with pytest.raises(UnsafeArchiveError, match="inner"):
        safe_extract(tar, tmp_path / "t")
    assert not (tmp_path / "t").exists()


@pytest.mark.parametrize("name", ["../evil.txt", "/abs/evil.txt", "a/../../evil.txt"])
def test_zip_path_traversal_refused(tmp_path: Path, name: str) -> None:
    zpath = tmp_path / "bad.zip"
    with zipfile.ZipFile(zpath, "w") as zf:
        zf.writestr("fine.txt", "ok")
        zf.writestr(zipfile.ZipInfo(name), "evil")
    with pytest.raises(UnsafeArchiveError, match="evil"):
        safe_extract(zpath, tmp_path / "z")
    assert not (tmp_path / "z").exists() and not (tmp_path / "evil.txt").exists()


def test_zip_symlink_refused(tmp_path: Path) -> None:
    zpath = tmp_path / "link.zip"
    info = zipfile.ZipInfo("link")
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    with zipfile.ZipFile(zpath, "w") as zf:
        zf.writestr(info, "/etc/passwd")
    with pytest.raises(UnsafeArchiveError, match="symlink"):
        safe_extract(zpath, tmp_path / "z")
    assert not (tmp_path / "z").exists()


def test_failed_extraction_leaves_no_tree(tmp_path: Path) -> None:
    tar = make_tar(tmp_path / "ok.tar.gz", [reg("a.txt")])
    with pytest.raises(FileNotFoundError):
        safe_extract(tar, tmp_path / "out" / "t", members=["missing.txt"])
    assert list((tmp_path / "out").iterdir()) == []


# --------------------------------------------------------- trust on first use: archives
def _archives(tmp_path: Path) -> dict[str, bytes]:
    """A good .tar.gz, .tar.bz2, .tar.xz, .zip and .gz, each of incompressible content."""
    import os

    payload = os.urandom(200_000)
    out: dict[str, bytes] = {}
    for name, mode in (("a.tar.gz", "w:gz"), ("a.tar.bz2", "w:bz2"), ("a.tar.xz", "w:xz")):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode=mode) as tf:
            info = tarfile.TarInfo("all_data/x.json")
            info.size = len(payload)
            tf.addfile(info, io.BytesIO(payload))
        out[name] = buf.getvalue()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("Art/Alarm_Clock/00001.jpg", payload)
    out["a.zip"] = buf.getvalue()
    out["a.gz"] = gzip.compress(payload)
    return out


@pytest.mark.parametrize("name", ["a.tar.gz", "a.tar.bz2", "a.tar.xz", "a.zip", "a.gz"])
def test_check_readable_refuses_truncated_and_flipped_archives(tmp_path: Path,
                                                               name: str) -> None:
    good = _archives(tmp_path)[name]
    path = tmp_path / name
    path.write_bytes(good)
    check_readable(path)
    for damaged in (good[: len(good) // 2], good[:-6]):
        path.write_bytes(damaged)
        with pytest.raises(DamagedArchiveError, match=rf"{path} does not read to its end"):
            check_readable(path)
    flipped = bytearray(good)
    flipped[len(good) // 2] ^= 0x01  # inside the compressed data
    path.write_bytes(bytes(flipped))
    with pytest.raises(DamagedArchiveError):
        check_readable(path)
    (tmp_path / "blob.bin").write_bytes(b"any bytes")  # not an archive: nothing to read
    check_readable(tmp_path / "blob.bin")


def test_truncated_first_archive_is_never_trusted(tmp_path: Path) -> None:
    # issue 17, item 6: a truncated first download stayed "verified" forever, even with
    # a good mirror after it
    good = _archives(tmp_path)["a.tar.gz"]
    bad_mirror, good_mirror = tmp_path / "bad", tmp_path / "good"
    bad_mirror.mkdir()
    good_mirror.mkdir()
    (bad_mirror / "femnist.tar.gz").write_bytes(good[:-100])
    (good_mirror / "femnist.tar.gz").write_bytes(good)
    spec = RemoteFile("femnist.tar.gz", None)
    dest = tmp_path / "dest"
    with pytest.raises(DownloadError, match="does not read to its end"):
        fetch(spec, [str(bad_mirror)], dest)
    assert list(dest.iterdir()) == []  # no file, no record
    out = fetch(spec, [str(bad_mirror), str(good_mirror)], dest)
    assert out.read_bytes() == good
    assert (dest / "femnist.tar.gz.sha256").read_text().split()[0] == sha(good)
    # a truncated copy already in place (no record yet) is replaced from the mirror
    (dest / "femnist.tar.gz.sha256").unlink()
    out.write_bytes(good[:1000])
    assert fetch(spec, [str(good_mirror)], dest).read_bytes() == good


def test_mismatch_with_the_first_use_record_names_the_record(tmp_path: Path) -> None:
    archives = _archives(tmp_path)
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    (first / "a.zip").write_bytes(archives["a.zip"])
    (second / "a.zip").write_bytes(archives["a.zip"] + b"\0")
    dest = tmp_path / "dest"
    fetch(RemoteFile("a.zip", None), [str(first)], dest)
    (dest / "a.zip").unlink()
    record = dest / "a.zip.sha256"
    with pytest.raises(DownloadError) as info:
        fetch(RemoteFile("a.zip", None), [str(second)], dest)
    assert f"recorded on first use in {record}; if that first copy was the wrong one, " \
           f"delete {record}" in str(info.value)


@pytest.mark.parametrize(("limits", "match"), [
    (Limits(min_rate=1000, grace_s=0.5), r"bytes in \d+ s, below the minimum rate of 1000"),
    (Limits(deadline_s=0.8, min_rate=0, grace_s=0), r"gave up after \d+ s, the deadline"),
])
def test_a_trickling_server_is_given_up(server: Server, tmp_path: Path, limits: Limits,
                                        match: str) -> None:
    # one byte every 50 ms stays inside every socket timeout: it used to go on for days
    data = b"x" * 5000
    server.state.files["/slow.bin"] = data
    server.state.trickle["/slow.bin"] = 0.05
    start = time.monotonic()
    with pytest.raises(DownloadError, match=match) as info:
        fetch(RemoteFile("slow.bin", sha256=sha(data)), [server.url], tmp_path, limits=limits)
    assert time.monotonic() - start < 5
    assert f"{server.url}/slow.bin" in str(info.value) and "data: download:" in str(info.value)


def test_a_server_that_falls_silent_is_given_up_at_the_deadline(server: Server,
                                                                 tmp_path: Path) -> None:
    # headers, then nothing: each read waited out the whole socket timeout (60 s by
    # default, here 15 s), past any deadline, and the attempt was retried
    data = b"x" * 5000
    server.state.files["/silent.bin"] = data
    server.state.stall["/silent.bin"] = 20.0
    start = time.monotonic()
    with pytest.raises(DownloadError, match="the deadline, with 0 bytes received") as info:
        fetch(RemoteFile("silent.bin", sha256=sha(data)), [server.url], tmp_path, timeout=15,
              limits=Limits(deadline_s=1.0))
    assert time.monotonic() - start < 5
    assert f"{server.url}/silent.bin" in str(info.value)
    assert len(server.state.requests) == 1  # no retry once the deadline has passed
