#!/usr/bin/env bash
# The checks that need a GPU, on a machine with one (CI has none: there these tests skip):
#   1. the kernels tests, whose CUDA cases fill every dtype and init kind on the GPU and compare
#      bytes and checksums with the CPU fill;
#   2. the MPI tests under mpirun with one rank per GPU, which runs the NCCL communicator's
#      collectives (tests/mpi/nccl_communicator_test.cpp);
#   3. `plan` then `materialize --device cuda --verify` of small shipped models, without a launcher
#      and under mpirun, one rank per GPU (with two GPUs or more, verified through NCCL on device
#      buffers), and Llama 2 7B's parameters verified on one GPU, timed;
#   4. an 8-rank tp 4 x dp 2 GPT-2 (ranks share GPUs when there are fewer) materialized on the GPUs
#      and on the CPU: every tensor's checksum must be the same.
#   5. the whole model state of Qwen3-0.6B (bf16) on the GPUs, the driver's measured growth within
#      10 % of the plan's prediction (--check-memory), figures printed;
#   6. a checkpoint read through NCCL (dp over every GPU, ZeRO 0): rows split across the replicas
#      and broadcast on device buffers, verified against the file;
#   7. with two GPUs or more, `rehearse --device cuda` of a tp x dp plan through NCCL (NCCL refuses
#      two ranks on one GPU: with one GPU, two ranks must be refused as bad input, exit 2);
#   8. a one-GPU rehearsal of Llama 2 7B: one layer's GEMMs timed with cuBLAS at the plan's shapes
#      beside the prediction, its attention calls timed by scripts/time_attention.py (PyTorch's
#      fused kernel, where PyTorch imports), and `calibrate --rehearsal` fitting hgx-h200's compute
#      figures to it and comparing the attention;
#   9. the CUDA fill's throughput (bench_init_fill_cuda_bench) beside PyTorch's on the same GPU
#      (scripts/bench_init_fill_cuda_torch.py, where PyTorch imports).
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
    --device cuda --verify | tee "$work/verify.txt"
  # One rank per GPU: verification's reductions and gathers ran through NCCL on device buffers.
  if [[ "$gpus" -ge 2 ]]; then grep -q "NCCL on device buffers" "$work/verify.txt"; fi
done
echo "== gpu_check.sh: Llama 2 7B parameters verified on one GPU, timed"
"$bin/shardplan" plan --model llama2-7b --cluster hgx-h200 --gpus 1 --seq 1024 --global-batch 8 \
  --out "$work/llama-verify.json" > /dev/null
start=$(date +%s.%N)
"$bin/shardplan" materialize --plan "$work/llama-verify.json" --device cuda --state params \
  --verify | tail -1
echo "llama2-7b materialize --verify: $(python3 -c "import sys; print(f\"{float(sys.argv[1]) - float(sys.argv[2]):.2f}\")" "$(date +%s.%N)" "$start") s in all"
echo "== gpu_check.sh: 8 ranks, tp 4 x dp 2, on the GPUs and on the CPU"
"$bin/shardplan" plan --model gpt2 --cluster dgx-h100 --gpus 8 --seq 1024 --global-batch 8 --tp 4 \
  --dp 2 --out "$work/tp4dp2.json" > /dev/null
for device in cuda cpu; do
  tests/mpi/mpirun.sh -np 8 "$bin/shardplan" materialize --plan "$work/tp4dp2.json" \
    --device "$device" --verify --json > "$work/$device.json"
done
python3 - "$work/cuda.json" "$work/cpu.json" <<'PY'
import json, sys
gpu, cpu = (json.load(open(f))["verify"]["tensor_checksums"] for f in sys.argv[1:])
print("GPU verification:", json.load(open(sys.argv[1]))["verify"]["transport"])
bad = [name for name in cpu if gpu.get(name) != cpu[name]]
print(f"{len(cpu) - len(bad)} of {len(cpu)} tensors have the CPU's checksum on the GPUs")
sys.exit(1 if bad or len(gpu) != len(cpu) else 0)
PY
echo "== gpu_check.sh: whole model state of qwen3-0.6b on $gpus GPU(s), measured by the driver"
"$bin/shardplan" plan --model qwen3-0.6b --cluster dgx-h100 --gpus "$gpus" --seq 1024 \
  --global-batch 8 --out "$work/state.json" > /dev/null
