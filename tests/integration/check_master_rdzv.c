/*
 * check_master_rdzv.c: the rendezvous of the real rover-master with
 * simulated agents over loopback (common/master_client): N agents get one
 * world with distinct group ranks and consistent rank offsets; between MIN
 * and MAX the round completes after the last call; an agent that stops
 * heartbeating is declared dead within the configured time, the world's
 * round moves on and the shards it held go to the others at once; a
 * failure report does the same without waiting; a round short of MIN past
 * the max wait fails with a clear status; writes need the token when set.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brainfix.h"
#include "http.h"
#include "masterfix.h"
#include "parse.h"
#include "testutil.h"

struct agent {
	const struct rv_test_master *m;
	char node[64];
	int lws;
	struct rv_rdzv_world_reply world;
	int rc;
	char err[512];
};

static void *agent_main(void *arg)
{
	struct agent *a = arg;
	struct rv_master_client *c = rv_test_master_client(a->m);
	struct rv_rdzv_join j = { .local_world_size = a->lws };
	snprintf(j.node, sizeof(j.node), "%s", a->node);
	snprintf(j.addr, sizeof(j.addr), "127.0.0.1:%d", 30000 + a->lws);
	struct rv_err err = { 0 };
	a->rc = rv_master_rendezvous(c, &j, 20000, &a->world, &err);
	snprintf(a->err, sizeof(a->err), "%s", err.msg);
	rv_master_client_free(c);
	return NULL;
}

/* n agents (local world sizes 1, 2, 1, 2, ...) rendezvous at once. */
static void rendezvous(const struct rv_test_master *m, struct agent *ag, int n)
{
	pthread_t t[64];
	for (int i = 0; i < n; i++) {
		memset(&ag[i], 0, sizeof(ag[i]));
		ag[i].m = m;
		ag[i].lws = 1 + i % 2;
		snprintf(ag[i].node, sizeof(ag[i].node), "node-%d", i);
		ck_assert_int_eq(pthread_create(&t[i], NULL, agent_main, &ag[i]), 0);
	}
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
}

START_TEST(test_world_of_n_agents)
{
	enum { N = 6 };
	char *spec = rv_test_master_spec(1000, 10, 1, N, N);
	struct rv_test_master m;
	ck_assert_int_eq(rv_test_master_init(&m, spec), 0);
	ck_assert_int_eq(rv_test_master_start(&m, NULL), 0);
	struct agent ag[N];
	int64_t t0 = rv_mono_ms();
	rendezvous(&m, ag, N);
	/* MAX nodes waiting: the round completes without the last call */
	ck_assert_int_lt(rv_mono_ms() - t0, 2500);
	bool seen[N] = { false };
	for (int i = 0; i < N; i++) {
		const struct rv_rdzv_world_reply *w = &ag[i].world;
		ck_assert_msg(ag[i].rc == 0, "agent %d: %s", i, ag[i].err);
		ck_assert_int_eq(w->status, RV_RDZV_COMPLETE);
		ck_assert_int_eq(w->round, ag[0].world.round);
		ck_assert_int_eq(w->nnodes, N);
		ck_assert_int_eq(w->world_size, N / 2 * 3);
		ck_assert_int_eq(w->nmembers, N);
		ck_assert(w->group_rank >= 0 && w->group_rank < N);
		ck_assert(!seen[w->group_rank]);
		seen[w->group_rank] = true;
		/* this agent is the member at its group rank */
		ck_assert_str_eq(w->members[w->group_rank].node, ag[i].node);
		ck_assert_int_eq(w->members[w->group_rank].local_world_size, ag[i].lws);
		int offset = 0;
		for (int k = 0; k < N; k++) {
			ck_assert_int_eq(w->members[k].group_rank, k);
			ck_assert_int_eq(w->members[k].rank_offset, offset);
			offset += w->members[k].local_world_size;
		}
	}
	struct rv_master_client *c = rv_test_master_client(&m);
	struct rv_job_status js;
	struct rv_err err = { 0 };
	ck_assert_int_eq(rv_master_job(c, &js, &err), 0);
	ck_assert_int_eq(js.state, RV_RDZV_COMPLETE);
	ck_assert_int_eq(js.nnodes, N);
	ck_assert_int_eq(js.world_size, N / 2 * 3);
	ck_assert_str_eq(js.job, "test-job");
	rv_master_client_free(c);
	for (int i = 0; i < N; i++)
		rv_rdzv_world_reply_release(&ag[i].world);
	rv_test_master_cleanup(&m);
	free(spec);
}
END_TEST

