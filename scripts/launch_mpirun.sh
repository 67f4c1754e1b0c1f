#!/usr/bin/env bash
# Materialize a plan on a cluster with Open MPI's mpirun and a hostfile (docs/launching.md).
#   bash scripts/launch_mpirun.sh hosts.txt plan.json [extra materialize flags...]
# hosts.txt lists one node per line with one slot per GPU, in the order ranks should fill them:
#   node001 slots=8
#   node002 slots=8
# Ranks fill each node before the next (--map-by slot), the layout the plan was priced with; the
# world size is read from the plan, so -np always matches it.
set -euo pipefail
[[ $# -ge 2 ]] || { sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
hostfile=$1
plan=$2
shift 2
shardplan=${SHARDPLAN:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/build/bin/shardplan}
world=$(python3 -c 'import json,math,sys; print(math.prod(json.load(open(sys.argv[1]))["mesh"]["shape"]))' "$plan")
flags=(--hostfile "$hostfile" --map-by slot -np "$world")
if [[ "$(id -u)" == 0 ]]; then flags+=(--allow-run-as-root); fi
exec mpirun "${flags[@]}" "$shardplan" materialize --plan "$plan" "$@"
