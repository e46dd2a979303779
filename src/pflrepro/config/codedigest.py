"""Which source files a job runs, found statically, and a digest of them.

A training job's Snakemake params carry a digest of the code it runs
(:func:`code_digest`), and a partition job one of its scheme's code
(:func:`partition_code_digest`), so editing that code reruns exactly the jobs it
affects. The file list is derived here from the ``import`` statements, read with
:mod:`ast` and never executed: the workflow parse that asks for it must stay fast
and import no torch.

:func:`import_closure` follows, from some entry modules, every import of a module
found under the source root, transitively: module-level imports, imports inside
functions and classes (they may run), relative imports, and the ``__init__.py`` of
every package on the way (importing ``a.b.c`` runs ``a/__init__.py`` and
``a/b/__init__.py``). It skips the body of ``if TYPE_CHECKING:`` (never true at
run time). Imports of modules not under the root (torch, the standard library)
are ignored. What it cannot see: modules imported by a computed name
(``importlib.import_module(name)``); the caller adds those entries itself.
"""

from __future__ import annotations

import ast
import functools
import hashlib
from collections.abc import Collection, Iterable, Iterator
from pathlib import Path

from pflrepro.algorithms.registry import algorithm_info

__all__ = ["PARTITION_ENTRIES", "TRAINING_ENTRIES", "code_digest", "digest_files",
           "import_closure", "module_file", "partition_code_digest", "partition_files",
           "training_core", "training_files"]


