#!/usr/bin/env bash
# Suite for scripts/check-layers.sh: a small tree that follows the layers
# passes; each forbidden edge, added to it alone, fails with the file and
# line named.  Prints one "ok"/"not ok" line per check (tests/run.sh counts
# them) and exits 1 if any failed.
set -u
. "$(dirname "$0")/suite.sh"
suite_init layers

# A tree that keeps the layers: every kind of allowed edge once.
good_tree() {
	rm -rf "$tmp/t" && mkdir -p "$tmp/t" && cd "$tmp/t" || exit 1
	mkdir -p algorithms common scaling brain master tests/lib tests/common tests/bench
	printf '#include <math.h>\n' >algorithms/rover_alg.h
	printf '#include "alg_internal.h"\n' >algorithms/fit.c
	printf '#include "rover_alg.h"\n' >algorithms/alg_internal.h
	printf '#include <stdio.h>\n' >common/log.h
	printf '#include "log.h"\n#include "stdint.h"\n' >common/log.c
	printf '#include "log.h"\n#include "rover_alg.h"\n' >brain/brain.h
	printf '#include "brain.h"\n#include "log.h"\n' >brain/store.c
	printf '#include "rover_alg.h"\n#include "log.h"\n' >scaling/rover_scaling.h
	printf '#include "rover_scaling.h"\n' >scaling/scaling.c
	printf '#include "rover_scaling.h"\n' >brain/planner.c
	printf '#include "../common/log.h"\n#include "rover_alg.h"\n' >master/main.c
	printf '/* #include "testutil.h" */\n// #include "brain.h"\n' >master/rdzv.c
	printf '#include "log.h"\n' >master/rdzv.h
	printf '#include "rdzv.h"\n' >master/master.h
	printf '#include "master.h"\n#include "rdzv.h"\n' >master/state.c
	printf '#include "master.h"\n' >master/plans.h
	printf '#include "plans.h"\n' >master/api.h
	printf '#include "log.h"\n' >tests/lib/testutil.h
	printf '#include "testutil.h"\n#include "log.h"\n' >tests/common/check_log.c
	printf '#include "brain/brain.h"\n#include "testutil.h"\n' >tests/bench/b.c
	mkdir -p pg
	printf '#include "log.h"\n' >pg/db.h
	printf '#include "db.h"\n#include "log.h"\n' >pg/db.c
	printf '#include "db.h"\n' >brain/api.c
	printf '#include "db.h"\n' >tests/common/check_db.c
	mkdir -p trainer tests/trainer
	printf '#include "log.h"\n' >trainer/rover_trainer.h
	printf '#include "rover_trainer.h"\n' >trainer/ckpt.c
	printf '#include "rover_trainer.h"\n#include "testutil.h"\n' >tests/trainer/check_t.c
}

# expect_fail NAME FILE LINE TEXT: add the line to FILE, run, want a failure
# naming FILE:LINE.
expect_fail() {
	local name=$1 file=$2 text=$3 out line
	good_tree
	mkdir -p "$(dirname "$file")"
	printf '%s\n' "$text" >>"$file"
	line=$(wc -l <"$file")
	if out=$("$check" . 2>&1); then
		echo "not ok - $name: passed"
		failed=1
	elif ! grep -q "^$file:$line: " <<<"$out"; then
		echo "not ok - $name: no $file:$line in: $out"
		failed=1
	else
		echo "ok - $name"
	fi
}

good_tree
if out=$("$check" . 2>&1); then echo "ok - a tree that keeps the layers passes"; else
	echo "not ok - a tree that keeps the layers fails: $out"; failed=1; fi

expect_fail "algorithms -> common" algorithms/fit.c '#include "log.h"'
expect_fail "algorithms -> common by a relative path" algorithms/fit.c '#include "../common/log.h"'
expect_fail "algorithms header -> daemon" algorithms/rover_alg.h '#include "brain.h"'
expect_fail "algorithms -> tests" algorithms/fit.c '  #  include "testutil.h"'
expect_fail "common -> algorithms" common/log.c '#include "rover_alg.h"'
expect_fail "common -> daemon" common/log.c '#include "brain/brain.h"'
expect_fail "daemon -> another daemon" master/main.c '#include "brain.h"'
expect_fail "daemon -> another daemon by a relative path" master/main.c '#include "../brain/brain.h"'
expect_fail "daemon -> tests/lib" brain/store.c '#include "testutil.h"'
expect_fail "algorithms -> scaling" algorithms/fit.c '#include "rover_scaling.h"'
expect_fail "common -> scaling" common/log.c '#include "../scaling/rover_scaling.h"'
expect_fail "scaling -> daemon" scaling/scaling.c '#include "brain.h"'
expect_fail "scaling -> tests/lib" scaling/scaling.c '#include "testutil.h"'
expect_fail "a directory that is not a daemon -> scaling" examples/x.c '#include "rover_scaling.h"'
expect_fail "a new daemon -> brain" monitor/main.c '#include "brain.h"'
expect_fail "trainer -> algorithms" trainer/ckpt.c '#include "rover_alg.h"'
expect_fail "trainer -> scaling" trainer/ckpt.c '#include "rover_scaling.h"'
expect_fail "trainer -> daemon" trainer/ckpt.c '#include "../brain/brain.h"'
expect_fail "common -> trainer" common/log.c '#include "../trainer/rover_trainer.h"'
expect_fail "a daemon but the brain -> pg" master/main.c '#include "db.h"'
expect_fail "pg -> algorithms" pg/db.c '#include "rover_alg.h"'
expect_fail "common -> pg" common/log.c '#include "../pg/db.h"'
expect_fail "scaling -> pg" scaling/scaling.c '#include "../pg/db.h"'
expect_fail "master: a state machine -> the job state" master/rdzv.c '#include "master.h"'
expect_fail "master: the job state -> the planner" master/state.c '#include "plans.h"'
expect_fail "master: the job state -> the API" master/state.c '#include "api.h"'
expect_fail "master: a file without a tier" master/extra.c '#include "rdzv.h"'
ROVER_DAEMONS=gateway expect_fail "a daemon named in ROVER_DAEMONS -> brain" gateway/main.c '#include "brain.h"'

# The message says what the header is and what the layer may include.
good_tree
printf '#include "log.h"\n' >>algorithms/fit.c
out=$("$check" . 2>&1)
if grep -q 'algorithms/fit.c:2: #include "log.h" is common/log.h: algorithms/ may include only algorithms/' <<<"$out"; then
	echo "ok - the message names the header found and the rule"
else
	echo "not ok - the message: $out"
	failed=1
fi

# The real tree keeps its layers.
if out=$("$check" "$top" 2>&1); then echo "ok - the source tree keeps the layers"; else
	echo "not ok - the source tree: $out"; failed=1; fi
exit $failed
