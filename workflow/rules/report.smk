# Reporting: tables and figures read only aggregated Parquet, so restyling retrains nothing.
# `snakemake --report results/report.html` gathers every table (as an HTML page, rule
# report_table) and figure (PNG) flagged with report(): category = paper, subcategory =
# experiment or table, captions from workflow/report/*.rst (pflrepro.reporting.report).
# (The paper numbers, captions and the helpers these rules call: common.smk.)


rule table:
    localrule: True
    input:
        agg=W.AGGREGATE,
        tuned=experiment_selections,
    output:
        md=W.pattern(W.TABLE, ext="md"),
        tex=W.pattern(W.TABLE, ext="tex"),
        csv=W.pattern(W.TABLE, ext="csv"),
    params:
        python=PFLREPRO_PYTHON,
        source=PFLREPRO_SRC,
        methods=methods_order,
        labels=experiment_labels,
        tuning=experiment_tuning,
    log:
        W.TABLE_LOG,
    conda:
        ENV
    shell:
        "{params.python:q} -m pflrepro --require-source {params.source:q}"
        " table --aggregate {input.agg:q} --md {output.md:q} --tex {output.tex:q}"
        " --csv {output.csv:q} --methods {params.methods:q} --labels {params.labels:q}"
        " --tuning {params.tuning:q} > {log:q} 2>&1"


rule communication_table:
    localrule: True
    input:
        agg=W.AGGREGATE,
        tuned=experiment_selections,
    output:
        md=W.pattern(W.COMMUNICATION_TABLE, ext="md"),
        csv=W.pattern(W.COMMUNICATION_TABLE, ext="csv"),
    params:
        python=PFLREPRO_PYTHON,
        source=PFLREPRO_SRC,
        methods=methods_order,
        labels=experiment_labels,
        tuning=experiment_tuning,
    log:
        W.COMMUNICATION_LOG,
    conda:
        ENV
    shell:
        "{params.python:q} -m pflrepro --require-source {params.source:q}"
        " communication --aggregate {input.agg:q} --md {output.md:q} --csv {output.csv:q}"
        " --methods {params.methods:q} --labels {params.labels:q}"
        " --tuning {params.tuning:q} > {log:q} 2>&1"


# An empty caption (none in the config) is `--caption=`: Snakemake's {x:q} writes nothing at
# all for an empty string, which would leave `--caption` without its value.
rule table_combined:
    localrule: True
    input:
        agg=table_aggregates,
        tuned=table_selections,
    output:
        md=W.pattern(W.COMBINED_TABLE, ext="md"),
        tex=W.pattern(W.COMBINED_TABLE, ext="tex"),
        csv=W.pattern(W.COMBINED_TABLE, ext="csv"),
    params:
        python=PFLREPRO_PYTHON,
        source=PFLREPRO_SRC,
        methods=table_methods,
        labels=table_labels,
        metric=table_metric,
        caption=table_caption,
        experiments=table_experiments,
        tuning=table_tuning,
    log:
        W.COMBINED_TABLE_LOG,
    conda:
        ENV
    shell:
        "{params.python:q} -m pflrepro --require-source {params.source:q}"
        " table --aggregate {input.agg:q} --md {output.md:q} --tex {output.tex:q}"
        " --csv {output.csv:q} --methods {params.methods:q} --labels {params.labels:q}"
        " --metric {params.metric:q} --caption={params.caption:q}"
        " --experiments {params.experiments:q} --tuning {params.tuning:q} > {log:q} 2>&1"


rule claims:
    input:
        claims=CLAIMS_FILE,
        aggregates=claims_aggregates,
    output:
        md=W.pattern(W.CLAIMS_TABLE, ext="md"),
        csv=W.pattern(W.CLAIMS_TABLE, ext="csv"),
    params:
        python=PFLREPRO_PYTHON,
        source=PFLREPRO_SRC,
        scale=claims_scale,
        labels=claims_labels,
        design=claims_design,
    log:
        W.CLAIMS_LOG,
    localrule: True
    conda:
        ENV
    shell:
        "{params.python:q} -m pflrepro --require-source {params.source:q}"
        " claims --claims {input.claims:q} --scale {params.scale:q}"
        " --aggregate {input.aggregates:q} --labels {params.labels:q}"
        " --design {params.design:q}"
        " --md {output.md:q} --csv {output.csv:q} > {log:q} 2>&1"


# One plot rule per figure kind, `plot_<kind>`, made from the kind's declaration (its
# figure module's KIND: pflrepro.config.figure_kinds): output files, input, and the
# `pflrepro plot` options it takes (figure_options). The report's caption of each is
# the kind's caption, found by the rule's name (workflow/report/figure.rst).
for figure in W.figure_rule_kinds():
    rule:
        name: figure.rule
        localrule: True
        input:
            figure_input(figure.name),
        output:
            pdf=W.figure_pattern(figure.name, "pdf"),
            png=report(W.figure_pattern(figure.name, "png"), **figure_report(figure.label)),
        params:
            python=PFLREPRO_PYTHON,
            source=PFLREPRO_SRC,
            kind=figure.name,
            options=figure_options(figure.name),
            labels=experiment_labels,
        log:
            W.figure_log(figure.name),
        conda:
            ENV
        shell:
            "{params.python:q} -m pflrepro --require-source {params.source:q}"
            " plot {params.kind:q} --aggregate {input:q} {params.options:q}"
            " --labels {params.labels:q} --pdf {output.pdf:q} --png {output.png:q} > {log:q} 2>&1"


# The papers' numbers beside ours (config/paper_numbers.csv): paper, ours (mean ± std),
# difference, inside our std; results/tables/<table_id>[_cpu]-paper.{md,csv}.
rule paper_table:
    input:
        numbers=PAPER_NUMBERS_FILE,
        aggregates=paper_table_inputs,
        tuned=paper_table_selections,
    output:
        md=W.pattern(W.PAPER_TABLE, ext="md"),
        csv=W.pattern(W.PAPER_TABLE, ext="csv"),
    params:
        python=PFLREPRO_PYTHON,
        source=PFLREPRO_SRC,
        table=paper_table_id,
        scale=CFG.scale,
        labels=paper_table_labels,
        tuning=paper_table_tuning,
    wildcard_constraints:
        paper_table=W.alternation(PAPER_TABLES),
    log:
        W.PAPER_TABLE_LOG,
    localrule: True
    conda:
        ENV
    shell:
        "{params.python:q} -m pflrepro --require-source {params.source:q}"
        " paper-vs-ours --numbers {input.numbers:q} --table {params.table:q}"
        " --scale {params.scale:q} --aggregate {input.aggregates:q} --labels {params.labels:q}"
        " --tuning {params.tuning:q} --md {output.md:q} --csv {output.csv:q} > {log:q} 2>&1"


# Each Markdown table as an HTML page: what `snakemake --report` shows of the tables.
rule report_table:
    input:
        W.REPORT_TABLE_SOURCE,
    output:
        report(W.REPORT_TABLE, caption=W.REPORT_CAPTION.format(kind="table"), category=report_table_category,
               subcategory=report_table_subcategory, labels=report_table_labels),
    wildcard_constraints:
        name=r"[^/]+",
    params:
        python=PFLREPRO_PYTHON,
        source=PFLREPRO_SRC,
    log:
        W.REPORT_TABLE_LOG,
    localrule: True
    conda:
        ENV
    shell:
        "{params.python:q} -m pflrepro --require-source {params.source:q}"
        " report-html --md {input:q} --out {output:q} --title {wildcards.name:q} > {log:q} 2>&1"
