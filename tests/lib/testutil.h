/*
 * testutil.h: shared helpers for the check suites.
 *
 * Each tests/<component>/check_<module>.c defines a Suite and ends with
 * RV_TEST_MAIN(suite_fn), or RV_TEST_MAIN_PG(suite_fn) when its tests need a
 * PostgreSQL: that variant starts one private cluster in the parent before
 * check forks the tests (tests/lib/pgfix.h) and stops it at the end.
 *
 * A test that cannot run here (no root, no torch, no writable cgroup)
 * calls RV_TEST_SKIP(ci_installs, "why ...") and returns: the line
 * "SKIP: <test>: <why>" it prints is counted and shown by tests/run.sh.
 * ci_installs says CI provides what is missing (.ci/run runs as root and
 * installs torch, iproute2, PostgreSQL, ...): under CI=true such a skip
 * fails the test instead.
 */
#ifndef RV_TESTUTIL_H
#define RV_TESTUTIL_H

#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "pgfix.h"

/* Print "SKIP: <fn less its _fn>: <why>" on stdout, or, when ci_installs
 * and CI=true, fail the running test with why.  Call it from a test. */
void rv_test_skip(const char *fn, bool ci_installs, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
#define RV_TEST_SKIP(ci_installs, ...) rv_test_skip(__func__, ci_installs, __VA_ARGS__)

#define RV_TEST_MAIN(suite_fn)                                   \
	int main(void)                                           \
	{                                                        \
		SRunner *sr = srunner_create(suite_fn());        \
		srunner_run_all(sr, CK_NORMAL);                  \
		int nf = srunner_ntests_failed(sr);              \
		srunner_free(sr);                                \
		return nf ? EXIT_FAILURE : EXIT_SUCCESS;         \
	}

#define RV_TEST_MAIN_PG(suite_fn)                                \
	int main(void)                                           \
	{                                                        \
		if (rv_test_pg_global_start() < 0)               \
			return EXIT_FAILURE;                     \
		SRunner *sr = srunner_create(suite_fn());        \
		srunner_run_all(sr, CK_NORMAL);                  \
		int nf = srunner_ntests_failed(sr);              \
		srunner_free(sr);                                \
		rv_test_pg_global_stop();                        \
		return nf ? EXIT_FAILURE : EXIT_SUCCESS;         \
	}

#endif
