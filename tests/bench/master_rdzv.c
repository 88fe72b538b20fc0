/*
 * master_rdzv: 256 simulated agents (one thread and one keep-alive client
 * each) join the real rover-master's rendezvous at once and long-poll for
 * the world; the figure is the time from the first join until every agent
 * holds the complete world (256 members).  Two cases, ROUNDS rounds each in
 * turn, each round on a fresh master, medians reported:
 *   full:    --nnodes 256:256, the world completes as soon as all joined;
 *   elastic: --nnodes 128:512 (MIN < MAX) with rdzv.last_call_ms at its
 *            default (3000 ms, what a job runs with): the round completes
 *            a last call after MIN joined, so elastic_over_ms (the world
 *            time beyond the last call) is the master's own share.
 * Ends with:
 *   bench=master_rdzv agents=256 world_ms=N elastic_nnodes=128:512
 *   last_call_ms=3000 elastic_world_ms=N elastic_over_ms=N rounds=3
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "masterfix.h"
#include "parse.h"

#define AGENTS       256
#define ROUNDS       3
#define ELASTIC_MIN  128
#define ELASTIC_MAX  512
#define LAST_CALL_MS 3000 /* rover-master's rdzv.last_call_ms default */

struct agent {
	pthread_t t;
	const char *url;
	int i;
	atomic_int *go;
	int64_t done_ms;
	int rc;
	char err[512];
};

static void *agent_main(void *arg)
{
	struct agent *a = arg;
	struct rv_master_opts o = { .url = a->url, .timeout_ms = 30000 };
	struct rv_err err = { 0 };
	struct rv_master_client *c = rv_master_client_new(&o, &err);
	struct rv_rdzv_join j = { .local_world_size = 8 };
	snprintf(j.node, sizeof(j.node), "node-%d", a->i);
	snprintf(j.addr, sizeof(j.addr), "10.0.%d.%d:29500", a->i / 250, a->i % 250 + 1);
	struct rv_rdzv_world_reply w;
	while (!atomic_load(a->go))
		;
	a->rc = rv_master_rendezvous(c, &j, 60000, &w, &err);
	a->done_ms = rv_mono_ms();
	if (a->rc == 0 && w.nmembers != AGENTS)
		a->rc = -EPROTO;
	if (a->rc < 0)
		snprintf(a->err, sizeof(a->err), "%s", err.msg);
	rv_rdzv_world_reply_release(&w);
	rv_master_client_free(c);
	return NULL;
}

/* One round: a master for --nnodes min:max, AGENTS agents joining at once;
 * the ms until the last of them held the world, or -1. */
static int64_t world_ms(int min, int max)
{
	char *spec = rv_test_master_spec(1000000, 100, 1, min, max);
	struct rv_test_master m;
	if (rv_test_master_bench_start(&m, spec) < 0) {
		free(spec);
		return -1;
	}
	static struct agent a[AGENTS];
	atomic_int go = 0;
	int started = 0;
	for (; started < AGENTS; started++) {
		a[started] = (struct agent){ .url = m.url, .i = started, .go = &go };
		if (pthread_create(&a[started].t, NULL, agent_main, &a[started]) != 0)
			break;
	}
	int64_t t0 = rv_mono_ms();
	atomic_store(&go, 1);
	int64_t last = t0;
	int failed = AGENTS - started;
	for (int i = 0; i < started; i++) {
		pthread_join(a[i].t, NULL);
		if (a[i].rc < 0) {
			if (!failed++)
				fprintf(stderr, "agent %d: %s\n", i, a[i].err);
		} else if (a[i].done_ms > last) {
			last = a[i].done_ms;
		}
	}
	rv_test_master_cleanup(&m);
	free(spec);
	if (failed) {
		fprintf(stderr, "%d agents did not get the world (--nnodes %d:%d)\n", failed, min,
			max);
		return -1;
	}
	return last - t0;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

int main(void)
{
	int64_t full[ROUNDS], elastic[ROUNDS];
	for (int r = 0; r < ROUNDS; r++) {
		full[r] = world_ms(AGENTS, AGENTS);
		elastic[r] = world_ms(ELASTIC_MIN, ELASTIC_MAX);
		if (full[r] < 0 || elastic[r] < 0)
			return 1;
		fprintf(stderr, "round %d: full %lld ms, elastic %lld ms\n", r + 1,
			(long long)full[r], (long long)elastic[r]);
	}
	qsort(full, ROUNDS, sizeof(full[0]), cmp_i64);
	qsort(elastic, ROUNDS, sizeof(elastic[0]), cmp_i64);
	int64_t e = elastic[ROUNDS / 2];
	printf("bench=master_rdzv agents=%d world_ms=%lld elastic_nnodes=%d:%d last_call_ms=%d "
	       "elastic_world_ms=%lld elastic_over_ms=%lld rounds=%d\n",
	       AGENTS, (long long)full[ROUNDS / 2], ELASTIC_MIN, ELASTIC_MAX, LAST_CALL_MS,
	       (long long)e, (long long)(e - LAST_CALL_MS), ROUNDS);
	return 0;
}
