/*
 * faultfix.h: what the fault suite (tests/fault/) shares on top of
 * runfix.h and masterfix.h: waits on the shard log of
 * examples/digits_rover.py (the moment training resumed after a fault),
 * the recovery time printed, and the closing accounting (every sample of
 * every epoch trained exactly once, the job at its accuracy).
 *
 * Times are rv_mono_ms() values.  Single-threaded: called from a test.
 */
#ifndef RV_FAULTFIX_H
#define RV_FAULTFIX_H

#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "masterfix.h"
#include "runfix.h"

/* The job every scenario trains, and the test accuracy it must reach. */
#define RV_TEST_FAULT_EXAMPLE "examples/digits_rover.py"
#define RV_TEST_FAULT_TARGET  "0.85"

/* rover-run's arguments for one node of the digits job at endpoint ep,
 * nproc workers, nnodes ("1", "1:2"), --hang-timeout hang (0: off, for a
 * node whose only worker is not rank 0, the one that prints), shard log
 * log; into a (24 slots, NULL-terminated; the strings borrowed). */
void rv_test_fault_node_args(const char **a, const char *nnodes, const char *nproc, const char *ep,
			     const char *hang, const char *log);
/* Whether every scenario runs (ROVER_FAULT_ALL=1, make fault) or only the
 * short ones make test runs. */
bool rv_test_fault_all(void);
/* Add test to s in a case of its own named name (CK_RUN_CASE=name runs it
 * alone), 400 s at most; a scenario not quick only under rv_test_fault_all(). */
void rv_test_fault_add(Suite *s, const char *name, const TTest *test, bool quick);
/* "ROVER_JOB_NAME=flt-PID-what" into out: the job's shared memory names. */
void rv_test_fault_job_env(char *out, size_t size, const char *what);
/* Wait up to timeout_ms until the shard log at path holds, after its
 * first `at` lines, a "load" line followed by a step line: training
 * resumed.  The time it was seen, or -ETIMEDOUT. */
int64_t rv_test_fault_wait_resumed(const char *path, int at, int timeout_ms);
/* The same for a load in a world of `world` ranks. */
int64_t rv_test_fault_wait_world(const char *path, int at, int world, int timeout_ms);
/* Wait until, after the first `at` lines, steps of nranks different ranks
 * were logged (no load needed: the world carried on).  The time, or
 * -ETIMEDOUT. */
int64_t rv_test_fault_wait_steps(const char *path, int at, int nranks, int timeout_ms);
/* How many lines starting with prefix the log holds after its first `at`
 * lines: "load " ones are group starts, "0 " ones rank 0's steps. */
int rv_test_fault_lines_after(const char *path, int at, const char *prefix);
/* Print "fault=NAME recovery_ms=MS" on stdout and as a "diag:" line. */
void rv_test_fault_report(const char *name, int64_t ms);
/* Fail the test (check) unless the shard log at path holds every index of
 * [0, size) exactly epochs times, the ranks of ranks_want (a bit per rank)
 * trained after the last load, and one of the n runs printed a test
 * accuracy of RV_TEST_FAULT_TARGET or more; the runs and the log are dumped
 * first when not. */
void rv_test_fault_expect_trained(const struct rv_test_run *r, int n, const char *path, long size,
				  int epochs, unsigned ranks_want);
/* A simulated node (run rv_test_fault_node_main as a thread): joins m's
 * rendezvous with one worker, then heartbeats every 200 ms until stop is
 * set, none while pause is set; round is the round its last heartbeat
 * answered, rejoined how many answered rejoin, rc the join's result. */
struct rv_test_fault_node {
	const struct rv_test_master *m;
	char name[32];
	atomic_int stop, pause;
	atomic_llong round;
	atomic_int rejoined;
	int rc;
};
void *rv_test_fault_node_main(void *arg);
/* Start the n simulated nodes nodes[i] ("node-i") of m, each in its thread
 * t[i]; fail the test unless all are in a world within 30 s.  A second
 * later (heartbeats answered), the round node 0 is in. */
long long rv_test_fault_nodes_start(const struct rv_test_master *m,
				    struct rv_test_fault_node *nodes, pthread_t *t, int n);
/* The rover-run processes of r (the one started and its stages below),
 * top first, up to max; the count. */
int rv_test_fault_run_stages(const struct rv_test_run *r, pid_t *out, int max);

#endif
