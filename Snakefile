# pflrepro: raw data -> partitions -> training runs -> aggregates -> tables and figures.
# Thin entry point: config, validation (in common.smk), one rule file per stage, `all`.
# Run:  snakemake --profile profiles/demo   (bundled digits, minutes on 2 cores)
#       snakemake --cores N                 (config.yaml: paper-scale experiments)


configfile: "config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/aggregate.smk"
include: "workflow/rules/report.smk"


rule all:
    input:
        all_targets(),
    default_target: True
