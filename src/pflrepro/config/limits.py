"""The config's fixed vocabulary and bounds.

Scales, figure kinds, resources, the rules of names, the size limits, and the check of
a name.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from pflrepro.config.errors import ConfigError, boolean_text
from pflrepro.config.figure_kinds import entries as figure_entries

SCALES = ("paper", "cpu")
#: The entries an experiment's ``figures`` list may hold (each figure module declares
#: its kind: :mod:`pflrepro.config.figure_kinds`).
FIGURE_KINDS = figure_entries()
TABLE_METRICS = ("weighted_final", "mean_bmta")
#: How an experiment combines its split seeds and training seeds (see
#: :meth:`ExperimentConfig.seed_pairs`).
SEED_PAIRINGS = ("grid", "paired")

#: Resources of a training job unless an experiment says otherwise.
DEFAULT_RESOURCES: Mapping[str, int] = {"gpu": 0, "mem_mb": 4000, "runtime": 60}
RESOURCE_DOCS: Mapping[str, str] = {
    "gpu": "GPUs per training job (Snakemake resource 'gpu'; 1 to run on CUDA under a "
           "scheduler or with --resources gpu=N).",
    "mem_mb": "Memory per training job, MB.",
    "runtime": "Wall-clock limit per training job, minutes.",
}


# ------------------------------------------------------------------------------ names
# Every config string that becomes a wildcard, a path part or a shell word is held to a
# pattern here and in the schema (pflrepro.config.schema), so a name can neither leave the
# working directory ('..', '/'), nor run as a command ('$(...)', ';', spaces), nor give
# a file name the file system refuses (length).

#: Longest experiment, table or method name: each is a directory or file name (with
#: suffixes such as ``-communication.csv``) and part of longer paths.
NAME_MAX_LENGTH = 64
#: Experiment and table names: a letter, then letters, digits and '_'.
NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9_]*$"
#: Method names: as :data:`NAME_PATTERN`, and single dots inside (``federico_eps0.1``);
#: never '.' first or last, never '..', '/', '-' or a space.
METHOD_NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*$"
#: Longest partition id (:attr:`pflrepro.data.partition.Partitioner.id`), a directory
#: name and, with ``-split<N>.pdf``, a file name (at most 255 bytes on most systems).
PARTITION_ID_MAX_LENGTH = 200
#: Partition ids: scheme name and parameter values (``dirichlet-clients4-alpha0.5``).
PARTITION_ID_PATTERN = r"^(?!.*\.\.)[A-Za-z0-9][A-Za-z0-9_.+-]*$"
#: Data mirrors (``data.mirrors``, at most this long): an absolute directory ('/', or
#: '~/' for the home directory) or an http(s):// or file:// URL, without characters a
#: shell or a URL query would read (NAME_RULES lists them). Spaces are allowed: the
#: prepare rule passes each mirror as one quoted word.
MIRROR_MAX_LENGTH = 1024
MIRROR_PATTERN = r"^(?:/|~/|https?://|file://)[^\x00-\x1f\x7f'\"$`;&|<>(){}\[\]*?!#\\]*$"

#: What each pattern admits, in words (the error messages).
NAME_RULES: Mapping[str, str] = {
    NAME_PATTERN: f"a letter, then letters, digits or '_' (at most {NAME_MAX_LENGTH} "
                  "characters)",
    METHOD_NAME_PATTERN: f"a letter, then letters, digits, '_' or single '.' inside (no "
                         f"'..', '/', '-' or spaces; at most {NAME_MAX_LENGTH} characters)",
    PARTITION_ID_PATTERN: f"letters, digits, '_', '.', '+' or '-', no '..' (at most "
                          f"{PARTITION_ID_MAX_LENGTH} characters)",
    MIRROR_PATTERN: "an absolute directory ('/...' or '~/...') or an http(s):// or file:// "
                    "URL, without quotes, '$', '`', ';', '&', '|', '<', '>', '(', ')', "
                    "'{', '}', '[', ']', '*', '?', '!', '#', '\\' or control characters",
}


# ------------------------------------------------------------------------------ sizes
# Upper bounds on every size a job allocates or loops over, so a typo (an extra zero,
# a seed pasted from elsewhere) is refused with the key named before any job starts,
# not met at job time as an OverflowError, std::bad_alloc or a run of years. Each bound
# is far above every shipped config (config.yaml at both scales, config/demo.yaml,
# config/convergence_fashion.yaml); the schema (pflrepro.config.schema) carries the same ones.

#: Seeds are integers in [0, SEED_LIMIT): the run tables store them as int64 and
#: scikit-learn's and NumPy's legacy seeding take 32-bit seeds (pflrepro.seeding's
#: derive_seed itself hashes any integer).
SEED_LIMIT = 2**32
#: Largest value of each integer training key.
TRAINING_MAXIMA: Mapping[str, int] = {
    "rounds": 100_000, "batch_size": 1_000_000, "local_epochs": 10_000,
    "local_steps": 1_000_000, "eval_every": 100_000, "eval_batch_size": 1_000_000,
    "client_chunk": 100_000,
}
#: Most clients of a partition.
MAX_CLIENTS = 100_000
#: Widest hidden layer or conv block (model_options 'hidden', 'channels').
MAX_WIDTH = 65_536
#: Largest kernel side (model_options 'kernel_size'; the inputs are at most 32x32 here).
MAX_KERNEL = 64
#: Most parameters of one model, counted without its input layer (a lower bound on the
#: real count; 250 M float32 parameters are 1 GB per client copy; VGG13 has 9.4 M).
MAX_MODEL_PARAMETERS = 250_000_000
#: Most training-sample passes (samples x local epochs x rounds, or local steps x
#: batch size x rounds, over the clients of a round and every run) one experiment may
#: project; a larger plan is refused unless the config sets ``allow_huge: true``.
#: 10^12 passes take about 3 years at 10^4 samples/s (a CPU core on the CNN).
MAX_SAMPLE_PASSES = 10**12


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return boolean_text(value) if isinstance(value, bool) else (
        text if len(text) <= limit else text[:limit - 3] + "...")


def canonical_json(obj: Any) -> str:
    """Compact JSON with sorted keys (stable across runs, used as a Snakemake param)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def check_name(name: Any, where: str, pattern: str = NAME_PATTERN,
               max_length: int = NAME_MAX_LENGTH, what: str = "key") -> str:
    """Return ``name`` if it matches ``pattern`` and ``max_length``; else :class:`ConfigError`.

    ``where`` is the section holding it (``methods``); the message names the key.
    """
    if (not isinstance(name, str) or len(name) > max_length
            or re.fullmatch(pattern, name) is None):
        length = (f" ({len(name)} characters)" if isinstance(name, str)
                  and len(name) > max_length else "")
        raise ConfigError(f"{where}: {what} {_short(name)}{length} is not allowed (it becomes "
                          f"part of file paths and command lines): it must be "
                          f"{NAME_RULES[pattern]}")
    return name
