"""How ``pflrepro`` presents itself: grouped help, and every error as one line.

:func:`group_help` lists the commands a person types first and the commands the
workflow's jobs run after them, instead of argparse's single list in the order the
subcommands were added. :func:`run_command` runs a parsed command and turns the
errors a user can cause (a bad input, a missing or wrong file, an unwritable or
closed output, a config nested too deep) into one line ``pflrepro CMD: error: ...``
on stderr, printed once, with exit status 1 (143 for a run stopped by ``SIGTERM``).
"""

from __future__ import annotations

import argparse
import errno
import logging
import os
import sys
import textwrap
import traceback
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger("pflrepro")

#: The commands for people, in the order the help lists them.
USER_COMMANDS = ("run", "list", "plan", "status", "check-config", "verify", "schema")
#: The commands the workflow's rules run (jobs), in the order the help lists them, after
#: the commands for people; every command is in one of the two.
JOB_COMMANDS = ("prepare", "grid-projection", "partition", "public", "partition-stats",
                "train", "cost", "aggregate", "table", "communication", "plot", "claims",
                "report-html", "paper-vs-ours", "tune-split", "tune-select", "other-config",
                "cost-projection")
#: The options naming each command's output files (argparse ``dest``s) that get a digest
#: record once the command has written them (:func:`output_paths`;
#: :func:`pflrepro.store.records.record_outputs` writes the records).
OUTPUT_ARGS: dict[str, tuple[str, ...]] = {
    "table": ("md", "tex", "csv"),
    "communication": ("md", "csv"),
    "cost": ("md", "csv", "projection_csv"),
    "cost-projection": ("md", "csv"),
    "grid-projection": ("md", "csv"),
    "partition-stats": ("csv", "md"),
    "claims": ("md", "csv"),
    "paper-vs-ours": ("md", "csv"),
    "report-html": ("out",),
    "tune-select": ("md", "csv", "selection"),
}
#: Width of the grouped command list.
HELP_WIDTH = 100
#: Commands whose result is what they print: a closed or full stdout is their error.
PRINTING_COMMANDS = ("list", "plan", "status", "verify", "check-config", "schema")
#: What writing to a full, closed or broken standard output raises (no file name).
_STDOUT_ERRNOS = (errno.ENOSPC, errno.EPIPE, errno.EBADF)


def group_help(parser: argparse.ArgumentParser,
               sub: argparse._SubParsersAction) -> None:  # noqa: SLF001 (argparse's type)
    """List ``sub``'s commands in two groups in ``parser``'s help: people's, then jobs'.

    Each group in its stated order (:data:`USER_COMMANDS`, :data:`JOB_COMMANDS`), which is
    also the order of the choices an unknown command's error lists; a command in neither
    is a ``ValueError`` (a new command is placed in one of them).
    """
    helps = {action.dest: action.help or "" for action in sub._choices_actions}  # noqa: SLF001
    unplaced = sorted(set(helps) - set(USER_COMMANDS) - set(JOB_COMMANDS))
    if unplaced:
        raise ValueError(f"command(s) {unplaced} in neither USER_COMMANDS nor JOB_COMMANDS "
                         "(pflrepro.cli.support): place each in the help's order")
    width = max(len(name) for name in helps) + 2
    user = [name for name in USER_COMMANDS if name in helps]
    jobs = [name for name in JOB_COMMANDS if name in helps]
    ordered = {name: sub.choices[name] for name in user + jobs}
    sub.choices.clear()
    sub.choices.update(ordered)

    def block(title: str, names: list[str]) -> str:
        lines = [title]
        for name in names:
            wrapped = textwrap.wrap(helps[name], HELP_WIDTH - width - 2) or [""]
            lines.append(f"  {name:<{width}}{wrapped[0]}")
            lines += [" " * (width + 2) + line for line in wrapped[1:]]
        return "\n".join(lines)

    parser.epilog = "\n\n".join([
        block("commands:", user),
        block("job commands (what the workflow's rules run; also usable by hand):", jobs),
        "`pflrepro COMMAND -h` describes a command."])
    sub.metavar = "COMMAND"
    sub.help = "one of the commands below"
    sub._choices_actions.clear()  # noqa: SLF001 (listed in the epilog instead)


