#!/usr/bin/env bash
# stream: records a second through the trainer library with offsets
# committed (rover.StreamSampler: the master's tasks, each task's records
# read through the bridge's chunks with XRANGE, each task reported done)
# against a plain XREADGROUP/XACK consumer of the same Redis stream, in the
# same run: a private redis-server (unix socket), rover-master with a
# streaming dataset, the rover.redis_feed bridge.  Each of 3 pairs adds
# BENCH_STREAM_RECORDS (default 20000) records to a partition of its own
# (XADD *), waits until the bridge told the master their end, then times
# the two consumers on that stream one after the other (which one first
# alternates), both taking BENCH_STREAM_BATCH (default 32) records a call;
# no model: the cost of the data path alone.  The tasks are
# BENCH_STREAM_SHARD (default 2048) records.  rps and raw_rps are the
# medians of the pairs, ratio the median of the pairs' ratios.  Last line:
#   bench=stream rps=N raw_rps=N ratio=R
set -euo pipefail
B=${B:-build}
BIN=${ROVER_BIN_DIR:-$(cd "$B/bin" && pwd)}
export ROVER_TRAINER_LIB=${ROVER_TRAINER_LIB:-$(cd "$B/lib" && pwd)/librover-trainer.so}
export PYTHONPATH=$(pwd)/python${PYTHONPATH:+:$PYTHONPATH}
exec /usr/bin/python3 tests/bench/stream_bench.py "$BIN" "${BENCH_STREAM_RECORDS:-20000}" \
  "${BENCH_STREAM_BATCH:-32}"