tests/mpi/mpirun.sh -np "$gpus" "$bin/shardplan" materialize --plan "$work/state.json" \
  --device cuda --state model --check-memory
echo "== gpu_check.sh: a checkpoint read once per replica group, broadcast through NCCL"
"$bin/shardplan" plan --model tests/data/safetensors/tiny-llama/config.json --cluster dgx-h100 \
  --gpus "$gpus" --seq 64 --global-batch "$gpus" --dp "$gpus" --zero 0 --out "$work/ck.json" \
  > /dev/null
tests/mpi/mpirun.sh -np "$gpus" "$bin/shardplan" materialize --plan "$work/ck.json" \
  --device cuda --state params --checkpoint tests/data/safetensors/tiny-llama/model.safetensors \
  --verify
if [[ "$gpus" -ge 2 ]]; then
  echo "== gpu_check.sh: rehearse a tp x dp plan through NCCL on $gpus GPUs"
  "$bin/shardplan" plan --model qwen3-0.6b --cluster dgx-h100 --gpus "$gpus" --seq 2048 \
    --global-batch "$((4 * gpus))" --tp 2 --out "$work/rehearse.json" > /dev/null
  tests/mpi/mpirun.sh -np "$gpus" "$bin/shardplan" rehearse --plan "$work/rehearse.json" \
    --device cuda
else
  echo "== gpu_check.sh: one GPU: two ranks on it are refused as bad input (NCCL refuses them)"
  "$bin/shardplan" plan --model qwen3-0.6b --cluster dgx-h100 --gpus 2 --seq 2048 \
    --global-batch 8 --tp 2 --out "$work/rehearse.json" > /dev/null
  rc=0
  tests/mpi/mpirun.sh -np 2 "$bin/shardplan" rehearse --plan "$work/rehearse.json" \
    --device cuda 2> "$work/refused.txt" || rc=$?
  grep -q "NCCL takes one rank per GPU" "$work/refused.txt" && [[ "$rc" == 2 ]] ||
    { cat "$work/refused.txt"; echo "gpu_check.sh: expected exit 2 and the one-rank-per-GPU line" >&2; exit 1; }
fi
echo "== gpu_check.sh: a one-GPU rehearsal: llama2-7b's layer GEMMs through cuBLAS, then calibrate"
"$bin/shardplan" plan --model llama2-7b --cluster hgx-h200 --gpus 1 --seq 4096 --global-batch 8 \
  --out "$work/one.json" > /dev/null
"$bin/shardplan" rehearse --plan "$work/one.json" --device cuda --out "$work/one-rehearsal.json"
if python3 -c "import torch" 2> /dev/null; then
  # Note [Rehearsed attention]: the attention calls, timed with PyTorch's fused kernel.
  python3 scripts/time_attention.py "$work/one-rehearsal.json"
fi
"$bin/shardplan" calibrate --cluster hgx-h200 --rehearsal "$work/one-rehearsal.json" \
  --out "$work/h200-rehearsed.json"
echo "== gpu_check.sh: llama2-7b's parameters filled on the GPU (init time)"
"$bin/shardplan" materialize --plan "$work/one.json" --device cuda --state params
if [[ -x "$bin/bench_init_fill_cuda_bench" ]]; then
  echo "== gpu_check.sh: CUDA fill throughput"
  "$bin/bench_init_fill_cuda_bench" --benchmark_counters_tabular=true
  if python3 -c "import torch" 2> /dev/null; then
    python3 scripts/bench_init_fill_cuda_torch.py --gib 4 --repetitions 10
  fi
fi
echo "== gpu_check.sh: all GPU checks passed (${SECONDS}s)"
