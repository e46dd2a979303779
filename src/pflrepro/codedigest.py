"""Which source files a job runs, found statically, and a digest of them.

A training job's Snakemake params carry a digest of the code it runs (see
:func:`pflrepro.config.code_digest`), so editing that code reruns exactly the jobs
it affects. The file list is derived here from the ``import`` statements, read with
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
import hashlib
from collections.abc import Collection, Iterable, Iterator
from pathlib import Path

__all__ = ["digest_files", "import_closure", "module_file"]


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
    """The modules under ``root`` that ``module`` (at ``path``) imports at run time."""
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
    return [m for name in out for m in _with_parents(name)
            if module_file(root, m) is not None]


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
