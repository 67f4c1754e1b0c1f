#!/usr/bin/env bash
# Installs what shardplan needs to build and test (Debian 12 / Ubuntu 24.04 and later), then configures
# the default preset into build/ and builds build/bin/shardplan. Idempotent: when every package is
# already there apt is skipped and the build is incremental. CUDA, NCCL and torch are not installed:
# the build detects CUDA/NCCL when present, and the PyTorch oracle's data are checked in.
#
#   bash scripts/setup.sh           # install + build the shardplan binary (the quick start)
#   bash scripts/setup.sh --all     # ... and every test suite and benchmark (scripts/test.sh does)
#   bash scripts/setup.sh --werror  # compiler warnings in shardplan's code are errors (CI)
#   bash scripts/setup.sh --asan    # also build the asan-ubsan preset (build-asan/)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

build_asan=0
build_all=0
werror=OFF
for arg in "$@"; do
  case "$arg" in
    --asan) build_asan=1 ;;
    --all) build_all=1 ;;
    --werror) werror=ON ;;
    -h | --help) sed -n '2,10p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "setup.sh: unknown argument '$arg' (expected --all, --werror, --asan or --help)" >&2; exit 2 ;;
  esac
done

# Build and test dependencies; keep in sync with the find_package calls in CMakeLists.txt.
packages=(
  build-essential cmake
  libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libcli11-dev libboost-graph-dev
  openmpi-bin libopenmpi-dev
  python3
)
if ((build_all)); then
  # clang builds the fuzz preset (scripts/fuzz.sh), which only the test command runs; the quick start
  # skips it (about 37 MB to download and 230 MB to unpack). libFuzzer's runtime is a separate
  # package that clang only recommends (libclang-common-<N>-dev -> libclang-rt-<N>-dev), so
  # --no-install-recommends skips it. libclang-rt-dev depends on the libclang-rt-<N>-dev of the
  # distribution's default clang (libclang-rt-14-dev on Debian 12), the same N as the `clang` package.
  packages+=(clang libclang-rt-dev)
fi

missing=()
for pkg in "${packages[@]}"; do
  if [[ "$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)" != "install ok installed" ]]; then
    missing+=("$pkg")
  fi
done

if ((${#missing[@]} > 0)); then
  if ! command -v apt-get >/dev/null; then
    echo "setup.sh: missing ${missing[*]} and no apt-get here; install them another way" >&2
    exit 1
  fi
  as_root=()
  if ((EUID != 0)); then
    if ! command -v sudo >/dev/null; then
      echo "setup.sh: need root (or sudo) to install: ${missing[*]}" >&2
      exit 1
    fi
    as_root=(sudo)
  fi
  echo "setup.sh: installing ${missing[*]}"
  # Lock timeout: wait for another apt run (unattended upgrades, a provisioning step) to finish.
  apt=("${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600)
  "${apt[@]}" update
  "${apt[@]}" install -y --no-install-recommends "${missing[@]}"
fi

# CMakePresets.json is version 6, read by CMake 3.25 and later.
cmake_version=$(cmake --version | sed -n 's/^cmake version \([0-9.]*\).*/\1/p')
if [[ "$(printf '%s\n' 3.25 "$cmake_version" | sort -V | head -n1)" != 3.25 ]]; then
  echo "setup.sh: CMake $cmake_version is too old; shardplan needs 3.25 or later" >&2
  exit 1
fi

jobs=$(nproc)
cmake --preset default -DSHARDPLAN_WERROR="$werror"
if ((build_all)); then
  cmake --build --preset default -j "$jobs"
else
  # The quick start needs only the binary: tests and benchmarks are built by scripts/test.sh.
  cmake --build --preset default -j "$jobs" --target shardplan
fi
if ((build_asan)); then
  cmake --preset asan-ubsan -DSHARDPLAN_WERROR="$werror"
  cmake --build --preset asan-ubsan -j "$jobs"
fi
echo "setup.sh: built build/bin/shardplan"
