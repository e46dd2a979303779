# Reporting: tables and figures read only aggregated Parquet, so restyling retrains nothing.


rule table:
    input:
        "results/aggregate/{experiment}.parquet",
    output:
        md="results/tables/{experiment}.md",
        tex="results/tables/{experiment}.tex",
        csv="results/tables/{experiment}.csv",
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


rule table_combined:
    input:
        table_aggregates,
    output:
        md="results/tables/{table}.md",
        tex="results/tables/{table}.tex",
        csv="results/tables/{table}.csv",
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


rule plot_accuracy:
    input:
        "results/aggregate/{experiment}.parquet",
    output:
        pdf="figures/{experiment}-accuracy.pdf",
        png="figures/{experiment}-accuracy.png",
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
        "results/aggregate/{experiment}/{method}.parquet",
    output:
        pdf="figures/{experiment}-weights-{method}.pdf",
        png="figures/{experiment}-weights-{method}.png",
    params:
        labels=experiment_labels,
    log:
        "logs/plot/{experiment}-weights-{method}.log",
    conda:
        ENV
    shell:
        "pflrepro plot weights --aggregate {input} --method {wildcards.method}"
        " --labels {params.labels:q} --pdf {output.pdf} --png {output.png} > {log} 2>&1"


rule plot_client_accuracy:
    input:
        "results/aggregate/{experiment}.parquet",
    output:
        pdf="figures/{experiment}-client{client}-accuracy.pdf",
        png="figures/{experiment}-client{client}-accuracy.png",
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
        pdf="figures/{experiment}-client{client}-weights.pdf",
        png="figures/{experiment}-client{client}-weights.png",
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
