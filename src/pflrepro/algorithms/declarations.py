"""The methods' declarations, read from their source without importing it.

A method module imports torch (seconds), and checking a config, building its schema,
listing the methods or parsing the workflow needs only what the module declares: the
registered class's ``name``, ``summary``, ``Hyper`` (its :func:`~pflrepro.algorithms.
registry.hyper` fields), ``records``, the flags of
:class:`~pflrepro.algorithms.registry.AlgorithmInfo` and ``TUNE_KEYS``. This module
reads them with :mod:`ast`:

* the registered class is the module's class decorated with ``@register_algorithm``;
* a class attribute is looked up along the class's method resolution order (C3, as
  Python does), through base classes defined in the module or imported from another
  module of :mod:`pflrepro.algorithms` (``Algorithm`` in ``base.py`` holds the
  defaults);
* a value is a literal, a tuple, list or dict of values, or a name: a module-level
  constant, a class, or a name imported from another method module, from
  :mod:`pflrepro.algorithms.registry` (``hyper``, ``NoHyper``) or from
  :data:`READABLE` (metric names); anything else is an error naming file and line;
* ``Hyper`` becomes a frozen dataclass with the same field names, annotations,
  defaults and metadata as the module's own (built by calling the same ``hyper``).

A test checks that what is read equals what the imported class declares, for every
method.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
from pathlib import Path
from typing import Any

#: The package of the method modules and its directory.
PACKAGE = "pflrepro.algorithms"
PACKAGE_DIR = Path(__file__).resolve().parent
#: The package's module whose objects (``hyper``, ``NoHyper``) a declaration uses as
#: they are.
REGISTRY = f"{PACKAGE}.registry"
#: Torch-free modules outside the package a declaration may take names from.
READABLE = frozenset({"pflrepro.store.results"})
#: The decorator that marks the registered class.
DECORATOR = "register_algorithm"


class DeclarationError(ValueError):
    """A declaration the reader cannot evaluate without importing the module."""


@dataclasses.dataclass(frozen=True)
class _ClassRef:
    """A class defined at the top level of a method package module."""

    module: str  # the module's name in the package ("fedavg")
    name: str
    node: ast.ClassDef = dataclasses.field(compare=False, hash=False, repr=False)


class _Module:
    """One module's top-level names: classes, constants and ``from ... import``s."""

    def __init__(self, name: str, path: Path) -> None:
        self.name, self.path = name, path
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        self.tree = tree
        self.defs: dict[str, ast.expr | ast.ClassDef] = {}
        self.imports: dict[str, tuple[str, str]] = {}
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    self.imports[alias.asname or alias.name] = (node.module, alias.name)
            elif isinstance(node, ast.ClassDef):
                self.defs[node.name] = node
            elif isinstance(node, ast.Assign) and len(node.targets) == 1:
                target = node.targets[0]
                if isinstance(target, ast.Name):
                    self.defs[target.id] = node.value
                elif (isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple)
                      and len(target.elts) == len(node.value.elts)):  # A, B = "a", "b"
                    self.defs.update({t.id: v for t, v in zip(target.elts, node.value.elts,
                                                              strict=True)
                                      if isinstance(t, ast.Name)})
            elif (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                  and node.value is not None):
                self.defs[node.target.id] = node.value


