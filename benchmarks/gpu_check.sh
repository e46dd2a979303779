#!/usr/bin/env bash
# The GPU check, one script for a lent CUDA machine (benchmarks/README.md, "The GPU check").
#
#   bash benchmarks/gpu_check.sh [OUT]
#
# Runs from the repository root with the machine's python3 (PyTorch with CUDA, pandas,
# pyarrow, matplotlib, scikit-learn, PyYAML; no Snakemake, no jsonschema needed) and the
# package from src/. Needs Debian's Fashion-MNIST idx .gz files in .gpu-carry/fashion-mnist/
# (git-ignored; copy them there with `bash benchmarks/gpu_check.sh --stage` on a machine with
# /usr/share/datasets/fashion-mnist, and carry that folder). Writes its logs under OUT
# (default $OUT, else /tmp/gpu-check) and prints, in order:
#   1. the machine: GPU, driver, torch and CUDA versions;
#   2. the tests that take the CUDA path where CUDA is present (device leases, the
#      vectorised local training);
#   3. bench_gpu.py: one round of all clients at once (vmap) against the per-client loop
#      at K = 10 and 100 clients of the CNN, and every method's round at 100 clients on
#      both paths (agreement of the two paths, speed-up, peak GPU memory);
#   4. gpu_experiment.py: FedAMP's practical non-IID experiment of config.yaml on the full
#      Fashion-MNIST (20 clients, the 784-200-200 MLP, one training seed), prepared,
#      partitioned and trained by the workflow's job commands on the GPU, and a few
#      rounds of the same on this machine's CPU cores: seconds per round on each.
# Each step has its own time limit so the whole stays within about 9 minutes; a step that
# fails is reported and the next one still runs; the exit status is the number of failed
# steps.
set -uo pipefail
cd "$(dirname "$0")/.."
CARRY=.gpu-carry/fashion-mnist

if [ "${1:-}" = "--stage" ]; then
  mkdir -p "$CARRY"
  cp /usr/share/datasets/fashion-mnist/*.gz "$CARRY"/
  du -sh "$CARRY"
  exit 0
fi

LOGS=${1:-${OUT:-/tmp/gpu-check}}
mkdir -p "$LOGS"
export PYTHONPATH="$PWD/src:$PWD/benchmarks${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
failed=0

step() {  # step NAME SECONDS COMMAND...: run with a time limit, log under $LOGS/NAME.log
  local name=$1 limit=$2 start=$SECONDS status=0
  shift 2
  printf '\n======== %s (limit %ss) ========\n' "$name" "$limit"
  timeout --signal=TERM --kill-after=10 "$limit" "$@" 2>&1 | tee "$LOGS/$name.log" || status=$?
  printf '======== %s: exit %d after %ds ========\n' "$name" "$status" $((SECONDS - start))
  [ "$status" -eq 0 ] || failed=$((failed + 1))
}

step machine 60 bash -c "nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv;
  $PY -c 'import torch; print(\"torch\", torch.__version__, \"CUDA\", torch.version.cuda,
  \"available:\", torch.cuda.is_available(), torch.cuda.get_device_name() if torch.cuda.is_available() else \"\")'"

step cuda-tests 120 "$PY" -m pytest -q -p no:cacheprovider -n 4 \
  tests/unit/test_devices.py tests/unit/test_local_training.py

step bench-gpu 240 "$PY" benchmarks/bench_gpu.py --ks 10,100 --method-clients 100

if [ -d "$CARRY" ]; then
  step fedamp-practical-fashion 180 "$PY" benchmarks/gpu_experiment.py \
    --experiment fedamp_practical_fashion --methods fedamp,fedavg --mirror "$CARRY" \
    --work "$LOGS/experiment" --devices "${DEVICES:-cuda,cpu}" --rounds 20 --cpu-rounds 3
else
  echo "no $CARRY: run 'bash benchmarks/gpu_check.sh --stage' here and carry $CARRY"
  failed=$((failed + 1))
fi

printf '\nGPU check: %d step(s) failed; logs in %s\n' "$failed" "$LOGS"
exit "$failed"
