# pflrepro: raw data -> partitions -> training runs -> aggregates -> tables and figures.
# Thin entry point: config, checks and P, the rules' adapter (common.smk); stages; `all`.
# Run:  snakemake --profile profiles/demo   (bundled digits, minutes on 2 cores)
#       snakemake --cores N                 (config.yaml: paper-scale experiments)


# First of all: the pflrepro package is this workflow's own src/, config.yaml reads.
include: "workflow/rules/preflight.smk"


configfile: "config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/tune.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/aggregate.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/cost.smk"
include: "workflow/rules/hints.smk"


# What a profile sets for `train` (set-resources, groups: profiles/slurm's partition,
# account, slurm_extra, group) reaches every rule it would submit, whatever its name:
# the train_<runs>, tune_train and tune_train_<runs> rules too
# (pflrepro.pipeline.workflow.cluster).
# A config that tunes groups nothing (Snakemake regroups wrongly after a checkpoint,
# and tune_select is one: W.grouping_safe).
W.share_training_settings(workflow, grouping=W.grouping_safe(W.tunes(CFG)))


# Local runs: no job-rate limiter (its timers wake the scheduler once a second per job
# finished so far; pflrepro.pipeline.workflow.drop_local_rate_limiter). Cluster executors keep it.
# A local run whose config asks for CUDA on a machine without one stops here, before
# any job (a cluster's jobs run on other machines; the executor is known only now).
onstart:
    W.drop_local_rate_limiter(workflow)
    if W.runs_here(workflow) and (_no_cuda := W.cuda_refusal(CFG)):
        raise WorkflowError(f"Invalid config: {_no_cuda}")


# With --keep-going, the tables of experiments that lost some runs: results/partial/;
# removed by the first successful run after which the experiment has every run.
onerror:
    for report in W.write_partial_reports(CFG):
        print(f"partial table (the runs that finished; failed ones listed): {report}")


onsuccess:
    for stale in W.clear_partial_reports(CFG):
        print(f"removed the partial table {stale}: its experiment has every run now")


# Every rule but the training ones (`train`, `tune_train`, and the `train_<runs>` and
# `tune_train_<runs>` rules of several runs per job) runs where Snakemake runs (the login node under profiles/slurm;
# prepare_data too, since compute nodes often have no network): each declares
# `localrule: True` itself (tests/unit/test_local_rules.py).
rule all:
    localrule: True
    input:
        P.all_input,
    default_target: True
