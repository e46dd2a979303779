"""Config files read and merged.

YAML is read with duplicate keys refused and errors at file and line; several files
are merged as Snakemake merges them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from pflrepro.config.checks import refuse_periodic_names
from pflrepro.config.errors import ConfigError, located
from pflrepro.config.model import WorkflowConfig
from pflrepro.config.schema_check import check


# --------------------------------------------------------------------- config files
class _UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that rejects a key repeated within one mapping."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, yaml.Mark] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *anchor`: may be overridden
                continue
            key = self.construct_object(key_node, deep=True)  # type: ignore[no-untyped-call]
            try:
                first = seen.get(key)
            except TypeError:  # unhashable key: let SafeLoader report it
                continue
            if first is not None:
                mark = key_node.start_mark
                raise ConfigError(
                    f"{mark.name}:{mark.line + 1}:{mark.column + 1}: duplicate key {key!r} "
                    f"(first at line {first.line + 1}); YAML keeps only the last value")
            seen[key] = key_node.start_mark
        return super().construct_mapping(node, deep=deep)

    def _refuse_sexagesimal(self, node: yaml.ScalarNode, value: Any) -> None:
        mark = node.start_mark
        raise ConfigError(
            f"{mark.name}:{mark.line + 1}:{mark.column + 1}: {node.value!r} is a base-60 "
            f"number in YAML 1.1 (it reads as {value!r}); write the number itself, or "
            f"quote it if a string is meant")

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        value = super().construct_yaml_int(node)  # type: ignore[no-untyped-call]
        if ":" in str(node.value):
            self._refuse_sexagesimal(node, value)
        if re.fullmatch(r"[-+]?0[0-7_]+", str(node.value)):
            mark = node.start_mark
            raise ConfigError(
                f"{mark.name}:{mark.line + 1}:{mark.column + 1}: {node.value!r} has a "
                f"leading zero, which YAML 1.1 reads as the octal number {value}; write "
                f"{'-' if str(node.value).startswith('-') else ''}"
                f"{str(node.value).lstrip('+-0_') or '0'} for the decimal number")
        return value  # type: ignore[no-any-return]

    def construct_yaml_float(self, node: yaml.ScalarNode) -> float:
        value = super().construct_yaml_float(node)  # type: ignore[no-untyped-call]
        if ":" in str(node.value):
            self._refuse_sexagesimal(node, value)
        return value  # type: ignore[no-any-return]


# PyYAML (YAML 1.1) reads an unquoted 1:30 as the base-60 integer 90 (and 1:30.5 as a
# float), and 010 as the octal 8: the strict loader refuses such scalars, naming file
# and line.
_UniqueKeyLoader.add_constructor("tag:yaml.org,2002:int", _UniqueKeyLoader.construct_yaml_int)
_UniqueKeyLoader.add_constructor("tag:yaml.org,2002:float",
                                 _UniqueKeyLoader.construct_yaml_float)


def load_config_file(path: str | Path) -> dict[str, Any]:
    """Read a config file, as Snakemake does, but strictly.

    Raises :class:`ConfigError` naming the file and line for a YAML syntax error or a
    duplicate key (plain YAML keeps the last value silently), and naming the file for
    an empty file or one whose top level is not a mapping.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"{path}: cannot read config file: {err.strerror or err}") from err
    except UnicodeDecodeError as err:
        raise ConfigError(f"{path}: not a text (UTF-8) config file: byte {err.start} is "
                          f"{err.object[err.start:err.start + 1]!r}") from None
    try:
        data = yaml.load(text, Loader=_loader_for(path))  # noqa: S506 (a SafeLoader)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        what = " ".join(x for x in (err.context, err.problem) if x)
        raise ConfigError(f"{where}: YAML syntax error: {what}") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: YAML error: {err}") from None
    if data is None:
        raise ConfigError(f"{path}: the config file is empty; it needs at least 'methods' "
                          f"and 'experiments'")
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the config's top level must be a mapping of keys, got "
                          f"{type(data).__name__}")
    return data


