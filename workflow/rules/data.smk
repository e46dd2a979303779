# Data stage: prepare each data set once, then write each partition once.


rule prepare_data:
    localrule: True
    output:
        meta=W.DATA_META,
        x=W.DATA_X,
        y=W.DATA_Y,
    params:
        **P.cli,
        mirrors=P.mirrors,
        out=W.DATA_DIR,
        raw=W.RAW_DIR,
    log:
        W.PREPARE_LOG,
    conda:
        ENV
    shell:
        cli(" prepare --dataset {wildcards.dataset:q} --out {params.out:q}"
        " --raw {params.raw:q} {params.mirrors:q} > {log:q} 2>&1")


rule partition:
    localrule: True
    input:
        meta=W.DATA_META,
    output:
        W.PARTITION,
    params:
        **P.cli,
        spec=P.partition_spec,
        code=P.partition_code,
    log:
        W.PARTITION_LOG,
    conda:
        ENV
    shell:
        cli(" partition --data {input.meta:q} --dataset {wildcards.dataset:q}"
        " --spec {params.spec:q} --seed {wildcards.split:q} --out {output:q} > {log:q} 2>&1")


rule partition_stats:
    localrule: True
    input:
        meta=W.DATA_META,
        partition=W.PARTITION,
    output:
        csv=W.pattern(W.PARTITION_STATS, kind="clients.csv"),
        md=W.pattern(W.PARTITION_STATS, kind="summary.md"),
    params:
        **P.cli,
    log:
        W.PARTITION_STATS_LOG,
    conda:
        ENV
    shell:
        cli(" partition-stats --data {input.meta:q} --partition {input.partition:q}"
        " --csv {output.csv:q} --md {output.md:q} > {log:q} 2>&1")


rule plot_partition:
    localrule: True
    input:
        meta=W.DATA_META,
        partition=W.PARTITION,
    output:
        pdf=W.pattern(W.PARTITION_FIGURE, ext="pdf"),
        png=report(W.pattern(W.PARTITION_FIGURE, ext="png"), caption=W.REPORT_CAPTION.format(kind="partition"),
                   category="Data partitions", subcategory="{dataset}",
                   labels={"output": "label distribution", "name": "{partition} split {split}"}),
    params:
        **P.cli,
        title=P.partition_title,
    log:
        W.PARTITION_FIGURE_LOG,
    conda:
        ENV
    shell:
        cli(" plot labels --data {input.meta:q} --partition {input.partition:q}"
        " --title {params.title:q}"
        " --pdf {output.pdf:q} --png {output.png:q} > {log:q} 2>&1")


rule public_set:
    localrule: True
    input:
        meta=W.pattern(W.DATA_META, dataset="{source}"),
        partition=W.PARTITION,
    output:
        W.PUBLIC,
    params:
        **P.cli,
        exclude=P.public_exclude,
    log:
        W.PUBLIC_LOG,
    conda:
        ENV
    shell:
        cli(" public --data {input.meta:q} --size {wildcards.size:q} --seed {wildcards.split:q}"
        " {params.exclude:q} --out {output:q} > {log:q} 2>&1")