def output_paths(args: argparse.Namespace) -> list[str]:
    """The output files the finished command ``args`` names (:data:`OUTPUT_ARGS`), given ones."""
    values = (getattr(args, dest, None) for dest in OUTPUT_ARGS.get(args.command, ()))
    return [value for value in values if value]


def _stdout_problem() -> str | None:
    """Why nothing can be printed (stdout closed), else None."""
    if sys.stdout is None:
        return "standard output is closed (>&-): there is nowhere to print the result"
    return None


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's last flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def run_command(args: argparse.Namespace, func: Callable[[argparse.Namespace], None],
                interrupted: type[BaseException]) -> int:
    """Run ``func(args)``; known errors print one line and return 1 (``interrupted``: 143)."""
    command = args.command
    try:
        if command in PRINTING_COMMANDS and (problem := _stdout_problem()) is not None:
            raise OSError(problem)
        func(args)
        if sys.stdout is not None:
            sys.stdout.flush()
    except interrupted as err:  # SIGTERM: checkpoint saved; the scheduler may requeue
        log.warning("%s", err)
        return 143
    except RecursionError:
        files = getattr(args, "configs", None) or getattr(args, "config", None) or []
        where = f" ({' + '.join(map(str, files))})" if files else ""
        _error(command, f"an input{where} is nested too deeply to read (a config or JSON "
                        f"value thousands of levels deep?)")
        return 1
    except OSError as err:
        if err.filename is None and err.errno in _STDOUT_ERRNOS and sys.stdout is not None:
            _silence_stdout()  # a full or broken stdout: say so once, not at exit again
            _error(command, f"cannot write to standard output: {err.strerror}")
        else:
            _error(command, _os_message(err))
        return 1
    except (ValueError, RuntimeError) as err:
        _error(command, str(err))
        return 1
    except Exception as err:  # noqa: BLE001 (no command ends in a traceback)
        if getattr(args, "verbose", False):
            traceback.print_exc()
        _error(command, f"unexpected {type(err).__name__}: {err} (an input this command "
                        f"does not check, or a bug: `pflrepro -v {command} ...` prints the "
                        f"traceback to report)")
        return 2
    return 0


def _os_message(err: OSError) -> str:
    """``path: what`` for an error with a file name, its text otherwise."""
    if err.filename is not None:
        what = ("is a directory, where a file is expected" if err.errno == errno.EISDIR
                else err.strerror)
        return f"{err.filename}: {what or err}"
    return str(err.strerror or err)


def _error(command: str, message: str) -> None:
    """The one line of an error, on stderr (``pflrepro CMD: error: ...``)."""
    print(f"pflrepro {command}: error: {message}", file=sys.stderr)


def check_source(src: str) -> None:
    """Refuse to run unless the ``pflrepro`` imported is ``src``/pflrepro (``--require-source``).

    The workflow's jobs pass their own ``src`` (workflow/rules/preflight.smk): another
    clone's package first on the path would otherwise run its code under this
    workflow's name. ``PFLREPRO_ANY_SOURCE=1`` skips the check, as it skips the
    workflow's own.
    """
    import pflrepro

    if os.environ.get("PFLREPRO_ANY_SOURCE") == "1":
        return
    own = Path(src).resolve() / "pflrepro"
    imported = Path(pflrepro.__file__).resolve().parent
    if imported != own:
        raise RuntimeError(
            f"this job runs pflrepro from {imported}, not from the workflow's own source "
            f"{own}: install the workflow's clone into the job's environment (pip install "
            f"-e {own.parent.parent}) or set PFLREPRO_ANY_SOURCE=1 to run other code on "
            f"purpose")
