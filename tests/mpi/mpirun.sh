#!/usr/bin/env bash
# mpirun for tests and examples on one machine: more ranks than cores (--oversubscribe), and as
# root in containers and CI (Open MPI refuses root without --allow-run-as-root).
#   tests/mpi/mpirun.sh -np 4 build/bin/shardplan materialize --plan plan.json --verify
set -euo pipefail
flags=(--oversubscribe)
if [[ "$(id -u)" == 0 ]]; then flags+=(--allow-run-as-root); fi
exec mpirun "${flags[@]}" "$@"
