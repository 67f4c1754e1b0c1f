#!/usr/bin/env bash
# Meta-op dispatch cost, shardplan vs PyTorch in one run: builds bench_meta_ops_bench if needed, runs
# it with repetitions (Google Benchmark JSON), times the same ops on device='meta' in PyTorch with
# scripts/bench_torch_meta.py, and prints one table (op, shardplan ns, PyTorch ns, ratio) that it also
# writes as JSON. Without torch it says so and prints shardplan's numbers only. CI does not run this.
#
#   bash scripts/bench_meta_ops.sh [--out build/bench/meta_ops.json] [--build-dir build]
#        [--repetitions 10] [--min-time 0.1] [--clock wall|cpu] [--filter REGEX]
#
# PyTorch comes from Debian's /usr/bin/python3 (python3-torch 1.13): the pyenv python3 on PATH has no
# torch. Override with SHARDPLAN_TORCH_PYTHON=/path/to/python.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

build_dir=build
out=
repetitions=10
min_time=0.1   # seconds per repetition, each side
clock=wall     # which clock the table shows; the JSON holds wall and CPU time
filter=
torch_python=${SHARDPLAN_TORCH_PYTHON:-/usr/bin/python3}

usage() { sed -n '2,11p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --build-dir) build_dir=$2; shift 2 ;;
    --repetitions) repetitions=$2; shift 2 ;;
    --min-time) min_time=$2; shift 2 ;;
    --clock) clock=$2; shift 2 ;;
    --filter) filter=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "bench_meta_ops.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
out=${out:-$build_dir/bench/meta_ops.json}
raw="$(dirname "$out")/meta_ops_shardplan.json"
mkdir -p "$(dirname "$out")"

# ---- build (incremental; configures with the default preset when build/ is not configured) ----
source scripts/lib/build_bench.sh
bench=$(build_bench "$build_dir" bench_meta_ops_bench bench_meta_ops.sh)

# ---- shardplan ----
load_before=$(uptime)
echo "== load before: $load_before" >&2
echo "== $bench, $repetitions repetitions -> $raw" >&2
"$bench" --benchmark_repetitions="$repetitions" --benchmark_report_aggregates_only=true \
  --benchmark_min_time="$min_time" --benchmark_format=json \
  ${filter:+--benchmark_filter="$filter"} >"$raw"
load_after=$(uptime)
echo "== load after shardplan run: $load_after" >&2

# ---- PyTorch, and the table ----
torch_args=()
py=$torch_python
if ! "$torch_python" -c 'import torch' >/dev/null 2>&1; then
  echo "bench_meta_ops.sh: torch is not importable by $torch_python; printing shardplan's numbers only" >&2
  torch_args=(--no-torch)
  [[ -x "$py" ]] || py=$(command -v python3)
fi
rc=0
"$py" scripts/bench_torch_meta.py --shardplan-json "$raw" --out "$out" \
  --repetitions "$repetitions" --min-time "$min_time" --clock "$clock" \
  --load-before "$load_before" --load-after "$load_after" "${torch_args[@]}" || rc=$?
echo "== load after PyTorch run: $(uptime)" >&2
exit "$rc"
