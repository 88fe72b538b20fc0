/*
 * faultfix.c: the fault suite's waits on the shard log, its recovery
 * lines and its closing accounting (see faultfix.h).
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "faultfix.h"
#include "parse.h"
#include "brainfix.h"
#include "testutil.h"

bool rv_test_fault_all(void)
{
	const char *v = getenv("ROVER_FAULT_ALL");
	return v && !strcmp(v, "1");
}

void rv_test_fault_add(Suite *s, const char *name, const TTest *test, bool quick)
{
	if (!quick && !rv_test_fault_all())
		return;
	TCase *tc = tcase_create(name);
	tcase_set_timeout(tc, 400);
	tcase_add_test(tc, test);
	suite_add_tcase(s, tc);
}

void rv_test_fault_node_args(const char **a, const char *nnodes, const char *nproc, const char *ep,
			     const char *hang, const char *log)
{
	const char *v[] = { "--nnodes",
			    nnodes,
			    "--nproc-per-node",
			    nproc,
			    "--rdzv-endpoint",
			    ep,
			    "--max-restarts",
			    "3",
			    "--hang-timeout",
			    hang,
			    RV_TEST_FAULT_EXAMPLE,
			    "--batch-size",
			    "8",
			    "--step-sleep",
			    "0.05",
			    "--log-every",
			    "2",
			    "--target",
			    RV_TEST_FAULT_TARGET,
			    "--shard-log",
			    log,
			    NULL };
	memcpy(a, v, sizeof(v));
}

void rv_test_fault_job_env(char *out, size_t size, const char *what)
{
	snprintf(out, size, "ROVER_JOB_NAME=flt-%d-%s", (int)getpid(), what);
}

/* What the log shows after its first `at` lines: whether a load (in a
 * world of `world`, any when 0) was followed by a step line, and the
 * ranks that logged steps (a bit each). */
static void log_after(const char *path, int at, int world, bool *resumed, unsigned *ranks)
{
	char *s = rv_test_read_file(path);
	bool loaded = false;
	int line = 0;
	*resumed = false;
	*ranks = 0;
	char *save = NULL;
	for (char *l = s ? strtok_r(s, "\n", &save) : NULL; l; l = strtok_r(NULL, "\n", &save)) {
		if (line++ < at)
			continue;
		long st;
		int w, rank;
		if (sscanf(l, "load %ld world=%d", &st, &w) == 2) {
			loaded = !world || w == world;
			continue;
		}
		if (sscanf(l, "%d %ld", &rank, &st) == 2 && rank >= 0 && rank < 32) {
			*resumed |= loaded;
			*ranks |= 1u << rank;
		}
	}
	free(s);
}

static int64_t wait_log(const char *path, int at, int world, int nranks, int timeout_ms)
{
	int64_t until = rv_mono_ms() + timeout_ms;
	for (;;) {
		bool resumed;
		unsigned ranks;
		log_after(path, at, world, &resumed, &ranks);
		if (nranks ? __builtin_popcount(ranks) >= nranks : resumed)
			return rv_mono_ms();
		if (rv_mono_ms() > until)
			return -ETIMEDOUT;
		usleep(20 * 1000);
	}
}

int64_t rv_test_fault_wait_resumed(const char *path, int at, int timeout_ms)
{
	return wait_log(path, at, 0, 0, timeout_ms);
}

int64_t rv_test_fault_wait_world(const char *path, int at, int world, int timeout_ms)
{
	return wait_log(path, at, world, 0, timeout_ms);
}

int64_t rv_test_fault_wait_steps(const char *path, int at, int nranks, int timeout_ms)
{
	return wait_log(path, at, 0, nranks, timeout_ms);
}

int rv_test_fault_lines_after(const char *path, int at, const char *prefix)
{
	char *s = rv_test_read_file(path);
	int line = 0, n = 0;
	char *save = NULL;
	for (char *l = s ? strtok_r(s, "\n", &save) : NULL; l; l = strtok_r(NULL, "\n", &save))
		n += line++ >= at && !strncmp(l, prefix, strlen(prefix));
	free(s);
	return n;
}

void rv_test_fault_report(const char *name, int64_t ms)
{
	printf("fault=%s recovery_ms=%lld\n", name, (long long)ms);
	printf("diag: fault=%s recovery_ms=%lld\n", name, (long long)ms);
	fflush(stdout);
}

