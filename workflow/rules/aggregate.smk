# Aggregation: runs of one method, then all methods of an experiment, into one Parquet each.


rule aggregate_method:
    localrule: True
    input:
        experiment_runs,
    output:
        W.METHOD_AGGREGATE,
    params:
        python=PFLREPRO_PYTHON,
        source=PFLREPRO_SRC,
    log:
        W.METHOD_AGGREGATE_LOG,
    conda:
        ENV
    shell:
        "{params.python:q} -m pflrepro --require-source {params.source:q}"
        " aggregate --out {output:q} {input:q} > {log:q} 2>&1"


rule aggregate_experiment:
    localrule: True
    input:
        experiment_method_aggregates,
    output:
        W.AGGREGATE,
    params:
        python=PFLREPRO_PYTHON,
        source=PFLREPRO_SRC,
    log:
        W.AGGREGATE_LOG,
    conda:
        ENV
    shell:
        "{params.python:q} -m pflrepro --require-source {params.source:q}"
        " aggregate --out {output:q} {input:q} > {log:q} 2>&1"
