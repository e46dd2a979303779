import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

import pflrepro.pipeline.workflow as W
from pflrepro.config import ConfigError, parse
from pflrepro.pipeline.workflow.training_rules import training_rules

REPO = Path(__file__).resolve().parents[2]
CFG = parse(yaml.safe_load((REPO / "tests/workflow/config.yaml").read_text()))
PID = CFG.experiments["tiny"].partitions[0].id


def test_alternation_matches_exact_names_longest_first() -> None:
    import re

    pattern = re.compile(f"^(?:{W.alternation(['fedavg', 'fedavg_plus'])})$")
    assert pattern.match("fedavg") and pattern.match("fedavg_plus")
    assert not pattern.match("fedav")
    assert not re.match(f"^(?:{W.alternation([])})$", "")


def test_targets_have_a_weights_figure_per_weight_learning_method() -> None:
    targets = W.all_targets(CFG)
    assert "results/tables/tiny.md" in targets
    assert "figures/tiny-accuracy.pdf" in targets
    assert "figures/tiny-weights-federico.pdf" in targets
    assert not any("weights-fedavg" in t for t in targets)
    raw = yaml.safe_load((REPO / "tests/workflow/config.yaml").read_text())
    raw["experiments"]["tiny"]["methods"] = ["local", "fedavg"]
    assert not any("-weights" in t for t in W.all_targets(parse(raw)))
    with pytest.raises(ValueError, match="no method with client weights"):
        W.weights_method(parse(raw), "tiny")


def test_figures_and_scale_select_targets() -> None:
    raw = yaml.safe_load((REPO / "tests/workflow/config.yaml").read_text())
    raw["experiments"]["tiny"]["figures"] = ["client_accuracy", "client_weights"]
    raw["experiments"]["tiny"]["focus_client"] = 2
    figures = [t for t in W.all_targets(parse(raw)) if t.startswith("figures/tiny")]
    assert figures == ["figures/tiny-client2-accuracy.pdf", "figures/tiny-client2-accuracy.png",
                       "figures/tiny-client2-weights.pdf", "figures/tiny-client2-weights.png"]
    raw["experiments"]["tiny"]["scale"] = "cpu"
    # the config's scale is 'paper' and no experiment has it: nothing would be built
    with pytest.raises(ConfigError, match=r"scale: no experiment has scale 'paper'.*tiny: cpu"):
        parse(raw)
    raw["scale"] = "cpu"
    assert "results/tables/tiny.md" in W.all_targets(parse(raw))


def test_distances_figure_needs_a_method_that_logs_distances() -> None:
    raw = yaml.safe_load((REPO / "tests/workflow/config.yaml").read_text())
    raw["methods"]["amp"] = {"algorithm": "fedamp"}
    raw["experiments"]["tiny"]["methods"] = ["fedavg", "amp"]
    raw["experiments"]["tiny"]["figures"] = ["distances"]
    figures = [t for t in W.all_targets(parse(raw)) if t.startswith("figures/tiny")]
    assert figures == ["figures/tiny-distances.pdf", "figures/tiny-distances.png"]
    raw["experiments"]["tiny"]["methods"] = ["fedavg"]
    with pytest.raises(ValueError, match="'distances' figure.*fedamp"):
        W.all_targets(parse(raw))


def test_weights_figures_include_a_cluster_figure_per_clustering_method() -> None:
    raw = yaml.safe_load((REPO / "tests/workflow/config.yaml").read_text())
    raw["methods"]["cfl"] = {"algorithm": "clustered_fl"}
    raw["experiments"]["tiny"]["methods"] = ["fedavg", "cfl", "federico"]
    figures = [t for t in W.all_targets(parse(raw)) if t.startswith("figures/tiny")]
    assert figures == ["figures/tiny-accuracy.pdf", "figures/tiny-accuracy.png",
                       "figures/tiny-weights-federico.pdf", "figures/tiny-weights-federico.png",
                       "figures/tiny-clusters-cfl.pdf", "figures/tiny-clusters-cfl.png"]
    assert W.clustered_methods(parse(raw), "tiny") == ["cfl"]
    raw["experiments"]["tiny"]["figures"] = ["accuracy"]
    assert not any("clusters" in t for t in W.all_targets(parse(raw)))


