# Training stage: one job per experiment x partition x method x split seed x training seed
# (rule `train`), or, where the config's `runs_per_job` for the experiment's scale is not
# 1, one job per chunk of those runs of an experiment x partition x method (the rules
# `train_<runs>` below: one process trains them in turn).
# `params.spec` holds everything that determines the numbers (hyperparameters, training
# settings, a digest of the method's code), so Snakemake reruns exactly the jobs whose
# spec changed.
# While it runs, a job logs one line per evaluated round (accuracy, loss, elapsed, time
# left) and keeps its curve so far (its progress table) in <run>.partial.parquet beside
# the output (written at each checkpoint, deleted with the checkpoint once the run's
# table is written);
# `pflrepro status` summarises finished, running and failed jobs.


rule train:
    input:
        unpack(train_public_inputs),
        unpack(tuning_selection_input),
        meta=experiment_input("meta"),
        partition=experiment_input("partition"),
    output:
        W.RUN,
    params:
        spec=final_run_spec,
        public=train_public_args,
        # this workflow's interpreter and src/ (preflight.smk; not rerun triggers)
        python=PFLREPRO_PYTHON,
        source=PFLREPRO_SRC,
    wildcard_constraints:
        experiment=W.alternation(W.single_run_experiments(CFG, config)),
    threads: 1
    resources:
        gpu=train_resources("gpu"),
        mem_mb=train_resources("mem_mb"),
        runtime=train_resources("runtime"),
    log:
        W.TRAIN_LOG,
    benchmark:
        W.BENCHMARK
    conda:
        ENV
    shell:
        "{params.python:q} -m pflrepro --require-source {params.source:q}"
        " train --spec {params.spec:q} --data {input.meta:q} --partition {input.partition:q}"
        " --checkpoint {output:q}.ckpt {params.public:q}"
        " --threads {threads:q} --progress-table --out {output:q} > {log:q} 2>&1"


# Several runs per job (`runs_per_job`, README "Running"): what pays for Python's and
# torch's start-up once instead of once a run. One rule per chunk of (split, seed) runs,
# shared by the experiments with that chunk. Each run keeps its table, digest, log
# (TRAIN_LOG), checkpoint and progress table, with the bytes it has when trained alone;
# the process's stderr goes to the job's log (W.BATCH_LOG). A job reruns as a whole: a
# changed spec of one member (params.spec lists every member's) reruns all of them.
# TRAIN_BATCHES, batch_function, batch_runtime: common.smk
for _batch in TRAIN_BATCHES:

    rule:
        name: _batch.rule
        input:
            unpack(batch_function(_batch.pairs, "inputs")),
            unpack(batch_function(_batch.pairs, "tuned")),
        output:
            [W.pattern(W.RUN, split=s, seed=t) for s, t in _batch.pairs],
        params:
            spec=batch_function(_batch.pairs, "spec"),
            partitions=batch_function(_batch.pairs, "partition"),
            public=batch_function(_batch.pairs, "public"),
            logs=batch_function(_batch.pairs, "log"),
            checkpoints=lambda wildcards, output: [f"{o}.ckpt" for o in output],
            python=PFLREPRO_PYTHON,
            source=PFLREPRO_SRC,
        wildcard_constraints:
            experiment=W.alternation(_batch.experiments),
        threads: 1
        resources:
            gpu=train_resources("gpu"),
            mem_mb=train_resources("mem_mb"),
            runtime=batch_runtime(_batch.pairs),
        log:
            job=W.pattern(W.BATCH_LOG, runs=_batch.label),
            runs=[W.pattern(W.TRAIN_LOG, split=s, seed=t) for s, t in _batch.pairs],
        benchmark:
            W.pattern(W.BATCH_BENCHMARK, runs=_batch.label)
        conda:
            ENV
        shell:
            "{params.python:q} -m pflrepro --require-source {params.source:q}"
            " train --spec {params.spec:q} --data {input.meta:q}"
            " --partition {params.partitions:q} --checkpoint {params.checkpoints:q}"
            " --log {params.logs:q} {params.public:q}"
            " --threads {threads:q} --progress-table --out {output:q} > {log.job:q} 2>&1"
