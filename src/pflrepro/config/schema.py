"""Generate ``workflow/schemas/config.schema.yaml`` from the registries.

The lists of data sets, partition schemes, algorithms (with each algorithm's
hyperparameters) and training keys all come from the package, so the schema can
never name a method that does not exist or miss one that does.
``tests/unit/test_schema.py`` fails when the committed file is out of date;
``pflrepro schema --write`` regenerates it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import yaml

from pflrepro.algorithms.registry import INFOS
from pflrepro.config import (
    DEFAULT_RESOURCES,
    FIGURE_KINDS,
    MAX_CLIENTS,
    MAX_KERNEL,
    MAX_SAMPLE_PASSES,
    MAX_WIDTH,
    METHOD_NAME_PATTERN,
    MIRROR_MAX_LENGTH,
    MIRROR_PATTERN,
    NAME_MAX_LENGTH,
    NAME_PATTERN,
    RESOURCE_DOCS,
    SCALES,
    SEED_LIMIT,
    SEED_PAIRINGS,
    TABLE_METRICS,
    TRAINING_MAXIMA,
)
from pflrepro.data.checksums import SHA256_PATTERN
from pflrepro.data.datasets import DATASETS
from pflrepro.data.partition import PARTITIONERS, schema_properties
from pflrepro.training.settings import POSITIVE_FIELDS, TRAINING_DOCS, TrainingConfig

SCHEMA_PATH = Path("workflow/schemas/config.schema.yaml")

_JSON_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string"}

#: Names of experiments and tables, and of methods (path parts, wildcards, shell words;
#: :func:`pflrepro.config.check_name` holds them to the same rules).
_NAME = {"pattern": NAME_PATTERN, "maxLength": NAME_MAX_LENGTH}
_METHOD_NAME = {"pattern": METHOD_NAME_PATTERN, "maxLength": NAME_MAX_LENGTH}


def _typed(value: Any) -> dict[str, Any]:
    t = type(value)
    if t is float:
        return {"type": "number"}
    if t in _JSON_TYPES:
        return {"type": _JSON_TYPES[t]}
    return {}


#: Upper bounds of the model options any model declares, on a number or a list's items
#: alike; pflrepro.config checks the rest (types, which model has which option, the
#: parameter count) with messages naming the model.
_WIDTH = {"maximum": MAX_WIDTH, "items": {"maximum": MAX_WIDTH}}
_MODEL_OPTIONS = {
    "type": "object",
    "properties": {"hidden": _WIDTH, "channels": _WIDTH,
                   "kernel_size": {"maximum": MAX_KERNEL}},
}


def _training_schema() -> dict[str, Any]:
    props: dict[str, Any] = {}
    for f in dataclasses.fields(TrainingConfig):
        if f.name == "model_options":
            entry: dict[str, Any] = dict(_MODEL_OPTIONS)
        elif f.name == "model":
            from pflrepro.models import MODEL_OPTIONS

            entry = {"type": "string", "enum": sorted(MODEL_OPTIONS)}
        elif f.name == "architectures":
            from pflrepro.models import MODEL_OPTIONS

            entry = {"type": "array", "items": {
                "type": "object", "additionalProperties": False, "required": ["model"],
                "properties": {
                    "model": {"type": "string", "enum": sorted(MODEL_OPTIONS),
                              "description": TRAINING_DOCS["model"]},
                    "model_options": {**_MODEL_OPTIONS,
                                      "description": TRAINING_DOCS["model_options"]}}}}
        elif f.name == "architecture_assignment":
            from pflrepro.training.settings import ASSIGNMENTS

            entry = {"type": "string", "enum": list(ASSIGNMENTS)}
        elif f.name in ("client_selection", "eval_test"):
            from pflrepro.training.settings import EVAL_TESTS, SELECTIONS

            entry = {"type": "string", "enum": list(SELECTIONS if f.name == "client_selection"
                                                     else EVAL_TESTS)}
        elif f.name in ("optimizer",):
            entry = {"type": "string", "enum": ["adam", "sgd"]}
        elif f.name == "device":
            entry = {"type": "string", "enum": ["auto", "cpu", "cuda"]}
        elif f.type in ("int",):
            entry = {"type": "integer", "minimum": 1 if f.name in POSITIVE_FIELDS else 0}
            if f.name in TRAINING_MAXIMA:
                entry["maximum"] = TRAINING_MAXIMA[f.name]
        elif f.type in ("float",):
            entry = {"type": "number", "minimum": 0}
        else:
            entry = {}
        entry["description"] = TRAINING_DOCS[f.name]
        props[f.name] = entry
    return {"type": "object", "additionalProperties": False,
            "description": "Training settings (see pflrepro.training.settings).",
            "properties": props}


def _method_schema() -> dict[str, Any]:
    cases = []
    for name, cls in sorted(INFOS.items()):
        props: dict[str, Any] = {"algorithm": {"const": name,
                                               "description": "Registered algorithm name."}}
        for f in dataclasses.fields(cls.Hyper):
            entry = _typed(f.default)
            meta = f.metadata
            if "choices" in meta:
                entry["enum"] = list(meta["choices"])
            if "minimum" in meta:
                entry["minimum"] = meta["minimum"]
            if "maximum" in meta:
                entry["maximum"] = meta["maximum"]
            entry["default"] = f.default
            entry["description"] = meta.get("doc", f.name)
            props[f.name] = entry
        props["sources"] = {
            "type": "object",
            "description": "Where each value comes from (`pflrepro list hyperparameters`): "
                           "'paper: <where it states it>' or 'unstated: <why this value>'.",
            "additionalProperties": {"type": "string", "pattern": "^(paper|unstated): ."}}
        props["label"] = {"type": "string", "minLength": 1,
                          "description": "The name tables, figures and the report show for "
                                         "this variant (default: the method's own name, "
                                         "else its id)."}
        cases.append({"if": {"properties": {"algorithm": {"const": name}}},
                      "then": {"properties": props, "additionalProperties": False}})
    summaries = "; ".join(f"{n}: {c.summary}" for n, c in sorted(INFOS.items()))
    return {
        "type": "object",
        "description": "A named method variant: an algorithm and its hyperparameters.",
        "required": ["algorithm"],
        "properties": {"algorithm": {"type": "string", "enum": sorted(INFOS),
                                     "description": f"The algorithm. {summaries}"}},
        "allOf": cases,
    }


def _partition_schema() -> dict[str, Any]:
    cases = []
    for name, cls in sorted(PARTITIONERS.items()):
        props: dict[str, Any] = {"scheme": {"const": name, "description": "Partition scheme."}}
        props.update(schema_properties(cls))
        if "clients" in props:
            props["clients"] = {**props["clients"], "maximum": MAX_CLIENTS}
        props["label"] = {"type": "string",
                          "description": "Display label in tables and figures (not part of "
                                         "the partition's id)."}
        required = ["scheme"] + [f.name for f in dataclasses.fields(cls)
                                 if f.default is dataclasses.MISSING]
        cases.append({"if": {"properties": {"scheme": {"const": name}}},
                      "then": {"properties": props, "required": required,
                               "additionalProperties": False}})
    return {
        "type": "object",
        "description": "A partition of the data set among clients; its parameters form its id.",
        "required": ["scheme"],
        "properties": {"scheme": {"type": "string", "enum": sorted(PARTITIONERS),
                                  "description": "Partition scheme name."}},
        "allOf": cases,
    }


def _experiment_schema() -> dict[str, Any]:
    seeds = {"type": "array", "items": {"type": "integer", "minimum": 0,
                                        "maximum": SEED_LIMIT - 1}, "minItems": 1}
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["dataset", "partitions", "methods"],
        "properties": {
            "description": {"type": "string", "description": "What the experiment reproduces."},
            "label": {"type": "string",
                      "description": "Display label in combined tables (default: its name)."},
            "scale": {"type": "string", "enum": list(SCALES), "default": "paper",
                      "description": "Scale this experiment belongs to; `snakemake` builds "
                                     "the experiments of the top-level `scale`."},
            "figures": {"type": "array", "items": {"enum": list(FIGURE_KINDS)},
                        "default": ["accuracy", "weights"],
                        "description": "Figures to build: accuracy vs round; weights (a "
                                       "heatmap per method that learns client weights, and "
                                       "each client's cluster id over rounds per method "
                                       "that clusters clients: Clustered FL); "
                                       "client_accuracy and client_weights (one client over "
                                       "rounds, FedeRiCo Figs. 6c and 7); distances (mean "
                                       "pairwise model distance over rounds, same-"
                                       "distribution vs other pairs; FedAMP/HeurFedAMP); "
                                       "communication (final accuracy against the scalars "
                                       "each method communicated, PerFed-CKT)."},
            "focus_client": {"type": "integer", "minimum": 0, "default": 0,
                             "description": "The client of the client_* figures."},
            "public": {
                "type": "object", "additionalProperties": False,
                "required": ["dataset", "size"],
                "description": "Unlabeled public set for distillation (PerFed-CKT: 2000 "
                               "CIFAR-100 images), drawn once per partition and split seed, "
                               "disjoint from the clients' data when from the same data set.",
                "properties": {
                    "dataset": {"type": "string", "enum": sorted(DATASETS),
                                "description": "Data set the public rows come from."},
                    "size": {"type": "integer", "minimum": 1,
                             "description": "Number of public samples."},
                },
            },
            "dataset": {"type": "string", "enum": sorted(DATASETS),
                        "description": "Data set name from the data set registry."},
            "partitions": {"type": "array", "minItems": 1,
                           "items": {"$ref": "#/$defs/partition"},
                           "description": "Partitions to run every method on."},
            "methods": {"type": "array", "minItems": 1,
                        "items": {"type": "string", **_METHOD_NAME},
                        "description": "Names of method variants defined under 'methods'."},
            "split_seeds": {**seeds, "description": "Seeds of the data splits (partitions)."},
            "train_seeds": {**seeds, "description": "Training seeds: run on every split "
                                                    "(seed_pairing grid), or the i-th on the "
                                                    "i-th split (paired)."},
            "seed_pairing": {"type": "string", "enum": list(SEED_PAIRINGS), "default": "grid",
                             "description": "How split and training seeds combine into runs: "
                                            "'grid' runs every split seed with every training "
                                            "seed; 'paired' runs zip(split_seeds, "
                                            "train_seeds), one training seed per split "
                                            "(FedeRiCo's CIFAR-100 and Office-Home design); "
                                            "the two lists then need equal lengths."},
            "training": {"$ref": "#/$defs/training",
                         "description": "Overrides of the top-level training defaults."},
            "resources": {
                "type": "object", "additionalProperties": False,
                "description": "Scheduler resources of each training job.",
                "properties": {k: {"type": "integer", "minimum": 0, "default": v,
                                   "description": RESOURCE_DOCS[k]}
                               for k, v in DEFAULT_RESOURCES.items()},
            },
            "tune": _tune_schema(),
            "sources": _setting_sources_schema(),
        },
    }


def _setting_sources_schema() -> dict[str, Any]:
    """An experiment's ``sources:`` (:mod:`pflrepro.config.settings_sources`)."""
    from pflrepro.config.settings_sources import SETTING_SOURCE_KINDS, SETTINGS

    text = {"type": "string", "pattern": f"^({'|'.join(SETTING_SOURCE_KINDS)}): ."}
    return {"type": "object", "additionalProperties": False,
            "description": "Where each setting's value comes from: 'paper: <where the text "
                           "states it>' or 'unstated: <why this value>' (`pflrepro list "
                           "settings` shows them beside the values).",
            "properties": {k: {**text, "description": doc} for k, doc in SETTINGS.items()}}


