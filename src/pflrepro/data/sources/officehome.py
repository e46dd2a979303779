"""Office-Home (Venkateswara et al. 2017): four domains, placed by hand, resized."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from pflrepro.data.datasets import DatasetSource, register_dataset
from pflrepro.data.download import RemoteFile
from pflrepro.data.formats import FormatError
from pflrepro.data.rawfiles import extracted, obtain_placed, save_array
from pflrepro.data.store import DatasetMeta, write_dataset
from pflrepro.store.io import write_text

# Office-Home (Venkateswara et al. 2017), hosted on Google Drive behind a browser page
# (https://www.hemanthdv.org/officeHomeDataset.html). No official checksum is published; one
# third-party loader pins MD5 b1c14819770c4448fd5b6d931031c91c for a copy of this zip, which
# could not be verified here, so the file is trusted on first use.
OFFICEHOME_FILES: tuple[RemoteFile, ...] = (
    RemoteFile("OfficeHomeDataset_10072016.zip", sha256=None),
)
OFFICEHOME_HOWTO = (
    "Download OfficeHomeDataset_10072016.zip with a browser from "
    "https://www.hemanthdv.org/officeHomeDataset.html (Google Drive)."
)
#: domain index used in ``domain.npy``
OFFICEHOME_DOMAINS: tuple[str, ...] = ("Art", "Clipart", "Product", "Real World")
OFFICEHOME_NUM_CLASSES = 65
OFFICEHOME_DEFAULT_SIZE = 32
_IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png"}


def _officehome_root(root: Path) -> tuple[Path, list[Path]]:
    """Find the directory holding the four domain folders; return it and their paths."""
    aliases = {"Real World": ("Real World", "Real_World", "RealWorld")}
    candidates = [root, *sorted(p for p in root.iterdir() if p.is_dir())]
    for base in candidates:
        found = []
        for domain in OFFICEHOME_DOMAINS:
            hit = next((base / a for a in aliases.get(domain, (domain,)) if (base / a).is_dir()),
                       None)
            if hit is None:
                break
            found.append(hit)
        else:
            return base, found
    raise FormatError(f"{root}: no folder holding the Office-Home domains "
                      f"{list(OFFICEHOME_DOMAINS)}")


def _load_image(path: Path, size: int) -> np.ndarray:
    from PIL import Image

    with Image.open(path) as img:
        rgb = img.convert("RGB").resize((size, size), Image.Resampling.BILINEAR)
        return np.asarray(rgb, dtype=np.uint8).transpose(2, 0, 1)


def prepare_officehome(out_dir: Path, raw_dir: Path, mirrors: Sequence[str], *,
                       files: Sequence[RemoteFile] = OFFICEHOME_FILES,
                       image_size: int = OFFICEHOME_DEFAULT_SIZE) -> DatasetMeta:
    """Office-Home: 4 domains x 65 classes of RGB photos/art, resized to ``image_size``.

    Each image is decoded with Pillow, converted to RGB and resized (aspect ratio not
    kept) to ``image_size`` x ``image_size`` with Pillow's antialiasing bilinear filter.
    Classes are the folder names in sorted order (``classes.json``); ``domain.npy``
    holds each image's domain index into :data:`OFFICEHOME_DOMAINS`. Images are
    ordered by domain, class, then file name. The archive is placed by hand.
    """
    try:
        import PIL  # noqa: F401
    except ImportError as exc:  # pragma: no cover - Pillow ships with matplotlib
        raise ImportError("Office-Home needs Pillow to decode images: pip install pillow") from exc
    if image_size < 1:
        raise ValueError(f"image_size must be positive, got {image_size}")
    raw_dir, out_dir = Path(raw_dir), Path(out_dir)
    archive = obtain_placed("officehome", files[0], mirrors, raw_dir, OFFICEHOME_HOWTO)
    _, domain_dirs = _officehome_root(extracted(archive, raw_dir))
    class_sets = [sorted(p.name for p in d.iterdir() if p.is_dir()) for d in domain_dirs]
    classes = class_sets[0]
    if any(c != classes for c in class_sets) or len(classes) != OFFICEHOME_NUM_CLASSES:
        raise FormatError(f"{archive}: expected the same {OFFICEHOME_NUM_CLASSES} class folders "
                          f"in every domain, got {[len(c) for c in class_sets]}")
    xs: list[np.ndarray] = []
    ys: list[int] = []
    ds: list[int] = []
    for d_idx, d_dir in enumerate(domain_dirs):
        for c_idx, cls in enumerate(classes):
            images = sorted(p for p in (d_dir / cls).iterdir()
                            if p.is_file() and p.suffix.lower() in _IMAGE_SUFFIXES
                            and not p.name.startswith("."))
            for img in images:
                xs.append(_load_image(img, image_size))
                ys.append(c_idx)
                ds.append(d_idx)
    if not xs:
        raise FormatError(f"{archive}: no images found")
    out_dir.mkdir(parents=True, exist_ok=True)
    save_array(out_dir / "domain.npy", np.asarray(ds, dtype=np.int64))
    write_text(out_dir / "classes.json", json.dumps(classes, indent=0) + "\n")
    return write_dataset(out_dir, np.stack(xs), np.asarray(ys, dtype=np.int64),
                         name="officehome", num_classes=OFFICEHOME_NUM_CLASSES, max_value=255,
                         source=f"Office-Home (Venkateswara et al. 2017), 4 domains (domain.npy:"
                                f" {', '.join(OFFICEHOME_DOMAINS)}), resized to "
                                f"{image_size}x{image_size} bilinear")


SOURCE = register_dataset(DatasetSource(
    name="officehome",
    description="Office-Home: 4 domains x 65 classes, resized to 32x32; archive placed by hand "
                "(domain.npy).",
    prepare=prepare_officehome,
    num_classes=OFFICEHOME_NUM_CLASSES,
    image_shape=(3, OFFICEHOME_DEFAULT_SIZE, OFFICEHOME_DEFAULT_SIZE),
    files=OFFICEHOME_FILES,
))