def test_combined_tables_and_labels() -> None:
    raw = yaml.safe_load((REPO / "tests/workflow/config.yaml").read_text())
    raw["experiments"]["tiny"]["partitions"][0]["label"] = "two groups"
    raw["experiments"]["tiny"]["label"] = "Tiny"
    raw["tables"] = {"both": {"experiments": ["tiny"], "caption": "c", "metric": "mean_bmta"}}
    cfg = parse(raw)
    assert "results/tables/both.csv" in W.all_targets(cfg)
    assert W.table_inputs(cfg, "both") == ["results/aggregate/tiny.parquet"]
    pid = cfg.experiments["tiny"].partitions[0].id
    assert json.loads(W.display_labels(cfg, ["tiny"])) == {
        "experiments": {"tiny": "Tiny"}, "partitions": {pid: "two groups"}, "methods": {},
        "groups": {}}
    # a partition figure is titled with the partition's label, not its id
    assert W.partition_title(cfg, "digits", pid, 0) == "digits: two groups, split 0"
    assert W.partition_title(cfg, "digits", "no-label", "1") == "digits: no-label, split 1"
    assert W.table_methods(cfg, ["tiny"]) == "local fedavg fedavg_plus federico"


def test_run_paths_and_inputs() -> None:
    paths = W.run_paths(CFG, "tiny", "federico")
    assert len(paths) == 4
    assert f"results/runs/tiny/{PID}/federico/split0-seed1.parquet" in paths
    wc = SimpleNamespace(experiment="tiny", partition=PID, method="federico", split="0",
                         seed="1")
    assert W.experiment_path(CFG, wc, "meta") == "results/data/digits/meta.json"
    assert W.experiment_path(CFG, wc, "partition") == \
        f"results/partitions/digits/{PID}/split0.parquet"
    assert W.train_resource(CFG, wc, "mem_mb") == 1000
    assert '"algorithm":"federico"' in W.run_spec_json(CFG, wc)


def test_paired_seeds_give_one_run_path_per_split() -> None:
    raw = yaml.safe_load((REPO / "tests/workflow/config.yaml").read_text())
    raw["experiments"]["tiny"].update(split_seeds=[0, 1, 2], train_seeds=[0, 1, 2],
                                      seed_pairing="paired")
    cfg = parse(raw)
    paths = [p for p in W.run_paths(cfg, "tiny", "federico") if f"/{PID}/" in p]
    assert paths == [f"results/runs/tiny/{PID}/federico/split{s}-seed{s}.parquet"
                     for s in (0, 1, 2)]
    stats = [t for t in W.all_targets(cfg) if t.endswith("-summary.md") and PID in t]
    assert stats == [f"results/partitions/digits/{PID}/split{s}-summary.md" for s in (0, 1, 2)]


def test_unknown_partition_id_is_an_error() -> None:
    wc = SimpleNamespace(experiment="tiny", partition="nope", method="fedavg", split="0",
                         seed="0")
    with pytest.raises(ValueError, match="nope"):
        W.experiment_path(CFG, wc, "partition")


def test_mirror_args_are_quoted() -> None:
    raw = yaml.safe_load((REPO / "tests/workflow/config.yaml").read_text())
    raw["data"] = {"mirrors": {"digits": ["/a b/c", "http://x/"]}}
    assert W.mirror_args(parse(raw), "digits") == "--mirror '/a b/c' --mirror http://x/"


def test_all_targets_include_the_stored_files_behind_the_tables() -> None:
    # issue 17, items 4 and 5: a run or partition set aside as damaged is missing; were
    # it only an input, Snakemake would not rebuild it while the tables made from it exist
    targets = W.all_targets(CFG)
    runs = [t for t in targets if t.startswith("results/runs/")]
    assert len(runs) == 2 * 4 * 1 * 2 and len(set(runs)) == len(runs)
    assert f"results/runs/tiny/{PID}/federico/split0-seed1.parquet" in runs
    assert f"results/partitions/digits/{PID}/split0.parquet" in targets
    assert "results/aggregate/tiny/federico.parquet" in targets
    assert "results/aggregate/tiny.parquet" in targets


