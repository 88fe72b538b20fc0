/*
 * check_master_shards.c: data shards from the real rover-master over
 * loopback: concurrent workers take every sample of every epoch exactly
 * once; a repeated or late done counts nothing; a retried shard request
 * gets the task its lost reply held; a data checkpoint at step S exported
 * from a job of two workers and imported into a fresh master with three
 * resumes with no sample lost or repeated, also across a kill -9 right
 * after the import; past the doing timeout a task stays with a worker whose
 * node heartbeats (a slow worker) and goes back from one of no known node,
 * and a node's join gives its workers' tasks back at once.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "masterfix.h"
#include "parse.h"
#include "testutil.h"

static void start_master(struct rv_test_master *m, long size, long shard, int epochs)
{
	char *spec = rv_test_master_spec(size, shard, epochs, 1, 1);
	ck_assert_ptr_nonnull(spec);
	ck_assert_int_eq(rv_test_master_init(m, spec), 0);
	free(spec);
	const char *args[] = { "--journal-snapshot-every", "500", NULL };
	ck_assert_int_eq(rv_test_master_start(m, args), 0);
}

static void run_workers(const struct rv_test_master *m, int n, atomic_int *counts, long size,
			int64_t first_worker)
{
	struct rv_test_shard_worker w[16];
	pthread_t t[16];
	for (int i = 0; i < n; i++) {
		memset(&w[i], 0, sizeof(w[i]));
		w[i].url = m->url;
		snprintf(w[i].node, sizeof(w[i].node), "node-%d", i);
		w[i].worker = first_worker + i;
		w[i].counts = counts;
		w[i].size = size;
		ck_assert_int_eq(pthread_create(&t[i], NULL, rv_test_shard_worker_main, &w[i]), 0);
	}
	for (int i = 0; i < n; i++) {
		pthread_join(t[i], NULL);
		ck_assert_msg(w[i].rc == 0, "worker %d: %s", i, w[i].err);
	}
}

START_TEST(test_every_sample_once)
{
	enum { SIZE = 5003, EPOCHS = 2, WORKERS = 4 };
	struct rv_test_master m;
	start_master(&m, SIZE, 37, EPOCHS);
	atomic_int *counts = calloc(SIZE * EPOCHS, sizeof(*counts));
	run_workers(&m, WORKERS, counts, SIZE, 0);
	for (int i = 0; i < SIZE * EPOCHS; i++)
		ck_assert_msg(counts[i] == 1, "epoch %d sample %d counted %d times", i / SIZE,
			      i % SIZE, counts[i]);
	struct rv_master_client *c = rv_test_master_client(&m);
	struct rv_job_status js;
	struct rv_err err = { 0 };
	ck_assert_int_eq(rv_master_job(c, &js, &err), 0);
	ck_assert(js.finished);
	ck_assert_int_eq(js.ndatasets, 1);
	ck_assert_int_eq(js.datasets[0].samples_total, SIZE * EPOCHS);
	ck_assert_int_eq(js.datasets[0].samples_done, SIZE * EPOCHS);
	/* a finished job says so to the next request */
	struct rv_shard_next req = { .node = "node-0", .worker = 0 };
	struct rv_shard_task t;
	ck_assert_int_eq(rv_master_shard_next(c, &req, &t, &err), 0);
	ck_assert_int_eq(t.status, RV_SHARD_FINISHED);
	rv_master_client_free(c);
	free(counts);
	rv_test_master_cleanup(&m);
}
END_TEST

START_TEST(test_repeated_done_and_retried_next)
{
	struct rv_test_master m;
	start_master(&m, 100, 10, 1);
	struct rv_master_client *c = rv_test_master_client(&m);
	struct rv_err err = { 0 };
	struct rv_shard_next req = { .node = "node-0", .worker = 7, .req = 42 };
	struct rv_shard_task a, b;
	ck_assert_int_eq(rv_master_shard_next(c, &req, &a, &err), 0);
	ck_assert_int_eq(a.status, RV_SHARD_TASK);
	/* the same request again (its reply was lost): the same task */
	ck_assert_int_eq(rv_master_shard_next(c, &req, &b, &err), 0);
	ck_assert_int_eq(b.id, a.id);
	ck_assert_int_eq(b.start, a.start);
	req.req = 43;
	ck_assert_int_eq(rv_master_shard_next(c, &req, &b, &err), 0);
	ck_assert_int_ne(b.id, a.id);
	struct rv_shard_done d = { .node = "node-0", .worker = 7, .id = a.id };
	bool counted = false;
	ck_assert_int_eq(rv_master_shard_done(c, &d, &counted, &err), 0);
	ck_assert(counted);
	ck_assert_int_eq(rv_master_shard_done(c, &d, &counted, &err), 0);
	ck_assert(!counted);
	/* another worker's task */
	d.id = b.id;
	d.worker = 8;
	ck_assert_int_eq(rv_master_shard_done(c, &d, &counted, &err), -EEXIST);
	/* an unknown dataset names the field */
	snprintf(req.dataset, sizeof(req.dataset), "nope");
	ck_assert_int_eq(rv_master_shard_next(c, &req, &b, &err), -EINVAL);
	ck_assert_str_eq(err.field, "dataset");
	struct rv_job_status js;
	ck_assert_int_eq(rv_master_job(c, &js, &err), 0);
	ck_assert_int_eq(js.datasets[0].samples_done, a.end - a.start);
	rv_master_client_free(c);
	rv_test_master_cleanup(&m);
}
END_TEST

