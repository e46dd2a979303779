"""Adapters between the parsed config and Snakemake: paths, targets and job parameters.

The rule files call these functions and hold no logic of their own. Every path
pattern lives here once, as a constant the rules use for their inputs, outputs and
benchmarks (:func:`pattern` fills a pattern's fixed parts, e.g. a figure's ``ext``, and
leaves its wildcards), and their logs (the ``*_LOG`` patterns; the plot rules, made in a
loop, take theirs from :func:`figure_log`).
"""

from __future__ import annotations

from pflrepro.pipeline.workflow.figures import (
    alternation,
    architecture_names,
    dataset_names,
    figure_aggregates,
    figure_log,
    figure_methods,
    figure_paths,
    figure_pattern,
    figure_rule_kinds,
    plot_input,
    plot_options,
    recording,
    table_methods,
    weighted_methods,
    weights_method,
)
from pflrepro.pipeline.workflow.jobs import (
    BATCH_BENCHMARK,
    BATCH_LOG,
    RUNS_PER_JOB,
    TrainBatch,
    batch_member_paths,
    batch_of,
    chunks,
    clustered_methods,
    cuda_refusal,
    experiment_path,
    member_wildcards,
    method_aggregate_paths,
    mirror_args,
    partition_code,
    partition_spec_json,
    public_exclude_arg,
    run_paths,
    run_spec_json,
    runs_per_job,
    single_run_experiments,
    train_batches,
    train_public_args,
    train_public_inputs,
    train_resource,
)
from pflrepro.pipeline.workflow.patterns import (
    AGGREGATE_LOG,
    BENCHMARK,
    CLAIMS_FILE,
    CLAIMS_LOG,
    CLAIMS_TABLE,
    CLAIMS_TABLES,
    COMBINED_TABLE,
    COMBINED_TABLE_LOG,
    COMMUNICATION_LOG,
    COMMUNICATION_TABLE,
    COST_LOG,
    COST_TABLE,
    DATA_META,
    DATA_X,
    DATA_Y,
    FIGURE,
    FIGURE_LOG,
    METHOD_AGGREGATE_LOG,
    PAPER_TABLE_LOG,
    PARTIAL_REPORT,
    PARTITION_FIGURE,
    PARTITION_FIGURE_LOG,
    PARTITION_LOG,
    PARTITION_STATS,
    PARTITION_STATS_LOG,
    PREPARE_LOG,
    PUBLIC_LOG,
    RAW_DIR,
    REPORT_TABLE_LOG,
    TABLE,
    TABLE_LOG,
    TRAIN_LOG,
    pattern,
)
from pflrepro.pipeline.workflow.report import (
    PAPER_NUMBERS_FILE,
    PAPER_TABLE,
    REPORT_CAPTION,
    REPORT_TABLE,
    REPORT_TABLE_SOURCE,
    cost_args,
    cost_inputs,
    paper_table_experiments,
    paper_table_inputs,
    paper_tables,
    report_table_names,
    report_targets,
)
from pflrepro.pipeline.workflow.targets import (
    all_targets,
    chosen_experiments,
    claims_experiments,
    claims_inputs,
    claims_scale,
    claims_targets,
    cost_targets,
    display_labels,
    drop_local_rate_limiter,
    experiment_targets,
    partition_targets,
    stored_targets,
    table_inputs,
    write_partial_reports,
)
from pflrepro.pipeline.workflow.tuning import (
    TUNE_BATCH_BENCHMARK,
    TUNE_BATCH_LOG,
    TUNE_BENCHMARK,
    TUNE_KIND,
    TUNE_LOG,
    TUNE_PARTITION,
    TUNE_RUN,
    TUNE_SELECT_LOG,
    TUNE_SELECTION,
    TUNE_SPLIT_LOG,
    TUNE_TABLE,
    TuneBatch,
    read_selection,
    single_run_tune_experiments,
    table_tuning_json,
    tune_batches,
    tune_member_paths,
    tune_plan_json,
    tune_run_paths,
    tune_targets,
    tune_trials,
    tuned_methods,
)
from pflrepro.reporting.cost_projection import COST_PROJECTION
from pflrepro.store.paths import AGGREGATE, DATA_DIR, METHOD_AGGREGATE, PARTITION, PUBLIC, RUN