/* The test accuracy one of the runs printed ("test_accuracy=A"), or -1. */
static double accuracy(const struct rv_test_run *r, int n)
{
	double best = -1;
	for (int i = 0; i < n; i++) {
		char *out = rv_test_run_output(&r[i], 1);
		for (const char *p = out; p && (p = strstr(p, "test_accuracy=")); p++) {
			double a = strtod(p + 14, NULL);
			if (a > best)
				best = a;
		}
		free(out);
	}
	return best;
}

void rv_test_fault_expect_trained(const struct rv_test_run *r, int n, const char *path, long size,
				  int epochs, unsigned ranks_want)
{
	long lost, twice;
	unsigned ranks;
	int loads;
	rv_test_shard_account(path, size, epochs, &lost, &twice, &ranks, &loads);
	double acc = accuracy(r, n);
	double target = strtod(RV_TEST_FAULT_TARGET, NULL);
	if (lost || twice || ranks != ranks_want || acc < target) {
		rv_test_run_dump(r, n, NULL);
		char *sl = rv_test_read_file(path);
		for (char *p = sl; p && (p = strstr(p, "load ")); p++)
			fprintf(stderr, "shard log: %.*s\n", (int)strcspn(p, "\n"), p);
		free(sl);
	}
	printf("diag: lost=%ld twice=%ld loads=%d ranks=%#x accuracy=%.4f\n", lost, twice, loads,
	       ranks, acc);
	ck_assert_msg(lost == 0 && twice == 0, "%ld samples lost, %ld trained twice", lost, twice);
	ck_assert_msg(ranks == ranks_want, "ranks that trained after the last load: %#x, not %#x",
		      ranks, ranks_want);
	ck_assert_msg(acc >= target, "test accuracy %.4f below %s", acc, RV_TEST_FAULT_TARGET);
}

int rv_test_fault_run_stages(const struct rv_test_run *r, pid_t *out, int max)
{
	struct rv_test_pid tree[64];
	int n = rv_test_proc_tree(r->proc.pid, tree, 64), k = 0;
	for (int i = 0; i < n && k < max; i++) {
		char path[64], comm[32] = "";
		snprintf(path, sizeof(path), "/proc/%d/comm", (int)tree[i].pid);
		FILE *fp = fopen(path, "r");
		if (fp && fgets(comm, sizeof(comm), fp))
			comm[strcspn(comm, "\n")] = '\0';
		if (fp)
			fclose(fp);
		if (!strcmp(comm, "rover-run"))
			out[k++] = tree[i].pid;
	}
	return k;
}

void *rv_test_fault_node_main(void *arg)
{
	struct rv_test_fault_node *n = arg;
	struct rv_master_client *c = rv_test_master_client(n->m);
	struct rv_rdzv_join j = { .local_world_size = 1 };
	snprintf(j.node, sizeof(j.node), "%s", n->name);
	snprintf(j.addr, sizeof(j.addr), "127.0.0.1");
	struct rv_rdzv_world_reply w;
	n->rc = rv_master_rendezvous(c, &j, 20000, &w, NULL);
	if (n->rc == 0)
		atomic_store(&n->round, w.round);
	rv_rdzv_world_reply_release(&w);
	while (n->rc == 0 && !atomic_load(&n->stop)) {
		struct rv_heartbeat_reply hb;
		if (!atomic_load(&n->pause) && rv_master_heartbeat(c, n->name, &hb, NULL) == 0) {
			atomic_store(&n->round, hb.round);
			if (hb.rejoin)
				atomic_fetch_add(&n->rejoined, 1);
		}
		usleep(200 * 1000);
	}
	rv_master_client_free(c);
	return NULL;
}

/* Whether every one of the n nodes is in a round. */
static bool fault_nodes_joined(struct rv_test_fault_node *nodes, int n)
{
	for (int i = 0; i < n; i++)
		if (!atomic_load(&nodes[i].round))
			return false;
	return true;
}

long long rv_test_fault_nodes_start(const struct rv_test_master *m,
				    struct rv_test_fault_node *nodes, pthread_t *t, int n)
{
	for (int i = 0; i < n; i++) {
		memset(&nodes[i], 0, sizeof(nodes[i]));
		nodes[i].m = m;
		snprintf(nodes[i].name, sizeof(nodes[i].name), "node-%d", i);
		ck_assert_int_eq(pthread_create(&t[i], NULL, rv_test_fault_node_main, &nodes[i]),
				 0);
	}
	int64_t until = rv_mono_ms() + 30000;
	while (!fault_nodes_joined(nodes, n) && rv_mono_ms() < until)
		usleep(20 * 1000);
	ck_assert_msg(fault_nodes_joined(nodes, n), "no world of %d", n);
	usleep(1000 * 1000);
	return atomic_load(&nodes[0].round);
}
