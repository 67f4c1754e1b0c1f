#!/usr/bin/env bash
# The checks that need a GPU, on a machine with one (CI has none: there these tests skip):
#   1. the kernels tests, whose CUDA cases fill every dtype and init kind on the GPU and compare
#      bytes and checksums with the CPU fill;
#   2. the MPI tests under mpirun with one rank per GPU, which runs the NCCL communicator's
#      collectives (tests/mpi/nccl_communicator_test.cpp);
#   3. `plan` then `materialize --device cuda --verify` of small shipped models, without a launcher
#      and under mpirun, one rank per GPU.
#   bash scripts/gpu_check.sh [build-dir]          # default: build (the default preset's folder)
# Exits non-zero on the first failure. Needs a build with CUDA, NCCL and MPI (`shardplan env`).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
bin=${1:-build}/bin
gpus=$(nvidia-smi --list-gpus | wc -l)
[[ "$gpus" -ge 1 ]] || { echo "gpu_check.sh: no GPU visible (nvidia-smi lists none)" >&2; exit 2; }
"$bin/shardplan" env | grep -E '^(cuda|nccl|mpi) +yes$' | wc -l | grep -qx 3 ||
  { echo "gpu_check.sh: $bin/shardplan was built without CUDA, NCCL or MPI (see: shardplan env)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== gpu_check.sh: kernels tests on $gpus GPU(s)"
"$bin/shardplan_kernels_tests" --gtest_brief=1
echo "== gpu_check.sh: MPI and NCCL tests, $gpus rank(s)"
tests/mpi/mpirun.sh -np "$gpus" "$bin/shardplan_mpi_tests" --gtest_brief=1
for model in gpt2 pythia-160m; do
  echo "== gpu_check.sh: $model on $gpus GPU(s)"
  "$bin/shardplan" plan --model "$model" --cluster dgx-h100 --gpus "$gpus" --seq 1024 \
    --global-batch 8 --out "$work/$model.json" > /dev/null
  if [[ "$gpus" == 1 ]]; then
    "$bin/shardplan" materialize --plan "$work/$model.json" --device cuda --verify
  fi
  tests/mpi/mpirun.sh -np "$gpus" "$bin/shardplan" materialize --plan "$work/$model.json" \
    --device cuda --verify
done
echo "== gpu_check.sh: all GPU checks passed (${SECONDS}s)"
