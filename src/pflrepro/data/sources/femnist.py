"""FEMNIST (LEAF, Caldas et al. 2018): the ``all_data`` JSON, placed by hand, by writer."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from pflrepro.data.datasets import DatasetSource, register_dataset
from pflrepro.data.download import RemoteFile
from pflrepro.data.formats import FormatError
from pflrepro.data.rawfiles import extracted, natural_key, obtain_placed, save_array
from pflrepro.data.store import DatasetMeta, write_dataset
from pflrepro.store.io import write_text

# FEMNIST (LEAF, Caldas et al. 2018) has no downloadable archive: LEAF's scripts build it from
# NIST SD19. No checksum exists, so it is trusted on first use.
FEMNIST_FILES: tuple[RemoteFile, ...] = (
    RemoteFile("femnist_all_data.tar.gz", sha256=None),
)
FEMNIST_HOWTO = (
    "FEMNIST is built locally with LEAF (https://github.com/TalwalkarLab/leaf): in "
    "leaf/data/femnist run `./preprocess.sh -s niid --sf 1.0 -k 0 -t sample` (any options; "
    "only the all_data output is used), then pack its JSON files with "
    "`tar -czf femnist_all_data.tar.gz -C leaf/data/femnist/data all_data`."
)
FEMNIST_NUM_CLASSES = 62


def _leaf_json_files(root: Path) -> list[Path]:
    """LEAF's ``all_data`` JSON files if that directory exists, else every JSON file."""
    all_data = sorted(p for p in root.rglob("all_data") if p.is_dir())
    search = all_data if all_data else [root]
    files = sorted({f for d in search for f in d.rglob("*.json")}, key=natural_key)
    if not files:
        raise FormatError(f"{root}: no LEAF JSON files found in the FEMNIST archive")
    return files


def prepare_femnist(out_dir: Path, raw_dir: Path, mirrors: Sequence[str], *,
                    files: Sequence[RemoteFile] = FEMNIST_FILES) -> DatasetMeta:
    """FEMNIST from LEAF's ``all_data`` JSON: 28x28 grey characters, 62 classes, per writer.

    Pixels are LEAF's values (floats in [0, 1], white background = 1) times 255,
    rounded. ``writer.npy`` holds each image's writer index (its natural client) and
    ``writers.json`` the writer ids in index order (order of first appearance, files in
    natural order). The archive is placed by hand; see :data:`FEMNIST_HOWTO`.
    """
    raw_dir, out_dir = Path(raw_dir), Path(out_dir)
    archive = obtain_placed("femnist", files[0], mirrors, raw_dir, FEMNIST_HOWTO)
    root = extracted(archive, raw_dir)
    xs: list[np.ndarray] = []
    ys: list[np.ndarray] = []
    ws: list[np.ndarray] = []
    writers: dict[str, int] = {}
    for jf in _leaf_json_files(root):
        data = json.loads(jf.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or "users" not in data or "user_data" not in data:
            raise FormatError(f"{jf}: not a LEAF data file (needs 'users' and 'user_data')")
        for user in data["users"]:
            record = data["user_data"][user]
            px = np.asarray(record["x"], dtype=np.float64)
            lab = np.asarray(record["y"], dtype=np.int64)
            if px.ndim != 2 or px.shape[1] != 784 or len(px) != len(lab):
                raise FormatError(f"{jf}: writer {user}: x has shape {px.shape}, y {lab.shape}; "
                                  "expected (n, 784) and (n,)")
            if px.size and (px.min() < 0.0 or px.max() > 1.0):
                raise FormatError(f"{jf}: writer {user}: pixel values outside [0, 1]")
            idx = writers.setdefault(str(user), len(writers))
            xs.append(np.rint(px * 255.0).astype(np.uint8).reshape(-1, 1, 28, 28))
            ys.append(lab)
            ws.append(np.full(len(lab), idx, dtype=np.int64))
        del data
    x, y, w = np.concatenate(xs), np.concatenate(ys), np.concatenate(ws)
    out_dir.mkdir(parents=True, exist_ok=True)
    save_array(out_dir / "writer.npy", w)
    write_text(out_dir / "writers.json", json.dumps(list(writers), indent=0) + "\n")
    return write_dataset(out_dir, x, y, name="femnist", num_classes=FEMNIST_NUM_CLASSES,
                         max_value=255,
                         source=f"FEMNIST (LEAF, Caldas et al. 2018) all_data JSON; {len(writers)} "
                                "writers (writer.npy); LEAF pixel values x255, white background")


SOURCE = register_dataset(DatasetSource(
    name="femnist",
    description="FEMNIST (LEAF): handwritten characters by writer (natural clients), 62 classes; "
                "archive built with LEAF and placed by hand (writer.npy).",
    prepare=prepare_femnist,
    num_classes=FEMNIST_NUM_CLASSES,
    image_shape=(1, 28, 28),
    files=FEMNIST_FILES,
))
