/*
 * master_rdzv: 256 simulated agents (one thread and one keep-alive client
 * each) join the real rover-master's rendezvous at once (--nnodes 256:256)
 * and long-poll for the world; the figure is the time from the first join
 * until every agent holds the complete world (256 members).  Ends with:
 *   bench=master_rdzv agents=256 world_ms=N
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "masterfix.h"
#include "parse.h"

#define AGENTS 256

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

int main(void)
{
	char *spec = rv_test_master_spec(1000000, 100, 1, AGENTS, AGENTS);
	struct rv_test_master m;
	if (rv_test_master_bench_start(&m, spec) < 0)
		return 1;
	static struct agent a[AGENTS];
	atomic_int go = 0;
	for (int i = 0; i < AGENTS; i++) {
		a[i] = (struct agent){ .url = m.url, .i = i, .go = &go };
		if (pthread_create(&a[i].t, NULL, agent_main, &a[i]) != 0)
			return 1;
	}
	int64_t t0 = rv_mono_ms();
	atomic_store(&go, 1);
	int64_t last = t0;
	int failed = 0;
	for (int i = 0; i < AGENTS; i++) {
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
		fprintf(stderr, "%d agents did not get the world\n", failed);
		return 1;
	}
	printf("bench=master_rdzv agents=%d world_ms=%lld\n", AGENTS, (long long)(last - t0));
	return 0;
}
