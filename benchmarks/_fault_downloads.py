"""The fault campaign's trials on downloads: decompression bombs, hostile archives, servers.

Every server is a loopback :class:`Mirror` of the campaign's own process; archives are
built in memory. Each trial prepares a data set with ``pflrepro prepare --mirror`` in
its scratch folder (benchmarks/fault_campaign.py).
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import threading
import time
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from _fault_core import Ctx, Result, Verdict, judge, trial, worst
from _fault_trials import SECRET, quoted

FEMNIST = "femnist_all_data.tar.gz"
OFFICEHOME = "OfficeHomeDataset_10072016.zip"
CIFAR = "cifar-10-binary.tar.gz"


# --------------------------------------------------------------------------- loopback mirror


class Mirror:
    """A loopback HTTP server: files, a byte-at-a-time trickle, a stall, a redirect."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.trickle: dict[str, float] = {}
        self.stall: set[str] = set()
        self.redirect: dict[str, str] = {}
        self.requests: list[str] = []
        self.closing = threading.Event()
        mirror = self

        class Handler(BaseHTTPRequestHandler):
            timeout = 5

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                pass

            def do_GET(self) -> None:  # noqa: N802
                name = self.path.split("?")[0].lstrip("/")
                mirror.requests.append(name)
                if name in mirror.redirect:
                    self.send_response(302)
                    self.send_header("Location", mirror.redirect[name])
                    self.end_headers()
                    return
                data = mirror.files.get(name)
                if data is None:
                    self.send_error(404, "Not Found")
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if name in mirror.stall:  # headers, then nothing until the campaign ends
                    mirror.closing.wait(60)
                    return
                gap = mirror.trickle.get(name)
                try:
                    if gap is None:
                        self.wfile.write(data)
                        return
                    for i in range(len(data)):
                        if mirror.closing.is_set():
                            return
                        self.wfile.write(data[i:i + 1])
                        self.wfile.flush()
                        time.sleep(gap)
                except OSError:  # the client gave up
                    return

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/"
        self.thread = threading.Thread(target=self.httpd.serve_forever,
                                       kwargs={"poll_interval": 0.05}, daemon=True)


@contextmanager
def mirror() -> Iterator[Mirror]:
    m = Mirror()
    m.thread.start()
    try:
        yield m
    finally:
        m.closing.set()
        m.httpd.shutdown()
        m.httpd.server_close()


def tar_gz(members: list[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=9) as tf:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            tf.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    if kind == tarfile.CHRTYPE:
        info.devmajor, info.devminor = 1, 7
    return info


def leaf_archive() -> bytes:
    """A good FEMNIST archive: LEAF's all_data JSON, two writers, five images."""
    users = {"w0": ([[0.5] * 784] * 3, [1, 2, 3]), "w1": ([[1.0] * 784] * 2, [4, 5])}
    data = {"users": list(users), "num_samples": [len(v[1]) for v in users.values()],
            "user_data": {u: {"x": x, "y": y} for u, (x, y) in users.items()}}
    return tar_gz([(member("leaf/all_data/all_data_0.json"), json.dumps(data).encode())])


def prepare(ctx: Ctx, dataset: str, url: str, *extra: str, timeout: float = 60) -> Result:
    return ctx.pf("prepare", "--dataset", dataset, "--out", "out", "--raw", "raw",
                  "--mirror", url, *extra, timeout=timeout)


def big_files(folder: Path, limit: int = 8 << 20) -> str | None:
    total = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())
    return f"{total} bytes kept under {folder.name}/" if total > limit else None


# --------------------------------------------------------------------------- archives


def _bomb(name: str, data: Callable[[], bytes], dataset: str) -> Callable:
    def fn(ctx: Ctx) -> Verdict:
        with mirror() as m:
            m.files[name] = data()
            result = prepare(ctx, dataset, m.url, timeout=120)
        return judge(result, needles=[name, "bomb", "allowed"], problems=[
            big_files(ctx.work)])
    return fn


def _zip_bomb() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        zf.writestr("Art/x/zeros.jpg", bytes(200 << 20))
    return buf.getvalue()


trial("decompression-bomb", "a 200 MiB member in a tar.gz of a few hundred KB", quick=True)(
    _bomb(FEMNIST, lambda: tar_gz([(member("zeros.bin"), bytes(200 << 20))]), "femnist"))
trial("decompression-bomb", "4000 members of 50 KiB of zeros (tar.gz)")(
    _bomb(FEMNIST, lambda: tar_gz([(member(f"z/{i}.bin"), bytes(50 << 10))
                                   for i in range(4000)]), "femnist"))
trial("decompression-bomb", "a 200 MiB member in a zip")(_bomb(OFFICEHOME, _zip_bomb,
                                                                "officehome"))


#: Names the hostile members below carry: none may appear anywhere in a trial's folder.
PLANTED = {"evil", "hard", "full", "slipped.txt", "absolute.txt", "zipslip.txt"}


def planted(ctx: Ctx) -> str | None:
    """What a hostile archive left: its members' names, a link, a device, a hard link."""
    found = [str(p.relative_to(ctx.root)) for p in ctx.root.rglob("*")
             if p.name in PLANTED or p.is_symlink() or p.is_char_device()]
    shadow = ctx.root / "etc" / "shadow"
    if shadow.exists() and shadow.stat().st_nlink > 1:
        found.append("a hard link to the shadow")
    return f"left behind: {found}" if found else None