def _loader_for(path: Path) -> type[yaml.SafeLoader]:
    def named(stream: str) -> yaml.SafeLoader:
        loader = _UniqueKeyLoader(stream)
        loader.name = str(path)
        return loader

    return named  # type: ignore[return-value]


def check_config_files(paths: Iterable[str | Path], missing_ok: bool = True) -> None:
    """Re-read each config file strictly (:func:`load_config_file`); skip missing ones."""
    for path in paths:
        if missing_ok and not Path(path).exists():
            continue
        load_config_file(path)


def files_in_force(loaded: Sequence[str | Path], given: Sequence[str | Path],
                   replace: bool = False) -> list[str]:
    """The config files behind the config, from weakest to strongest.

    ``loaded``: every file Snakemake read (``workflow.configfiles``: the ``--configfile``
    files, then the Snakefile's own ``configfile:``); ``given``: the ``--configfile``
    files, which override the Snakefile's, or with ``--replace-workflow-config``
    (``replace``) stand alone. A key's file is the last of these that sets it.
    """
    cli = [str(f) for f in given]
    own = [] if replace else [str(f) for f in loaded if str(f) not in cli]
    return own + cli


def merge_note(loaded: Sequence[str | Path], given: Sequence[str | Path],
               replace: bool = False) -> str:
    """One line when a ``--configfile`` of only new experiments was merged over the own config.

    A researcher's own config usually names experiments of its own; merged over
    ``config.yaml`` (the default), the paper experiments run beside them and their
    checks apply. Returns ``""`` with ``--replace-workflow-config``, without
    ``--configfile`` files, when a file reuses an experiment name of the own config
    (an overlay such as config/paper_smoke.yaml means to merge) or sets none.
    """
    cli = [str(f) for f in given]
    own = [str(f) for f in loaded if str(f) not in cli]
    if replace or not cli or not own:
        return ""

    def experiments(path: str) -> set[str]:
        try:
            section = load_config_file(path).get("experiments")
        except ConfigError:
            return set()
        return set(section) if isinstance(section, Mapping) else set()

    base = set().union(*(experiments(f) for f in own))
    new = [f for f in cli if (names := experiments(f)) and not names & base]
    if not new or len(new) != len(cli):
        return ""

    def shown(path: str) -> str:  # relative to the working directory where inside it
        rel = os.path.relpath(path)
        return path if rel.startswith("..") else rel

    mine, base_files = ", ".join(map(shown, new)), ", ".join(map(shown, own))
    files = " ".join(f"--configfile {shown(f)}" for f in new)
    return (f"{mine} was merged over {base_files} (its experiments are all new, so "
            f"{base_files}'s run too); to run it alone: snakemake {files} "
            f"--replace-workflow-config --cores N")


def merge_configs(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """``override`` merged into a copy of ``base`` as Snakemake merges config files.

    A key of both whose values are both mappings is merged the same way, recursively;
    any other value of ``override`` replaces the one of ``base``.
    """
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = merge_configs(merged[key], value)
        else:
            merged[key] = value
    return merged


def check_config_paths(paths: Sequence[str | Path],
                       schema: Mapping[str, Any] | str | Path) -> WorkflowConfig:
    """The workflow's checks on config files: read strictly, merged in order, checked.

    Snakemake reads the files of ``--configfile`` itself, before the workflow runs, and
    reports a YAML syntax error or an empty file with neither the file nor the line;
    this reports them as :func:`load_config_file` does, then checks the merged config
    (:func:`check`). Several files merge in the order given, as Snakemake merges them:
    ``config.yaml my.yaml`` checks ``my.yaml`` merged into ``config.yaml``.
    """
    if not paths:
        raise ConfigError("no config file given")
    merged: dict[str, Any] = {}
    for path in paths:
        merged = merge_configs(merged, load_config_file(path))
    return located_check(paths, lambda: check(merged, schema))  # errors name file:line


def located_check(paths: Sequence[str | Path], check: Callable[[], WorkflowConfig]
                  ) -> WorkflowConfig:
    """``check()`` (the merged files' check), :func:`located`, names refused as periodic."""
    with located(paths):
        return refuse_periodic_names(check())