static void count_range(atomic_int *counts, int64_t from, int64_t to)
{
	for (int64_t i = from; i < to; i++)
		atomic_fetch_add(&counts[i], 1);
}

/* Two workers up to step S, then a fresh master with three imports S. */
START_TEST(test_checkpoint_world_size_change)
{
	enum { SIZE = 1000, STEP = 50 };
	struct rv_test_master m;
	start_master(&m, SIZE, 10, 1);
	struct rv_master_client *c = rv_test_master_client(&m);
	struct rv_err err = { 0 };
	atomic_int *counts = calloc(SIZE, sizeof(*counts));
	struct rv_shard_next r0 = { .node = "node-0", .worker = 0 };
	struct rv_shard_next r1 = { .node = "node-1", .worker = 1 };
	struct rv_shard_task a1, a2, a3, b1, b2;
	/* worker 0: a1 consumed and done, a2 consumed 4 samples at S, a3 prefetched */
	ck_assert_int_eq(rv_master_shard_next(c, &r0, &a1, &err), 0);
	ck_assert_int_eq(rv_master_shard_next(c, &r0, &a2, &err), 0);
	/* worker 1: b1 consumed 7 at S; b2 prefetched and even done after S */
	ck_assert_int_eq(rv_master_shard_next(c, &r1, &b1, &err), 0);
	ck_assert_int_eq(rv_master_shard_next(c, &r0, &a3, &err), 0);
	ck_assert_int_eq(rv_master_shard_next(c, &r1, &b2, &err), 0);
	struct rv_shard_done d = { .node = "node-0", .worker = 0, .id = a1.id };
	ck_assert_int_eq(rv_master_shard_done(c, &d, NULL, &err), 0);
	count_range(counts, a1.start, a1.end);
	count_range(counts, a2.start, a2.start + 4);
	count_range(counts, b1.start, b1.start + 7);
	struct rv_ckpt_report rep0 = { .step = STEP, .worker = 0, .task_id = a2.id, .consumed = 4 };
	struct rv_ckpt_report rep1 = { .step = STEP, .worker = 1, .task_id = b1.id, .consumed = 7 };
	ck_assert_msg(rv_master_ckpt_report(c, &rep0, &err) == 0, "%s", err.msg);
	ck_assert_msg(rv_master_ckpt_report(c, &rep1, &err) == 0, "%s", err.msg);
	/* after S: b1 and b2 finish (their samples after S are not in step S) */
	d = (struct rv_shard_done){ .node = "node-1", .worker = 1, .id = b1.id };
	ck_assert_int_eq(rv_master_shard_done(c, &d, NULL, &err), 0);
	d.id = b2.id;
	ck_assert_int_eq(rv_master_shard_done(c, &d, NULL, &err), 0);
	struct rv_data_ckpt ck;
	ck_assert_msg(rv_master_ckpt_export(c, STEP, &ck, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(ck.step, STEP);
	/* a step nobody reported */
	struct rv_data_ckpt none;
	ck_assert_int_eq(rv_master_ckpt_export(c, STEP + 1, &none, &err), -ENOENT);
	rv_master_client_free(c);
	rv_test_master_cleanup(&m);

	/* the job restarts from step S with three workers */
	struct rv_test_master m2;
	start_master(&m2, SIZE, 10, 1);
	c = rv_test_master_client(&m2);
	ck_assert_msg(rv_master_ckpt_import(c, &ck, &err) == 0, "%s", err.msg);
	struct rv_job_status js;
	ck_assert_int_eq(rv_master_job(c, &js, &err), 0);
	ck_assert_int_eq(js.datasets[0].samples_done, (a1.end - a1.start) + 4 + 7);
	/* the import is journaled: a crash right after it keeps it */
	ck_assert_int_ge(rv_test_master_stop(&m2, SIGKILL, 5000), 0);
	ck_assert_int_eq(rv_test_master_restart(&m2), 0);
	ck_assert_int_eq(rv_master_job(c, &js, &err), 0);
	ck_assert_int_eq(js.datasets[0].samples_done, (a1.end - a1.start) + 4 + 7);
	run_workers(&m2, 3, counts, SIZE, 10);
	for (int i = 0; i < SIZE; i++)
		ck_assert_msg(counts[i] == 1, "sample %d counted %d times", i, counts[i]);
	ck_assert_int_eq(rv_master_job(c, &js, &err), 0);
	ck_assert(js.finished);
	ck_assert_int_eq(js.datasets[0].samples_done, SIZE);
	/* a document that is not a checkpoint is refused, the state unchanged */
	struct rv_data_ckpt bad = { .step = 1, .checkpoint = (char *)"{\"x\":1}", .len = 7 };
	ck_assert_int_eq(rv_master_ckpt_import(c, &bad, &err), -EINVAL);
	ck_assert_int_eq(rv_master_job(c, &js, &err), 0);
	ck_assert(js.finished);
	rv_master_client_free(c);
	rv_data_ckpt_release(&ck);
	free(counts);
	rv_test_master_cleanup(&m2);
}
END_TEST

/* Heartbeats of node for ms milliseconds, every 200 ms. */
static void heartbeat_for(struct rv_master_client *c, const char *node, int ms)
{
	struct rv_err err = { 0 };
	for (int64_t until = rv_mono_ms() + ms; rv_mono_ms() < until;) {
		ck_assert_msg(rv_master_heartbeat(c, node, NULL, &err) == 0, "%s", err.msg);
		usleep(200 * 1000);
	}
}

static struct rv_shard_task next_task(struct rv_master_client *c, const char *node, int64_t worker)
{
	struct rv_shard_next req = { .worker = worker };
	snprintf(req.node, sizeof(req.node), "%s", node);
	struct rv_shard_task t;
	struct rv_err err = { 0 };
	ck_assert_msg(rv_master_shard_next(c, &req, &t, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(t.status, RV_SHARD_TASK);
	return t;
}

/* A doing timeout of 300 ms: worker 0 of a node that joined and heartbeats
 * holds its task through 1.5 s (its done still counts, no one else got
 * it), while worker 1 of a node the master never saw loses its task to
 * worker 2; the node's join gives its worker's next task back at once, and
 * a restarted master replays the same. */
START_TEST(test_live_node_keeps_its_tasks)
{
	struct rv_test_master m;
	char *spec = rv_test_master_spec(100, 10, 1, 1, 1);
	ck_assert_int_eq(rv_test_master_init(&m, spec), 0);
	free(spec);
	const char *args[] = { "--shard-doing-timeout-ms", "300", NULL };
	ck_assert_int_eq(rv_test_master_start(&m, args), 0);
	struct rv_master_client *c = rv_test_master_client(&m);
	struct rv_err err = { 0 };
	struct rv_rdzv_join j = { .node = "live", .addr = "127.0.0.1:1", .local_world_size = 1 };
	int64_t round;
	ck_assert_msg(rv_master_join(c, &j, &round, &err) == 0, "%s", err.msg);
	struct rv_shard_task a = next_task(c, "live", 0);
	struct rv_shard_task b = next_task(c, "nobody", 1);
	heartbeat_for(c, "live", 1500);
	/* b went back and is served first; a is still worker 0's */
	struct rv_shard_task again = next_task(c, "nobody", 2);
	ck_assert_int_eq(again.start, b.start);
	struct rv_shard_task fresh = next_task(c, "nobody", 2);
	ck_assert(fresh.start != a.start);
	bool counted = false;
	struct rv_shard_done d = { .node = "live", .worker = 0, .id = a.id };
	ck_assert_int_eq(rv_master_shard_done(c, &d, &counted, &err), 0);
	ck_assert_msg(counted, "the slow worker's done did not count");
	/* the node joins again (its workers were stopped): their task is free */
	struct rv_shard_task held = next_task(c, "live", 0);
	ck_assert_msg(rv_master_join(c, &j, &round, &err) == 0, "%s", err.msg);
	struct rv_shard_task freed = next_task(c, "nobody", 3);
	ck_assert_int_eq(freed.start, held.start);
	/* a restart replays it all: the same answers to the same requests */
	struct rv_job_status before, after;
	ck_assert_int_eq(rv_master_job(c, &before, &err), 0);
	ck_assert_int_ge(rv_test_master_stop(&m, SIGKILL, 5000), 0);
	ck_assert_int_eq(rv_test_master_restart(&m), 0);
	ck_assert_int_eq(rv_master_job(c, &after, &err), 0);
	ck_assert_int_eq(after.datasets[0].samples_done, before.datasets[0].samples_done);
	ck_assert_int_eq(after.datasets[0].samples_done, a.end - a.start);
	rv_master_client_free(c);
	rv_test_master_cleanup(&m);
}
END_TEST

RV_TEST_MAIN_TCASE("master_shards", "shards", 90, test_every_sample_once,
		   test_repeated_done_and_retried_next, test_checkpoint_world_size_change,
		   test_live_node_keeps_its_tasks)