def output_dirs() -> list[str]:
    """The fixed directories the rules write under (results/runs, figures, logs, ...)."""
    import os

    patterns = [v for k, v in globals().items() if k.isupper() and isinstance(v, str)
                and v.split("/")[0] in ("results", "figures", "logs")]
    return sorted({os.path.dirname(p.split("{")[0]) for p in patterns} | {"logs", "data/raw"})


__all__ = ["AGGREGATE", "AGGREGATE_LOG", "BATCH_BENCHMARK", "BATCH_LOG", "BENCHMARK",
           "CLAIMS_FILE", "CLAIMS_LOG", "CLAIMS_TABLE", "CLAIMS_TABLES",
           "COMBINED_TABLE", "COMBINED_TABLE_LOG", "COMMUNICATION_LOG",
           "COMMUNICATION_TABLE", "COST_LOG", "COST_PROJECTION", "COST_TABLE",
           "DATA_DIR", "DATA_META", "DATA_X", "DATA_Y", "FIGURE", "FIGURE_LOG",
           "METHOD_AGGREGATE", "METHOD_AGGREGATE_LOG", "PAPER_NUMBERS_FILE",
           "PAPER_TABLE", "PAPER_TABLE_LOG", "PARTIAL_REPORT", "PARTITION",
           "PARTITION_FIGURE", "PARTITION_FIGURE_LOG", "PARTITION_LOG",
           "PARTITION_STATS", "PARTITION_STATS_LOG", "PREPARE_LOG", "PUBLIC",
           "PUBLIC_LOG", "RAW_DIR", "REPORT_CAPTION", "REPORT_TABLE",
           "REPORT_TABLE_LOG", "REPORT_TABLE_SOURCE", "RUN", "RUNS_PER_JOB", "TABLE",
           "TABLE_LOG", "TRAIN_LOG", "TUNE_BATCH_BENCHMARK", "TUNE_BATCH_LOG",
           "TUNE_BENCHMARK", "TUNE_KIND", "TUNE_LOG", "TUNE_PARTITION", "TUNE_RUN",
           "TUNE_SELECTION", "TUNE_SELECT_LOG", "TUNE_SPLIT_LOG", "TUNE_TABLE",
           "TrainBatch", "TuneBatch", "all_targets", "alternation",
           "architecture_names", "batch_member_paths", "batch_of", "chosen_experiments",
           "chunks", "claims_experiments", "claims_inputs", "claims_scale",
           "claims_targets", "clustered_methods", "cuda_refusal", "cost_args", "cost_inputs",
           "cost_targets", "dataset_names", "display_labels", "drop_local_rate_limiter",
           "experiment_path", "experiment_targets", "figure_aggregates", "figure_log",
           "figure_methods", "figure_paths", "figure_pattern", "figure_rule_kinds",
           "member_wildcards", "method_aggregate_paths", "mirror_args", "output_dirs",
           "paper_table_experiments", "paper_table_inputs", "paper_tables",
           "partition_code", "partition_spec_json", "partition_targets", "pattern",
           "plot_input", "plot_options", "public_exclude_arg", "read_selection",
           "recording", "report_table_names", "report_targets", "run_paths",
           "run_spec_json", "runs_per_job", "single_run_experiments",
           "single_run_tune_experiments", "stored_targets", "table_inputs",
           "table_methods", "table_tuning_json", "train_batches", "train_public_args",
           "train_public_inputs", "train_resource", "tune_batches", "tune_member_paths",
           "tune_plan_json", "tune_run_paths", "tune_targets", "tune_trials",
           "tuned_methods", "weighted_methods", "weights_method",
           "write_partial_reports"]
