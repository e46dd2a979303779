# Tuning stage: unstated hyperparameters selected on validation rows carved from each
# client's training rows (pflrepro.tuning), never on the test rows. Per experiment with
# a `tune:` block: a validation partition per split, one training run per grid point,
# partition, split and tuning seed, then `tune_select` (a checkpoint) writes the table
# of every value tried, the figure and the selection, which the final train jobs read
# into their spec (train.smk: params.spec = final_run_spec). The selection file is an
# ancient() input of the train jobs and rewritten only when its content changes, so a
# changed grid or budget reruns the tuning and then only the final runs whose selected
# values changed (their spec changed). A `tune: training:` block (pflrepro.tuning.shared)
# is tuned as its `by` method's grid; every final run of the experiment reads that
# selection (common.smk: tuning_selection_input, final_run_spec). The input functions:
# common.smk.


wildcard_constraints:
    point=r"[A-Za-z0-9_.+-]+",


rule tune_split:
    localrule: True
    input:
        tune_partition_input,
    output:
        W.TUNE_PARTITION,
    params:
        python=PFLREPRO_PYTHON,
        source=PFLREPRO_SRC,
        fraction=tune_split_fraction,
    log:
        W.TUNE_SPLIT_LOG,
    conda:
        ENV
    shell:
        "{params.python:q} -m pflrepro --require-source {params.source:q}"
        " tune-split --partition {input:q} --fraction {params.fraction:q}"
        " --seed {wildcards.split:q} --out {output:q} > {log:q} 2>&1"


# One tuning run per job: the experiments at one run per training job (`runs_per_job`,
# README "Running"; the paper scale).
rule tune_train:
    input:
        unpack(train_public_inputs),
        meta=experiment_input("meta"),
        partition=W.TUNE_PARTITION,
    output:
        W.TUNE_RUN,
    params:
        spec=tune_run_spec,
        public=train_public_args,
        python=PFLREPRO_PYTHON,
        source=PFLREPRO_SRC,
    wildcard_constraints:
        experiment=W.alternation(W.single_run_tune_experiments(CFG, config)),
    threads: 1
    resources:
        gpu=train_resources("gpu"),
        mem_mb=train_resources("mem_mb"),
        runtime=train_resources("runtime"),
    log:
        W.TUNE_LOG,
    benchmark:
        W.TUNE_BENCHMARK
    conda:
        ENV
    shell:
        "{params.python:q} -m pflrepro --require-source {params.source:q}"
        " train --spec {params.spec:q} --data {input.meta:q} --partition"
        " {input.partition:q} {params.public:q} --threads {threads:q} --out {output:q}"
        " > {log:q} 2>&1"


# Several tuning runs per job, as the training jobs' train_<runs> (train.smk): the runs of
# a tuned method on a partition (split seeds x grid points x tuning seeds), `runs_per_job`
# at a time, one after another in one process (`pflrepro train`'s list arguments), each
# with the bytes it has when trained alone, its own log (W.TUNE_LOG) and table. One rule
# per chunk of runs of a method (W.tune_batches; named by the method and which of its
# runs, e.g. tune_train_fedamp_runs1to6of6; its files by a digest of them), shared by the
# experiments with that chunk; the job's stderr goes to W.TUNE_BATCH_LOG. TUNE_BATCHES,
# tune_batch_function: common.smk.
for _tune in TUNE_BATCHES:

    rule:
        name: _tune.rule
        input:
            unpack(tune_batch_function(_tune.trials, "inputs")),
        output:
            [W.pattern(W.TUNE_RUN, point=p, split=s, seed=t) for p, s, t in _tune.trials],
        params:
            spec=tune_batch_function(_tune.trials, "spec"),
            partitions=tune_batch_function(_tune.trials, "partition"),
            public=tune_batch_function(_tune.trials, "public"),
            logs=tune_batch_function(_tune.trials, "log"),
            python=PFLREPRO_PYTHON,
            source=PFLREPRO_SRC,
        wildcard_constraints:
            experiment=W.alternation(_tune.experiments),
            method=W.alternation([_tune.method]),
        threads: 1
        resources:
            gpu=train_resources("gpu"),
            mem_mb=train_resources("mem_mb"),
            runtime=batch_runtime(_tune.trials),
        log:
            job=W.pattern(W.TUNE_BATCH_LOG, runs=_tune.label),
            runs=[W.pattern(W.TUNE_LOG, point=p, split=s, seed=t) for p, s, t in _tune.trials],
        benchmark:
            W.pattern(W.TUNE_BATCH_BENCHMARK, runs=_tune.label)
        conda:
            ENV
        shell:
            "{params.python:q} -m pflrepro --require-source {params.source:q}"
            " train --spec {params.spec:q} --data {input.meta:q}"
            " --partition {params.partitions:q} --log {params.logs:q} {params.public:q}"
            " --threads {threads:q} --out {output:q} > {log.job:q} 2>&1"


checkpoint tune_select:
    localrule: True
    input:
        tune_runs,
    output:
        # first: the file a train job's params wait for (Snakemake names the first)
        selection=W.TUNE_SELECTION,
        md=W.pattern(W.TUNE_TABLE, ext="md"),
        csv=W.pattern(W.TUNE_TABLE, ext="csv"),
        pdf=W.pattern(W.FIGURE, kind=W.TUNE_KIND, ext="pdf"),
        # in `snakemake --report` beside the experiment's other figures
        png=report(W.pattern(W.FIGURE, kind=W.TUNE_KIND, ext="png"), **figure_report("tuning: {method}")),
    params:
        python=PFLREPRO_PYTHON,
        source=PFLREPRO_SRC,
        plan=tune_plan,
        title=tune_title,
    log:
        W.TUNE_SELECT_LOG,
    conda:
        ENV
    shell:
        "{params.python:q} -m pflrepro --require-source {params.source:q}"
        " tune-select --plan {params.plan:q} --md {output.md:q} --csv {output.csv:q}"
        " --selection {output.selection:q} --figure {output.pdf:q} {output.png:q}"
        " --title {params.title:q} {input:q} > {log:q} 2>&1"
