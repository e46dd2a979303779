# A file of another shipped config's experiment or table (a demo figure named without
# the demo profile): instead of Snakemake's MissingRuleException, planning stops with
# one line naming the config, and the profile, that make it (pflrepro.pipeline.other_configs).
# The rule matches only the paths of names the loaded config lacks; its input function
# stops the planning, so its command (which prints the same line) never runs. Its input
# function and names: common.smk (other_config_hint, OTHER_NAMES).

# Before any planning: a named target of another config, or a partition figure of a
# partition no experiment uses, ends the run with one line saying what to do (inside the
# plan the same line would come wrapped in Snakemake's traceback).
_TARGET_PROBLEMS = OC.target_problems(
    OC.command_line_targets(sys.argv[1:]), W.partitions_by_dataset(CFG), OTHER_NAMES,
    OC.profiles_of(workflow.basedir), loaded_config())
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