def test_table_tuning_names_each_tuned_method_with_its_grid_and_selection() -> None:
    import copy

    raw = copy.deepcopy(yaml.safe_load((REPO / "tests/workflow/config.yaml").read_text()))
    raw["methods"]["fedamp"] = {"algorithm": "fedamp"}
    tiny = raw["experiments"]["tiny"]
    tiny["methods"] = [*tiny["methods"], "fedamp"]
    tiny["tune"] = {"rounds": 1, "methods": {"fedamp": {"sigma": [1e-5, 1e-3]}}}
    cfg = parse(raw)
    assert W.tuned_methods(cfg, "tiny") == ["fedamp"]
    selection = {"p": {"0": {"point": {"sigma": 1e-3}, "params": {"sigma": 1e-3}}}}
    spec = json.loads(W.table_tuning_json(cfg, ["tiny"], {("tiny", "fedamp"): selection}))
    assert [(e["experiment"], e["method"], e["grids"], e["selection"]) for e in spec] == \
        [("tiny", "fedamp", {"sigma": [1e-5, 1e-3]}, selection)]
    assert "trials" not in spec[0] and spec[0]["criterion"] == "best_mean"
    raw["experiments"]["tiny"].pop("tune")
    assert W.table_tuning_json(parse(raw), ["tiny"], {}) == "[]"


def _seeded(split_seeds: list[int], train_seeds: list[int], **top: object) -> dict:
    raw = yaml.safe_load((REPO / "tests/workflow/config.yaml").read_text())
    raw["experiments"]["tiny"].update(split_seeds=split_seeds, train_seeds=train_seeds)
    return {**raw, **top}


def test_runs_per_job_chunks_an_experiments_seed_pairs() -> None:
    # issue 28, item 2: the runs of one experiment x partition x method, in seed order,
    # cut into jobs of runs_per_job (paper scale: 1 unless set; 'all': one job)
    raw = _seeded([0, 1], [0, 1, 2])
    cfg = parse(raw)
    assert W.train_batches(cfg, raw) == []  # paper scale: one run per job
    assert W.single_run_experiments(cfg, raw) == ["tiny"]
    raw = _seeded([0, 1], [0, 1, 2], runs_per_job={"paper": 4})
    batches = W.train_batches(parse(raw), raw)
    assert [b.pairs for b in batches] == [((0, 0), (0, 1), (0, 2), (1, 0)),
                                          ((1, 1), (1, 2))]
    assert [b.rule for b in batches] == ["train_s0t0_s0t1_s0t2_s1t0", "train_s1t1_s1t2"]
    assert W.single_run_experiments(parse(raw), raw) == []
    raw = _seeded([0, 1], [0, 1, 2], runs_per_job={"paper": "all"})
    assert [len(b.pairs) for b in W.train_batches(parse(raw), raw)] == [6]
    with pytest.raises(ValueError, match="runs_per_job.paper"):
        W.runs_per_job({"runs_per_job": {"paper": 0}}, "paper")


def test_runs_sharing_a_job_share_its_benchmark_in_the_cost_args() -> None:
    raw = _seeded([0], [0, 1], runs_per_job={"paper": "all"})
    cfg = parse(raw)
    args = W.cost_args(cfg, "tiny", W.train_batches(cfg, raw)).split()
    benchmarks = args[1:args.index("--logs")]
    logs = args[args.index("--logs") + 1:args.index("--training")]
    runs = W.cost_inputs(cfg, "tiny")
    assert len(benchmarks) == len(logs) == len(runs)
    first = runs[0].replace("results/runs/", "results/benchmarks/train/")
    assert benchmarks[0] == benchmarks[1] == first.replace("split0-seed0.parquet",
                                                           "runs-s0t0_s0t1.tsv")
    assert logs[0].endswith("split0-seed0.log") and logs[1].endswith("split0-seed1.log")
    # one run per job: each run's own record, as before
    assert W.cost_args(cfg, "tiny").split()[1].endswith("split0-seed0.tsv")


def _tuned(split_seeds: list[int], **top: object) -> dict:
    """The tiny config with FedAMP tuned on a 2 x 2 grid, two tuning seeds."""
    raw = _seeded(split_seeds, [0], **top)
    raw["methods"]["fedamp"] = {"algorithm": "fedamp"}
    tiny = raw["experiments"]["tiny"]
    tiny["methods"] = [*tiny["methods"], "fedamp"]
    tiny["tune"] = {"rounds": 1, "seeds": [0, 1],
                    "methods": {"fedamp": {"sigma": [1e-5, 1e-3], "prox": [0.1, 1]}}}
    return raw


