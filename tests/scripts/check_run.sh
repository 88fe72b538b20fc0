#!/usr/bin/env bash
# Suite for tests/run.sh: small suites made here (a check binary built with
# RV_TEST_SKIP from tests/lib/testutil.c, and shell suites using
# tests/web/lib.sh) are run through it.  A skip is counted as skipped, not
# passed, in the closing line "N passed, N failed, N skipped" and named
# under its suite; under CI=true the skip of what CI installs is a failure,
# any other skip stays a skip.  Prints one "ok"/"not ok" line per check and
# exits 1 if any failed.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d /tmp/rover-run-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
failed=0
cd "$top" || exit 1
mkdir -p "$tmp/bin" "$tmp/tests/fake"

cat >"$tmp/fake.c" <<'C'
#include "testutil.h"
START_TEST(test_runs) { ck_assert_int_eq(1, 1); }
END_TEST
START_TEST(test_needs_root) { RV_TEST_SKIP(true, "not root: NOT TESTED"); }
END_TEST
START_TEST(test_needs_quiet) { RV_TEST_SKIP(false, "too busy: NOT COMPARED"); }
END_TEST
static Suite *fake_suite(void)
{
	Suite *s = suite_create("fake");
	TCase *tc = tcase_create("fake");
	tcase_add_test(tc, test_runs);
	tcase_add_test(tc, test_needs_root);
	tcase_add_test(tc, test_needs_quiet);
	suite_add_tcase(s, tc);
	return s;
}
RV_TEST_MAIN(fake_suite)
C
# shellcheck disable=SC2046 # pkg-config's words are separate flags
if ! cc -std=gnu11 -D_GNU_SOURCE -iquote tests/lib -iquote common -o "$tmp/tests/fake/check_fake" \
	"$tmp/fake.c" tests/lib/testutil.c $(pkg-config --cflags --libs check) 2>"$tmp/cc.err"; then
	echo "not ok - the fake check suite builds: $(cat "$tmp/cc.err")"
	exit 1
fi
web=$tmp/tests/fake/check_fakeweb.sh
printf '%s\n' '#!/usr/bin/env bash' "cd '$top' || exit 1" '. tests/web/lib.sh' \
	'ok "one check"' 'skip "no chromium: the page NOT TESTED"' >"$web"
chmod +x "$web"

# expect NAME WANT_RC WANT_LINE... : run.sh's exit code and lines of its output.
expect() {
	local name=$1 want_rc=$2 line bad=
	shift 2
	if [ "$rc" -ne "$want_rc" ]; then
		bad="exit $rc, not $want_rc"
	fi
	for line in "$@"; do
		grep -qxF -- "$line" <<<"$out" || bad="${bad:+$bad; }no line \"$line\""
	done
	if [ -n "$bad" ]; then
		echo "not ok - $name: $bad in:"
		sed 's/^/    /' <<<"$out"
		failed=1
	else
		echo "ok - $name"
	fi
}

run() { out=$(env -u CI B="$tmp" "$@" tests/run.sh "$tmp/tests/fake/check_fake" 2>&1); rc=$?; }
run
expect "a check suite's skips are counted and named" 0 "1 passed, 0 failed, 2 skipped" \
	"    SKIP: fake/check_fake: test_needs_root: not root: NOT TESTED" \
	"    SKIP: fake/check_fake: test_needs_quiet: too busy: NOT COMPARED"
grep -qE '^ok   fake/check_fake: 3 checks, 2 skipped \(' <<<"$out" ||
	{ echo "not ok - the suite's line counts its skips: $out"; failed=1; }
run CI=true
expect "under CI=true a skip of what CI installs fails, another stays a skip" 1 \
	"1 passed, 1 failed, 1 skipped" \
	"    SKIP: fake/check_fake: test_needs_quiet: too busy: NOT COMPARED"
grep -q 'CI=true installs what test_needs_root needs, but: not root' <<<"$out" ||
	{ echo "not ok - the CI failure says why: $out"; failed=1; }

wrun() { out=$(env -u CI B="$tmp" "$@" tests/run.sh "$web" 2>&1); rc=$?; }
wrun
expect "a shell suite's skip is counted and named" 0 "1 passed, 0 failed, 1 skipped" \
	"    SKIP: fake/check_fakeweb.sh: no chromium: the page NOT TESTED"
wrun CI=true
expect "under CI=true a shell suite's skip fails" 1 "1 passed, 1 failed, 0 skipped"
exit $failed
