/*
 * check_fault_time.c: the real rover-master with its clock stepped by ten
 * minutes forward, then twenty back (Debian's libfaketime, preloaded into
 * the master only, CLOCK_REALTIME faked through a file the test rewrites;
 * the monotonic clock left alone).  Two nodes (threads of this test that
 * join and heartbeat every 200 ms through the typed client) are in a world
 * of two:
 *   - stepped forward, no node is declared dead (a heartbeat deadline is
 *     a span of monotonic time, not of wall-clock time);
 *   - stepped back, a node that stops its heartbeats is still declared
 *     dead within the heartbeat timeout (time does not stand still until
 *     the wall clock catches up); the time it took is printed.
 * Without libfaketime the test is a counted skip (a failure under CI=true:
 * scripts/install-deps.sh installs it).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brainfix.h"
#include "faultfix.h"
#include "masterfix.h"
#include "parse.h"
#include "testutil.h"

#define FAKETIME_LIB "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1"
#define TIMEOUT_MS   2000

/* The master's clock, OFFSET seconds from the real one. */
static void set_offset(const char *file, const char *offset)
{
	FILE *fp = fopen(file, "w");
	ck_assert_ptr_nonnull(fp);
	fprintf(fp, "%s\n", offset);
	ck_assert_int_eq(fclose(fp), 0);
}

START_TEST(test_master_clock_stepped)
{
	if (access(FAKETIME_LIB, R_OK) != 0) {
		RV_TEST_SKIP(true, "no libfaketime (%s): apt-get install faketime", FAKETIME_LIB);
		return;
	}
	struct rv_test_master m;
	char *spec = rv_test_master_spec(1000, 10, 1, 1, 2);
	ck_assert_int_eq(rv_test_master_init(&m, spec), 0);
	free(spec);
	char file[400];
	snprintf(file, sizeof(file), "%s/faketime.rc", m.dir);
	set_offset(file, "+0");
	setenv("LD_PRELOAD", FAKETIME_LIB, 1);
	setenv("FAKETIME_TIMESTAMP_FILE", file, 1);
	setenv("FAKETIME_NO_CACHE", "1", 1);
	setenv("FAKETIME_DONT_FAKE_MONOTONIC", "1", 1);
	const char *args[] = { "--rdzv-heartbeat-timeout-ms", "2000", NULL };
	int rc = rv_test_master_start(&m, args);
	unsetenv("LD_PRELOAD");
	ck_assert_int_eq(rc, 0);

	struct rv_test_fault_node n[2];
	pthread_t t[2];
	long long round = rv_test_fault_nodes_start(&m, n, t, 2);

	/* ten minutes forward: nobody died */
	set_offset(file, "+600");
	usleep(3 * TIMEOUT_MS * 1000);
	char *log = rv_test_read_file(m.log);
	ck_assert_msg(!strstr(log, "node declared dead") && atomic_load(&n[0].rejoined) == 0 &&
			      atomic_load(&n[1].rejoined) == 0 && atomic_load(&n[0].round) == round,
		      "a clock stepped forward took nodes for dead (round %lld -> %lld):\n%s",
		      round, (long long)atomic_load(&n[0].round), log);
	free(log);

	/* twenty minutes back, then node 1 goes silent: still found dead */
	set_offset(file, "-600");
	usleep(500 * 1000);
	atomic_store(&n[1].stop, 1);
	int64_t t0 = rv_mono_ms();
	int64_t until = t0 + TIMEOUT_MS + 3000;
	while (atomic_load(&n[0].round) == round && rv_mono_ms() < until)
		usleep(20 * 1000);
	int64_t found = rv_mono_ms() - t0;
	log = rv_test_read_file(m.log);
	ck_assert_msg(atomic_load(&n[0].round) > round,
		      "a silent node not declared dead %lld ms after the clock went back:\n%s",
		      (long long)found, log);
	free(log);
	rv_test_fault_report("master_clock_back_death_found", found);
	for (int i = 0; i < 2; i++) {
		atomic_store(&n[i].stop, 1);
		pthread_join(t[i], NULL);
		ck_assert_int_eq(n[i].rc, 0);
	}
	rv_test_master_cleanup(&m);
}
END_TEST

static Suite *fault_time_suite(void)
{
	Suite *s = suite_create("fault_time");
	rv_test_fault_add(s, "master_clock", test_master_clock_stepped, true);
	return s;
}

RV_TEST_MAIN(fault_time_suite)
