/*
 * testutil.h: shared helpers for the check suites.
 *
 * Each tests/<component>/check_<module>.c defines a Suite and ends with
 * RV_TEST_MAIN(suite_fn), or RV_TEST_MAIN_PG(suite_fn) when its tests need a
 * PostgreSQL: that variant starts one private cluster in the parent before
 * check forks the tests (tests/lib/pgfix.h) and stops it at the end.
 */
#ifndef RV_TESTUTIL_H
#define RV_TESTUTIL_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>

#include "pgfix.h"

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
