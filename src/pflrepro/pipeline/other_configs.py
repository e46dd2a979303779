"""Which shipped config a file belongs to, for a target the loaded config does not make.

Snakemake answers a target no rule makes with ``MissingRuleException``; a figure or
table of the demo asked for without the demo profile is the common case. The
workflow's rule ``other_config_target`` (workflow/rules/common.smk) matches exactly the
files of experiments and tables that the loaded config lacks and another config of
``config/`` (or ``config.yaml``) has, and fails while Snakemake plans, with the line
:func:`hint` writes: the config to load, and the profile that loads it.

``snakemake --report`` of the default target (every output of the loaded config)
stops likewise, with :func:`report_hint`, when files the report shows were never built
(the paper-scale figures, when the demo profile was left out), instead of Snakemake's
"marked for report but does not exist" for the first one it meets.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import yaml

#: Where experiment and table names appear in the paths the workflow writes.
_OWNED = (r"figures/{name}-[^/]+", r"results/tables/{name}(?:-[^/]+)?\.[a-z]+",
          r"results/(?:runs|aggregate|tuning|report|partial)/{name}(?:/.*|\.[a-z]+|-[^/]+)",
          r"results/report/{name}\.html")


def shipped_configs(root: str | Path) -> dict[str, set[str]]:
    """Config file (relative to ``root``) -> the experiment and table names it defines."""
    root = Path(root)
    found: dict[str, set[str]] = {}
    for path in [root / "config.yaml", *sorted((root / "config").glob("*.yaml"))]:
        try:
            raw = yaml.safe_load(path.read_text())
        except (OSError, yaml.YAMLError):
            continue
        if isinstance(raw, dict) and isinstance(raw.get("experiments"), dict):
            names = set(raw["experiments"]) | set(raw.get("tables") or {})
            found[str(path.relative_to(root))] = {str(n) for n in names}
    return found


def profiles_of(root: str | Path) -> dict[str, str]:
    """Config file -> a profile directory whose ``configfile:`` loads it."""
    out: dict[str, str] = {}
    for path in sorted(Path(root).glob("profiles/*/config.yaml")):
        try:
            raw = yaml.safe_load(path.read_text())
        except (OSError, yaml.YAMLError):
            continue
        if isinstance(raw, dict) and isinstance(raw.get("configfile"), str):
            out.setdefault(raw["configfile"], str(path.parent.relative_to(root)))
    return out


def foreign_names(configs: Mapping[str, set[str]], loaded: Iterable[str]) -> dict[str, str]:
    """Name -> config file, for names the loaded config lacks (the first config wins)."""
    have = set(loaded)
    out: dict[str, str] = {}
    for config, names in configs.items():
        for name in sorted(names - have):
            out.setdefault(name, config)
    return out


def target_pattern(names: Iterable[str]) -> str:
    """A regex matching the paths the workflow writes for ``names`` (never matches if none)."""
    names = sorted(names, key=len, reverse=True)
    if not names:
        return r"(?!x)x"
    alternation = "(?:" + "|".join(re.escape(n) for n in names) + ")"
    return "(?:" + "|".join(p.format(name=alternation) for p in _OWNED) + ")"


def owner(target: str, names: Mapping[str, str]) -> str | None:
    """The config file whose names make ``target``, or ``None``."""
    for name in sorted(names, key=len, reverse=True):
        if re.fullmatch(target_pattern([name]), target):
            return names[name]
    return None


def hint(target: str, names: Mapping[str, str], profiles: Mapping[str, str],
         loaded: str) -> str:
    """One line: ``<target> belongs to config/demo.yaml: add --profile profiles/demo``."""
    config = owner(target, names) or "another config"
    how = (f"add --profile {profiles[config]}" if config in profiles
           else f"add --configfile {config} --replace-workflow-config")
    return f"{target} belongs to {config}, not to {loaded}: {how}"


def report_mode(argv: Sequence[str]) -> bool:
    """Whether Snakemake's command line asks for a report of the files as they are.

    ``--report`` without ``--report-after-run`` (which builds first). Snakemake gives a
    Snakefile no other sign of report mode.
    """
    args = list(argv)
    return (any(a == "--report" or a.startswith("--report=") for a in args)
            and "--report-after-run" not in args)


def build_command(loaded: str, scale: str, profiles: Mapping[str, str]) -> str:
    """The command that builds every output of the loaded config at its scale."""
    if loaded in profiles:
        return f"snakemake --profile {profiles[loaded]}"
    config = "" if loaded == "config.yaml" else f" --configfile {loaded} --replace-workflow-config"
    return f"snakemake --cores N{config}" + (" --config scale=cpu" if scale == "cpu" else "")


def report_hint(loaded: str, scale: str, missing: Sequence[str], total: int,
                profiles: Mapping[str, str]) -> str:
    """One line for a report of a config whose reported files are not all built.

    Names the config and scale the report is for, how many of its files are missing
    (one of them), the command that builds them and the profiles of the other shipped
    configs (the demo's), whose reports need only their own files.
    """
    others = [f"the report of {c}: snakemake --profile {p} --report"
              for c, p in sorted(profiles.items()) if c != loaded]
    alternative = f"; or {', or '.join(others)}" if others else ""
    return (f"the report is of {loaded} at the {scale} scale, and {len(missing)} of the "
            f"{total} files it shows are not built (e.g. {missing[0]}): build them first "
            f"with {build_command(loaded, scale, profiles)}{alternative}")


#: The log of rule ``other_config_target`` (never written: the rule never runs).
HINT_LOG = "logs/other_config/{other_config_target}.log"


def hint_job(root: str, loaded: str, target: str) -> None:
    """``pflrepro other-config``: fail with :func:`hint` for ``target`` (``ValueError``)."""
    configs = shipped_configs(root)
    names = foreign_names(configs, configs.get(loaded, set()))
    raise ValueError(hint(target, names, profiles_of(root), loaded))


def command_line_targets(argv: Sequence[str]) -> list[str]:
    """The targets named on Snakemake's command line ``argv`` (``[]`` when none or unread).

    Read with Snakemake's own parser, so an option's value is never taken for a target;
    a command line that is not Snakemake's (a Snakefile parsed through the API) gives none.
    """
    import contextlib
    import io

    from snakemake.cli import get_argument_parser

    try:
        with contextlib.redirect_stderr(io.StringIO()):
            args, _ = get_argument_parser().parse_known_args(list(argv))
    except SystemExit:
        return []
    return [str(t) for t in (getattr(args, "targets", None) or [])]


def target_problems(targets: Sequence[str], names: Mapping[str, str],
                    profiles: Mapping[str, str], loaded: str) -> list[str]:
    """One line per named target that belongs to another shipped config: :func:`hint`.

    ``names``: the other shipped configs' experiment and table names
    (:func:`foreign_names`). Checked before Snakemake plans, so the line is all a
    reader sees (inside the plan it would come wrapped in Snakemake's traceback); the
    loaded config's own names are checked by
    :func:`pflrepro.pipeline.workflow.named_targets.target_problems`.
    """
    return [hint(target, names, profiles, loaded) for target in targets
            if owner(target, names) is not None]
