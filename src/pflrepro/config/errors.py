"""Config errors, and the checks on config files beyond the schema.

:class:`ConfigError` is every config problem (:mod:`pflrepro.config` raises it); a
schema error is a :class:`SchemaError`, which knows the key it is about, so that
:func:`located` (around :func:`pflrepro.config.check_config_paths`, what
``pflrepro check-config`` runs) names the file and line of that key: the last file
given that sets it, since later files override earlier ones.

:func:`refuse_periodic_names` refuses a name that ends in one piece repeated 20 or
more times (``eeeeeeeeeeeeeeeeeeee``, ``ab`` x 20): Snakemake takes such a wildcard
value for an endless recursion of a rule into itself and stops the dry run with
``PeriodicWildcardError``, after ``check-config`` had said "valid". The workflow
(``common.smk``) and ``check-config`` (:func:`located_check`) both run it.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

#: Snakemake's ``PeriodicityDetector``: a wildcard value ending in one piece repeated
#: this many times or more is refused.
PERIODIC_REPEATS = 20
_PERIODIC = re.compile(rf"(.+?)\1{{{PERIODIC_REPEATS - 1},}}$")


class ConfigError(ValueError):
    """A config problem; the message names the key."""


class SchemaError(ConfigError):
    """A schema error that knows the key it is about (``key_path``, from the top)."""

    def __init__(self, message: str, key_path: Sequence[Any]) -> None:
        super().__init__(message)
        self.key_path = tuple(key_path)


#: What YAML 1.1 (Snakemake's and PyYAML's) reads as a boolean when unquoted.
YAML_BOOLEANS = "on/off, yes/no, true/false, y/n"
#: Why a nested ``--config`` value is a string, and what to do instead.
NESTED_CONFIG_HINT = (
    "a string where a number or boolean belongs: Snakemake passes the values of a "
    "nested --config (--config 'training={rounds: 5}') as strings; set nested keys in a "
    "config file of your own instead (--configfile config.yaml my.yaml, with my.yaml "
    "holding 'training: {rounds: 5}')")


#: Why a name became a boolean.
BOOLEAN_HINT = f"YAML's reading of an unquoted {YAML_BOOLEANS}: quote a name such as 'on'"


def boolean_text(value: bool) -> str:
    """``True`` with why a name became a boolean (YAML 1.1's unquoted ``on``, ``yes``)."""
    return f"{value} ({BOOLEAN_HINT})"


def _hint(error: Any) -> str:
    """A sentence on what most likely caused ``error``, for two common cases; else ''."""
    instance = error.instance
    wanted = error.schema.get("type") if isinstance(error.schema, Mapping) else None
    if isinstance(instance, bool) and wanted != "boolean":
        return f" ({BOOLEAN_HINT})"
    if error.validator == "type" and isinstance(instance, str) and \
            set(wanted if isinstance(wanted, list) else [wanted]) & {"integer", "number",
                                                                      "boolean"}:
        try:
            parsed = yaml.safe_load(instance)
        except yaml.YAMLError:
            return ""
        if not isinstance(parsed, str):
            return f" ({NESTED_CONFIG_HINT})"
    return ""


def schema_error(message: str, error: Any) -> SchemaError:
    """The :class:`SchemaError` of a ``jsonschema`` error: its key, or its unknown key."""
    path = list(error.absolute_path)
    if error.validator == "additionalProperties" and isinstance(error.instance, Mapping):
        known = set(error.schema.get("properties") or {})
        unknown = sorted((k for k in error.instance if k not in known), key=str)
        path += unknown[:1]
    return SchemaError(message + _hint(error), path)


def _key_line(node: yaml.Node, key_path: Sequence[Any]) -> int | None:
    """1-based line of the key (or list item) at ``key_path`` under ``node``; None if absent."""
    line = None
    for part in key_path:
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if key.value == str(part):
                    line, node = key.start_mark.line + 1, value
                    break
            else:
                return None
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and \
                0 <= part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            return None
    return line


def locate(paths: Sequence[str | Path], key_path: Sequence[Any]) -> str | None:
    """``file:line`` of ``key_path`` in the last of ``paths`` that sets it (None: none)."""
    if not key_path:
        return None
    for path in reversed(list(paths)):
        try:
            node = yaml.compose(Path(path).read_text(encoding="utf-8"), Loader=yaml.SafeLoader)
        except (OSError, ValueError, yaml.YAMLError):
            continue
        line = _key_line(node, key_path) if node is not None else None
        if line is not None:
            return f"{path}:{line}"
    return None


def periodic_piece(name: str) -> tuple[str, int] | None:
    """(piece, times) when ``name`` ends in one piece repeated 20 times or more; else None."""
    match = _PERIODIC.search(name)
    if match is None:
        return None
    return match.group(1), len(match.group(0)) // len(match.group(1))


@contextlib.contextmanager
def located(paths: Sequence[str | Path]) -> Iterator[None]:
    """Re-raise a :class:`SchemaError` inside with the ``file:line`` of its key in front."""
    try:
        yield
    except SchemaError as err:
        where = locate(paths, err.key_path)
        if where is None:
            raise
        raise ConfigError(f"{where}: {err}") from None


def json_object(text: str, what: str, keys: Mapping[str, Any],
                optional: Iterable[str] | None = None) -> dict[str, Any]:
    """``text`` read as a JSON object holding every key of ``keys``, each of its type.

    ``keys`` maps a key to a type or a tuple of types (``bool`` never counts as a
    number); with ``optional`` given, a key in neither is refused too. ``ValueError``
    names ``what`` and the first problem in one line.
    """
    import json

    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"{what}: not JSON ({err})") from None
    if not isinstance(value, dict):
        raise ValueError(f"{what}: a JSON object is expected, got {type(value).__name__}")
    if optional is not None and (unknown := sorted(set(value) - set(keys) - set(optional))):
        raise ValueError(f"{what}: unknown key(s) {unknown}")
    missing = sorted(set(keys) - set(value))
    if missing:
        raise ValueError(f"{what}: missing key(s) {missing}")
    for key, kind in keys.items():
        if not isinstance(value[key], kind) or isinstance(value[key], bool):
            raise ValueError(f"{what}: {key} has the wrong type ({type(value[key]).__name__})")
    return value
