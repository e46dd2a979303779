# A file of another shipped config's experiment or table (a demo figure named without
# the demo profile): instead of Snakemake's MissingRuleException, planning stops with
# one line naming the config, and the profile, that make it (pflrepro.pipeline.other_configs).
# The rule matches only the paths of names the loaded config lacks; its input function
# stops the planning, so its command (which prints the same line) never runs. Its input
# function and names: common.smk (other_config_hint, OTHER_NAMES).

# Before any planning: a named target of another config, or one naming an experiment,
# method, partition, data set, table, figure or tuning this config lacks, ends the run
# with one line saying what to do (inside the plan the same line would come wrapped in
# Snakemake's traceback, or as "No rule to produce").
_TARGET_PROBLEMS = P.target_problems(sys.argv[1:], OTHER_NAMES)
if _TARGET_PROBLEMS:
    print("\n".join(_TARGET_PROBLEMS), file=sys.stderr)
    sys.exit(1)


rule other_config_target:
    localrule: True
    input:
        other_config_hint,
    output:
        "{other_config_target}",
    wildcard_constraints:
        other_config_target=OC.target_pattern(OTHER_NAMES),
    params:
        **P.cli,
        root=workflow.basedir,
        loaded=P.loaded_config,
    log:
        OC.HINT_LOG,
    conda:
        ENV
    shell:
        cli(" other-config --root {params.root:q} --loaded {params.loaded:q}"
        " {output:q} > {log:q} 2>&1")

