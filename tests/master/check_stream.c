/*
 * check_stream.c: streaming datasets (master/stream.c): offset-range tasks
 * up to the known end, a producer extending it, the committed offset held
 * below a gap, dead and stalled workers' ranges handed out again, late and
 * foreign dones, snapshots, committed offsets carried to a new manager, and
 * a property test: random interleavings of next, done, deaths, stalls,
 * extensions and snapshot reloads, after which every offset was processed
 * exactly once and the committed offset only moved up, never past an
 * offset not done.  STREAM_SEEDS=N (default 200) runs more seeds.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "json.h"
#include "stream.h"
#include "testutil.h"

static struct stream_mgr *mgr(int64_t shard, int nparts, const int64_t *ends, int64_t timeout)
{
	struct stream_partition p[8];
	for (int i = 0; i < nparts; i++) {
		snprintf(p[i].name, sizeof(p[i].name), "p%d", i);
		p[i].start = 0;
		p[i].end = ends[i];
	}
	struct stream_dataset d = {
		.name = "clicks", .shard_size = shard, .nparts = nparts, .parts = p
	};
	struct stream_conf c = { .doing_timeout_ms = timeout };
	struct rv_err err = { 0 };
	struct stream_mgr *m = stream_new(&d, 1, &c, &err);
	ck_assert_msg(m, "stream_new: %s", err.msg);
	return m;
}

static int64_t committed(const struct stream_mgr *m, int part)
{
	struct stream_part_stats st;
	stream_part_stats(m, 0, part, &st);
	return st.committed;
}

START_TEST(test_tasks_up_to_the_known_end)
{
	int64_t ends[] = { 25 };
	struct stream_mgr *m = mgr(10, 1, ends, 0);
	struct stream_task t[4];
	ck_assert_int_eq(stream_next(m, 0, 1, 0, &t[0]), 1);
	ck_assert_int_eq(stream_next(m, 0, 1, 0, &t[1]), 1);
	ck_assert_int_eq(stream_next(m, 0, 1, 0, &t[2]), 1);
	ck_assert_int_eq(t[0].start, 0);
	ck_assert_int_eq(t[0].end, 10);
	ck_assert_int_eq(t[2].start, 20);
	ck_assert_int_eq(t[2].end, 25); /* short: the known end */
	ck_assert_int_ge(t[0].id, STREAM_ID_BASE);
	ck_assert_int_eq(stream_next(m, 0, 1, 0, &t[3]), 0); /* wait */
	ck_assert_int_eq(stream_extend(m, 0, "p0", 20), 0);  /* below: nothing */
	ck_assert_int_eq(stream_extend(m, 0, "p9", 40), -ENOENT);
	ck_assert_int_eq(stream_extend(m, 0, "p0", 40), 1);
	ck_assert_int_eq(stream_next(m, 0, 1, 0, &t[3]), 1);
	ck_assert_int_eq(t[3].start, 25);
	ck_assert_int_eq(t[3].end, 35);
	ck_assert_int_eq(stream_next(m, 1, 1, 0, &t[3]), -EINVAL);
	stream_free(m);
}
END_TEST

START_TEST(test_committed_waits_for_the_gap)
{
	int64_t ends[] = { 30 };
	struct stream_mgr *m = mgr(10, 1, ends, 0);
	struct stream_task a, b, c;
	stream_next(m, 0, 1, 0, &a);
	stream_next(m, 0, 2, 0, &b);
	stream_next(m, 0, 3, 0, &c);
	ck_assert_int_eq(stream_done(m, c.id, 3), 1);
	ck_assert_int_eq(committed(m, 0), 0);
	ck_assert_int_eq(stream_done(m, b.id, 1), -EPERM); /* another worker's */
	ck_assert_int_eq(stream_done(m, b.id, 2), 1);
	ck_assert_int_eq(committed(m, 0), 0);
	ck_assert_int_eq(stream_done(m, b.id, 2), 0); /* repeated */
	ck_assert_int_eq(stream_done(m, a.id, 1), 1);
	ck_assert_int_eq(committed(m, 0), 30);
	struct stream_part_stats st;
	stream_part_stats(m, 0, 0, &st);
	ck_assert_int_eq(st.held, 0);
	ck_assert_int_eq(st.done, 30);
	ck_assert_int_eq(st.tasks_done, 3); /* the repeated done counts once */
	/* a restart keeps the count (the progress the brain is told) */
	struct rv_buf buf;
	rv_buf_init(&buf);
	ck_assert_int_eq(stream_snapshot_save(m, &buf), 0);
	int64_t ends2[] = { 30 };
	struct stream_mgr *n = mgr(10, 1, ends2, 0);
	struct rv_err err = { 0 };
	ck_assert_msg(stream_snapshot_load(n, buf.data, buf.len, &err) == 0, "load: %s", err.msg);
	rv_buf_release(&buf);
	stream_part_stats(n, 0, 0, &st);
	ck_assert_int_eq(st.tasks_done, 3);
	stream_free(n);
	stream_free(m);
}
END_TEST