/* MIN 2, MAX 4, three agents: complete with three after the last call. */
START_TEST(test_between_min_and_max)
{
	char *spec = rv_test_master_spec(1000, 10, 1, 1, 1);
	struct rv_test_master m;
	ck_assert_int_eq(rv_test_master_init(&m, spec), 0);
	const char *args[] = { "--nnodes", "2:4", "--rdzv-last-call-ms", "300", NULL };
	ck_assert_int_eq(rv_test_master_start(&m, args), 0);
	struct agent ag[3];
	int64_t t0 = rv_mono_ms();
	rendezvous(&m, ag, 3);
	int64_t took = rv_mono_ms() - t0;
	for (int i = 0; i < 3; i++) {
		ck_assert_msg(ag[i].rc == 0, "agent %d: %s", i, ag[i].err);
		ck_assert_int_eq(ag[i].world.nnodes, 3);
		rv_rdzv_world_reply_release(&ag[i].world);
	}
	ck_assert_int_ge(took, 250);
	ck_assert_int_lt(took, 3000);
	rv_test_master_cleanup(&m);
	free(spec);
}
END_TEST

struct beat {
	const struct rv_test_master *m;
	const char *node;
	atomic_int *stop;
};

static void *beat_main(void *arg)
{
	struct beat *b = arg;
	struct rv_master_client *c = rv_test_master_client(b->m);
	while (!atomic_load(b->stop)) {
		rv_master_heartbeat(c, b->node, NULL, NULL);
		usleep(200 * 1000);
	}
	rv_master_client_free(c);
	return NULL;
}

/* node-1 goes silent holding shards: declared dead within the heartbeat
 * timeout (plus a tick), the round moves on, its shards go to node-0 and
 * every sample is counted once. */
START_TEST(test_silent_agent_declared_dead)
{
	enum { SIZE = 2000, TIMEOUT_MS = 1000 };
	char *spec = rv_test_master_spec(SIZE, 10, 1, 1, 2);
	struct rv_test_master m;
	ck_assert_int_eq(rv_test_master_init(&m, spec), 0);
	const char *args[] = { "--nnodes",
			       "1:2",
			       "--rdzv-heartbeat-timeout-ms",
			       "1000",
			       "--rdzv-last-call-ms",
			       "100",
			       "--timer-tick-ms",
			       "20",
			       NULL };
	ck_assert_int_eq(rv_test_master_start(&m, args), 0);
	struct agent ag[2];
	int64_t before_join = rv_mono_ms();
	rendezvous(&m, ag, 2);
	ck_assert_msg(ag[0].rc == 0 && ag[1].rc == 0, "%s %s", ag[0].err, ag[1].err);
	int64_t round = ag[0].world.round;
	rv_rdzv_world_reply_release(&ag[0].world);
	rv_rdzv_world_reply_release(&ag[1].world);

	atomic_int stop = 0;
	struct beat b0 = { &m, "node-0", &stop };
	pthread_t bt;
	ck_assert_int_eq(pthread_create(&bt, NULL, beat_main, &b0), 0);

	/* node-1's worker takes three shards and never finishes them */
	struct rv_master_client *c = rv_test_master_client(&m);
	struct rv_err err = { 0 };
	struct rv_shard_next req = { .node = "node-1", .worker = 1 };
	int64_t held = 0;
	for (int i = 0; i < 3; i++) {
		struct rv_shard_task t;
		ck_assert_msg(rv_master_shard_next(c, &req, &t, &err) == 0, "%s", err.msg);
		ck_assert_int_eq(t.status, RV_SHARD_TASK);
		held += t.end - t.start;
	}
	int64_t silent_since =
		rv_mono_ms(); /* its last word: the join (a heartbeat) came earlier */
	struct rv_job_status js;
	int64_t dead_at = 0;
	while (rv_mono_ms() - silent_since < 5000) {
		ck_assert_int_eq(rv_master_job(c, &js, &err), 0);
		if (js.round > round) {
			dead_at = rv_mono_ms();
			break;
		}
		usleep(20 * 1000);
	}
	ck_assert_msg(dead_at > 0, "node-1 was not declared dead within 5 s");
	/* the timeout, plus a tick and scheduling slack on a loaded machine */
	ck_assert_int_le(dead_at - silent_since, TIMEOUT_MS + 800);
	/* and not before: its last word (the join) came after before_join */
	ck_assert_int_ge(dead_at - before_join, TIMEOUT_MS - 20);

	/* node-0 finishes the dataset, node-1's shards included */
	atomic_int *counts = calloc(SIZE, sizeof(*counts));
	struct rv_test_shard_worker w = {
		.url = m.url, .node = "node-0", .worker = 0, .counts = counts, .size = SIZE
	};
	rv_test_shard_worker_main(&w);
	ck_assert_msg(w.rc == 0, "%s", w.err);
	ck_assert_int_eq(w.samples, SIZE);
	for (int i = 0; i < SIZE; i++)
		ck_assert_msg(counts[i] == 1, "sample %d counted %d times", i, counts[i]);
	ck_assert_int_eq(rv_master_job(c, &js, &err), 0);
	ck_assert(js.finished);
	ck_assert_int_eq(js.datasets[0].samples_done, SIZE);
	ck_assert_int_gt(held, 0);
	atomic_store(&stop, 1);
	pthread_join(bt, NULL);
	rv_master_client_free(c);
	free(counts);
	rv_test_master_cleanup(&m);
	free(spec);
}
END_TEST