def test_tuning_runs_per_job_chunk_a_methods_trials_per_partition() -> None:
    # paper scale: one tuning run per job (the tune_train rule), as training
    raw = _tuned([0, 1])
    cfg = parse(raw)
    assert W.tune_batches(cfg, raw) == []
    assert W.single_run_tune_experiments(cfg, raw) == ["tiny"]
    # 'all': a partition's 2 splits x 4 points x 2 seeds = 16 runs in one job, in the
    # order of tune_trials (split, point, seed); one rule, for both partitions
    raw = _tuned([0, 1], runs_per_job={"paper": "all"})
    cfg = parse(raw)
    (batch,) = W.tune_batches(cfg, raw)
    assert W.single_run_tune_experiments(cfg, raw) == []
    assert batch.method == "fedamp" and batch.experiments == ("tiny",)
    assert len(batch.trials) == 16
    assert batch.trials[:3] == (("sigma1e-05_prox0.1", 0, 0), ("sigma1e-05_prox0.1", 0, 1),
                                ("sigma1e-05_prox1", 0, 0))
    assert batch.trials[8] == ("sigma1e-05_prox0.1", 1, 0)
    assert batch.label.startswith("16runs-") and len(batch.label) == len("16runs-") + 10
    # the rule says the method and which of its runs on a partition; files keep the label
    assert batch.rule == "tune_train_fedamp_runs1to16of16"
    paths = W.tune_run_paths(cfg, "tiny", "fedamp")
    (rule,) = [r for r in training_rules(cfg, raw) if r.tuning and r.several]
    assert [p.format(experiment="tiny", partition=PID, method="fedamp")
            for p in rule.outputs] == [p for p in paths if f"/{PID}/" in p]
    # 5 per job: chunks of 5, 5, 5 and 1, each its own rule
    raw = _tuned([0, 1], runs_per_job={"paper": 5})
    batches = W.tune_batches(parse(raw), raw)
    assert [len(b.trials) for b in batches] == [5, 5, 5, 1]
    assert [t for b in batches for t in b.trials] == \
        list(batch.trials)
    assert [b.rule for b in batches] == [
        "tune_train_fedamp_runs1to5of16", "tune_train_fedamp_runs6to10of16",
        "tune_train_fedamp_runs11to15of16", "tune_train_fedamp_runs16to16of16"]
    assert W.unique_names(["a", "b", "a", "a"]) == ["a", "b", "a_2", "a_3"]


# ------------------------------------------------------------- Snakemake's rate limiter
def _workflow(executor: str) -> SimpleNamespace:
    limiter = object()
    return SimpleNamespace(executor_plugin=SimpleNamespace(name=executor),
                           scheduler=SimpleNamespace(job_rate_limiter=limiter))


def test_rate_limiter_is_dropped_for_the_local_executor_only() -> None:
    local, slurm = _workflow("local"), _workflow("slurm")
    kept = slurm.scheduler.job_rate_limiter
    assert W.drop_local_rate_limiter(local) is True
    assert local.scheduler.job_rate_limiter is None
    assert W.drop_local_rate_limiter(slurm) is False
    assert slurm.scheduler.job_rate_limiter is kept
    assert W.drop_local_rate_limiter(local) is False  # nothing left to drop
    assert W.drop_local_rate_limiter(SimpleNamespace()) is False  # other names: no change


def test_rate_limiter_is_dropped_in_a_real_local_snakemake_run(tmp_path: Path) -> None:
    # the installed Snakemake still names its executor, scheduler and limiter so
    import os
    import subprocess
    import sys

    (tmp_path / "Snakefile").write_text(
        "import pflrepro.pipeline.workflow as W\n"
        "onstart:\n"
        "    print('limiter dropped:', W.drop_local_rate_limiter(workflow),\n"
        "          workflow.scheduler.job_rate_limiter)\n"
        "rule all:\n"
        "    output: 'done'\n"
        "    shell: 'touch {output}'\n")
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "--snakefile",
                           str(tmp_path / "Snakefile"), "--directory", str(tmp_path)],
                          capture_output=True, text=True, env=env, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "limiter dropped: True None" in out, out
    assert (tmp_path / "done").exists()