START_TEST(test_dead_and_stalled_go_back)
{
	int64_t ends[] = { -1, -1 }; /* unbounded */
	struct stream_mgr *m = mgr(5, 2, ends, 100);
	struct stream_task a, b, c;
	ck_assert_int_eq(stream_next(m, 0, 1, 0, &a), 1);
	ck_assert_int_eq(stream_next(m, 0, 2, 50, &b), 1);
	ck_assert_int_ne(a.part, b.part); /* the partitions take turns */
	ck_assert_int_eq(stream_worker_dead(m, 1), 1);
	ck_assert_int_eq(stream_done(m, a.id, 1), 0); /* taken back: not counted */
	ck_assert_int_eq(stream_next(m, 0, 3, 60, &c), 1);
	ck_assert_int_eq(c.part, a.part); /* the returned range first */
	ck_assert_int_eq(c.start, a.start);
	ck_assert_int_eq(c.end, a.end);
	ck_assert_int_eq(stream_next_deadline(m), 150);
	ck_assert_int_eq(stream_expire(m, 150, NULL, NULL), 1); /* b stalled */
	ck_assert_int_eq(stream_done(m, b.id, 2), 0);
	ck_assert_int_eq(stream_done(m, c.id, 3), 1);
	ck_assert_int_eq(committed(m, a.part), 5);
	ck_assert_int_eq(committed(m, b.part), 0);
	stream_free(m);
}
END_TEST

static bool held_worker_2(const void *arg, int64_t worker)
{
	(void)arg;
	return worker == 2;
}

/* A due task of a worker still held waits another timeout; once its worker
 * is not held it goes back. */
START_TEST(test_held_task_stays)
{
	int64_t ends[] = { -1 };
	struct stream_mgr *m = mgr(5, 1, ends, 100);
	struct stream_task a, b, c;
	ck_assert_int_eq(stream_next(m, 0, 2, 0, &a), 1);
	ck_assert_int_eq(stream_expire(m, 100, held_worker_2, NULL), 0);
	ck_assert_int_eq(stream_next_deadline(m), 200);
	ck_assert_int_eq(stream_next(m, 0, 3, 150, &b), 1);
	ck_assert_int_ne(b.start, a.start); /* not handed out twice */
	ck_assert_int_eq(stream_done(m, a.id, 2), 1);
	ck_assert_int_eq(stream_next(m, 0, 2, 160, &c), 1);
	ck_assert_int_eq(stream_expire(m, 260, NULL, NULL), 2); /* not held: back */
	stream_free(m);
}
END_TEST

