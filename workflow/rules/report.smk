# Reporting: tables and figures read only aggregated Parquet, so restyling retrains nothing.


rule table:
    input:
        W.AGGREGATE,
    output:
        md=W.pattern(W.TABLE, ext="md"),
        tex=W.pattern(W.TABLE, ext="tex"),
        csv=W.pattern(W.TABLE, ext="csv"),
    params:
        methods=methods_order,
        labels=experiment_labels,
    log:
        "logs/table/{experiment}.log",
    conda:
        ENV
    shell:
        "pflrepro table --aggregate {input} --md {output.md} --tex {output.tex}"
        " --csv {output.csv} --methods {params.methods} --labels {params.labels:q}"
        " > {log} 2>&1"


rule communication_table:
    input:
        W.AGGREGATE,
    output:
        md=W.pattern(W.COMMUNICATION_TABLE, ext="md"),
        csv=W.pattern(W.COMMUNICATION_TABLE, ext="csv"),
    params:
        methods=methods_order,
        labels=experiment_labels,
    log:
        "logs/communication/{experiment}.log",
    conda:
        ENV
    shell:
        "pflrepro communication --aggregate {input} --md {output.md} --csv {output.csv}"
        " --methods {params.methods} --labels {params.labels:q} > {log} 2>&1"


rule table_combined:
    input:
        table_aggregates,
    output:
        md=W.pattern(W.COMBINED_TABLE, ext="md"),
        tex=W.pattern(W.COMBINED_TABLE, ext="tex"),
        csv=W.pattern(W.COMBINED_TABLE, ext="csv"),
    params:
        methods=table_methods,
        labels=table_labels,
        metric=table_metric,
        caption=table_caption,
        experiments=table_experiments,
    log:
        "logs/table/{table}.log",
    conda:
        ENV
    shell:
        "pflrepro table --aggregate {input} --md {output.md} --tex {output.tex}"
        " --csv {output.csv} --methods {params.methods} --labels {params.labels:q}"
        " --metric {params.metric} --caption {params.caption:q}"
        " --experiments {params.experiments} > {log} 2>&1"


rule claims:
    input:
        claims=CLAIMS_FILE,
        aggregates=claims_aggregates,
    output:
        md=W.pattern(W.CLAIMS_TABLE, ext="md"),
        csv=W.pattern(W.CLAIMS_TABLE, ext="csv"),
    params:
        scale=claims_scale,
        labels=claims_labels,
    log:
        "logs/claims/{claims}.log",
    localrule: True
    conda:
        ENV
    shell:
        "pflrepro claims --claims {input.claims} --scale {params.scale}"
        " --aggregate {input.aggregates} --labels {params.labels:q}"
        " --md {output.md} --csv {output.csv} > {log} 2>&1"


rule plot_accuracy:
    input:
        W.AGGREGATE,
    output:
        pdf=W.figure_pattern("accuracy", "pdf"),
        png=W.figure_pattern("accuracy", "png"),
    params:
        methods=methods_order,
        labels=experiment_labels,
    log:
        "logs/plot/{experiment}-accuracy.log",
    conda:
        ENV
    shell:
        "pflrepro plot accuracy --aggregate {input} --pdf {output.pdf} --png {output.png}"
        " --methods {params.methods} --labels {params.labels:q} > {log} 2>&1"


rule plot_weights:
    input:
        W.METHOD_AGGREGATE,
    output:
        pdf=W.figure_pattern("weights", "pdf"),
        png=W.figure_pattern("weights", "png"),
    params:
        labels=experiment_labels,
    log:
        "logs/plot/{experiment}-weights-{method}.log",
    conda:
        ENV
    shell:
        "pflrepro plot weights --aggregate {input} --method {wildcards.method}"
        " --labels {params.labels:q} --pdf {output.pdf} --png {output.png} > {log} 2>&1"


rule plot_clusters:
    input:
        W.METHOD_AGGREGATE,
    output:
        pdf=W.clusters_figure_pattern("pdf"),
        png=W.clusters_figure_pattern("png"),
    params:
        labels=experiment_labels,
    log:
        "logs/plot/{experiment}-clusters-{method}.log",
    localrule: True
    conda:
        ENV
    shell:
        "pflrepro plot clusters --aggregate {input} --method {wildcards.method}"
        " --labels {params.labels:q} --pdf {output.pdf} --png {output.png} > {log} 2>&1"


rule plot_distances:
    input:
        W.AGGREGATE,
    output:
        pdf=W.figure_pattern("distances", "pdf"),
        png=W.figure_pattern("distances", "png"),
    params:
        methods=methods_order,
        labels=experiment_labels,
    log:
        "logs/plot/{experiment}-distances.log",
    conda:
        ENV
    shell:
        "pflrepro plot distances --aggregate {input}"
        " --methods {params.methods} --labels {params.labels:q}"
        " --pdf {output.pdf} --png {output.png} > {log} 2>&1"


rule plot_communication:
    input:
        W.AGGREGATE,
    output:
        pdf=W.figure_pattern("communication", "pdf"),
        png=W.figure_pattern("communication", "png"),
    params:
        methods=methods_order,
        labels=experiment_labels,
    log:
        "logs/plot/{experiment}-communication.log",
    conda:
        ENV
    shell:
        "pflrepro plot communication --aggregate {input}"
        " --methods {params.methods} --labels {params.labels:q}"
        " --pdf {output.pdf} --png {output.png} > {log} 2>&1"


rule plot_client_accuracy:
    input:
        W.AGGREGATE,
    output:
        pdf=W.figure_pattern("client_accuracy", "pdf"),
        png=W.figure_pattern("client_accuracy", "png"),
    params:
        methods=methods_order,
        labels=experiment_labels,
    log:
        "logs/plot/{experiment}-client{client}-accuracy.log",
    conda:
        ENV
    shell:
        "pflrepro plot client-accuracy --aggregate {input} --client {wildcards.client}"
        " --methods {params.methods} --labels {params.labels:q}"
        " --pdf {output.pdf} --png {output.png} > {log} 2>&1"


rule plot_client_weights:
    input:
        weighted_aggregates,
    output:
        pdf=W.figure_pattern("client_weights", "pdf"),
        png=W.figure_pattern("client_weights", "png"),
    params:
        methods=methods_order,
        labels=experiment_labels,
    log:
        "logs/plot/{experiment}-client{client}-weights.log",
    conda:
        ENV
    shell:
        "pflrepro plot client-weights --aggregate {input} --client {wildcards.client}"
        " --methods {params.methods} --labels {params.labels:q}"
        " --pdf {output.pdf} --png {output.png} > {log} 2>&1"
