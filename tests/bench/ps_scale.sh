#!/usr/bin/env bash
# ps_scale: the pause a parameter-server re-partition costs
# (examples/ps_rover.py), against memcpy of the same bytes in the same run.
# BENCH_PS_MIB (default 256) MiB of parameters (table and dense rows) start
# in 2 PS partitions, each in its flash checkpoint (the trainer library's
# shared-memory slots), one process per PS.  Timed: 2 -> 3 PS, then 3 -> 2,
# each from the moment the old PS freeze (their last save) to the moment
# every new PS has built and saved its partition from the old checkpoints,
# the processes running at once as the PS of a job do.  memcpy: one copy
# of the same bytes (torch's copy_ into touched pages, best of 3).  Not in it: the master
# noticing the plan (the PS read it every --poll-s) and a new PS's start.
#   bench=ps_scale params_mib=N repartition_s=N ratio_to_memcpy=R grow_s=N shrink_s=N memcpy_s=N
set -euo pipefail
B=${B:-build}
export ROVER_TRAINER_LIB=${ROVER_TRAINER_LIB:-$(cd "$B/lib" && pwd)/librover-trainer.so}
exec /usr/bin/python3 "$(dirname "$0")/ps_scale.py" "${BENCH_PS_MIB:-256}"
