# Aggregation: runs of one method, then all methods of an experiment, into one Parquet each.


rule aggregate_method:
    localrule: True
    input:
        P.experiment_runs,
    output:
        W.METHOD_AGGREGATE,
    params:
        **P.cli,
    log:
        W.METHOD_AGGREGATE_LOG,
    conda:
        ENV
    shell:
        cli(" aggregate --out {output:q} {input:q} > {log:q} 2>&1")


rule aggregate_experiment:
    localrule: True
    input:
        P.method_aggregates,
    output:
        W.AGGREGATE,
    params:
        **P.cli,
    log:
        W.AGGREGATE_LOG,
    conda:
        ENV
    shell:
        cli(" aggregate --out {output:q} {input:q} > {log:q} 2>&1")