/* Gang wait: MIN nodes never come; the round fails within max wait, the
 * waiting agent hears -ECANCELED and the job status says failed. */
START_TEST(test_gang_wait_fails_the_round)
{
	char *spec = rv_test_master_spec(1000, 10, 1, 1, 1);
	struct rv_test_master m;
	ck_assert_int_eq(rv_test_master_init(&m, spec), 0);
	const char *args[] = { "--nnodes", "3:3", "--rdzv-max-wait-s", "1", "--timer-tick-ms",
			       "20",       NULL };
	ck_assert_int_eq(rv_test_master_start(&m, args), 0);
	struct agent ag[2];
	int64_t t0 = rv_mono_ms();
	rendezvous(&m, ag, 2);
	int64_t took = rv_mono_ms() - t0;
	for (int i = 0; i < 2; i++) {
		ck_assert_msg(ag[i].rc == -ECANCELED, "agent %d: rc %d %s", i, ag[i].rc, ag[i].err);
		rv_rdzv_world_reply_release(&ag[i].world);
	}
	ck_assert_int_ge(took, 900);
	ck_assert_int_lt(took, 3000);
	struct rv_master_client *c = rv_test_master_client(&m);
	struct rv_job_status js;
	struct rv_err err = { 0 };
	ck_assert_int_eq(rv_master_job(c, &js, &err), 0);
	ck_assert_int_eq(js.state, RV_RDZV_FAILED);
	/* a late node is told so too, not left waiting */
	struct rv_rdzv_join j = { .node = "late", .local_world_size = 1 };
	int64_t round;
	ck_assert_int_eq(rv_master_join(c, &j, &round, &err), -ECANCELED);
	ck_assert_ptr_nonnull(strstr(err.msg, "rendezvous failed"));
	rv_master_client_free(c);
	rv_test_master_cleanup(&m);
	free(spec);
}
END_TEST

/* A failure report: the node leaves at once (new round) and its shards go
 * straight back to the queue, before any timeout. */
START_TEST(test_failure_report_requeues_at_once)
{
	enum { SIZE = 100 };
	char *spec = rv_test_master_spec(SIZE, 10, 1, 1, 2);
	struct rv_test_master m;
	ck_assert_int_eq(rv_test_master_init(&m, spec), 0);
	const char *args[] = { "--nnodes", "1:2", "--rdzv-last-call-ms", "100", NULL };
	ck_assert_int_eq(rv_test_master_start(&m, args), 0);
	struct agent ag[2];
	rendezvous(&m, ag, 2);
	ck_assert_msg(ag[0].rc == 0 && ag[1].rc == 0, "%s %s", ag[0].err, ag[1].err);
	int64_t round = ag[0].world.round;
	rv_rdzv_world_reply_release(&ag[0].world);
	rv_rdzv_world_reply_release(&ag[1].world);
	struct rv_master_client *c = rv_test_master_client(&m);
	struct rv_err err = { 0 };
	/* node-1 takes every shard */
	struct rv_shard_next req = { .node = "node-1", .worker = 1 };
	struct rv_shard_task t;
	int taken = 0;
	for (;;) {
		ck_assert_int_eq(rv_master_shard_next(c, &req, &t, &err), 0);
		if (t.status != RV_SHARD_TASK)
			break;
		taken++;
	}
	ck_assert_int_eq(taken, SIZE / 10);
	ck_assert_int_eq(t.status, RV_SHARD_WAIT);
	struct rv_failure_report f = { .node = "node-1", .reason = "worker oom", .exit_code = -9 };
	ck_assert_int_eq(rv_master_failure(c, &f, &err), 0);
	struct rv_job_status js;
	ck_assert_int_eq(rv_master_job(c, &js, &err), 0);
	ck_assert_int_gt(js.round, round);
	/* node-0 can take them all now */
	req = (struct rv_shard_next){ .node = "node-0", .worker = 0 };
	ck_assert_int_eq(rv_master_shard_next(c, &req, &t, &err), 0);
	ck_assert_int_eq(t.status, RV_SHARD_TASK);
	/* the heartbeat of the node that left tells it to join again */
	struct rv_heartbeat_reply hb;
	ck_assert_int_eq(rv_master_heartbeat(c, "node-1", &hb, &err), 0);
	ck_assert(hb.rejoin);
	rv_master_client_free(c);
	rv_test_master_cleanup(&m);
	free(spec);
}
END_TEST