def test_mirror_args_pass_mirrors_and_the_configs_own_checksums() -> None:
    raw = yaml.safe_load((REPO / "tests/workflow/config.yaml").read_text())
    name = "train-labels-idx1-ubyte.gz"
    raw["data"] = {"mirrors": {"mnist": ["http://127.0.0.1:1/m n/"]},
                   "checksums": {"mnist": {name: "AB" * 32}}}
    cfg = parse(raw)
    assert cfg.checksums == {"mnist": {name: "ab" * 32}}
    assert W.mirror_args(cfg, "mnist") == (f"--mirror 'http://127.0.0.1:1/m n/' "
                                           f"--checksum {name}={'ab' * 32}")
    assert W.mirror_args(cfg, "cifar10") == ""


def test_cuda_is_refused_where_the_jobs_run_without_it() -> None:
    raw = yaml.safe_load((REPO / "tests/workflow/config.yaml").read_text())
    assert W.cuda_refusal(parse(raw), cuda_available=False) is None  # device: cpu
    raw["experiments"]["tiny"]["training"] = {"device": "cuda"}
    cfg = parse(raw)
    message = W.cuda_refusal(cfg, cuda_available=False)
    assert message.startswith("experiments.tiny.training.device: cuda, but this machine "
                              "has no CUDA device"), message
    assert "device: auto" in message and "profiles/slurm" in message
    assert W.cuda_refusal(cfg, cuda_available=True) is None
    raw["experiments"]["tiny"]["training"] = {"device": "auto"}  # CUDA when present
    assert W.cuda_refusal(parse(raw), cuda_available=False) is None


def test_the_jobs_run_here_only_under_the_local_executor() -> None:
    assert W.runs_here(SimpleNamespace(executor_plugin=SimpleNamespace(name="local")))
    assert not W.runs_here(SimpleNamespace(executor_plugin=SimpleNamespace(name="slurm")))
    assert not W.runs_here(SimpleNamespace(executor_plugin=None))  # while parsing


def test_download_limits_reach_prepare_only_where_the_config_sets_them() -> None:
    raw = yaml.safe_load((REPO / "tests/workflow/config.yaml").read_text())
    raw["data"] = {"download": {"deadline_s": 600, "min_rate": 2048.5}}
    assert W.mirror_args(parse(raw), "digits") == "--deadline 600 --min-rate 2048.5"
    raw["data"] = {}
    assert W.mirror_args(parse(raw), "digits") == ""
    raw["data"] = {"download": {"deadline_s": 0}}
    from pflrepro.config import check

    with pytest.raises(ConfigError, match="deadline_s"):
        check(raw, REPO / "workflow/schemas/config.schema.yaml")


def test_the_workflow_checks_a_config_against_the_papers_numbers(tmp_path: Path) -> None:
    # config.yaml with the paper's method `perfedckt` renamed: one line naming the
    # numbers file and the row, before any job (the test config of other experiments
    # passes: tests/unit/test_preflight.py plans it)
    import subprocess
    import sys

    raw = yaml.safe_load((REPO / "config.yaml").read_text())
    raw["methods"]["perfedckt_x"] = raw["methods"].pop("perfedckt")
    for exp in raw["experiments"].values():
        exp["methods"] = ["perfedckt_x" if m == "perfedckt" else m for m in exp["methods"]]
        tuned = (exp.get("tune") or {}).get("methods", {})
        if "perfedckt" in tuned:
            tuned["perfedckt_x"] = tuned.pop("perfedckt")
    (tmp_path / "renamed.yaml").write_text(yaml.safe_dump(raw))
    done = subprocess.run(
        [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "-d", str(tmp_path),
         "-n", "--cores", "1", "--configfile", str(tmp_path / "renamed.yaml"),
         "--replace-workflow-config"], capture_output=True, text=True, timeout=300)
    out = done.stdout + done.stderr
    assert done.returncode != 0
    lines = [line for line in out.splitlines() if line.startswith("Invalid config:")]
    assert len(lines) == 1, out[-3000:]
    assert re.match(r"Invalid config: config/paper_numbers\.csv: row 'perfedckt-[a-z0-9-]+': "
                    r"method 'perfedckt' is not under `methods:`", lines[0]), lines[0]