START_TEST(test_offsets_carry_to_a_new_manager)
{
	int64_t ends[] = { 100, 100 };
	struct stream_mgr *m = mgr(10, 2, ends, 0);
	struct stream_task t;
	for (int i = 0; i < 4; i++) {
		ck_assert_int_eq(stream_next(m, 0, 1, 0, &t), 1);
		if (i != 2)
			ck_assert_int_eq(stream_done(m, t.id, 1), 1);
	}
	/* p0: [0,10) done, [10,20) doing; p1: [0,10) and [10,20) done */
	ck_assert_int_eq(committed(m, 0), 10);
	ck_assert_int_eq(committed(m, 1), 20);
	struct rv_buf b;
	rv_buf_init(&b);
	ck_assert_int_eq(stream_offsets_save(m, &b), 0);

	int64_t ends2[] = { 5, -1 };
	struct stream_mgr *n = mgr(10, 2, ends2, 0);
	struct rv_err err = { 0 };
	ck_assert_int_eq(stream_offsets_load(n, b.data, b.len, &err), 0);
	/* p0's known end (5) is below its committed offset: nothing there yet */
	ck_assert_int_eq(stream_next(n, 0, 7, 0, &t), 1);
	ck_assert_int_eq(t.part, 1);
	ck_assert_int_eq(t.start, 20); /* resumes at the committed offset */
	ck_assert_int_eq(stream_extend(n, 0, "p0", 15), 1);
	ck_assert_int_eq(stream_next(n, 0, 7, 0, &t), 1);
	ck_assert_int_eq(t.part, 0);
	ck_assert_int_eq(t.start, 10);
	ck_assert_int_eq(t.end, 15);
	stream_free(n);
	rv_buf_release(&b);

	const char *bad = "{\"datasets\":[{\"name\":\"clicks\",\"partitions\":[{\"name\":\"p7\","
			  "\"committed\":3}]}]}";
	ck_assert_int_eq(stream_offsets_load(m, bad, strlen(bad), &err), -EINVAL);
	ck_assert_str_eq(err.field, "datasets[0].partitions[0]");
	ck_assert_int_eq(committed(m, 0), 10); /* unchanged */
	stream_free(m);
}
END_TEST

START_TEST(test_bad_datasets_named)
{
	struct stream_partition p[2] = { { "a", 5, 3 }, { "b", 0, -1 } };
	struct stream_dataset d = { .name = "s", .shard_size = 1, .nparts = 2, .parts = p };
	struct rv_err err = { 0 };
	ck_assert_ptr_null(stream_new(&d, 1, NULL, &err));
	ck_assert_str_eq(err.field, "datasets.partitions.end");
	p[0].end = -1;
	snprintf(p[1].name, sizeof(p[1].name), "a");
	ck_assert_ptr_null(stream_new(&d, 1, NULL, &err));
	ck_assert_str_eq(err.field, "datasets.partitions.name");
}
END_TEST

/* ---- property test ---- */

struct model {
	int nparts;
	int64_t limit; /* offsets tracked per partition */
	unsigned char *seen[4];
	int64_t last_committed[4];
};

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Snapshot m and load it into a fresh manager: the master's restart. */
static struct stream_mgr *reload(struct stream_mgr *m, int nparts, const int64_t *ends)
{
	struct rv_buf b;
	rv_buf_init(&b);
	ck_assert_int_eq(stream_snapshot_save(m, &b), 0);
	struct stream_mgr *n = mgr(3, nparts, ends, 40);
	struct rv_err err = { 0 };
	ck_assert_msg(stream_snapshot_load(n, b.data, b.len, &err) == 0, "load: %s", err.msg);
	rv_buf_release(&b);
	stream_free(m);
	return n;
}

static void check_committed(struct stream_mgr *m, struct model *md)
{
	for (int p = 0; p < md->nparts; p++) {
		int64_t c = committed(m, p);
		if (c < md->last_committed[p])
			ck_abort_msg("p%d committed went back", p);
		for (int64_t o = 0; o < c; o++)
			if (md->seen[p][o] != 1) /* ck_assert per offset would be slow */
				ck_abort_msg("offset %ld of p%d committed, not done", (long)o, p);
		md->last_committed[p] = c;
	}
}