def _tune_schema() -> dict[str, Any]:
    """An experiment's ``tune:`` block (:mod:`pflrepro.tuning`; checked in detail there)."""
    from pflrepro.tuning import CRITERIA, DEFAULT_FRACTION, POOLS

    grid = {"oneOf": [
        {"type": "array", "items": {"type": "number"}, "minItems": 1},
        {"type": "object", "additionalProperties": False, "required": ["log", "num"],
         "properties": {"log": {"type": "array", "items": {"type": "number",
                                                            "exclusiveMinimum": 0},
                                "minItems": 2, "maxItems": 2},
                        "num": {"type": "integer", "minimum": 2}}}]}
    from pflrepro.tuning.shared import SHARED_KEYS

    return {
        "type": "object", "additionalProperties": False,
        "anyOf": [{"required": ["methods"]}, {"required": ["training"]}],
        "description": "Hyperparameters the papers leave unstated, selected on validation "
                       "rows carved from each client's training rows (never the test rows).",
        "properties": {
            "training": {
                "type": "object", "additionalProperties": False, "required": ["by"],
                "description": "Training settings every method of the experiment shares, "
                               "selected by the validation score of method `by` alone; "
                               "every method's final runs train at the selected values "
                               "(pflrepro.tuning.shared). Tunes alone (no `methods`).",
                "properties": {"by": {"type": "string", "description": "The method whose "
                                      "validation score selects the values."},
                               **{k: grid for k in SHARED_KEYS}}},
            "methods": {"type": "object", "description": "method -> {key: grid}; a grid is "
                        "a list or {log: [lo, hi], num: n}; a key the method fixes is not "
                        "tuned.",
                        "additionalProperties": {"type": "object",
                                                 "additionalProperties": grid}},
            "rounds": {"type": "integer", "minimum": 1,
                       "description": "Rounds of each tuning run (default: the experiment's)."},
            "rounds_note": {"type": "string", "description": "Why the budget is what it is "
                            "(e.g. shorter than the curves need), printed under the tuning "
                            "tables."},
            "seeds": {"type": "array", "items": {"type": "integer", "minimum": 0},
                      "minItems": 1, "description": "Training seeds of the tuning runs."},
            "fraction": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1,
                         "default": DEFAULT_FRACTION,
                         "description": "Share of each client's training rows held out."},
            "criterion": {"type": "string", "enum": list(CRITERIA), "default": "best_mean",
                          "description": "best_mean: best over rounds of the mean client "
                                         "validation accuracy; final_mean: its last round."},
            "pool": {"type": "string", "enum": list(POOLS), "default": "split",
                     "description": "split: one selection per (partition, split seed); "
                                    "partition: one per partition, the scores averaged over "
                                    "its splits, so every split's final runs share the "
                                    "values (a table cell then holds runs of one setting)."},
        },
    }


