/*
 * check_master_stream.c: streaming datasets on the real rover-master.  A
 * producer tells each partition's end as data "arrives", workers pull
 * offset ranges and report them done, and the master is killed with -9
 * and restarted on the same state folder several times meanwhile: at the
 * end every offset was processed exactly once, the committed offsets are
 * the ends, and a new job that imports the data checkpoint resumes from
 * them.  Also: nothing past the known end is handed out ("wait"), and an
 * unknown stream or partition is a 404.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "brainfix.h"
#include "masterfix.h"
#include "testutil.h"

#define NPARTS 3
#define TOTAL  1500 /* offsets per partition */

static const char spec_json[] =
	"{\"apiVersion\":\"elastic.rover.dev/v1alpha1\",\"kind\":\"ElasticJob\","
	"\"metadata\":{\"name\":\"online\"},"
	"\"spec\":{\"distributionStrategy\":\"AllreduceStrategy\","
	"\"replicaSpecs\":{\"worker\":{\"replicas\":1}},"
	"\"datasets\":[{\"name\":\"clicks\",\"streaming\":true,\"shardSize\":7,\"partitions\":["
	"{\"name\":\"p0\",\"end_offset\":0},{\"name\":\"p1\",\"start_offset\":0,\"end_offset\":0},"
	"{\"name\":\"p2\",\"end_offset\":0}]}]}}";

struct worker {
	const struct rv_test_master *m;
	int64_t id;
	atomic_int *counts; /* [part * TOTAL + offset] */
	atomic_int *stop;
	int rc;
	char err[512];
};

static int part_of(const char *name)
{
	return name[0] == 'p' && name[1] >= '0' && name[1] < '0' + NPARTS && !name[2]
		       ? name[1] - '0'
		       : -1;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct rv_err err = { 0 };
	struct rv_master_client *c = rv_test_master_client(w->m);
	struct rv_shard_next req = { .worker = w->id, .dataset = "clicks" };
	snprintf(req.node, sizeof(req.node), "node-%d", (int)w->id);
	while (c && !atomic_load(w->stop)) {
		struct rv_shard_task t;
		if ((w->rc = rv_master_shard_next(c, &req, &t, &err)) < 0)
			break;
		if (t.status != RV_SHARD_TASK) {
			usleep(2000);
			continue;
		}
		int p = part_of(t.partition);
		if (p < 0 || t.end > TOTAL || t.start >= t.end) {
			w->rc = -EPROTO;
			snprintf(err.msg, sizeof(err.msg), "bad task %s [%ld,%ld)", t.partition,
				 (long)t.start, (long)t.end);
			break;
		}
		struct rv_shard_done d = { .worker = w->id, .id = t.id };
		snprintf(d.node, sizeof(d.node), "%s", req.node);
		if ((w->rc = rv_master_shard_done(c, &d, NULL, &err)) < 0)
			break;
		for (int64_t i = t.start; i < t.end; i++)
			atomic_fetch_add(&w->counts[p * TOTAL + i], 1);
	}
	snprintf(w->err, sizeof(w->err), "%s", err.msg);
	rv_master_client_free(c);
	return NULL;
}

struct producer {
	const struct rv_test_master *m;
	int rc;
	char err[512];
};

/* Data arrives in steps of 50 per partition, told to the master each time. */
static void *producer_main(void *arg)
{
	struct producer *pr = arg;
	struct rv_err err = { 0 };
	struct rv_master_client *c = rv_test_master_client(pr->m);
	for (int64_t end = 50; c && end <= TOTAL; end += 50) {
		for (int p = 0; p < NPARTS; p++) {
			struct rv_stream_end e = { .end_offset = end };
			snprintf(e.partition, sizeof(e.partition), "p%d", p);
			if ((pr->rc = rv_master_stream_end(c, "clicks", &e, &err)) < 0)
				goto out;
		}
		usleep(3000);
	}
out:
	snprintf(pr->err, sizeof(pr->err), "%s", err.msg);
	rv_master_client_free(c);
	return NULL;
}

