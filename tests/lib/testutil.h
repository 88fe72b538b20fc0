/*
 * testutil.h: shared helpers for the check suites.
 *
 * Each tests/<component>/check_<module>.c defines a Suite, most of them as
 * RV_TEST_SUITE(name, RV_TEST_TCASE(...)), and ends with
 * RV_TEST_MAIN(suite_fn), or RV_TEST_MAIN_PG(suite_fn) when its tests need a
 * PostgreSQL: that variant starts one private cluster in the parent before
 * check forks the tests (tests/lib/pgfix.h) and stops it at the end.  A
 * file whose tests are one TCase (with a checked fixture at most) ends with
 * RV_TEST_MAIN_TCASE or a variant of it instead, suite and main in one.
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
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "pgfix.h"

/* Print "SKIP: <fn less its _fn>: <why>" on stdout, or, when ci_installs
 * and CI=true, fail the running test with why.  Call it from a test. */
void rv_test_skip(const char *fn, bool ci_installs, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
#define RV_TEST_SKIP(ci_installs, ...) rv_test_skip(__func__, ci_installs, __VA_ARGS__)

/* Write text to path (created, or emptied first).  Called from a test: a
 * failure fails it. */
void rv_test_write_file(const char *path, const char *text);

/* Write text to dir/name, dir made first (mkdir -p).  Called from a test:
 * a failure fails it. */
void rv_test_put(const char *dir, const char *name, const char *text);

/* A cgroup v2 tree for the usage readers: root a new temp folder (the
 * caller removes it, rv_test_rm_rf), parent its folder job with a quota of
 * 1.5 cores and node job/node without one (their cpu.max).  Called from a
 * test: a failure fails it. */
struct rv_test_cgtree {
	char root[32];
	char parent[64];
	char node[96];
};
void rv_test_cgtree_make(struct rv_test_cgtree *t);

/* Remove dir and all below it, as much of it as can be (rm -rf). */
void rv_test_rm_rf(const char *dir);

/* The median of the n values of v (v is left as it was). */
double rv_test_median(const double *v, int n);

/* This test binary's path (/proc/self/exe) into out; fails the test when
 * it cannot be read. */
void rv_test_self_exe(char *out, size_t size);

/* A new TCase named name, its timeout timeout_s seconds (check's default
 * when 0), holding the n tests of tests in order.  Owned by the Suite it is
 * added to.  RV_TEST_TCASE(name, timeout_s, test, ...) lists them inline. */
TCase *rv_test_tcase_new(const char *name, double timeout_s, const TTest *const *tests, size_t n);
#define RV_TEST_TCASE(name, timeout_s, ...)                                                        \
	rv_test_tcase_new(name, timeout_s, (const TTest *const[]){ __VA_ARGS__ },                  \
			  sizeof((const TTest *const[]){ __VA_ARGS__ }) / sizeof(TTest *))

/* A new Suite named name holding the n TCases of tcs in order.  The caller
 * hands it to srunner_create (RV_TEST_MAIN).  RV_TEST_SUITE(name, tc, ...)
 * lists them inline. */
Suite *rv_test_suite_new(const char *name, TCase *const *tcs, size_t n);
#define RV_TEST_SUITE(name, ...)                                                                   \
	rv_test_suite_new(name, (TCase *const[]){ __VA_ARGS__ },                                   \
			  sizeof((TCase *const[]){ __VA_ARGS__ }) / sizeof(TCase *))

/* Run every test of s (srunner_create takes it): EXIT_SUCCESS when none
 * failed, else EXIT_FAILURE (what a test binary's main returns). */
int rv_test_run_suite(Suite *s);

#define RV_TEST_MAIN(suite_fn)                                                                     \
	int main(void)                                                                             \
	{                                                                                          \
		return rv_test_run_suite(suite_fn());                                              \
	}

#define RV_TEST_MAIN_PG(suite_fn)                                                                  \
	int main(void)                                                                             \
	{                                                                                          \
		if (rv_test_pg_global_start() < 0)                                                 \
			return EXIT_FAILURE;                                                       \
		int rc = rv_test_run_suite(suite_fn());                                            \
		rv_test_pg_global_stop();                                                          \
		return rc;                                                                         \
	}

/* tc with the checked fixture setup, teardown added (either may be NULL;
 * none when both are). */
TCase *rv_test_tcase_fixture(TCase *tc, void (*setup)(void), void (*teardown)(void));

/* The suite of a file whose tests are one TCase, and its main (the _PG ones
 * with a PostgreSQL): RV_TEST_MAIN_TCASE("suite", "tcase", timeout_s,
 * test, ...) stands for a suite function returning
 * RV_TEST_SUITE("suite", RV_TEST_TCASE("tcase", timeout_s, test, ...)) and
 * RV_TEST_MAIN of it; the _FIXTURE_ ones add the checked fixture setup,
 * teardown given after the suite's name. */
#define RV_TEST_ONE_TCASE_SUITE(suite_name, setup, teardown, ...)                                  \
	static Suite *rv_test_one_tcase_suite(void)                                                \
	{                                                                                          \
		return RV_TEST_SUITE(suite_name, rv_test_tcase_fixture(RV_TEST_TCASE(__VA_ARGS__), \
								       setup, teardown));          \
	}
#define RV_TEST_MAIN_TCASE(suite_name, ...)                                                        \
	RV_TEST_ONE_TCASE_SUITE(suite_name, NULL, NULL, __VA_ARGS__)                               \
	RV_TEST_MAIN(rv_test_one_tcase_suite)
#define RV_TEST_MAIN_PG_TCASE(suite_name, ...)                                                     \
	RV_TEST_ONE_TCASE_SUITE(suite_name, NULL, NULL, __VA_ARGS__)                               \
	RV_TEST_MAIN_PG(rv_test_one_tcase_suite)
#define RV_TEST_MAIN_FIXTURE_TCASE(suite_name, setup, teardown, ...)                               \
	RV_TEST_ONE_TCASE_SUITE(suite_name, setup, teardown, __VA_ARGS__)                          \
	RV_TEST_MAIN(rv_test_one_tcase_suite)
#define RV_TEST_MAIN_PG_FIXTURE_TCASE(suite_name, setup, teardown, ...)                            \
	RV_TEST_ONE_TCASE_SUITE(suite_name, setup, teardown, __VA_ARGS__)                          \
	RV_TEST_MAIN_PG(rv_test_one_tcase_suite)

#endif
