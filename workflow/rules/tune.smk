# Tuning stage: unstated hyperparameters selected on validation rows carved from each
# client's training rows (pflrepro.tuning), never on the test rows. Per experiment with
# a `tune:` block: a validation partition per split (tune_split), one training run per
# grid point, partition, split and tuning seed (a training rule on the validation
# partition: train.smk), then `tune_select` (a checkpoint) writes the table of every
# value tried, the figure and the selection, which the final runs read into their spec
# (P.run_spec). The selection file is an ancient() input of the final runs and
# rewritten only when its content changes, so a changed grid or budget reruns the
# tuning and then only the final runs whose selected values changed (their spec
# changed). A `tune: training:` block (pflrepro.tuning.shared) is tuned as its `by`
# method's grid; every final run of the experiment reads that selection
# (P.run_selections).


wildcard_constraints:
    point=r"[A-Za-z0-9_.+-]+",


rule tune_split:
    localrule: True
    input:
        P.tune_split_input,
    output:
        W.TUNE_PARTITION,
    params:
        **P.cli,
        fraction=P.tune_fraction,
    log:
        W.TUNE_SPLIT_LOG,
    conda:
        ENV
    shell:
        cli(" tune-split --partition {input:q} --fraction {params.fraction:q}"
        " --seed {wildcards.split:q} --out {output:q} > {log:q} 2>&1")


checkpoint tune_select:
    localrule: True
    input:
        P.tune_runs,
    output:
        # first: the file a train job's params wait for (Snakemake names the first)
        selection=W.TUNE_SELECTION,
        md=W.pattern(W.TUNE_TABLE, ext="md"),
        csv=W.pattern(W.TUNE_TABLE, ext="csv"),
        pdf=W.pattern(W.FIGURE, kind=W.TUNE_KIND, ext="pdf"),
        # in `snakemake --report` beside the experiment's other figures
        png=report(W.pattern(W.FIGURE, kind=W.TUNE_KIND, ext="png"), **P.figure_report("tuning: {method}")),
    params:
        **P.cli,
        plan=P.tune_plan,
        title=P.tune_title,
    log:
        W.TUNE_SELECT_LOG,
    conda:
        ENV
    shell:
        cli(" tune-select --plan {params.plan:q} --md {output.md:q} --csv {output.csv:q}"
        " --selection {output.selection:q} --figure {output.pdf:q} {output.png:q}"
        " --title {params.title:q} {input:q} > {log:q} 2>&1")
