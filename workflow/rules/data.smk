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
    log:
        "logs/partition/{dataset}/{partition}/split{split}.log",
    conda:
        ENV
    shell:
        "pflrepro partition --data {input.meta} --dataset {wildcards.dataset}"
        " --spec {params.spec:q} --seed {wildcards.split} --out {output} > {log} 2>&1"
