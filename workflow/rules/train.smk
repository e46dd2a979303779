# Training stage: every rule that runs `pflrepro train`, final runs and tuning runs alike
# (a tuning run is a training run on a validation partition: tune.smk), from one
# generator (pflrepro.pipeline.workflow.training_rules): `train` (one final run per
# job: experiment x partition x method x split seed x training seed), `train_<runs>`
# (where the config's `runs_per_job` for the experiment's scale is not 1: a chunk of an
# experiment x partition x method's runs, trained in turn by one process, which pays for
# Python's and torch's start-up once), `tune_train` and `tune_train_<method>_runs...`
# (the same for tuning runs). Each run keeps its table, digest, log, checkpoint and
# progress table, with the bytes it has when trained alone; a job of several runs sends
# its stderr to a log of its own and reruns as a whole.
# `params.spec` holds everything that determines the numbers (hyperparameters, training
# settings, a digest of the method's code), so Snakemake reruns exactly the jobs whose
# spec changed. While it runs, a final run logs one line per evaluated round and keeps
# its curve so far in <run>.partial.parquet beside the output; `pflrepro status`
# summarises finished, running and failed jobs.
# The rules are made by training_rule (common.smk), one call per rule.

for _job in P.training_rules:
    training_rule(_job)
