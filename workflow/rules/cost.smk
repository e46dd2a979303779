# Compute cost: each experiment's training jobs (Snakemake benchmark records, devices and
# training times from their logs) tabled per method; then one projection of config.yaml's
# paper-scale grid from all those measured tables (pflrepro.reporting.cost says how, and
# what such a projection cannot say; pflrepro.reporting.cost_projection how the rates of
# several experiments combine). At paper scale, the grid's GPU-hours projected from FLOPs
# counted per model instead (pflrepro.reporting.flops): grid_projection.


rule cost_table:
    input:
        runs=P.cost_runs,
        tuned=P.experiment.selections,
    output:
        md=W.pattern(W.COST_TABLE, kind="cost", ext="md"),
        csv=W.pattern(W.COST_TABLE, kind="cost", ext="csv"),
    params:
        **P.cli,
        args=P.cost_args,
        methods=P.experiment.methods,
        labels=P.experiment.labels,
        tuning=P.experiment.tuning,
    log:
        W.COST_LOG,
    localrule: True
    conda:
        ENV
    shell:
        cli(" cost --experiment {wildcards.experiment:q} --runs {input.runs:q} {params.args:q}"
        " --methods {params.methods:q}"
        " --md {output.md:q} --csv {output.csv:q}"
        " --labels {params.labels:q} --tuning {params.tuning:q} > {log:q} 2>&1")


rule cost_projection:
    input:
        costs=P.cost_tables,
        # the paper-scale grid to project (config.yaml beside the Snakefile)
        paper=os.path.join(workflow.basedir, "config.yaml"),
    output:
        md=W.COST_PROJECTION.format(ext="md"),
        csv=W.COST_PROJECTION.format(ext="csv"),
    params:
        **P.cli,
        experiments=W.chosen_experiments(CFG),
    log:
        W.COST_LOG.format(experiment="cost-projection"),
    localrule: True
    conda:
        ENV
    shell:
        cli(" cost-projection --experiments {params.experiments:q} --costs {input.costs:q}"
        " --project {input.paper:q} --md {output.md:q} --csv {output.csv:q} > {log:q} 2>&1")


rule grid_projection:
    input:
        # the paper-scale grid to project (config.yaml beside the Snakefile)
        paper=os.path.join(workflow.basedir, "config.yaml"),
    output:
        md=FL.GRID_PROJECTION.format(ext="md"),
        csv=FL.GRID_PROJECTION.format(ext="csv"),
    params:
        **P.cli,
    log:
        FL.GRID_PROJECTION_LOG,
    localrule: True
    conda:
        ENV
    shell:
        cli(" grid-projection --config {input.paper:q} --md {output.md:q} --csv {output.csv:q}"
        " > {log:q} 2>&1")
