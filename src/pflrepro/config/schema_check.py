"""The config checked against its JSON schema first, with messages that name the key."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from pflrepro.choices import did_you_mean
from pflrepro.config.errors import ConfigError, schema_error
from pflrepro.config.limits import (
    MIRROR_PATTERN,
    NAME_MAX_LENGTH,
    NAME_RULES,
    _short,
    check_name,
)
from pflrepro.config.model import WorkflowConfig
from pflrepro.config.parsing import parse


# ----------------------------------------------------------------------- the schema
def _where(path: Iterable[Any]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _schema_message(error: Any) -> str:
    where = _where(error.absolute_path)
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        known = sorted(error.schema.get("properties") or {})
        unknown = sorted(set(error.instance) - set(known), key=str)
        place = where or "config top level"
        hint = did_you_mean(unknown[0], known) if len(unknown) == 1 else ""
        return (f"unknown key {', '.join(repr(k) for k in unknown)} at {place}{hint}; "
                f"known: {', '.join(known)}")
    if error.validator == "propertyNames":
        return f"{where or 'config top level'}: key {_short(error.instance)} is not allowed"
    pattern = error.schema.get("pattern") if isinstance(error.schema, Mapping) else None
    if error.validator in ("pattern", "maxLength") and pattern in NAME_RULES:
        # a name (propertyNames: the key of ``where``) or a mirror: say what is allowed
        key = "propertyNames" in error.relative_schema_path
        try:
            check_name(error.instance, where or "config top level", pattern,
                       error.schema.get("maxLength", NAME_MAX_LENGTH),
                       what="key" if key else "mirror" if pattern == MIRROR_PATTERN
                       else "name")
        except ConfigError as err:
            return str(err)
    if error.validator == "enum":
        return (f"{where}: {_short(error.instance)} is not one of "
                f"{', '.join(map(str, error.validator_value))}"
                f"{did_you_mean(error.instance, error.validator_value)}")
    if error.validator == "required":
        return f"{where or 'config top level'}: {error.message}"
    if error.validator in ("minItems", "minProperties") and not error.instance:
        what = "entry" if error.validator == "minItems" else "key"
        return (f"{where or 'config top level'} is empty: give it at least "
                f"{error.validator_value} {what} (config/demo.yaml has complete experiments; "
                "`pflrepro list` shows the methods, data sets and partition schemes)")
    message = error.message
    if len(message) > 200:
        message = message[:197] + "..."
    return f"{where or 'config top level'}: {message}"


def check_schema(raw: Any, schema: Mapping[str, Any] | str | Path) -> None:
    """Validate ``raw`` against the config schema; one short message naming the key.

    ``schema`` is the schema (:func:`pflrepro.config.schema.build_schema`, which imports this
    module: so it is passed in, never imported here) or the path of its YAML file.
    Unlike ``snakemake.utils.validate`` the message never prints the schema itself.
    """
    import jsonschema

    if isinstance(schema, str | Path):
        schema = yaml.safe_load(Path(schema).read_text(encoding="utf-8"))
    if not isinstance(raw, Mapping):
        raise ConfigError(f"the config's top level must be a mapping, got {type(raw).__name__}")
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(raw))
    if not errors:
        return
    error = jsonschema.exceptions.best_match(errors)
    # Inside if/then cases, report the deepest error (the bad hyperparameter itself).
    while error.context:
        error = jsonschema.exceptions.best_match(error.context)
    raise schema_error(_schema_message(error), error)  # a ConfigError that knows its key


def check(raw: Any, schema: Mapping[str, Any] | str | Path) -> WorkflowConfig:
    """:func:`check_schema`, then :func:`parse`: what ``common.smk`` does."""
    check_schema(raw, schema)
    return parse(raw)
