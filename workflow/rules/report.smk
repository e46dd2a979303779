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
    log:
        "logs/table/{experiment}.log",
    conda:
        ENV
    shell:
        "pflrepro table --aggregate {input} --md {output.md} --tex {output.tex}"
        " --csv {output.csv} --methods {params.methods} > {log} 2>&1"


rule plot_accuracy:
    input:
        "results/aggregate/{experiment}.parquet",
    output:
        pdf="figures/{experiment}-accuracy.pdf",
        png="figures/{experiment}-accuracy.png",
    params:
        methods=methods_order,
    log:
        "logs/plot/{experiment}-accuracy.log",
    conda:
        ENV
    shell:
        "pflrepro plot accuracy --aggregate {input} --pdf {output.pdf} --png {output.png}"
        " --methods {params.methods} > {log} 2>&1"


rule plot_weights:
    input:
        weights_aggregate,
    output:
        pdf="figures/{experiment}-weights.pdf",
        png="figures/{experiment}-weights.png",
    params:
        method=weights_method,
    log:
        "logs/plot/{experiment}-weights.log",
    conda:
        ENV
    shell:
        "pflrepro plot weights --aggregate {input} --method {params.method}"
        " --pdf {output.pdf} --png {output.png} > {log} 2>&1"