static void run_seed(uint64_t seed)
{
	uint64_t s = seed * 2654435761u + 1;
	struct model md = { .nparts = 1 + (int)(rnd(&s) % 3), .limit = 200 };
	int64_t ends[4];
	for (int p = 0; p < md.nparts; p++) {
		ends[p] = (int64_t)(rnd(&s) % 30);
		md.seen[p] = calloc((size_t)md.limit, 1);
	}
	struct stream_mgr *m = mgr(3, md.nparts, ends, 40);
	struct held {
		struct stream_task t;
		int64_t worker;
	} doing[64];
	int nd = 0;
	int64_t now = 0;
	for (int step = 0; step < 600; step++) {
		now += (int64_t)(rnd(&s) % 10);
		unsigned op = (unsigned)(rnd(&s) % 100);
		if (op < 35 && nd < 64) {
			struct stream_task t;
			int64_t w = (int64_t)(rnd(&s) % 5);
			int rc = stream_next(m, 0, w, now, &t);
			ck_assert_int_ge(rc, 0);
			if (rc == 1) {
				ck_assert_int_le(t.end, md.limit);
				doing[nd++] = (struct held){ t, w };
			}
		} else if (op < 75 && nd > 0) {
			int i = (int)(rnd(&s) % (uint64_t)nd);
			int rc = stream_done(m, doing[i].t.id, doing[i].worker);
			ck_assert_int_ge(rc, 0);
			if (rc == 1)
				for (int64_t o = doing[i].t.start; o < doing[i].t.end; o++)
					md.seen[doing[i].t.part][o]++;
			/* a repeat of the same done never counts again */
			ck_assert_int_eq(stream_done(m, doing[i].t.id, doing[i].worker), 0);
			doing[i] = doing[--nd];
		} else if (op < 80) {
			ck_assert_int_ge(stream_worker_dead(m, (int64_t)(rnd(&s) % 5)), 0);
		} else if (op < 85) {
			ck_assert_int_ge(stream_expire(m, now, NULL, NULL), 0);
		} else if (op < 95) {
			int p = (int)(rnd(&s) % (uint64_t)md.nparts);
			char name[8];
			snprintf(name, sizeof(name), "p%d", p);
			int64_t e = ends[p] + (int64_t)(rnd(&s) % 20);
			if (e > md.limit)
				e = md.limit;
			ck_assert_int_ge(stream_extend(m, 0, name, e), 0);
			ends[p] = e > ends[p] ? e : ends[p];
		} else {
			m = reload(m, md.nparts, ends);
		}
		check_committed(m, &md);
		for (int p = 0; p < md.nparts; p++)
			for (int64_t o = 0; o < md.limit; o++)
				if (md.seen[p][o] > 1)
					ck_abort_msg("seed %lu: offset %ld twice",
						     (unsigned long)seed, (long)o);
	}
	/* drain: a fresh worker takes and finishes everything left */
	for (int guard = 0; guard < 10000; guard++) {
		ck_assert_int_ge(stream_expire(m, INT64_MAX - 1, NULL, NULL), 0);
		struct stream_task t;
		int rc = stream_next(m, 0, 99, now, &t);
		if (rc == 0)
			break;
		ck_assert_int_eq(stream_done(m, t.id, 99), 1);
		for (int64_t o = t.start; o < t.end; o++)
			md.seen[t.part][o]++;
	}
	check_committed(m, &md);
	for (int p = 0; p < md.nparts; p++) {
		ck_assert_int_eq(committed(m, p), ends[p]);
		for (int64_t o = 0; o < ends[p]; o++)
			ck_assert_msg(md.seen[p][o] == 1, "seed %lu: offset %ld of p%d seen %d",
				      (unsigned long)seed, (long)o, p, md.seen[p][o]);
		struct stream_part_stats st;
		stream_part_stats(m, 0, p, &st);
		ck_assert_int_eq(st.held, 0);
		ck_assert_int_eq(st.returned, 0);
		free(md.seen[p]);
	}
	stream_free(m);
}

START_TEST(test_property_exactly_once)
{
	const char *n = getenv("STREAM_SEEDS");
	long seeds = n ? atol(n) : 200;
	for (long i = 1; i <= seeds; i++)
		run_seed((uint64_t)i);
}
END_TEST

/* A partition's ranges as snapshots before the names held them: one
 * flat array [a,b,a,b,...]. */
