# Reporting: tables and figures read only aggregated Parquet, so restyling retrains nothing.
# `snakemake --report results/report.html` gathers every table (as an HTML page, rule
# report_table) and figure (PNG) flagged with report(): category = paper, subcategory =
# experiment or table, captions from workflow/report/*.rst (pflrepro.reporting.report).
# (The paper numbers and captions: common.smk; the input and params functions: P, the
# adapter object, pflrepro.pipeline.workflow.adapter.)


rule table:
    localrule: True
    input:
        agg=W.AGGREGATE,
        tuned=P.experiment.selections,
    output:
        md=W.pattern(W.TABLE, ext="md"),
        tex=W.pattern(W.TABLE, ext="tex"),
        csv=W.pattern(W.TABLE, ext="csv"),
    params:
        **P.cli,
        methods=P.experiment.methods,
        labels=P.experiment.labels,
        tuning=P.experiment.tuning,
    log:
        W.TABLE_LOG,
    conda:
        ENV
    shell:
        cli(" table --aggregate {input.agg:q} --md {output.md:q} --tex {output.tex:q}"
        " --csv {output.csv:q} --methods {params.methods:q} --labels {params.labels:q}"
        " --tuning {params.tuning:q} > {log:q} 2>&1")


rule communication_table:
    localrule: True
    input:
        agg=W.AGGREGATE,
        tuned=P.experiment.selections,
    output:
        md=W.pattern(W.COMMUNICATION_TABLE, ext="md"),
        csv=W.pattern(W.COMMUNICATION_TABLE, ext="csv"),
    params:
        **P.cli,
        methods=P.experiment.methods,
        labels=P.experiment.labels,
        tuning=P.experiment.tuning,
    log:
        W.COMMUNICATION_LOG,
    conda:
        ENV
    shell:
        cli(" communication --aggregate {input.agg:q} --md {output.md:q} --csv {output.csv:q}"
        " --methods {params.methods:q} --labels {params.labels:q}"
        " --tuning {params.tuning:q} > {log:q} 2>&1")


# An empty caption (none in the config) is `--caption=`: Snakemake's {x:q} writes nothing at
# all for an empty string, which would leave `--caption` without its value.
rule table_combined:
    localrule: True
    input:
        agg=P.table_aggregates,
        tuned=P.table.selections,
    output:
        md=W.pattern(W.COMBINED_TABLE, ext="md"),
        tex=W.pattern(W.COMBINED_TABLE, ext="tex"),
        csv=W.pattern(W.COMBINED_TABLE, ext="csv"),
    params:
        **P.cli,
        methods=P.table.methods,
        labels=P.table.labels,
        metric=P.table_metric,
        caption=P.table_caption,
        experiments=P.table_experiments,
        tuning=P.table.tuning,
    log:
        W.COMBINED_TABLE_LOG,
    conda:
        ENV
    shell:
        cli(" table --aggregate {input.agg:q} --md {output.md:q} --tex {output.tex:q}"
        " --csv {output.csv:q} --methods {params.methods:q} --labels {params.labels:q}"
        " --metric {params.metric:q} --caption={params.caption:q}"
        " --experiments {params.experiments:q} --tuning {params.tuning:q} > {log:q} 2>&1")


rule claims:
    input:
        claims=CLAIMS_FILE,
        aggregates=P.claims_aggregates,
    output:
        md=W.pattern(W.CLAIMS_TABLE, ext="md"),
        csv=W.pattern(W.CLAIMS_TABLE, ext="csv"),
    params:
        **P.cli,
        scale=P.claims_scale,
        labels=P.claims_table.labels,
        design=P.claims_design,
    log:
        W.CLAIMS_LOG,
    localrule: True
    conda:
        ENV
    shell:
        cli(" claims --claims {input.claims:q} --scale {params.scale:q}"
        " --aggregate {input.aggregates:q} --labels {params.labels:q}"
        " --design {params.design:q}"
        " --md {output.md:q} --csv {output.csv:q} > {log:q} 2>&1")


# One plot rule per figure kind, `plot_<kind>`, made from the kind's declaration (its
# figure module's KIND: pflrepro.config.figure_kinds): output files, input, and the
# `pflrepro plot` options it takes (P.figure_options). The report's caption of each is
# the kind's caption, found by the rule's name (workflow/report/figure.rst).
for figure in W.figure_rule_kinds():
    rule:
        name: figure.rule
        localrule: True
        input:
            P.figure_input(figure.name),
        output:
            pdf=W.figure_pattern(figure.name, "pdf"),
            png=report(W.figure_pattern(figure.name, "png"), **P.figure_report(figure.label)),
        params:
            **P.cli,
            kind=figure.name,
            options=P.figure_options(figure.name),
            labels=P.experiment.labels,
        log:
            W.figure_log(figure.name),
        conda:
            ENV
        shell:
            cli(" plot {params.kind:q} --aggregate {input:q} {params.options:q}"
            " --labels {params.labels:q} --pdf {output.pdf:q} --png {output.png:q} > {log:q} 2>&1")


# The papers' numbers beside ours (config/paper_numbers.csv): paper, ours (mean ± std),
# difference, inside our std; results/tables/<table_id>[_cpu]-paper.{md,csv}.
rule paper_table:
    input:
        numbers=PAPER_NUMBERS_FILE,
        aggregates=P.paper_table_inputs,
        tuned=P.paper_table.selections,
    output:
        md=W.pattern(W.PAPER_TABLE, ext="md"),
        csv=W.pattern(W.PAPER_TABLE, ext="csv"),
    params:
        **P.cli,
        table=P.paper_table_id,
        scale=CFG.scale,
        labels=P.paper_table.labels,
        tuning=P.paper_table.tuning,
    wildcard_constraints:
        paper_table=W.alternation(P.paper_tables),
    log:
        W.PAPER_TABLE_LOG,
    localrule: True
    conda:
        ENV
    shell:
        cli(" paper-vs-ours --numbers {input.numbers:q} --table {params.table:q}"
        " --scale {params.scale:q} --aggregate {input.aggregates:q} --labels {params.labels:q}"
        " --tuning {params.tuning:q} --md {output.md:q} --csv {output.csv:q} > {log:q} 2>&1")


# Each Markdown table as an HTML page: what `snakemake --report` shows of the tables.
rule report_table:
    input:
        W.REPORT_TABLE_SOURCE,
    output:
        report(W.REPORT_TABLE, caption=W.REPORT_CAPTION.format(kind="table"), category=P.report_table_category,
               subcategory=P.report_table_subcategory, labels=P.report_table_labels),
    wildcard_constraints:
        name=r"[^/]+",
    params:
        **P.cli,
    log:
        W.REPORT_TABLE_LOG,
    localrule: True
    conda:
        ENV
    shell:
        cli(" report-html --md {input:q} --out {output:q} --title {wildcards.name:q} > {log:q} 2>&1")
