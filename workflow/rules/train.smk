# Training stage: one job per experiment x partition x method x split seed x training seed.
# `params.spec` holds everything that determines the numbers (hyperparameters, training
# settings, a digest of the method's code), so Snakemake reruns exactly the jobs whose
# spec changed.
# While it runs, a job logs one line per evaluated round (accuracy, loss, elapsed, time
# left) and keeps its curve so far in <run>.partial.parquet beside the output (written at
# each checkpoint, deleted with the checkpoint once the run's table is written);
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
        " --threads {threads:q} --partial --out {output:q} > {log:q} 2>&1"