def build_schema() -> dict[str, Any]:
    """Return the config schema as a dict."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "pflrepro workflow config",
        "description": "Generated by `pflrepro schema --write` from the package registries; "
                       "do not edit by hand.",
        "type": "object",
        "additionalProperties": False,
        "required": ["methods", "experiments"],
        "properties": {
            "data": {
                "type": "object", "additionalProperties": False,
                "description": "Where data sets come from.",
                "properties": {
                    "mirrors": {
                        "type": "object",
                        "description": "Per data set, mirrors tried in order (http(s) URLs, "
                                       "file:// URLs or absolute local directories, no "
                                       "shell metacharacters) before the built-in "
                                       "defaults.",
                        "propertyNames": {"enum": sorted(DATASETS)},
                        "additionalProperties": {
                            "type": "array",
                            "items": {"type": "string", "pattern": MIRROR_PATTERN,
                                      "maxLength": MIRROR_MAX_LENGTH}},
                    },
                    "checksums": {
                        "type": "object",
                        "description": "Per data set, the SHA-256 of each raw file (by its "
                                       "file name) that replaces the built-in one: for a copy "
                                       "whose bytes differ from the official archive (a "
                                       "re-packed mirror, generated test archives).",
                        "propertyNames": {"enum": sorted(DATASETS)},
                        "additionalProperties": {
                            "type": "object",
                            "additionalProperties": {"type": "string",
                                                     "pattern": SHA256_PATTERN}}},
                    "download": {
                        "type": "object", "additionalProperties": False,
                        "description": "Bounds on one file's transfer from one mirror (a "
                                       "server that trickles bytes keeps every read inside "
                                       "the socket timeout).",
                        "properties": {
                            "deadline_s": {"type": "number", "exclusiveMinimum": 0,
                                           "default": 21600,
                                           "description": "Seconds a file may take, its "
                                                          "retries and resumes included."},
                            "min_rate": {"type": "number", "minimum": 0, "default": 1024,
                                         "description": "Bytes per second below which a "
                                                        "transfer is given up, judged "
                                                        "after its first minute."}}},
                },
            },
            "allow_huge": {"type": "boolean", "default": False,
                           "description": "Run experiments whose projected training-sample "
                                          "passes (samples x local epochs, or local steps x "
                                          "batch size, x rounds x clients per round x runs x "
                                          f"methods) exceed {MAX_SAMPLE_PASSES:.0e}; the "
                                          "config check refuses them otherwise, naming the "
                                          "experiment."},
            "scale": {"type": "string", "enum": list(SCALES), "default": "paper",
                      "description": "Which experiments and tables `snakemake` builds: "
                                     "'paper' (the papers' settings) or 'cpu' (small real "
                                     "data, minutes on a laptop). Switch with "
                                     "`--config scale=cpu`."},
            "training": {"$ref": "#/$defs/training",
                         "description": "Training defaults of every experiment."},
            "runs_per_job": {
                "type": "object", "additionalProperties": False,
                "default": {"paper": 1, "cpu": "all"},
                "description": "Training runs per training job, by the experiments' scale: "
                               "the runs of one experiment, partition and method (its split "
                               "and training seeds, in order) are trained this many at a "
                               "time in one process ('all': all of them), so that small "
                               "runs pay Python's and torch's start-up once. Each run still "
                               "writes its own table, digest, log and checkpoint, with the "
                               "same bytes as alone. The trade: a job reruns as a whole, so "
                               "a changed spec of one run (or an added seed in its chunk) "
                               "reruns its job-mates too. Default: 1 at paper scale (big "
                               "runs, one GPU job each), 'all' at CPU scale.",
                "properties": {scale: {"oneOf": [{"type": "integer", "minimum": 1},
                                                 {"const": "all"}],
                                       "default": {"paper": 1, "cpu": "all"}[scale]}
                               for scale in SCALES},
            },
            "tables": {
                "type": "object",
                "description": "Tables over several experiments, by name.",
                "propertyNames": {**_NAME},
                "additionalProperties": {
                    "type": "object", "additionalProperties": False,
                    "required": ["experiments"],
                    "properties": {
                        "experiments": {"type": "array", "minItems": 1,
                                        "items": {"type": "string", **_NAME},
                                        "description": "Experiments whose columns the table "
                                                       "holds, in order."},
                        "caption": {"type": "string", "description": "Table caption."},
                        "metric": {"type": "string", "enum": list(TABLE_METRICS),
                                   "default": "weighted_final",
                                   "description": "weighted_final: final-round accuracy "
                                                  "weighted by client test size (FedeRiCo); "
                                                  "mean_bmta: best-over-rounds and final "
                                                  "mean client accuracy (FedAMP)."},
                    },
                },
            },
            "methods": {"type": "object", "description": "Method variants by name.",
                        "propertyNames": {**_METHOD_NAME},
                        "additionalProperties": {"$ref": "#/$defs/method"}},
            "experiments": {"type": "object", "minProperties": 1,
                            "description": "Experiments by name; each is a grid of runs with "
                                           "its own table and figures.",
                            "propertyNames": {**_NAME},
                            "additionalProperties": {"$ref": "#/$defs/experiment"}},
        },
        "$defs": {
            "training": _training_schema(),
            "method": _method_schema(),
            "partition": _partition_schema(),
            "experiment": _experiment_schema(),
        },
    }


def render() -> str:
    """The schema as YAML text, with a header comment."""
    header = ("# GENERATED by `pflrepro schema --write` from the package registries.\n"
              "# Do not edit; change the package and regenerate.\n")
    return header + yaml.safe_dump(build_schema(), sort_keys=False, allow_unicode=True,
                                   width=100)
