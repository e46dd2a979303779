"""Registry of data sets: each entry turns its raw source into the uniform form.

An entry is a :class:`DatasetSource`: a name, a description, and a ``prepare``
callable that writes :mod:`pflrepro.data.store`'s form into a directory. Sources
that download take an ordered list of mirrors (http(s) URLs, ``file://`` URLs or
local directories) and a raw-download directory. The config schema's list of data
sets comes from :data:`DATASETS`.

A data set is one module of :mod:`pflrepro.data.sources`: :data:`DATASETS` finds them
as the algorithm and scheme registries find theirs, by importing every module of that
package (a scan of its directory) the first time it is read; nothing else lists them.
The sources import this module, never the reverse.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from pflrepro.data.download import RemoteFile, tofu_record
from pflrepro.data.store import DatasetMeta
from pflrepro.store.scan import ScannedRegistry

PrepareFn = Callable[[Path, Path, Sequence[str]], DatasetMeta]


@dataclass(frozen=True)
class DatasetSource:
    """One selectable data set."""

    name: str
    description: str
    prepare: PrepareFn  # (out_dir, raw_dir, mirrors) -> metadata
    default_mirrors: tuple[str, ...] = ()
    #: Rows of the prepared data set and its number of labels, where fixed; the config
    #: check uses them (too many clients, more label groups than labels) at parse time,
    #: and leaves data sets without them to the partition job.
    num_samples: int | None = None
    num_classes: int | None = None
    #: (channels, height, width) of its prepared images, where fixed; the config check
    #: refuses a model that cannot take them (:func:`pflrepro.models.shapes.check_input_shape`).
    image_shape: tuple[int, int, int] | None = None
    #: The raw files ``prepare`` fetches (its ``files=`` keyword's default); a config's
    #: ``data.checksums`` replaces their SHA-256 (:func:`with_checksums`).
    files: tuple[RemoteFile, ...] = ()


#: The package whose every module is a data set (imported on the first read of
#: :data:`DATASETS`).
SOURCES_PACKAGE = "pflrepro.data.sources"
#: Data sets registered so far (:func:`register_dataset`), by name.
_LOADED: dict[str, DatasetSource] = {}


#: Every data set by name (``dataset:`` in the config); the first read imports every
#: source module.
DATASETS: Mapping[str, DatasetSource] = ScannedRegistry(SOURCES_PACKAGE, _LOADED)


def register_dataset(source: DatasetSource) -> DatasetSource:
    """Add ``source`` to the registry (names are unique)."""
    if source.name in _LOADED:
        raise ValueError(f"data set {source.name!r} registered twice")
    _LOADED[source.name] = source
    return source


def with_checksums(source: DatasetSource,
                   checksums: Mapping[str, str]) -> tuple[RemoteFile, ...]:
    """``source.files`` with the SHA-256 of each file named in ``checksums`` replaced.

    A replaced file is checked against that hash alone (its published size and
    decompressed-content hash belong to the official file): a mirror of other bytes, a
    user's own copy or generated test archives, is verified as strictly as the original.
    """
    unknown = sorted(set(checksums) - {f.name for f in source.files})
    if unknown:
        raise ValueError(f"data.checksums.{source.name}: unknown file(s) {unknown}; "
                         f"{source.name}'s files: {[f.name for f in source.files]}")
    return tuple(replace(f, sha256=checksums[f.name], size=None, content_sha256=None)
                 if f.name in checksums else f for f in source.files)


def prepare_dataset(name: str, out_dir: str | Path, raw_dir: str | Path,
                    mirrors: Sequence[str] | None = None,
                    checksums: Mapping[str, str] | None = None) -> DatasetMeta:
    """Prepare data set ``name`` into ``out_dir`` (raw files cached in ``raw_dir``).

    ``checksums`` (file name -> SHA-256) replaces the hashes of the source's files.
    """
    if name not in DATASETS:
        raise ValueError(f"unknown data set {name!r}; known: {sorted(DATASETS)}")
    from pflrepro.data.download import DownloadError

    source = DATASETS[name]
    chosen = tuple(mirrors) if mirrors else source.default_mirrors
    files = {"files": with_checksums(source, checksums)} if checksums else {}
    before = _first_use_records(Path(raw_dir), source)
    try:
        return source.prepare(Path(out_dir), Path(raw_dir), chosen, **files)
    except (ValueError, KeyError, IndexError, EOFError) as err:
        # A first-use archive that verified but does not prepare (a wrong archive placed
        # by hand) must not stay trusted: its hash is recorded only once it prepares.
        aside = _set_aside_new_records(Path(raw_dir), source, before)
        if not aside:
            raise
        from pflrepro.data.rawfiles import ArchiveMissingError

        raise ArchiveMissingError(f"{name}: {err}; {aside}") from err
    except DownloadError as err:
        if type(err) is not DownloadError:  # checksum, damaged archive: they say their fix
            raise
        raise DownloadError(
            f"{err}\nFix: data set {name!r} is not downloaded yet and no mirror gave it. "
            f"Where there is network, the next run downloads it; without one, copy its "
            f"raw files (the one named above and the rest of its manifest) into {raw_dir}, "
            f"or into a directory listed under data.mirrors.{name} in the config "
            f"(pflrepro prepare/run: --mirror DIR).", err.failures) from err


def _first_use_records(raw_dir: Path, source: DatasetSource) -> set[str]:
    """Names of ``source``'s first-use files whose hash record is in ``raw_dir``."""
    return {f.name for f in source.files
            if f.trust_on_first_use and tofu_record(raw_dir, f).is_file()}


def _set_aside_new_records(raw_dir: Path, source: DatasetSource, before: set[str]) -> str:
    """Set aside each first-use archive recorded since ``before``, with its record.

    Returns what was set aside, in words ("" when nothing was).
    """
    from pflrepro.data.rawfiles import set_aside_archive
    from pflrepro.store.damage import set_aside

    moved = []
    for f in source.files:
        record, archive = tofu_record(raw_dir, f), raw_dir / f.name
        if f.name in before or not f.trust_on_first_use or not record.is_file():
            continue
        if archive.is_file():
            moved.append(f"{f.name}, recorded on first use but not preparing, is "
                         f"{set_aside_archive(archive, raw_dir)}")
        else:
            moved.append(f"the recorded hash of {f.name} set aside as "
                         f"{set_aside(record).name}")
    return "; ".join(moved)