def _hostile(members: Callable[[Ctx], list[tuple[tarfile.TarInfo, bytes | None]]]) -> Callable:
    def fn(ctx: Ctx) -> Verdict:
        with mirror() as m:
            m.files[FEMNIST] = tar_gz(members(ctx))
            first = prepare(ctx, "femnist", m.url)
            left = planted(ctx)
            m.files[FEMNIST] = leaf_archive()  # the mirror is good again
            second = prepare(ctx, "femnist", m.url)
            asked = m.requests.count(FEMNIST)
        return worst(
            judge(first, needles=[FEMNIST], problems=[left]),
            judge(second, expect="recover", problems=[
                None if (ctx.work / "out" / "meta.json").is_file() else "no meta.json",
                None if asked == 2 else f"the mirror was asked {asked} times, not twice"]))
    return fn


trial("hostile-archive", "a symlink member to /etc/passwd, then a good mirror", quick=True)(
    _hostile(lambda c: [(member("leaf/evil", tarfile.SYMTYPE, "/etc/passwd"), None)]))
trial("hostile-archive", "a ../ member (tar slip), then a good mirror")(
    _hostile(lambda c: [(member("../../slipped.txt"), b"x")]))
trial("hostile-archive", "an absolute member, then a good mirror")(
    _hostile(lambda c: [(member(str(c.root / "absolute.txt")), b"x")]))
trial("hostile-archive", "a hard link member to the shadow, then a good mirror")(
    _hostile(lambda c: [(member("leaf/hard", tarfile.LNKTYPE, str(c.shadow())), None)]))
trial("hostile-archive", "a character device member, then a good mirror")(
    _hostile(lambda c: [(member("leaf/full", tarfile.CHRTYPE), None)]))


@trial("hostile-archive", "a zip with a ../ member (zip slip)")
def _zip_slip(ctx: Ctx) -> Verdict:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("../../zipslip.txt", b"x")
    with mirror() as m:
        m.files[OFFICEHOME] = buf.getvalue()
        result = prepare(ctx, "officehome", m.url)
    return judge(result, needles=[OFFICEHOME], problems=[planted(ctx)])


# --------------------------------------------------------------------------- servers


def _cifar(ctx: Ctx, setup: Callable[[Mirror], None], *extra: str,
           timeout: float = 40) -> tuple[Result, Mirror]:
    payload = bytes(range(256)) * 400
    with mirror() as m:
        m.files[CIFAR] = payload
        setup(m)
        result = prepare(ctx, "cifar10", m.url, "--checksum",
                         f"{CIFAR}={hashlib.sha256(payload).hexdigest()}", *extra,
                         timeout=timeout)
    return result, m


@trial("hostile-server", "1 byte every 50 ms, --deadline 3", quick=True)
def _trickle(ctx: Ctx) -> Verdict:
    result, _ = _cifar(ctx, lambda m: m.trickle.__setitem__(CIFAR, 0.05), "--deadline", "3")
    late = f"took {result.seconds:.0f} s" if result.seconds > 20 else None
    return judge(result, needles=["127.0.0.1", CIFAR], problems=[late])


@trial("hostile-server", "headers, then no byte at all, --deadline 3")
def _stall(ctx: Ctx) -> Verdict:
    result, _ = _cifar(ctx, lambda m: m.stall.add(CIFAR), "--deadline", "3")
    late = f"took {result.seconds:.0f} s" if result.seconds > 20 else None
    return judge(result, needles=["127.0.0.1", CIFAR], problems=[late])


@trial("hostile-server", "1 byte every 200 ms, --min-rate 100 (judged after 60 s)")
def _below_rate(ctx: Ctx) -> Verdict:
    result, _ = _cifar(ctx, lambda m: m.trickle.__setitem__(CIFAR, 0.2), "--min-rate", "100",
                       timeout=120)
    late = f"took {result.seconds:.0f} s" if result.seconds > 90 else None
    return judge(result, needles=["minimum rate"], problems=[late])


@trial("hostile-server", "a redirect to file:// of the shadow")
def _redirect(ctx: Ctx) -> Verdict:
    shadow = ctx.shadow()
    result, _ = _cifar(ctx, lambda m: m.redirect.__setitem__(CIFAR, shadow.as_uri()))
    kept = [p for p in (ctx.work / "raw").rglob("*") if p.is_file()
            and SECRET.encode() in p.read_bytes()] if (ctx.work / "raw").exists() else []
    return judge(result, needles=["file:", "redirect", CIFAR], problems=[
        quoted(result), f"the shadow was copied to {kept}" if kept else None])


@trial("hostile-server", "content that does not match the checksum")
def _wrong_content(ctx: Ctx) -> Verdict:
    result, _ = _cifar(ctx, lambda m: m.files.__setitem__(CIFAR, b"not the archive"))
    return judge(result, needles=[CIFAR, "sha256", "checksum"], problems=[
        None if not (ctx.work / "raw" / CIFAR).exists() else "the wrong file was kept"])


@trial("hostile-server", "404 on the only mirror")
def _missing(ctx: Ctx) -> Verdict:
    result, _ = _cifar(ctx, lambda m: m.files.pop(CIFAR))
    return judge(result, needles=["127.0.0.1", CIFAR])
