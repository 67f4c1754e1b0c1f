#!/usr/bin/env bash
# Builds the libFuzzer harnesses (tests/fuzz/*_fuzz.cpp; fuzz preset, clang, ASan + UBSan, into
# build-fuzz/) and runs each one for SECONDS (default 60) on a copy of its checked-in seed corpus.
# Prints one summary line per harness and exits non-zero if any harness found a crash, an escaped
# exception, a sanitizer report, a leak, a timeout or an out-of-memory.
#
#   bash scripts/fuzz.sh                    # every harness, 60 s each
#   bash scripts/fuzz.sh 600                # every harness, 10 minutes each
#   bash scripts/fuzz.sh 30 cluster cli_args  # only these harnesses
#   bash scripts/fuzz.sh --list             # the harness names
#
# Seeds stay untouched in tests/fuzz/corpus/<name>/; libFuzzer grows its working copy in
# build-fuzz/corpus/<name>/ (kept between runs; delete it to start over from the seeds). A failing
# input is written to build-fuzz/artifacts/<name>-crash-<sha1> (or leak-, timeout-, oom-); replay it
# with build-fuzz/bin/fuzz_<name> <file>. Full logs: build-fuzz/logs/<name>.log.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

usage() { sed -n '2,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

harnesses() {
  local f
  for f in tests/fuzz/*_fuzz.cpp; do
    f=${f##*/}
    echo "${f%_fuzz.cpp}"
  done
}

# Longest input per harness: a little above the largest seed, so the fuzzer explores variations of
# real files without spending its time on megabyte inputs.
max_len() {
  case "$1" in
    cli_args) echo 256 ;;
    cli_numbers) echo 512 ;;
    plan_file) echo 65536 ;;
    model_config) echo 4096 ;;
    cluster | nccl_tests_log) echo 8192 ;;
    safetensors) echo 16384 ;;
    safetensors_index) echo 32768 ;;
    describe) echo 65536 ;;
    *) echo 4096 ;;
  esac
}

seconds=60
selected=()
for arg in "$@"; do
  case "$arg" in
    --list) harnesses; exit 0 ;;
    -h | --help) usage; exit 0 ;;
    -*) echo "fuzz.sh: unknown option '$arg' (expected SECONDS, harness names, --list or --help)" >&2; exit 2 ;;
    *)
      if [[ "$arg" =~ ^[0-9]+$ ]]; then
        seconds=$arg
      elif harnesses | grep -qx -- "$arg"; then
        selected+=("$arg")
      else
        echo "fuzz.sh: no harness '$arg' (scripts/fuzz.sh --list names them)" >&2
        exit 2
      fi
      ;;
  esac
done
if ((${#selected[@]} == 0)); then
  mapfile -t selected < <(harnesses)
fi
if ((seconds < 1)); then
  echo "fuzz.sh: SECONDS must be at least 1" >&2
  exit 2
fi

jobs=$(nproc)
echo "== fuzz.sh: building the fuzz preset (build-fuzz/)"
if ! command -v clang++ >/dev/null; then
  echo "fuzz.sh: clang++ not found; 'bash scripts/setup.sh --all' installs clang and libFuzzer" >&2
  exit 1
fi
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "$jobs"

out=build-fuzz
mkdir -p "$out/artifacts" "$out/logs"
# Leaks are findings; UBSan stops at the first report (-fno-sanitize-recover=all) with a stack.
export ASAN_OPTIONS="detect_leaks=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"

failed=0
summary=()
for name in "${selected[@]}"; do
  bin="$out/bin/fuzz_$name"
  corpus="$out/corpus/$name"
  log="$out/logs/$name.log"
  mkdir -p "$corpus"
  # The working copy: seeds added (never overwriting what the fuzzer found), so the checked-in
  # corpus never grows.
  if [[ -d "tests/fuzz/corpus/$name" ]]; then
    cp -n "tests/fuzz/corpus/$name"/* "$corpus"/ 2>/dev/null || true
  fi
  flags=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len="$(max_len "$name")"
         -artifact_prefix="$out/artifacts/$name-" -print_final_stats=1)
  if [[ -f "tests/fuzz/$name.dict" ]]; then
    flags+=(-dict="tests/fuzz/$name.dict")
  fi
  echo "== fuzz.sh: fuzz_$name for ${seconds}s (log: $log)"
  start=$SECONDS
  rc=0
  "$bin" "${flags[@]}" "$corpus" >"$log" 2>&1 || rc=$?
  elapsed=$((SECONDS - start))
  runs=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$log" | tail -n1)
  if [[ -z "$runs" ]]; then
    runs=$(grep -o '^#[0-9]*' "$log" | tail -n1 | tr -d '#' || true)
  fi
  result=ok
  if ((rc != 0)); then
    failed=1
    if grep -q 'ERROR: libFuzzer: timeout' "$log"; then
      result=timeout
    elif grep -q 'ERROR: libFuzzer: out-of-memory' "$log"; then
      result=oom
    elif grep -q 'ERROR: LeakSanitizer' "$log"; then
      result=leak
    elif grep -q 'runtime error:' "$log"; then
      result=ub
    else
      result=crash
    fi
    artifact=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n1)
    result="$result (exit $rc${artifact:+, input $artifact})"
    echo "-- last lines of $log:"
    tail -n 40 "$log" | sed 's/^/   /'
  fi
  summary+=("$(printf '%-24s runs %10s  %5ss  %s' "fuzz_$name" "${runs:-?}" "$elapsed" "$result")")
done

echo "== fuzz.sh: summary (${seconds}s per harness)"
printf '%s\n' "${summary[@]}"
if ((failed)); then
  echo "== fuzz.sh: FAILED: inputs are in $out/artifacts/" >&2
  exit 1
fi
echo "== fuzz.sh: no findings"
