# Data stage: prepare each data set once, then write each partition once.


rule prepare_data:
    output:
        meta="results/data/{dataset}/meta.json",
        x="results/data/{dataset}/x.npy",
        y="results/data/{dataset}/y.npy",
    params:
        mirrors=mirrors,
    log:
        "logs/prepare_data/{dataset}.log",
    conda:
        ENV
    shell:
        "pflrepro prepare --dataset {wildcards.dataset} --out results/data/{wildcards.dataset}"
        " --raw data/raw/{wildcards.dataset} {params.mirrors} > {log} 2>&1"


rule partition:
    input:
        meta="results/data/{dataset}/meta.json",
    output:
        "results/partitions/{dataset}/{partition}/split{split}.parquet",
    params:
        spec=partition_spec,
        code=partition_code,
    log:
        "logs/partition/{dataset}/{partition}/split{split}.log",
    conda:
        ENV
    shell:
        "pflrepro partition --data {input.meta} --dataset {wildcards.dataset}"
        " --spec {params.spec:q} --seed {wildcards.split} --out {output} > {log} 2>&1"


rule partition_stats:
    input:
        meta="results/data/{dataset}/meta.json",
        partition="results/partitions/{dataset}/{partition}/split{split}.parquet",
    output:
        csv="results/partitions/{dataset}/{partition}/split{split}-clients.csv",
        md="results/partitions/{dataset}/{partition}/split{split}-summary.md",
    log:
        "logs/partition_stats/{dataset}/{partition}/split{split}.log",
    conda:
        ENV
    shell:
        "pflrepro partition-stats --data {input.meta} --partition {input.partition}"
        " --csv {output.csv} --md {output.md} > {log} 2>&1"


rule plot_partition:
    input:
        meta="results/data/{dataset}/meta.json",
        partition="results/partitions/{dataset}/{partition}/split{split}.parquet",
    output:
        pdf="figures/partitions/{dataset}/{partition}-split{split}.pdf",
        png="figures/partitions/{dataset}/{partition}-split{split}.png",
    log:
        "logs/plot_partition/{dataset}/{partition}/split{split}.log",
    conda:
        ENV
    shell:
        "pflrepro plot labels --data {input.meta} --partition {input.partition}"
        " --title '{wildcards.dataset}: {wildcards.partition}, split {wildcards.split}'"
        " --pdf {output.pdf} --png {output.png} > {log} 2>&1"


rule public_set:
    input:
        meta="results/data/{source}/meta.json",
        partition="results/partitions/{dataset}/{partition}/split{split}.parquet",
    output:
        "results/public/{dataset}/{partition}/split{split}-{source}{size}.parquet",
    params:
        exclude=public_exclude,
    log:
        "logs/public_set/{dataset}/{partition}/split{split}-{source}{size}.log",
    conda:
        ENV
    shell:
        "pflrepro public --data {input.meta} --size {wildcards.size} --seed {wildcards.split}"
        " {params.exclude} --out {output} > {log} 2>&1"