static int64_t committed_total(struct rv_master_client *c, struct rv_stream_status *st)
{
	struct rv_err err = { 0 };
	ck_assert_msg(rv_master_stream(c, "clicks", st, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(st->npartitions, NPARTS);
	int64_t n = 0;
	for (int p = 0; p < NPARTS; p++) {
		ck_assert_int_le(st->partitions[p].committed_offset, st->partitions[p].end_offset);
		n += st->partitions[p].committed_offset;
	}
	return n;
}

START_TEST(test_kill9_exactly_once_and_resume)
{
	struct rv_test_master m;
	ck_assert_int_eq(rv_test_master_init(&m, spec_json), 0);
	const char *args[] = { "--journal-snapshot-every", "200", NULL };
	ck_assert_int_eq(rv_test_master_start(&m, args), 0);
	struct rv_master_client *c = rv_test_master_client(&m);
	struct rv_err err = { 0 };

	/* nothing is available yet: workers hear "wait" */
	struct rv_shard_next req = { .node = "probe", .worker = 99, .dataset = "clicks" };
	struct rv_shard_task t;
	ck_assert_int_eq(rv_master_shard_next(c, &req, &t, &err), 0);
	ck_assert_int_eq(t.status, RV_SHARD_WAIT);

	atomic_int *counts = calloc(NPARTS * TOTAL, sizeof(*counts));
	atomic_int stop = 0;
	enum { NW = 4 };
	struct worker w[NW];
	pthread_t tw[NW], tp;
	struct producer pr = { .m = &m };
	for (int i = 0; i < NW; i++) {
		w[i] = (struct worker){ .m = &m, .id = i, .counts = counts, .stop = &stop };
		ck_assert_int_eq(pthread_create(&tw[i], NULL, worker_main, &w[i]), 0);
	}
	ck_assert_int_eq(pthread_create(&tp, NULL, producer_main, &pr), 0);

	struct rv_stream_status st;
	for (int k = 1; k <= 3; k++) {
		int64_t target = (int64_t)NPARTS * TOTAL * k / 4;
		while (committed_total(c, &st) < target)
			usleep(3000);
		int ws = rv_test_master_stop(&m, SIGKILL, 5000);
		ck_assert(ws >= 0 && WIFSIGNALED(ws));
		ck_assert_int_eq(rv_test_master_restart(&m), 0);
		/* nothing committed before the kill went back */
		ck_assert_int_ge(committed_total(c, &st), target);
	}
	pthread_join(tp, NULL);
	ck_assert_msg(pr.rc == 0, "producer: %s", pr.err);
	for (int guard = 0; committed_total(c, &st) < (int64_t)NPARTS * TOTAL; guard++) {
		ck_assert_int_lt(guard, 5000);
		usleep(2000);
	}
	atomic_store(&stop, 1);
	for (int i = 0; i < NW; i++) {
		pthread_join(tw[i], NULL);
		ck_assert_msg(w[i].rc == 0, "worker %d: %s", i, w[i].err);
	}
	rv_test_assert_once(counts, NPARTS * TOTAL, "offsets");
	for (int p = 0; p < NPARTS; p++) {
		ck_assert_int_eq(st.partitions[p].committed_offset, TOTAL);
		ck_assert_int_eq(st.partitions[p].end_offset, TOTAL);
		ck_assert_int_eq(st.partitions[p].doing, 0);
	}
	struct rv_job_status js;
	ck_assert_int_eq(rv_master_job(c, &js, &err), 0);
	ck_assert_int_eq(js.datasets[0].samples_done, NPARTS * TOTAL);
	ck_assert(!js.finished); /* a stream never finishes */

	/* a new job resumes from the committed offsets */
	struct rv_data_ckpt ck;
	ck_assert_msg(rv_master_ckpt_export(c, 7, &ck, &err) == 0, "%s", err.msg);
	struct rv_test_master m2;
	ck_assert_int_eq(rv_test_master_init(&m2, spec_json), 0);
	ck_assert_int_eq(rv_test_master_start(&m2, NULL), 0);
	struct rv_master_client *c2 = rv_test_master_client(&m2);
	ck_assert_msg(rv_master_ckpt_import(c2, &ck, &err) == 0, "%s", err.msg);
	rv_data_ckpt_release(&ck);
	ck_assert_int_eq(committed_total(c2, &st), (int64_t)NPARTS * TOTAL);
	struct rv_stream_end e = { .partition = "p1", .end_offset = TOTAL + 5 };
	ck_assert_int_eq(rv_master_stream_end(c2, "clicks", &e, &err), 0);
	ck_assert_int_eq(rv_master_shard_next(c2, &req, &t, &err), 0);
	ck_assert_int_eq(t.status, RV_SHARD_TASK);
	ck_assert_str_eq(t.partition, "p1");
	ck_assert_int_eq(t.start, TOTAL);
	ck_assert_int_eq(t.end, TOTAL + 5);

	rv_master_client_free(c2);
	rv_master_client_free(c);
	free(counts);
	rv_test_master_cleanup(&m2);
	rv_test_master_cleanup(&m);
}
END_TEST

START_TEST(test_unknown_stream_or_partition)
{
	struct rv_test_master m;
	ck_assert_int_eq(rv_test_master_init(&m, spec_json), 0);
	ck_assert_int_eq(rv_test_master_start(&m, NULL), 0);
	struct rv_master_client *c = rv_test_master_client(&m);
	struct rv_err err = { 0 };
	struct rv_stream_end e = { .partition = "p7", .end_offset = 10 };
	ck_assert_int_eq(rv_master_stream_end(c, "clicks", &e, &err), -ENOENT);
	ck_assert_str_eq(err.field, "partition");
	snprintf(e.partition, sizeof(e.partition), "p0");
	ck_assert_int_eq(rv_master_stream_end(c, "nope", &e, &err), -ENOENT);
	struct rv_stream_status st;
	ck_assert_int_eq(rv_master_stream(c, "nope", &st, &err), -ENOENT);
	/* a lower end than known changes nothing */
	ck_assert_int_eq(rv_master_stream_end(c, "clicks", &e, &err), 0);
	e.end_offset = 3;
	ck_assert_int_eq(rv_master_stream_end(c, "clicks", &e, &err), 0);
	ck_assert_int_eq(rv_master_stream(c, "clicks", &st, &err), 0);
	ck_assert_int_eq(st.partitions[0].end_offset, 10);
	/* the committed offsets are metrics too */
	struct rv_test_brain b = { .port = m.port };
	snprintf(b.url, sizeof(b.url), "%s", m.url);
	struct rv_test_reply r;
	ck_assert_int_eq(rv_test_http(&b, "GET", "/metrics", NULL, NULL, &r), 0);
	ck_assert_ptr_nonnull(strstr(
		r.body,
		"rover_master_stream_committed_offset{dataset=\"clicks\",partition=\"p2\"} 0"));
	/* and the consumer lag, end - committed, per partition */
	const char *lag0 = "rover_master_stream_lag{dataset=\"clicks\",partition=\"p0\"} 10\n";
	ck_assert_msg(strstr(r.body, lag0), "no line %s in /metrics", lag0);
	rv_test_reply_release(&r);
	struct rv_shard_next req = { .node = "n", .worker = 1, .dataset = "clicks" };
	struct rv_shard_task t;
	ck_assert_int_eq(rv_master_shard_next(c, &req, &t, &err), 0);
	ck_assert_int_eq(t.status, RV_SHARD_TASK);
	ck_assert_str_eq(t.partition, "p0");
	struct rv_shard_done d = { .node = "n", .worker = 1, .id = t.id };
	ck_assert_int_eq(rv_master_shard_done(c, &d, NULL, &err), 0);
	char want[128];
	snprintf(want, sizeof(want),
		 "rover_master_stream_lag{dataset=\"clicks\",partition=\"p0\"} %d\n",
		 (int)(10 - (t.end - t.start)));
	ck_assert_int_eq(rv_test_http(&b, "GET", "/metrics", NULL, NULL, &r), 0);
	ck_assert_msg(strstr(r.body, want), "no line %s in /metrics", want);
	rv_test_reply_release(&r);
	rv_master_client_free(c);
	rv_test_master_cleanup(&m);
}
END_TEST

RV_TEST_MAIN_TCASE("master_stream", "core", 120, test_kill9_exactly_once_and_resume,
		   test_unknown_stream_or_partition)