static void ranges_flat(cJSON *part, const char *key)
{
	cJSON *flat = cJSON_CreateArray(), *r;
	cJSON_ArrayForEach(r, cJSON_GetObjectItem(part, key))
	{
		cJSON_AddItemToArray(flat, cJSON_CreateNumber(cJSON_GetNumberValue(
						   cJSON_GetObjectItem(r, "start"))));
		cJSON_AddItemToArray(flat, cJSON_CreateNumber(cJSON_GetNumberValue(
						   cJSON_GetObjectItem(r, "end"))));
	}
	ck_assert(cJSON_ReplaceItemInObject(part, key, flat));
}

/* A snapshot names its tasks' and ranges' fields, keeps task ids above
 * 2^52 exact, loads to the state it was taken from, and one in the
 * positional form of older snapshots loads to that same state. */
START_TEST(test_snapshot_named_and_positional)
{
	int64_t ends[] = { 100 };
	struct stream_mgr *m = mgr(10, 1, ends, 50);
	struct stream_task t[4];
	for (int w = 0; w < 4; w++)
		ck_assert_int_eq(stream_next(m, 0, w, 0, &t[w]), 1);
	ck_assert_int_eq(stream_done(m, t[2].id, 2), 1); /* held: above the gap */
	ck_assert_int_eq(stream_worker_dead(m, 1), 1);   /* returned */
	struct rv_buf a = { 0 }, b = { 0 };
	struct rv_err err = { 0 };
	ck_assert_int_eq(stream_snapshot_save(m, &a), 0);
	char want[128];
	snprintf(want, sizeof(want), "\"tasks\":[{\"id\":%" PRId64 ",\"worker\":0,", t[0].id);
	ck_assert_msg(strstr(a.data, want), "no %s in %s", want, a.data);
	ck_assert_ptr_nonnull(strstr(a.data, "\"returned\":[{\"start\":10,\"end\":20}]"));
	ck_assert_ptr_nonnull(strstr(a.data, "\"held\":[{\"start\":20,\"end\":30}]"));
	struct stream_mgr *n = mgr(10, 1, ends, 50);
	ck_assert_msg(stream_snapshot_load(n, a.data, a.len, &err) == 0, "load: %s", err.msg);
	ck_assert_int_eq(stream_snapshot_save(n, &b), 0);
	ck_assert_str_eq(a.data, b.data);
	rv_buf_release(&b);
	stream_free(n);
	/* positional */
	RV_CLEANUP_CJSON cJSON *doc = cJSON_Parse(a.data);
	cJSON *it, *ds, *pt;
	cJSON_ArrayForEach(it, cJSON_GetObjectItem(doc, "tasks"))
		it->type = cJSON_Array; /* its values in order, keys ignored */
	cJSON_ArrayForEach(ds, cJSON_GetObjectItem(doc, "datasets"))
		cJSON_ArrayForEach(pt, cJSON_GetObjectItem(ds, "partitions"))
	{
		ranges_flat(pt, "returned");
		ranges_flat(pt, "held");
	}
	RV_CLEANUP_FREE char *old = rv_json_print(doc);
	ck_assert_ptr_nonnull(strstr(old, "\"returned\":[10,20]"));
	n = mgr(10, 1, ends, 50);
	ck_assert_msg(stream_snapshot_load(n, old, strlen(old), &err) == 0, "load: %s", err.msg);
	ck_assert_int_eq(stream_snapshot_save(n, &b), 0);
	ck_assert_str_eq(a.data, b.data);
	struct stream_task t1, t2;
	for (int i = 0; i < 8; i++) {
		ck_assert_int_eq(stream_next(m, 0, 9, 100, &t1), stream_next(n, 0, 9, 100, &t2));
		ck_assert_mem_eq(&t1, &t2, sizeof(t1));
	}
	rv_buf_release(&a);
	rv_buf_release(&b);
	stream_free(n);
	stream_free(m);
}
END_TEST

RV_TEST_MAIN_TCASE("stream", "core", 60, test_tasks_up_to_the_known_end,
		   test_committed_waits_for_the_gap, test_dead_and_stalled_go_back,
		   test_held_task_stays, test_offsets_carry_to_a_new_manager,
		   test_bad_datasets_named, test_property_exactly_once,
		   test_snapshot_named_and_positional)