class Reader:
    """Reads method modules of a package directory (cached per module)."""

    def __init__(self, directory: Path = PACKAGE_DIR) -> None:
        self.directory = directory
        self._modules: dict[str, _Module] = {}

    def module(self, name: str) -> _Module:
        """The parsed module ``name`` of the package."""
        if name not in self._modules:
            path = self.directory / f"{name}.py"
            if not path.is_file():
                raise DeclarationError(f"{PACKAGE}.{name}: no file {path}")
            self._modules[name] = _Module(name, path)
        return self._modules[name]

    def lookup(self, module: _Module, name: str, where: str) -> Any:
        """The value of top-level name ``name`` of ``module``."""
        if name in module.defs:
            node = module.defs[name]
            if isinstance(node, ast.ClassDef):
                return _ClassRef(module.name, name, node)
            return self.evaluate(module, node)
        if name in module.imports:
            source, original = module.imports[name]
            if source == REGISTRY or source in READABLE:
                return getattr(importlib.import_module(source), original)
            if source.startswith(PACKAGE + "."):
                return self.lookup(self.module(source.rpartition(".")[2]), original, where)
            raise DeclarationError(f"{where}: {name!r} comes from {source}, which the "
                                   f"declarations reader does not import")
        raise DeclarationError(f"{where}: {name!r} is not defined or imported at the top "
                               f"level of {module.path.name}")

    def evaluate(self, module: _Module, node: ast.expr) -> Any:
        """A declaration's value (see the module docstring for what it may be)."""
        where = f"{module.path}:{node.lineno}"
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return self.lookup(module, node.id, where)
        if isinstance(node, ast.Tuple | ast.List):
            values = [self.evaluate(module, e) for e in node.elts]
            return tuple(values) if isinstance(node, ast.Tuple) else values
        if isinstance(node, ast.Dict) and None not in node.keys:
            return {self.evaluate(module, k): self.evaluate(module, v)  # type: ignore[arg-type]
                    for k, v in zip(node.keys, node.values, strict=True)}
        try:
            return ast.literal_eval(node)  # -1, 1e-7, ...
        except ValueError:
            raise DeclarationError(f"{where}: {ast.unparse(node)!r} is neither a literal nor "
                                   f"a name the declarations reader can resolve") from None

    def bases(self, ref: _ClassRef) -> list[_ClassRef]:
        """The class's bases inside the package (``ABC`` and other outside ones left out).

        A parametrised base (``Algorithm[FedEMState]``) counts as its class: the type
        argument (the method's state type) declares nothing the reader reads.
        """
        module = self.module(ref.module)
        out = []
        for written in ref.node.bases:
            base = written.value if isinstance(written, ast.Subscript) else written
            if not isinstance(base, ast.Name):
                raise DeclarationError(f"{module.path}:{base.lineno}: base "
                                       f"{ast.unparse(base)!r} of {ref.name} is not a name")
            source = module.imports.get(base.id, (PACKAGE, ""))[0]
            if source != PACKAGE and not source.startswith(PACKAGE + "."):
                continue
            value = self.lookup(module, base.id, f"{module.path}:{base.lineno}")
            if not isinstance(value, _ClassRef):
                raise DeclarationError(f"{module.path}:{base.lineno}: base {base.id!r} of "
                                       f"{ref.name} is not a class of {PACKAGE}")
            out.append(value)
        return out

    def mro(self, ref: _ClassRef) -> list[_ClassRef]:
        """The C3 linearisation of ``ref`` over its bases inside the package."""
        bases = self.bases(ref)
        seqs = [[ref], *(self.mro(b) for b in bases), bases]
        out: list[_ClassRef] = []
        while seqs := [s for s in seqs if s]:
            for seq in seqs:
                head = seq[0]
                if not any(head in other[1:] for other in seqs):
                    break
            else:
                raise DeclarationError(f"{PACKAGE}.{ref.module}.{ref.name}: inconsistent "
                                       f"base classes")
            out.append(head)
            seqs = [s[1:] if s[0] == head else s for s in seqs]
        return out

    def attributes(self, ref: _ClassRef, names: tuple[str, ...]) -> dict[str, Any]:
        """The class attributes ``names`` that ``ref`` declares or inherits."""
        found: dict[str, Any] = {}
        for cls in self.mro(ref):
            module = self.module(cls.module)
            for node in cls.node.body:
                target, value = _assignment(node)
                if target in names and target not in found and value is not None:
                    found[target] = self.evaluate(module, value)
        return found

    def hyper_class(self, ref: _ClassRef) -> type:
        """A frozen dataclass equal in fields to the declared ``Hyper`` class ``ref``."""
        module = self.module(ref.module)
        if ref.node.bases:
            raise DeclarationError(f"{module.path}:{ref.node.lineno}: {ref.name} has base "
                                   f"classes; a Hyper class declares all its fields itself")
        fields = []
        for node in ref.node.body:
            if not isinstance(node, ast.AnnAssign) or not isinstance(node.target, ast.Name):
                continue
            where = f"{module.path}:{node.lineno}"
            if node.value is None:
                raise DeclarationError(f"{where}: hyperparameter {node.target.id!r} has no "
                                       f"default")
            fields.append((node.target.id, ast.unparse(node.annotation),
                           self.field(module, node.value)))
        cls = dataclasses.make_dataclass(ref.name, fields, frozen=True)
        cls.__module__ = f"{PACKAGE}.{ref.module}"
        cls.__doc__ = ast.get_docstring(ref.node)
        return cls

    def field(self, module: _Module, node: ast.expr) -> Any:
        """A field: ``hyper(default, doc, ...)`` called as declared, or a plain default."""
        if isinstance(node, ast.Call):
            function = self.evaluate(module, node.func)
            if not callable(function):
                raise DeclarationError(f"{module.path}:{node.lineno}: "
                                       f"{ast.unparse(node.func)!r} is not a function")
            args = [self.evaluate(module, a) for a in node.args]
            kwargs = {k.arg: self.evaluate(module, k.value) for k in node.keywords if k.arg}
            return function(*args, **kwargs)
        return dataclasses.field(default=self.evaluate(module, node))

    def declaration(self, name: str, attributes: tuple[str, ...]) -> dict[str, Any] | None:
        """What module ``name``'s registered class declares of ``attributes``.

        ``None`` when the module registers no class; a ``Hyper`` class of the package
        comes as a dataclass (:meth:`hyper_class`).
        """
        ref = self.registered(name)
        if ref is None:
            return None
        values = self.attributes(ref, attributes)
        if isinstance(values.get("Hyper"), _ClassRef):
            values["Hyper"] = self.hyper_class(values["Hyper"])
        return values

    def registered(self, name: str) -> _ClassRef | None:
        """The class module ``name`` decorates with ``@register_algorithm`` (None: none)."""
        module = self.module(name)
        found = [node for node in module.tree.body if isinstance(node, ast.ClassDef)
                 and any(isinstance(d, ast.Name) and d.id == DECORATOR
                         for d in node.decorator_list)]
        if len(found) > 1:
            raise DeclarationError(f"{module.path}: registers {len(found)} classes, not one")
        return _ClassRef(name, found[0].name, found[0]) if found else None


def _assignment(node: ast.stmt) -> tuple[str | None, ast.expr | None]:
    """``name = value`` / ``name: T = value`` in a class body: (name, value)."""
    if (isinstance(node, ast.Assign) and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)):
        return node.targets[0].id, node.value
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return node.target.id, node.value
    return None, None
