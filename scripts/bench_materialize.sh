#!/usr/bin/env bash
# Materialization end to end, the figures docs/launching.md quotes: GPT-2 planned on 4 CPU ranks
# and materialized under mpirun (without and with --verify), and Llama-3.1-405B planned on 16,384
# H100s and checked with --dry-run on virtual ranks. Each is run --runs times; the best and median
# wall times are printed. CI does not run this.
#
#   bash scripts/bench_materialize.sh [--build-dir build] [--runs 3]
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

build_dir=build
runs=3
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) build_dir=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    -h | --help) sed -n '2,7p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench_materialize.sh: unknown argument '$1' (expected --build-dir, --runs or --help)" >&2
       exit 2 ;;
  esac
done
bin=$build_dir/bin/shardplan
[[ -x "$bin" ]] || { echo "bench_materialize.sh: no $bin (bash scripts/setup.sh builds it)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$bin" plan --model gpt2 --cluster cpu-local --gpus 4 --seq 512 --global-batch 8 \
  --out "$work/gpt2.json" >/dev/null
"$bin" plan --model llama3.1-405b --cluster dgx-h100 --gpus 16384 --seq 8192 --global-batch 2048 \
  --out "$work/405b.json" >/dev/null

# time_runs <label> <command...>: wall seconds of each run, then best and median.
time_runs() {
  local label=$1
  shift
  local times=()
  for ((i = 0; i < runs; ++i)); do
    local t0 t1
    t0=$(date +%s%N)
    "$@" >/dev/null
    t1=$(date +%s%N)
    times+=("$(((t1 - t0) / 1000))")  # microseconds
  done
  printf '%s\n' "${times[@]}" | sort -n | awk -v label="$label" '
    { t[NR] = $1 / 1e6 }
    END { printf "%-44s best %7.3f s   median %7.3f s   (%d runs)\n", label, t[1], t[int((NR + 1) / 2)], NR }'
}

mpi=(tests/mpi/mpirun.sh -np 4 "$bin" materialize --plan "$work/gpt2.json" --device cpu)
time_runs "gpt2, 4 CPU ranks, materialize" "${mpi[@]}"
time_runs "gpt2, 4 CPU ranks, materialize --verify" "${mpi[@]}" --verify
time_runs "llama3.1-405b, 16,384 ranks, --dry-run" "$bin" materialize --plan "$work/405b.json" --dry-run