struct watcher {
	const struct rv_test_master *m;
	int64_t round;
	struct rv_rdzv_world_reply reply;
	int rc;
	int64_t answered_ms;
};

static void *watch_main(void *arg)
{
	struct watcher *w = arg;
	struct rv_master_client *c = rv_test_master_client(w->m);
	w->rc = rv_master_world_watch(c, "node-0", w->round, 20000, &w->reply, NULL);
	w->answered_ms = rv_mono_ms();
	rv_master_client_free(c);
	return NULL;
}

/* The world watch (rover-run's): parked while the round is complete with
 * the node in it, answered at once when another node's failure opens a
 * new round; a watch of a round already over is answered at once. */
START_TEST(test_world_watch)
{
	char *spec = rv_test_master_spec(100, 10, 1, 2, 2);
	struct rv_test_master m;
	ck_assert_int_eq(rv_test_master_init(&m, spec), 0);
	ck_assert_int_eq(rv_test_master_start(&m, NULL), 0);
	struct agent ag[2];
	rendezvous(&m, ag, 2);
	ck_assert_msg(ag[0].rc == 0 && ag[1].rc == 0, "%s %s", ag[0].err, ag[1].err);
	struct watcher w = { .m = &m, .round = ag[0].world.round };
	rv_rdzv_world_reply_release(&ag[0].world);
	rv_rdzv_world_reply_release(&ag[1].world);
	pthread_t t;
	ck_assert_int_eq(pthread_create(&t, NULL, watch_main, &w), 0);
	usleep(500 * 1000);
	ck_assert_int_eq(w.answered_ms, 0); /* still parked */
	struct rv_master_client *c = rv_test_master_client(&m);
	struct rv_err err = { 0 };
	struct rv_failure_report f = { .node = "node-1",
				       .reason = "worker killed",
				       .exit_code = -9 };
	int64_t t0 = rv_mono_ms();
	ck_assert_int_eq(rv_master_failure(c, &f, &err), 0);
	pthread_join(t, NULL);
	ck_assert_int_eq(w.rc, 0);
	ck_assert_int_ne(w.reply.status, RV_RDZV_COMPLETE);
	ck_assert_int_lt(w.answered_ms - t0, 1000);
	rv_rdzv_world_reply_release(&w.reply);
	/* asked again for the round that is over: answered without a wait */
	t0 = rv_mono_ms();
	ck_assert_int_eq(rv_master_world_watch(c, "node-0", w.round, 20000, &w.reply, &err), 0);
	ck_assert_int_ne(w.reply.status, RV_RDZV_COMPLETE);
	ck_assert_int_lt(rv_mono_ms() - t0, 1000);
	rv_rdzv_world_reply_release(&w.reply);
	rv_master_client_free(c);
	rv_test_master_cleanup(&m);
	free(spec);
}
END_TEST

/* With a token, writes without it are refused (401) and reads are not. */
START_TEST(test_token)
{
	char *spec = rv_test_master_spec(100, 10, 1, 1, 1);
	struct rv_test_master m;
	ck_assert_int_eq(rv_test_master_init(&m, spec), 0);
	const char *args[] = { "--token", "s3cret", NULL };
	ck_assert_int_eq(rv_test_master_start(&m, args), 0);
	struct rv_err err = { 0 };
	struct rv_master_client *anon = rv_test_master_client(&m);
	struct rv_rdzv_join j = { .node = "n", .local_world_size = 1 };
	int64_t round;
	ck_assert_int_eq(rv_master_join(anon, &j, &round, &err), -EACCES);
	struct rv_job_status js;
	ck_assert_int_eq(rv_master_job(anon, &js, &err), 0);
	struct rv_master_opts o = { .url = m.url, .token = "s3cret" };
	struct rv_master_client *c = rv_master_client_new(&o, &err);
	ck_assert_ptr_nonnull(c);
	ck_assert_int_eq(rv_master_join(c, &j, &round, &err), 0);
	ck_assert_int_ge(round, 1);
	rv_master_client_free(c);
	rv_master_client_free(anon);
	rv_test_master_cleanup(&m);
	free(spec);
}
END_TEST

