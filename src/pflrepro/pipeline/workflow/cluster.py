"""What a profile sets for `train` reaches every rule that Snakemake submits.

Snakemake keys a profile's ``set-resources`` and ``groups`` by rule name, but the training
jobs are several rule families: ``train``, the ``train_<runs>`` rules of several runs per
job, ``tune_train`` and the ``tune_train_<runs>`` rules (the batch rules are made in loops,
from the config, so their names are not known in advance). A profile names them once,
as ``train`` (profiles/slurm: partition, account, ``slurm_extra``, ``cpus_per_gpu``; the
group and its size). :func:`share_training_settings`, called by the Snakefile once every
rule is defined, gives each rule that Snakemake would submit (every rule not declared
``localrule: True``: only training is submitted) what the profile sets for ``train``:

- resources: the ``set-resources`` entries of ``train``, then the rule's own entries
  (a rule named in ``set-resources`` keeps what is set for it);
- group: the profile's ``groups`` entry ``training`` (:data:`GROUPS_KEY`; no rule has that
  name, so Snakemake applies it to none by itself), for a rule that declares no group;
  none at all in a config that tunes (:func:`grouping_safe`). Tuning runs get a group of
  their own, :func:`tuning_group`
  of it, because Snakemake refuses a group that a path of jobs leaves and re-enters
  (tuning runs, then the local ``tune_select`` checkpoint, then the final runs that read
  its selection: "Group train depends on itself"). That group takes its size from the
  ``group-components`` entry of the training group unless ``group-components`` names
  it: Snakemake reads ``group-components`` through its map from a group id to the group
  entry the id came from (``Workflow.parent_groupids``, which it fills for group names
  with wildcards), and the tuning group is entered there.

Snakemake hands ``groups`` and ``group-components`` to the workflow only when it builds
the jobs, after reading the Snakefile, so the group is a function of the job that reads
them then; ``set-resources`` is known while the Snakefile is read. The requeue flag
(``slurm-requeue``) is the executor's own and applies to every submitted job. Without a
profile that sets them (local runs, the demo) nothing changes; Snakemake ignores groups
outside cluster runs and dry runs anyway.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pflrepro.pipeline.workflow.tuning import TUNE_RUN

#: The rule name under which a profile sets what every training job gets.
TRAINING_RULE = "train"
#: The ``groups`` entry of a profile naming the group of every training job. No rule has
#: this name, so Snakemake applies it to none itself (an entry ``train`` would group the
#: rule ``train`` whatever this module decides).
GROUPS_KEY = "training"
#: Outputs of tuning runs start with this.
TUNING_OUTPUTS = TUNE_RUN.split("{", 1)[0]


def tuning_group(group: str) -> str:
    """The group of the tuning runs when the training runs are in ``group``."""
    return f"{group}_tuning"


def submitted_rules(workflow: Any) -> list[Any]:
    """The rules Snakemake would submit to a cluster: those not declared local."""
    local = getattr(workflow, "_localrules", None)
    if local is None:
        raise RuntimeError("this Snakemake keeps no set of local rules (Workflow._localrules): "
                           "pflrepro.pipeline.workflow.cluster needs updating")
    return [rule for rule in workflow.rules if rule.name not in local and not rule.norun]


def is_tuning(rule: Any) -> bool:
    """Whether ``rule`` writes tuning runs (its outputs are under :data:`TUNING_OUTPUTS`)."""
    return any(str(path).startswith(TUNING_OUTPUTS) for path in rule.output)


def share_training_settings(workflow: Any, grouping: bool = True) -> list[str]:
    """Give every submitted rule the profile's resources and group of ``train``.

    ``grouping`` False: no training job is grouped in this run (:func:`grouping_safe`).
    Returns the names of the rules other than ``train`` that Snakemake would submit.
    """
    from snakemake.resources import Resources

    overwrite = workflow.resource_settings.overwrite_resources
    shared = overwrite.get(TRAINING_RULE)
    names = []
    said: list[bool] = []  # the note on dropped groups, once a run
    for rule in submitted_rules(workflow):
        # the rule's own `group:` (Rule.group reads None while the Snakefile is read)
        if getattr(rule, "_group", None) is None:
            rule.group = (training_group_of(workflow, tuning=is_tuning(rule)) if grouping
                          else ungrouped(workflow, said))
        if rule.name == TRAINING_RULE:
            continue
        if shared:
            rule.resources.update(Resources.from_mapping(shared))
            rule.resources.update(Resources.from_mapping(overwrite.get(rule.name, {})))
        names.append(rule.name)
    return names


def training_group_of(workflow: Any, tuning: bool) -> Callable[[Any], str | None]:
    """A rule's group, as a function of a job's wildcards.

    It gives the profile's group of ``train`` (of a tuning rule: its
    :func:`tuning_group`), or none where the profile sets none.
    """

    def group(wildcards: Any) -> str | None:
        settings = workflow.group_settings
        found = settings.overwrite_groups.get(GROUPS_KEY)
        if found is None or not tuning:
            return found
        tuned = tuning_group(found)
        if tuned not in settings.group_components:
            workflow.parent_groupids[tuned] = found
        return tuned

    return group


def grouping_safe(tuned: bool) -> bool:
    """Whether this run may group training jobs: not when the config tunes anything.

    Snakemake 9.27 caches each group job by the jobs it was made with
    (``GroupJobFactory.new``) and merges groups by changing those cached objects in place
    (``DAG._update_group_components``). After a checkpoint the DAG builds its groups
    again from that cache: each group comes back whole and is merged with others, and a
    group already submitted changes its members (and its hash) under the scheduler, which
    then submits some jobs a second time. Every ``tune_select`` is a checkpoint, and
    whether one runs is known only once the DAG is built, so a config that tunes
    (``tuned``) groups nothing.
    """
    return not tuned


def ungrouped(workflow: Any, said: list[bool]) -> Callable[[Any], None]:
    """A rule's group while grouping is unsafe: none, saying why once (``said``) if asked."""

    def group(wildcards: Any) -> None:
        wanted = workflow.group_settings.overwrite_groups
        if not said and wanted.get(GROUPS_KEY):
            said.append(True)
            import sys

            print("pflrepro: training jobs are not grouped: the config tunes, and Snakemake "
                  "regroups jobs wrongly after a checkpoint such as tune_select "
                  "(docs/slurm.md, Grouping)", file=sys.stderr)
        return None

    return group
