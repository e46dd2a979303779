# Compute cost: each experiment's training jobs (Snakemake benchmark records, devices and
# training times from their logs) tabled per method, and the paper-scale grid of
# config.yaml projected from the measured rates (pflrepro.reporting.cost says how, and
# what such a projection cannot say).


rule cost_table:
    input:
        runs=lambda wildcards: W.cost_inputs(CFG, wildcards.experiment),
        # the paper-scale grid to project (config.yaml beside the Snakefile)
        paper=os.path.join(workflow.basedir, "config.yaml"),
    output:
        md=W.pattern(W.COST_TABLE, kind="cost", ext="md"),
        csv=W.pattern(W.COST_TABLE, kind="cost", ext="csv"),
        projection=W.pattern(W.COST_TABLE, kind="cost-projection", ext="csv"),
    params:
        args=lambda wildcards: W.cost_args(CFG, wildcards.experiment),
        methods=methods_order,
    log:
        "logs/cost/{experiment}.log",
    localrule: True
    conda:
        ENV
    shell:
        "pflrepro cost --experiment {wildcards.experiment} --runs {input.runs} {params.args}"
        " --methods {params.methods} --project {input.paper:q}"
        " --md {output.md} --csv {output.csv} --projection-csv {output.projection}"
        " > {log} 2>&1"
