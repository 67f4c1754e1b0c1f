#!/usr/bin/env bash
# Llama-3-70B on meta, shardplan vs PyTorch in one run: builds bench_training_trace_bench if needed,
# runs BM_BuildAndTrace_Llama3_70B_HF (build from configs/models/llama3-70b.json + trace one
# training step: forward, saved tensors, backward, optimizer, activation memory) with repetitions,
# then scripts/bench_models_torch.py builds the same architecture in PyTorch on the meta device and
# runs its forward to the loss, and prints both times, the ratio, and shardplan's peak RSS against
# the issue's targets (< 3 ms on one core, < 50 MB, >= 10x). Both sides are pinned to one core
# (taskset) when available. CI does not run this.
#
#   bash scripts/bench_models.sh [--out build/bench/models.json] [--build-dir build]
#        [--repetitions 10] [--core 1]
#
# PyTorch comes from Debian's /usr/bin/python3 (python3-torch 1.13): the pyenv python3 on PATH has no
# torch. Override with SHARDPLAN_TORCH_PYTHON=/path/to/python.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

build_dir=build
out=
repetitions=10
core=1
torch_python=${SHARDPLAN_TORCH_PYTHON:-/usr/bin/python3}

usage() { sed -n '2,13p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --build-dir) build_dir=$2; shift 2 ;;
    --repetitions) repetitions=$2; shift 2 ;;
    --core) core=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "bench_models.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
out=${out:-$build_dir/bench/models.json}
raw="$(dirname "$out")/models_shardplan.json"
mkdir -p "$(dirname "$out")"

# ---- build (incremental; configures with the default preset when build/ is not configured) ----
source scripts/lib/build_bench.sh
bench=$(build_bench "$build_dir" bench_training_trace_bench bench_models.sh)

pin=()
if command -v taskset >/dev/null 2>&1 && [[ "$core" -lt "$(nproc)" ]]; then pin=(taskset -c "$core"); fi

# ---- shardplan: only this benchmark in the process, so its peak RSS is this run's ----
load_before=$(uptime)
echo "== load before: $load_before" >&2
echo "== ${pin[*]} $bench, $repetitions repetitions -> $raw" >&2
"${pin[@]}" "$bench" --benchmark_filter='^BM_BuildAndTrace_Llama3_70B_HF/' \
  --benchmark_repetitions="$repetitions" --benchmark_report_aggregates_only=true \
  --benchmark_format=json >"$raw"
load_after=$(uptime)
echo "== load after shardplan run: $load_after" >&2

# ---- PyTorch, and the table ----
torch_args=()
py=$torch_python
if ! "$torch_python" -c 'import torch' >/dev/null 2>&1; then
  echo "bench_models.sh: torch is not importable by $torch_python; printing shardplan's numbers only" >&2
  torch_args=(--no-torch)
  [[ -x "$py" ]] || py=$(command -v python3)
fi
rc=0
"${pin[@]}" "$py" scripts/bench_models_torch.py --shardplan-json "$raw" --out "$out" \
  --repetitions "$repetitions" --load-before "$load_before" --load-after "$load_after" \
  "${torch_args[@]}" || rc=$?
echo "== load after PyTorch run: $(uptime)" >&2
exit "$rc"
