"""The workflow config, parsed into frozen, typed objects.

``config.yaml`` is first checked against ``workflow/schemas/config.schema.yaml``
(generated from the registries by :mod:`pflrepro.config.schema`); :func:`parse` then
builds these objects and checks what a schema cannot (references between sections,
partition parameters). Every error names the offending key.

Layer (tests/unit/test_layers.py): with :mod:`pflrepro.tuning`, what to run; it may
import the store, models, data, training and algorithms layers, never reporting,
pipeline or the CLI.
"""

from __future__ import annotations

from pflrepro.config.checks import (
           CLIENT_COUNTED,
           model_parameters_lower_bound,
           projected_sample_passes,
)
from pflrepro.config.errors import ConfigError
from pflrepro.config.files import (
           check_config_files,
           check_config_paths,
           files_in_force,
           load_config_file,
           merge_configs,
           merge_note,
)
from pflrepro.config.limits import (
           DEFAULT_RESOURCES,
           FIGURE_KINDS,
           MAX_CLIENTS,
           MAX_KERNEL,
           MAX_MODEL_PARAMETERS,
           MAX_SAMPLE_PASSES,
           MAX_WIDTH,
           METHOD_NAME_PATTERN,
           MIRROR_MAX_LENGTH,
           MIRROR_PATTERN,
           NAME_MAX_LENGTH,
           NAME_PATTERN,
           NAME_RULES,
           PARTITION_ID_MAX_LENGTH,
           PARTITION_ID_PATTERN,
           RESOURCE_DOCS,
           SCALES,
           SEED_LIMIT,
           SEED_PAIRINGS,
           TABLE_METRICS,
           TRAINING_MAXIMA,
           canonical_json,
           check_name,
)
from pflrepro.config.model import (
           SOURCE_KINDS,
           ExperimentConfig,
           MethodConfig,
           PublicConfig,
           RunKey,
           TableConfig,
           WorkflowConfig,
           parse_sources,
)
from pflrepro.config.parsing import parse
from pflrepro.config.schema_check import check, check_schema

__all__ = ["CLIENT_COUNTED", "ConfigError", "DEFAULT_RESOURCES", "ExperimentConfig",
           "FIGURE_KINDS", "MAX_CLIENTS", "MAX_KERNEL", "MAX_MODEL_PARAMETERS",
           "MAX_SAMPLE_PASSES", "MAX_WIDTH", "METHOD_NAME_PATTERN", "MIRROR_MAX_LENGTH",
           "MIRROR_PATTERN", "MethodConfig", "NAME_MAX_LENGTH", "NAME_PATTERN",
           "NAME_RULES", "PARTITION_ID_MAX_LENGTH", "PARTITION_ID_PATTERN",
           "PublicConfig", "RESOURCE_DOCS", "RunKey", "SCALES", "SEED_LIMIT",
           "SEED_PAIRINGS", "SOURCE_KINDS", "TABLE_METRICS", "TRAINING_MAXIMA",
           "TableConfig", "WorkflowConfig", "canonical_json", "check",
           "check_config_files", "check_config_paths", "check_name", "check_schema",
           "files_in_force", "load_config_file", "merge_configs", "merge_note",
           "model_parameters_lower_bound", "parse",
           "parse_sources", "projected_sample_passes"]