/* --token-file: the token stays off the command line; a file that cannot
 * be read or holds no token stops the master, naming the key. */
START_TEST(test_token_file)
{
	char *spec = rv_test_master_spec(100, 10, 1, 1, 1);
	struct rv_test_master m;
	ck_assert_int_eq(rv_test_master_init(&m, spec), 0);
	char path[400];
	snprintf(path, sizeof(path), "%s/token", m.dir);
	rv_test_write_file(path, "s3cret-from-file  \n");
	const char *args[] = { "--token-file", path, NULL };
	ck_assert_int_eq(rv_test_master_start(&m, args), 0);
	struct rv_err err = { 0 };
	struct rv_master_client *anon = rv_test_master_client(&m);
	struct rv_rdzv_join j = { .node = "n", .local_world_size = 1 };
	int64_t round;
	ck_assert_int_eq(rv_master_join(anon, &j, &round, &err), -EACCES);
	struct rv_master_opts o = { .url = m.url, .token = "s3cret-from-file" };
	struct rv_master_client *c = rv_master_client_new(&o, &err);
	ck_assert_ptr_nonnull(c);
	ck_assert_int_eq(rv_master_join(c, &j, &round, &err), 0);
	rv_master_client_free(c);
	rv_master_client_free(anon);
	rv_test_master_stop(&m, SIGTERM, 10000);

	rv_test_write_file(path, " \n");
	ck_assert_int_lt(rv_test_master_start(&m, args), 0);
	char *log = rv_test_read_file(m.log);
	ck_assert_msg(log && strstr(log, "no token in") && strstr(log, "server.token_file"),
		      "log: %s", log ? log : "");
	free(log);
	rv_test_master_cleanup(&m);
	free(spec);
}
END_TEST

/* Query parameters: not UTF-8, or longer than a node name may be, is a 400
 * in JSON naming the parameter. */
START_TEST(test_query_checked)
{
	char *spec = rv_test_master_spec(100, 10, 1, 1, 1);
	struct rv_test_master m;
	ck_assert_int_eq(rv_test_master_init(&m, spec), 0);
	ck_assert_int_eq(rv_test_master_start(&m, NULL), 0);
	char longname[400];
	memset(longname, 'n', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	char longq[1300];
	memset(longq, 'x', sizeof(longq) - 1);
	longq[sizeof(longq) - 1] = '\0';
	struct {
		const char *query, *field, *detail;
	} bad[] = {
		{ "/v1/rdzv/world?node=w%FF&round=1", "node", "not valid UTF-8" },
		{ "/v1/rdzv/world?node=ok&round=1&x%C3=1", "query", "not valid UTF-8" },
		{ NULL, "node", "longer than" },
		{ NULL, "pad", "longer than 1024" },
		{ "/v1/netcheck/group?round=0", "node", "required" },
	};
	char u0[600], u1[1500];
	snprintf(u0, sizeof(u0), "/v1/rdzv/world?node=%s&round=1", longname);
	snprintf(u1, sizeof(u1), "/v1/rdzv/world?node=a&round=1&pad=%s", longq);
	bad[2].query = u0;
	bad[3].query = u1;
	struct rv_http_client *hc = rv_http_client_new(NULL, 2000, 5000);
	ck_assert_ptr_nonnull(hc);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char url[2000];
		snprintf(url, sizeof(url), "%s%s", m.url, bad[i].query);
		struct rv_http_result r = { 0 };
		struct rv_err err = { 0 };
		ck_assert_int_eq(rv_http_request(hc, "GET", url, NULL, 0, 0, &r, &err), 0);
		ck_assert_msg(r.status == 400, "%zu: %ld %s", i, r.status, r.body ? r.body : "");
		char want[80];
		snprintf(want, sizeof(want), "\"field\":\"%s\"", bad[i].field);
		ck_assert_msg(r.body && strstr(r.body, want) && strstr(r.body, bad[i].detail),
			      "%zu: %s", i, r.body ? r.body : "");
		rv_http_result_release(&r);
	}
	rv_http_client_free(hc);
	rv_test_master_cleanup(&m);
	free(spec);
}
END_TEST

RV_TEST_MAIN_TCASE("master_rdzv", "rdzv", 60, test_world_of_n_agents, test_between_min_and_max,
		   test_silent_agent_declared_dead, test_gang_wait_fails_the_round,
		   test_failure_report_requeues_at_once, test_world_watch, test_token,
		   test_token_file, test_query_checked)
