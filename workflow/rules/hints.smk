# A file of another shipped config's experiment or table (a demo figure named without
# the demo profile): instead of Snakemake's MissingRuleException, planning stops with
# one line naming the config, and the profile, that make it (pflrepro.pipeline.other_configs).
# The rule matches only the paths of names the loaded config lacks; its input function
# stops the planning, so its command (which prints the same line) never runs. Its input
# function and names: common.smk (other_config_hint, OTHER_NAMES).

rule other_config_target:
    localrule: True
    input:
        other_config_hint,
    output:
        "{other_config_target}",
    wildcard_constraints:
        other_config_target=OC.target_pattern(OTHER_NAMES),
    params:
        python=PFLREPRO_PYTHON,
        source=PFLREPRO_SRC,
        root=workflow.basedir,
        loaded=loaded_config(),
    log:
        OC.HINT_LOG,
    conda:
        ENV
    shell:
        "{params.python:q} -m pflrepro --require-source {params.source:q}"
        " other-config --root {params.root:q} --loaded {params.loaded:q}"
        " {output:q} > {log:q} 2>&1"

