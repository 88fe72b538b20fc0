#!/usr/bin/env bash
# Suite for scripts/check-names.sh: small static libraries built here with
# the prefixes right pass; a symbol without its prefix, or one defined by two
# libraries, fails with the library, the object and the symbol named.  Prints
# one "ok"/"not ok" line per check and exits 1 if any failed.
set -u
. "$(dirname "$0")/suite.sh"
suite_init names
cd "$tmp" || exit 1

# lib NAME FILE=SOURCE...: build NAME from the sources given inline.
lib() {
	local name=$1 f
	shift
	rm -f "$name" ./*.o
	for f in "$@"; do
		printf '%s\n' "${f#*=}" >"${f%%=*}.c"
		cc -c "${f%%=*}.c" -o "${f%%=*}.o" || exit 1
	done
	ar rcs "$name" ./*.o
	mv "$name" "lib-$name"
}
run() { out=$("$check" "$@" 2>&1); }
mv_lib() { mkdir -p "$2" && cp "lib-$1" "$2/$1"; }

lib librover-common.a 'log=int rv_log_level(void) { return 1; } static int helper(void) { return 2; } int rv_log_x(void) { return helper(); }'
mv_lib librover-common.a ok
lib librover-brain.a 'store=int store_job_get(void) { return 1; }' \
	'api_jobs=int api_jobs_get(void) { return 1; } int api_query_int(void) { return 2; }' \
	'main_loop=int brain_run(void) { return 0; }'
mv_lib librover-brain.a ok
lib librover-master.a 'rdzv=int rdzv_join(void) { return 1; }'
mv_lib librover-master.a ok
pass "prefixed symbols pass" ok/librover-common.a ok/librover-brain.a ok/librover-master.a

lib librover-common.a 'json=int json_get(void) { return 1; }'
mv_lib librover-common.a common
fail "a common symbol without rv_" "librover-common.a: json.o: global symbol json_get does not begin with rv_" \
	common/librover-common.a

lib librover-master.a 'shard=int store_job_get(void) { return 1; }'
mv_lib librover-master.a daemon
fail "a daemon symbol named after another file" "librover-master.a: shard.o: global symbol store_job_get" \
	daemon/librover-master.a

lib librover-master.a 'store=int store_job_get(void) { return 1; }'
mv_lib librover-master.a twice
fail "two daemons define the same symbol" "store_job_get is also defined in librover-brain.a" \
	ok/librover-brain.a twice/librover-master.a

lib librover-testlib.a 'pgfix=int rv_pg_start(void) { return 1; }'
mv_lib librover-testlib.a test
fail "a test fixture symbol without rv_test_" "global symbol rv_pg_start does not begin with rv_test_" \
	test/librover-testlib.a

lib librover-scaling.a 'scaling=int rv_scaling_config(void) { return 1; }'
mv_lib librover-scaling.a ok
pass "scaling/ symbols with rv_scaling_ pass" ok/librover-scaling.a

lib librover-scaling.a 'scaling=int rv_limits(void) { return 1; }'
mv_lib librover-scaling.a scaling
fail "a scaling/ symbol with rv_ but not rv_scaling_" "librover-scaling.a: scaling.o: global symbol rv_limits does not begin with rv_scaling_" \
	scaling/librover-scaling.a

lib librover-trainer.a 'ckpt=int rv_trainer_save(void) { return 1; } int trainer_now_ns(void) { return 2; }'
mv_lib librover-trainer.a ok
pass "trainer/ symbols with rv_trainer_ or trainer_ pass" ok/librover-trainer.a

lib librover-trainer.a 'ckpt=int rv_crc32c(void) { return 1; }'
mv_lib librover-trainer.a trainer
fail "a trainer/ symbol with rv_ but not rv_trainer_" "librover-trainer.a: ckpt.o: global symbol rv_crc32c does not begin with rv_trainer_ or trainer_" \
	trainer/librover-trainer.a

# The libraries built here keep their prefixes.
b=$top/${B:-build}/lib
if [ -f "$b/librover-common.a" ]; then
	pass "the built libraries keep their prefixes" "$b"/librover-*.a
fi
exit $failed
