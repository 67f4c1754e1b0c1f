#!/usr/bin/env bash
# Materialize a plan under Slurm (docs/launching.md). Submit with the plan's world size, one task
# per GPU, tasks filling each node in order (block distribution, the layout the plan was priced
# with):
#   sbatch --nodes=2 --ntasks-per-node=8 --gpus-per-node=8 scripts/launch_srun.sh plan.json --verify
#SBATCH --job-name=shardplan-materialize
#SBATCH --distribution=block:block
set -euo pipefail
[[ $# -ge 1 ]] || { sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
plan=$1
shift
shardplan=${SHARDPLAN:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/build/bin/shardplan}
# --mpi=pmix lets Open MPI or MPICH built with PMIx read their ranks from Slurm.
exec srun --mpi=pmix --distribution=block:block "$shardplan" materialize --plan "$plan" "$@"
