#!/usr/bin/env bash
# Suite for the parameter-server mode (examples/ps_rover.py, design in
# examples/README-ps.md): tests/scripts/ps_layout.py builds every
# re-partition from 1..5 PS to 1..5 PS and checks each PS's rows;
# tests/scripts/ps_job.py runs the example under the
# real rover-master with plans from a stand-in brain (2 PS / 2 workers to
# 3 / 4 and back, ps-1 killed with SIGKILL in between, then ps-0 migrated)
# and prints one "ok"/"not ok" line per check: the target loss, every
# sample trained once, every row's applied updates equal to the shard
# log's.  Needs Debian's
# PyTorch (/usr/bin/python3): a skip without it, a failure under CI=true.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top" || exit 1
export ROVER_BIN_DIR=${ROVER_BIN_DIR:-$top/build/bin}
if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
	if [ "${CI:-}" = true ]; then
		echo "not ok - /usr/bin/python3 imports torch (python3-torch, scripts/install-deps.sh)"
		exit 1
	fi
	echo "SKIP: ps job: no PyTorch for /usr/bin/python3: NOT TESTED"
	echo "ok - # SKIP ps job"
	exit 0
fi
rc=0
/usr/bin/python3 tests/scripts/ps_layout.py 2>/dev/null || rc=1
/usr/bin/python3 tests/scripts/ps_job.py || rc=1
exit $rc