def module_file(root: Path, module: str) -> Path | None:
    """The source file of ``module`` under ``root`` (``a/b.py`` or ``a/b/__init__.py``).

    ``None`` when ``root`` holds no such module (a third-party or standard module, or
    a name imported from a module that is not itself a module).
    """
    base = root.joinpath(*module.split("."))
    for path in (base.with_name(base.name + ".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _is_type_checking(test: ast.expr) -> bool:
    """``TYPE_CHECKING`` or ``<anything>.TYPE_CHECKING`` (``typing.TYPE_CHECKING``)."""
    return ((isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
            or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


def _runtime_imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement of ``tree`` except those under ``if TYPE_CHECKING:``."""
    todo = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            todo.extend(node.orelse)  # the ``else:`` branch does run
        else:
            todo.extend(ast.iter_child_nodes(node))


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str | None:
    """The absolute module name of ``from <node.module> import ...`` inside ``module``."""
    if not node.level:
        return node.module
    package = module.split(".") if is_package else module.split(".")[:-1]
    if node.level - 1 >= len(package):
        return None  # beyond the top-level package: Python raises ImportError
    parts = package[:len(package) - (node.level - 1)]
    return ".".join(parts + ([node.module] if node.module else []))


def _with_parents(module: str) -> list[str]:
    """``a.b.c`` -> ``[a, a.b, a.b.c]``: importing a module runs its packages first."""
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def _imported_modules(root: Path, module: str, path: Path) -> list[str]:
    """The modules under ``root`` that ``module`` (at ``path``) imports at run time.

    Remembered per file version (its modification time and size): a dry run asks for
    the same closures once per experiment.
    """
    stat = path.stat()
    return list(_imported_modules_of(root, module, path, stat.st_mtime_ns, stat.st_size))


@functools.lru_cache(maxsize=4096)
def _imported_modules_of(root: Path, module: str, path: Path, mtime_ns: int, size: int
                         ) -> tuple[str, ...]:
    """:func:`_imported_modules` of one version of the file (the cache's key)."""
    tree = ast.parse(path.read_bytes(), filename=str(path))
    out: list[str] = []
    for node in _runtime_imports(tree):
        if isinstance(node, ast.Import):
            out += [alias.name for alias in node.names]
            continue
        target = _absolute(node, module, path.name == "__init__.py")
        if target is None:
            continue
        out.append(target)
        # ``from pkg import name``: ``name`` may be a submodule (then it is imported)
        out += [f"{target}.{alias.name}" for alias in node.names if alias.name != "*"
                and module_file(root, f"{target}.{alias.name}") is not None]
    return tuple(m for name in out for m in _with_parents(name)
                 if module_file(root, m) is not None)


def import_closure(root: Path, entries: Iterable[str], known: Collection[str] = ()
                   ) -> dict[str, Path]:
    """Every module under ``root`` that importing ``entries`` runs, with its file.

    ``root`` is the directory holding the top-level package (a ``sys.path`` entry,
    e.g. ``src``); ``entries`` are dotted module names under it. Modules in ``known``
    are neither returned nor followed: pass a closure already computed (closed under
    imports, so nothing beyond it is missed) to get only what ``entries`` add to it.
    Returns ``{module name: file}`` sorted by name. Raises
    :class:`ModuleNotFoundError` for an entry that ``root`` does not hold.
    """
    root = Path(root)
    found: dict[str, Path] = dict.fromkeys(known, Path())
    todo: list[str] = []
    for entry in entries:
        if module_file(root, entry) is None:
            raise ModuleNotFoundError(f"no module {entry!r} under {root}")
        todo += [m for m in _with_parents(entry) if module_file(root, m) is not None]
    while todo:
        module = todo.pop()
        if module in found:
            continue
        path = module_file(root, module)
        assert path is not None  # only modules found under root are queued
        found[module] = path
        todo += _imported_modules(root, module, path)
    return {m: found[m] for m in sorted(set(found) - set(known))}


def digest_files(root: Path, files: Iterable[Path]) -> str:
    """SHA-256 (first 16 hex digits) over ``files``' paths and contents.

    Paths are taken relative to ``root`` and hashed in sorted order with each file's
    content hash (no mtimes): the same sources give the same digest on any machine and
    checkout.
    """
    root = Path(root)
    h = hashlib.sha256()
    for rel in sorted({Path(f).relative_to(root).as_posix() for f in files}):
        h.update(rel.encode() + b"\0")
        h.update(hashlib.sha256((root / rel).read_bytes()).digest())
    return h.hexdigest()[:16]


#: What ``pflrepro train`` (:func:`pflrepro.cli.training._train`) imports: the training job's
#: code is these modules and all they import (:func:`training_files`).
#: (train_job.train_jobs: checkpoints, progress, output)
TRAINING_ENTRIES = ("pflrepro.pipeline.train_job",)
#: The directory holding the ``pflrepro`` package (``src``).
_SRC = Path(__file__).resolve().parents[2]


@functools.cache
def training_core(src: Path = _SRC) -> tuple[Path, ...]:
    """The files every training job runs, whatever its algorithm (sorted).

    The static import closure (:func:`import_closure`) of
    :data:`TRAINING_ENTRIES`. An algorithm's module is not in it: a job imports that
    by name (:func:`pflrepro.algorithms.base.get_algorithm`), which no static reading
    sees, so :func:`training_files` adds it per algorithm. Reporting code is not in it
    either, since the training entry does not import it. Computed once per process.
    """
    return tuple(_core_closure(src).values())


@functools.cache
def _core_closure(src: Path) -> dict[str, Path]:
    return import_closure(src, TRAINING_ENTRIES)


def _algorithm_files(module: str, src: Path = _SRC) -> list[Path]:
    """The files algorithm module ``module`` adds to :func:`training_core`.

    Its own file first, then, sorted, those of everything it imports beyond the core
    (e.g. the algorithm modules it builds on).
    """
    own = module_file(src, module)
    if own is None:
        raise ValueError(f"algorithm module {module!r}: no such file under {src}")
    added = import_closure(src, [module], known=_core_closure(src))
    return [own, *(f for f in added.values() if f != own)]


@functools.cache
def training_files(algorithm: str, src: Path = _SRC) -> tuple[Path, ...]:
    """Every source file a training job of ``algorithm`` runs, sorted.

    :func:`training_core` plus the closure of the algorithm's module, so editing one
    algorithm's file (or one it imports: HeurFedAMP builds on FedAMP) changes only the
    digests of the algorithms that run it. Found from the source without importing
    it (no torch); computed once per process.
    """
    extra = _algorithm_files(algorithm_info(algorithm).module, src)
    return tuple(sorted({*training_core(src), *extra}))


@functools.cache
def code_digest(algorithm: str, src: Path = _SRC) -> str:
    """SHA-256 (first 16 hex digits) over :func:`training_files` of ``algorithm``.

    Paths relative to ``src`` and contents (:func:`digest_files`).
    """
    return digest_files(src, training_files(algorithm, src))


#: What a partition job (``pflrepro partition``) runs besides its scheme's module: the
#: job itself (:func:`pflrepro.data.jobs.make_partition`, with the statistics it logs),
#: the partition base and the data store it reads labels and extra arrays from.
PARTITION_ENTRIES = ("pflrepro.data.jobs", "pflrepro.data.partition", "pflrepro.data.store")


@functools.cache
def partition_files(scheme: str, src: Path = _SRC) -> tuple[Path, ...]:
    """Every source file a partition job of ``scheme`` runs, sorted.

    The static import closure of :data:`PARTITION_ENTRIES` and the scheme's module,
    without the other schemes' modules (the schemes package imports them all to
    register them; none of their code runs in this scheme's split) and what only they
    import. Computed once per process.
    """
    from pflrepro.data.partition import PARTITIONERS

    if scheme not in PARTITIONERS:
        raise ValueError(f"unknown partition scheme {scheme!r}")
    own = PARTITIONERS[scheme].__module__
    others = {cls.__module__ for cls in PARTITIONERS.values()} - {own}
    closure = import_closure(src, [*PARTITION_ENTRIES, own], known=others)
    return tuple(sorted(closure.values()))


@functools.cache
def partition_code_digest(scheme: str, src: Path = _SRC) -> str:
    """SHA-256 (16 hex digits) over :func:`partition_files` of ``scheme``.

    A partition job's parameters include it, so editing a scheme re-partitions (and
    retrains on) only that scheme's partitions, and editing what every split runs (the
    partition base, the seeding, the data store) re-partitions all.
    """
    return digest_files(src, partition_files(scheme, src))
