# Sourced by the scripts/bench_*.sh drivers: builds one benchmark binary incrementally.
#   source scripts/lib/build_bench.sh
#   bench=$(build_bench build bench_meta_ops_bench bench_meta_ops.sh)
# Configures with the default preset when build/ is not configured yet (another build dir gets a
# plain RelWithDebInfo configure), builds the target, and prints the binary's path; exits 1 with
# one line naming the caller when the binary was not built (Google Benchmark missing).
build_bench() {
  local build_dir=$1 target=$2 caller=$3
  if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
    if [[ "$build_dir" == build ]]; then
      cmake --preset default >&2
    else
      cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo >&2
    fi
  fi
  cmake --build "$build_dir" --target "$target" -j "$(nproc)" >&2
  local bench="$build_dir/bin/$target"
  if [[ ! -x "$bench" ]]; then
    echo "$caller: $bench was not built (is libbenchmark-dev installed?)" >&2
    exit 1
  fi
  echo "$bench"
}
