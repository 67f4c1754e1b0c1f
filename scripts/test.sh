#!/usr/bin/env bash
# Installs, builds and runs every test: the default preset (RelWithDebInfo), then the same tests under
# AddressSanitizer + UBSan (asan-ubsan preset, no CUDA), then each fuzz harness briefly. Both builds
# treat compiler warnings in shardplan's code as errors. Exits non-zero on the first failure.
#   bash scripts/test.sh                      # everything
#   SHARDPLAN_SKIP_ASAN=1 bash scripts/test.sh  # skip the sanitizer build and run
#   SHARDPLAN_SKIP_FUZZ=1 bash scripts/test.sh  # skip the fuzz harnesses (scripts/fuzz.sh, clang)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
jobs=$(nproc)

bash scripts/setup.sh --all --werror
echo "== test.sh: default preset"
ctest --preset default --output-on-failure -j "$jobs"

if [[ "${SHARDPLAN_SKIP_ASAN:-0}" != 1 ]]; then
  echo "== test.sh: asan-ubsan preset"
  cmake --preset asan-ubsan -DSHARDPLAN_WERROR=ON
  cmake --build --preset asan-ubsan -j "$jobs"
  ctest --preset asan-ubsan --output-on-failure -j "$jobs"
fi

if [[ "${SHARDPLAN_SKIP_FUZZ:-0}" != 1 ]]; then
  echo "== test.sh: fuzz harnesses, 15 s each"
  bash scripts/fuzz.sh 15
fi
echo "== test.sh: all tests passed (${SECONDS}s)"
