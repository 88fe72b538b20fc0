/*
 * check_shard.c: the master's data sharding (master/shard.c): shard sizes
 * and epochs, the shuffle as a permutation per (seed, epoch), pull, a dead
 * worker's tasks back at once, stalls, late/repeated/foreign dones, the
 * in-flight cap, memory at 10^7 shards, snapshots, step-tied checkpoints,
 * and a property test: random interleavings of joins, deaths, stalls (a live
 * worker keeps its due tasks and consumes them later), workers gone
 * unannounced, dones, master restarts and checkpoint restores into a
 * different number of workers, after which every sample of every epoch was
 * consumed exactly once.
 * SHARD_SEEDS=N (default 200) and SHARD_SEED0 run more seeds by hand.
 */
#include <inttypes.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "json.h"
#include "shard.h"
#include "testutil.h"

/* Heap bytes in use: glibc's count, or the sanitizer allocator's under ASan
 * (which does not go through glibc's malloc). */
#if defined(__SANITIZE_ADDRESS__)
size_t __sanitizer_get_current_allocated_bytes(void);
static size_t heap_bytes(void)
{
	return __sanitizer_get_current_allocated_bytes();
}
#else
static size_t heap_bytes(void)
{
	return mallinfo2().uordblks;
}
#endif

static struct shard_dataset dset(const char *name, int64_t size, int64_t shard, int epochs,
				 bool shuffle, uint64_t seed)
{
	struct shard_dataset d = { .size = size,
				   .shard_size = shard,
				   .epochs = epochs,
				   .shuffle = shuffle,
				   .seed = seed };
	snprintf(d.name, sizeof(d.name), "%s", name);
	return d;
}

static struct shard_mgr *mgr1(struct shard_dataset d, int64_t timeout, int cap)
{
	struct shard_conf c = { .doing_timeout_ms = timeout, .max_tasks_in_flight = cap };
	struct rv_err err = { 0 };
	struct shard_mgr *m = shard_new(&d, 1, &c, &err);
	ck_assert_msg(m, "shard_new: %s", err.msg);
	return m;
}

static struct shard_task next_ok(struct shard_mgr *m, int ds, int64_t w, int64_t now)
{
	struct shard_task t;
	int rc = shard_next(m, ds, w, now, &t);
	ck_assert_int_eq(rc, 1);
	return t;
}

START_TEST(test_new_validation)
{
	struct rv_err err = { 0 };
	struct shard_dataset d[2] = { dset("train", 100, 10, 1, false, 0),
				      dset("train", 10, 1, 1, false, 0) };
	ck_assert_ptr_null(shard_new(d, 2, NULL, &err));
	ck_assert_str_eq(err.field, "datasets[1].name");
	d[1] = dset("eval", 10, 11, 1, false, 0);
	ck_assert_ptr_null(shard_new(d, 2, NULL, &err));
	ck_assert_str_eq(err.field, "datasets[1].shard_size");
	d[1] = dset("eval", 0, 1, 1, false, 0);
	ck_assert_ptr_null(shard_new(d, 2, NULL, &err));
	ck_assert_str_eq(err.field, "datasets[1].size");
	d[1] = dset("eval", 10, 1, 0, false, 0);
	ck_assert_ptr_null(shard_new(d, 2, NULL, &err));
	ck_assert_str_eq(err.field, "datasets[1].epochs");
	d[1] = dset("ev al", 10, 1, 1, false, 0);
	ck_assert_ptr_null(shard_new(d, 2, NULL, &err));
	ck_assert_str_eq(err.field, "datasets[1].name");
	ck_assert_ptr_null(shard_new(d, 0, NULL, &err));
	d[1] = dset("eval/part-0", 10, 1, 1, false, 0);
	struct shard_mgr *m = shard_new(d, 2, NULL, &err);
	ck_assert_ptr_nonnull(m);
	struct shard_task t;
	ck_assert_int_eq(shard_next(m, 2, 1, 0, &t), -EINVAL);
	ck_assert_int_eq(shard_next(m, -1, 1, 0, &t), -EINVAL);
	shard_free(m);
	shard_free(NULL);
}
END_TEST

/* 1003 samples in shards of 100: 11 shards, the last of 3; two epochs in
 * order without shuffle; the second starts while the first's tasks are DOING. */
START_TEST(test_sizes_epochs_in_order)
{
	struct shard_mgr *m = mgr1(dset("d", 1003, 100, 2, false, 7), 0, 0);
	struct shard_task t[22];
	for (int i = 0; i < 11; i++) {
		t[i] = next_ok(m, 0, 1, 0);
		ck_assert_int_eq(t[i].epoch, 0);
		ck_assert_int_eq(t[i].start, i * 100);
		ck_assert_int_eq(t[i].end, i == 10 ? 1003 : i * 100 + 100);
		ck_assert_int_eq(t[i].id, i + 1);
	}
	/* All of epoch 0 is DOING: epoch 1 starts anyway. */
	for (int i = 11; i < 22; i++) {
		t[i] = next_ok(m, 0, 2, 0);
		ck_assert_int_eq(t[i].epoch, 1);
		ck_assert_int_eq(t[i].start, (i - 11) * 100);
	}
	struct shard_task x;
	ck_assert_int_eq(shard_next(m, 0, 3, 0, &x), 0);
	struct shard_stats st;
	shard_stats(m, 0, &st);
	ck_assert_int_eq(st.samples_total, 2006);
	ck_assert_int_eq(st.tasks_doing, 22);
	ck_assert_int_eq(st.epoch, 1);
	ck_assert(!st.finished);
	for (int i = 0; i < 22; i++)
		ck_assert_int_eq(shard_done(m, t[i].id, i < 11 ? 1 : 2, 0), 1);
	shard_stats(m, -1, &st);
	ck_assert_int_eq(st.samples_done, 2006);
	ck_assert_int_eq(st.tasks_doing, 0);
	ck_assert(st.finished);
	ck_assert_int_eq(shard_next(m, 0, 3, 0, &x), 0);
	shard_free(m);
}
END_TEST

/* The order of one epoch's shards, as handed out. */
static void epoch_order(int64_t nshards, uint64_t seed, int epochs, int64_t *order)
{
	struct shard_mgr *m = mgr1(dset("d", nshards * 3, 3, epochs, true, seed), 0, 0);
	for (int64_t i = 0; i < nshards * epochs; i++) {
		struct shard_task t;
		if (shard_next(m, 0, 1, 0, &t) != 1 || shard_done(m, t.id, 1, 0) != 1 ||
		    t.epoch != i / nshards)
			ck_abort_msg("task %" PRId64 " of %" PRId64 " shards", i, nshards);
		order[i] = t.start / 3;
	}
	struct shard_task t;
	ck_assert_int_eq(shard_next(m, 0, 1, 0, &t), 0);
	shard_free(m);
}

START_TEST(test_shuffle_permutation)
{
	static const int64_t sizes[] = { 1, 2, 3, 5, 16, 17, 100, 1000, 1025, 4099 };
	for (size_t k = 0; k < RV_ARRAY_SIZE(sizes); k++) {
		int64_t n = sizes[k];
		int64_t *a = malloc((size_t)n * 3 * sizeof(*a)),
			*b = malloc((size_t)n * 3 * sizeof(*b));
		uint8_t *seen = malloc((size_t)n);
		epoch_order(n, 42, 3, a);
		for (int e = 0; e < 3; e++) {
			memset(seen, 0, (size_t)n);
			for (int64_t i = 0; i < n; i++) {
				if (a[e * n + i] >= n || seen[a[e * n + i]])
					ck_abort_msg("n=%" PRId64 " shard %" PRId64 " repeated", n,
						     a[e * n + i]);
				seen[a[e * n + i]] = 1;
			}
		}
		if (n >= 16) {
			/* Each epoch has its own order, each seed too, the same seed the same. */
			ck_assert(memcmp(a, a + n, (size_t)n * sizeof(*a)) != 0);
			ck_assert(memcmp(a + n, a + 2 * n, (size_t)n * sizeof(*a)) != 0);
			epoch_order(n, 43, 3, b);
			ck_assert(memcmp(a, b, (size_t)n * sizeof(*a)) != 0);
			epoch_order(n, 42, 3, b);
			ck_assert(memcmp(a, b, (size_t)n * 3 * sizeof(*a)) == 0);
			/* Shuffled: far from the identity. */
			int64_t fixed = 0;
			for (int64_t i = 0; i < n; i++)
				fixed += a[i] == i;
			ck_assert_int_lt(fixed, n / 4);
		}
		free(a);
		free(b);
		free(seen);
	}
}
END_TEST

/* Workers pull: one that asks three times as often gets three times the tasks. */
START_TEST(test_pull_fast_worker_gets_more)
{
	struct shard_mgr *m = mgr1(dset("d", 4000, 10, 1, true, 1), 0, 0);
	int got[2] = { 0, 0 }, round = 0;
	uint8_t seen[400] = { 0 };
	for (;;) {
		int w = (round++ % 4 == 3) ? 1 : 0; /* worker 0 asks 3 times for each of worker 1 */
		struct shard_task t;
		int rc = shard_next(m, 0, w, 0, &t);
		if (rc == 0)
			break;
		ck_assert_int_eq(rc, 1);
		ck_assert(!seen[t.start / 10]);
		seen[t.start / 10] = 1;
		got[w]++;
		ck_assert_int_eq(shard_done(m, t.id, w, 0), 1);
	}
	ck_assert_int_eq(got[0] + got[1], 400);
	ck_assert_int_eq(got[0], 300);
	shard_free(m);
}
END_TEST

/* A dead worker's DOING tasks are handed out again at once, before new shards;
 * its late done counts nothing. */
START_TEST(test_dead_worker_back_at_once)
{
	struct shard_mgr *m = mgr1(dset("d", 1000, 10, 1, true, 5), 60000, 0);
	struct shard_task a[3], b = next_ok(m, 0, 2, 0);
	for (int i = 0; i < 3; i++)
		a[i] = next_ok(m, 0, 1, 0);
	ck_assert_int_eq(shard_done(m, a[0].id, 1, 0), 1);
	ck_assert_int_eq(shard_worker_dead(m, 1), 2);
	ck_assert_int_eq(shard_worker_dead(m, 1), 0);
	struct shard_stats st;
	shard_stats(m, 0, &st);
	ck_assert_int_eq(st.todo_ranges, 2);
	ck_assert_int_eq(st.tasks_doing, 1);
	/* Served again, lowest sample first, under new ids. */
	struct shard_task r1 = next_ok(m, 0, 2, 1), r2 = next_ok(m, 0, 2, 1);
	int64_t lo = a[1].start < a[2].start ? a[1].start : a[2].start;
	int64_t hi = a[1].start < a[2].start ? a[2].start : a[1].start;
	ck_assert_int_eq(r1.start, lo);
	ck_assert_int_eq(r2.start, hi);
	ck_assert_int_gt(r1.id, a[2].id);
	ck_assert_int_eq(shard_done(m, a[1].id, 1, 2), 0);
	ck_assert_int_eq(shard_done(m, a[2].id, 1, 2), 0);
	ck_assert_int_eq(shard_done(m, r1.id, 2, 2), 1);
	ck_assert_int_eq(shard_done(m, r2.id, 2, 2), 1);
	ck_assert_int_eq(shard_done(m, b.id, 2, 2), 1);
	shard_stats(m, 0, &st);
	ck_assert_int_eq(st.samples_done, 40);
	ck_assert_int_eq(st.todo_ranges, 0);
	shard_free(m);
}
END_TEST

/* A stalled worker's task goes back once its deadline passes, not before. */
START_TEST(test_stall_timeout)
{
	struct shard_mgr *m = mgr1(dset("d", 100, 10, 1, false, 0), 1000, 0);
	ck_assert_int_eq(shard_next_deadline(m), INT64_MAX);
	struct shard_task a = next_ok(m, 0, 1, 5000);
	struct shard_task b = next_ok(m, 0, 2, 5500);
	ck_assert_int_eq(shard_next_deadline(m), 6000);
	ck_assert_int_eq(shard_expire(m, 5999, NULL, NULL), 0);
	ck_assert_int_eq(shard_expire(m, 6000, NULL, NULL), 1);
	ck_assert_int_eq(shard_next_deadline(m), 6500);
	struct shard_task again = next_ok(m, 0, 3, 6001);
	ck_assert_int_eq(again.start, a.start);
	ck_assert_int_eq(again.end, a.end);
	ck_assert_int_eq(shard_done(m, a.id, 1, 6002), 0); /* too late */
	ck_assert_int_eq(shard_done(m, again.id, 3, 6002), 1);
	ck_assert_int_eq(shard_done(m, b.id, 2, 6002), 1);
	ck_assert_int_eq(shard_next_deadline(m), INT64_MAX);
	struct shard_stats st;
	shard_stats(m, 0, &st);
	ck_assert_int_eq(st.samples_done, 20);
	/* No timeout configured: nothing ever expires. */
	struct shard_mgr *n = mgr1(dset("d", 100, 10, 1, false, 0), 0, 0);
	next_ok(n, 0, 1, 0);
	ck_assert_int_eq(shard_expire(n, INT64_MAX - 1, NULL, NULL), 0);
	ck_assert_int_eq(shard_next_deadline(n), INT64_MAX);
	shard_free(n);
	shard_free(m);
}
END_TEST

/* The workers a test says are alive, for shard_expire. */
static bool held_by(const void *arg, int64_t worker)
{
	const bool *alive = arg;
	return worker >= 0 && worker < 4 && alive[worker];
}

/* A due task of a worker still held (alive, however slow) stays its own and
 * waits another timeout; it goes back only once its worker is not held. */
START_TEST(test_stall_held)
{
	struct shard_mgr *m = mgr1(dset("d", 100, 10, 1, false, 0), 1000, 0);
	bool alive[4] = { false, true, true, false };
	struct shard_task a = next_ok(m, 0, 1, 5000);
	struct shard_task b = next_ok(m, 0, 2, 5500);
	ck_assert_int_eq(shard_expire(m, 6000, held_by, alive), 0);
	/* a waits again, b is now the earliest */
	ck_assert_int_eq(shard_next_deadline(m), 6500);
	ck_assert_int_eq(shard_expire(m, 6500, held_by, alive), 0);
	ck_assert_int_eq(shard_next_deadline(m), 7000);
	/* nothing was handed out twice: a third worker gets a fresh shard */
	struct shard_task c = next_ok(m, 0, 3, 6600);
	ck_assert(c.start != a.start && c.start != b.start);
	/* worker 1 is gone: its task goes back at its (renewed) deadline */
	alive[1] = false;
	ck_assert_int_eq(shard_expire(m, 6999, held_by, alive), 0);
	ck_assert_int_eq(shard_expire(m, 7000, held_by, alive), 1);
	struct shard_task again = next_ok(m, 0, 3, 7001);
	ck_assert_int_eq(again.start, a.start);
	ck_assert_int_eq(shard_done(m, a.id, 1, 7002), 0);
	ck_assert_int_eq(shard_done(m, b.id, 2, 7002), 1); /* the slow worker's done counts */
	struct shard_stats st;
	shard_stats(m, 0, &st);
	ck_assert_int_eq(st.samples_done, 10);
	ck_assert_int_eq(st.tasks_doing, 2);
	shard_free(m);
}
END_TEST

START_TEST(test_late_repeated_foreign_done)
{
	struct shard_mgr *m = mgr1(dset("d", 100, 10, 1, false, 0), 0, 0);
	struct shard_task a = next_ok(m, 0, 1, 0), b = next_ok(m, 0, 2, 0);
	ck_assert_int_eq(shard_done(m, b.id, 1, 0), -EPERM);
	ck_assert_int_eq(shard_done(m, a.id, 1, 0), 1);
	ck_assert_int_eq(shard_done(m, a.id, 1, 0), 0);
	ck_assert_int_eq(shard_done(m, a.id, 2, 0), 0);
	ck_assert_int_eq(shard_done(m, 999999, 1, 0), 0);
	ck_assert_int_eq(shard_done(m, 0, 1, 0), 0);
	ck_assert_int_eq(shard_done(m, -3, 1, 0), 0);
	struct shard_stats st;
	shard_stats(m, 0, &st);
	ck_assert_int_eq(st.samples_done, 10);
	ck_assert_int_eq(st.tasks_doing, 1);
	ck_assert_int_eq(shard_done(m, b.id, 2, 0), 1);
	shard_stats(m, 0, &st);
	ck_assert_int_eq(st.samples_done, 20);
	shard_free(m);
}
END_TEST

START_TEST(test_in_flight_cap)
{
	struct shard_dataset d[2] = { dset("a", 100, 10, 1, false, 0),
				      dset("b", 100, 10, 1, false, 0) };
	struct shard_conf c = { .max_tasks_in_flight = 3 };
	struct shard_mgr *m = shard_new(d, 2, &c, NULL);
	struct shard_task t[3], x;
	t[0] = next_ok(m, 0, 1, 0);
	t[1] = next_ok(m, 1, 1, 0);
	t[2] = next_ok(m, 0, 2, 0);
	ck_assert_int_eq(shard_next(m, 1, 3, 0, &x), -ENOSPC);
	ck_assert_int_eq(shard_done(m, t[1].id, 1, 0), 1);
	ck_assert_int_eq(next_ok(m, 1, 3, 0).start, 10);
	ck_assert_int_eq(shard_next(m, 0, 3, 0, &x), -ENOSPC);
	shard_free(m);
}
END_TEST

/* 10^8 samples in 10^7 shards: the manager, a million tasks through it and
 * its documents cost kilobytes, not the dataset's size. */
START_TEST(test_big_dataset_memory)
{
	size_t before = heap_bytes();
	struct shard_mgr *m = mgr1(dset("big", 100000000, 10, 3, true, 99), 30000, 0);
	size_t made = heap_bytes();
	ck_assert_uint_lt(made - before, 4096);
	struct shard_task held[64];
	int64_t now = 0, done = 0;
	for (int w = 0; w < 64; w++)
		held[w] = next_ok(m, 0, w, now);
	for (int i = 0; i < 1000000; i++) {
		int w = (int)((uint64_t)i * 2654435761u % 64);
		done += held[w].end - held[w].start;
		if (shard_done(m, held[w].id, w, now) != 1 ||
		    shard_next(m, 0, w, now, &held[w]) != 1)
			ck_abort_msg("next or done failed at %d", i);
		if (i % 1000 == 0 && shard_expire(m, now++, NULL, NULL) != 0)
			ck_abort_msg("a task expired at %d", i);
		if (i == 500000) {
			ck_assert_int_eq(shard_worker_dead(m, 7), 1);
			struct shard_task again = next_ok(m, 0, 7, now);
			ck_assert_int_eq(again.start, held[7].start);
			held[7] = again;
		}
	}
	struct shard_stats st;
	shard_stats(m, 0, &st);
	ck_assert_int_eq(st.samples_done, done);
	ck_assert_int_eq(st.tasks_doing, 64);
	size_t used = heap_bytes();
	/* 64 tasks in flight and 64 workers' recent dones: a few tens of KiB. */
	ck_assert_msg(used - before < 256 * 1024, "%zu bytes for 10^7 shards", used - before);

	struct rv_buf b = { 0 };
	for (int w = 0; w < 64; w++)
		ck_assert_int_eq(shard_ckpt_report(m, 100, w, held[w].id, 3, NULL), 0);
	ck_assert_int_eq(shard_ckpt_export(m, 100, &b, NULL), 0);
	ck_assert_uint_lt(b.len, 8192);
	struct shard_mgr *n = mgr1(dset("big", 100000000, 10, 3, true, 99), 30000, 0);
	ck_assert_int_eq(shard_ckpt_import(n, b.data, b.len, NULL), 0);
	struct shard_stats sn;
	shard_stats(n, 0, &sn);
	ck_assert_int_eq(sn.samples_done, done + 64 * 3);
	rv_buf_release(&b);
	ck_assert_int_eq(shard_snapshot_save(m, &b), 0);
	ck_assert_uint_lt(b.len, 256 * 1024);
	rv_buf_release(&b);
	shard_free(n);
	shard_free(m);
}
END_TEST

/* A tiny deterministic PRNG for the randomised tests. */
static uint64_t rnd_state;
static uint64_t rnd(void)
{
	uint64_t z = (rnd_state += UINT64_C(0x9e3779b97f4a7c15));
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}
static int64_t rndn(int64_t n)
{
	return n <= 1 ? 0 : (int64_t)(rnd() % (uint64_t)n);
}

static struct shard_mgr *reload(struct shard_mgr *m, const struct shard_dataset *d, int nds,
				const struct shard_conf *c)
{
	struct rv_buf a = { 0 }, b = { 0 };
	struct rv_err err = { 0 };
	ck_assert_int_eq(shard_snapshot_save(m, &a), 0);
	struct shard_mgr *n = shard_new(d, nds, c, NULL);
	int rc = shard_snapshot_load(n, a.data, a.len, &err);
	ck_assert_msg(rc == 0, "snapshot load: %s (%s)", err.msg, err.field);
	ck_assert_int_eq(shard_snapshot_save(n, &b), 0);
	ck_assert_str_eq(a.data, b.data);
	rv_buf_release(&a);
	rv_buf_release(&b);
	shard_free(m);
	return n;
}

/* A snapshot taken mid-epoch (tasks DOING, ranges returned, a checkpoint
 * step pending), loaded into a new manager: both answer the same random
 * calls alike from then on. */
START_TEST(test_snapshot_round_trip)
{
	struct shard_dataset d[2] = { dset("a", 5000, 7, 2, true, 3),
				      dset("b", 300, 11, 3, false, 0) };
	struct shard_conf c = { .doing_timeout_ms = 50 };
	struct shard_mgr *m = shard_new(d, 2, &c, NULL), *n = NULL;
	int64_t held[8][2];
	memset(held, 0, sizeof(held));
	rnd_state = 11;
	for (int i = 0; i < 6000; i++) {
		if (i == 2900 || i == 4000) {
			for (int w = 0; w < 8; w++) {
				int r1 = shard_ckpt_report(m, 10, w, held[w][0], 0, NULL);
				if (n)
					ck_assert_int_eq(r1, shard_ckpt_report(n, 10, w, held[w][0],
									       0, NULL));
			}
		}
		if (i == 3000) {
			m = reload(m, d, 2, &c);
			struct rv_buf s = { 0 };
			ck_assert_int_eq(shard_snapshot_save(m, &s), 0);
			n = shard_new(d, 2, &c, NULL);
			ck_assert_int_eq(shard_snapshot_load(n, s.data, s.len, NULL), 0);
			rv_buf_release(&s);
		}
		int w = (int)rndn(8), ds = (int)rndn(2), op = (int)rndn(10);
		int64_t now = i;
		int r1, r2 = 0;
		if (op < 5) {
			struct shard_task t1, t2;
			r1 = shard_next(m, ds, w, now, &t1);
			if (n) {
				r2 = shard_next(n, ds, w, now, &t2);
				ck_assert_int_eq(r1, r2);
				if (r1 == 1)
					ck_assert_mem_eq(&t1, &t2, sizeof(t1));
			}
			if (r1 == 1)
				held[w][ds] = t1.id;
		} else if (op < 9) {
			r1 = shard_done(m, held[w][ds], w, now);
			if (n)
				r2 = shard_done(n, held[w][ds], w, now);
		} else if (rndn(10) == 0) {
			r1 = shard_worker_dead(m, w);
			if (n)
				r2 = shard_worker_dead(n, w);
		} else {
			r1 = shard_expire(m, now, NULL, NULL);
			if (n)
				r2 = shard_expire(n, now, NULL, NULL);
		}
		if (n) {
			ck_assert_int_eq(r1, r2);
			ck_assert_int_eq(shard_next_deadline(m), shard_next_deadline(n));
		}
	}
	struct shard_stats sm, sn;
	shard_stats(m, -1, &sm);
	shard_stats(n, -1, &sn);
	ck_assert_mem_eq(&sm, &sn, sizeof(sm));
	ck_assert_int_gt(sm.samples_done, 0);
	struct rv_buf a = { 0 }, b = { 0 };
	ck_assert_int_eq(shard_ckpt_export(m, 10, &a, NULL), 0);
	ck_assert_int_eq(shard_ckpt_export(n, 10, &b, NULL), 0);
	ck_assert_str_eq(a.data, b.data);
	rv_buf_release(&a);
	rv_buf_release(&b);
	ck_assert_int_eq(shard_snapshot_save(m, &a), 0);
	ck_assert_int_eq(shard_snapshot_save(n, &b), 0);
	ck_assert_str_eq(a.data, b.data);
	rv_buf_release(&a);
	rv_buf_release(&b);
	shard_free(m);
	shard_free(n);
}
END_TEST

/* Entries of arr back in the positional form snapshots held before their
 * entries were named: each object its values in order. */
static void to_positional(cJSON *arr)
{
	cJSON *it;
	cJSON_ArrayForEach(it, arr)
	{
		ck_assert(cJSON_IsObject(it));
		it->type = cJSON_Array; /* an array of the same values, keys ignored */
	}
}

/* The state a snapshot holds with every kind of entry: TODO ranges, tasks
 * DOING, dones in workers' rings, a pending step's cursors, ranges and
 * reports. */
static struct shard_mgr *busy_mgr(const struct shard_dataset *d, const struct shard_conf *c)
{
	struct shard_mgr *m = shard_new(d, 2, c, NULL);
	struct shard_task t[6];
	for (int w = 0; w < 6; w++)
		t[w] = next_ok(m, w % 2, w, 0);
	ck_assert_int_eq(shard_done(m, t[0].id, 0, 1), 1);
	ck_assert_int_eq(shard_ckpt_report(m, 5, 2, t[2].id, 3, NULL), 0);
	ck_assert_int_eq(shard_ckpt_report(m, 5, 0, 0, 0, NULL), 0);
	ck_assert_int_eq(shard_done(m, t[2].id, 2, 2), 1);
	ck_assert_int_eq(shard_worker_dead(m, 5), 1);
	next_ok(m, 0, 0, 3);
	return m;
}

/* A snapshot names each entry's fields, loads to the state it was taken
 * from, and one in the positional form of older snapshots loads to that
 * same state. */
START_TEST(test_snapshot_named_and_positional)
{
	struct shard_dataset d[2] = { dset("a", 500, 10, 2, true, 3),
				      dset("b", 90, 7, 1, false, 0) };
	struct shard_conf c = { .doing_timeout_ms = 50 };
	struct shard_mgr *m = busy_mgr(d, &c);
	struct rv_buf a = { 0 }, b = { 0 };
	struct rv_err err = { 0 };
	ck_assert_int_eq(shard_snapshot_save(m, &a), 0);
	static const char *const named[] = {
		"\"todo\":[{\"epoch\":0,\"start\":",
		"\"doing\":[{\"id\":",
		"\"ring\":[{\"id\":1,\"seq\":",
		"\"cursors\":[{\"epoch\":0,\"pos\":",
		"\"carved\":[{\"ds\":",
		"\"reports\":[{\"worker\":",
	};
	for (size_t i = 0; i < sizeof(named) / sizeof(named[0]); i++)
		ck_assert_msg(strstr(a.data, named[i]), "no %s in %s", named[i], a.data);
	ck_assert_ptr_null(strstr(a.data, "[["));
	/* round trip */
	struct shard_mgr *n = shard_new(d, 2, &c, NULL);
	int rc = shard_snapshot_load(n, a.data, a.len, &err);
	ck_assert_msg(rc == 0, "load: %s (%s)", err.msg, err.field);
	ck_assert_int_eq(shard_snapshot_save(n, &b), 0);
	ck_assert_str_eq(a.data, b.data);
	rv_buf_release(&b);
	shard_free(n);
	/* the same snapshot, positional */
	RV_CLEANUP_CJSON cJSON *doc = cJSON_Parse(a.data);
	cJSON *it, *ds;
	cJSON_ArrayForEach(ds, cJSON_GetObjectItem(doc, "datasets"))
		to_positional(cJSON_GetObjectItem(ds, "todo"));
	to_positional(cJSON_GetObjectItem(doc, "doing"));
	cJSON_ArrayForEach(it, cJSON_GetObjectItem(doc, "workers"))
		to_positional(cJSON_GetObjectItem(it, "ring"));
	cJSON_ArrayForEach(it, cJSON_GetObjectItem(doc, "steps"))
	{
		to_positional(cJSON_GetObjectItem(it, "cursors"));
		to_positional(cJSON_GetObjectItem(it, "todo"));
		to_positional(cJSON_GetObjectItem(it, "carved"));
		to_positional(cJSON_GetObjectItem(it, "reports"));
	}
	RV_CLEANUP_FREE char *old = cJSON_PrintUnformatted(doc);
	ck_assert_ptr_nonnull(strstr(old, "\"doing\":[[")); /* as dcde0f9 wrote it */
	n = shard_new(d, 2, &c, NULL);
	rc = shard_snapshot_load(n, old, strlen(old), &err);
	ck_assert_msg(rc == 0, "load of the positional form: %s (%s)", err.msg, err.field);
	ck_assert_int_eq(shard_snapshot_save(n, &b), 0);
	ck_assert_str_eq(a.data, b.data);
	/* and it behaves the same from then on */
	struct shard_task t1, t2;
	for (int i = 0; i < 40; i++) {
		ck_assert_int_eq(shard_next(m, i % 2, i % 7, 10 + i, &t1),
				 shard_next(n, i % 2, i % 7, 10 + i, &t2));
		ck_assert_mem_eq(&t1, &t2, sizeof(t1));
	}
	rv_buf_release(&a);
	rv_buf_release(&b);
	shard_free(n);
	shard_free(m);
}
END_TEST

START_TEST(test_snapshot_load_errors)
{
	struct shard_mgr *m = mgr1(dset("d", 100, 10, 1, false, 0), 0, 0);
	struct shard_mgr *other = mgr1(dset("d", 100, 20, 1, false, 0), 0, 0);
	next_ok(m, 0, 1, 0);
	next_ok(m, 0, 2, 0);
	ck_assert_int_eq(shard_worker_dead(m, 1), 1);
	struct rv_buf a = { 0 };
	struct rv_err err = { 0 };
	ck_assert_int_eq(shard_snapshot_save(other, &a), 0);
	ck_assert_int_eq(shard_snapshot_load(m, a.data, a.len, &err), -EINVAL);
	ck_assert_str_eq(err.field, "datasets[0].shard_size");
	ck_assert_int_eq(shard_snapshot_load(m, "{}", 2, &err), -EINVAL);
	ck_assert_int_eq(shard_snapshot_load(m, "[", 1, &err), -EINVAL);
	ck_assert_int_eq(shard_ckpt_import(m, a.data, a.len, &err), -EINVAL);
	ck_assert_str_eq(err.field, "kind");
	/* A failed load leaves the state as it was. */
	struct shard_stats st;
	shard_stats(m, 0, &st);
	ck_assert_int_eq(st.tasks_doing, 1);
	ck_assert_int_eq(st.todo_ranges, 1);
	rv_buf_release(&a);
	ck_assert_int_eq(shard_snapshot_save(m, &a), 0);
	/* A range ahead of the cursor would be served twice. */
	char *bad = strdup(a.data), *p = strstr(bad, "\"pos\":2,");
	ck_assert_ptr_nonnull(p);
	p[6] = '0';
	ck_assert_int_eq(shard_snapshot_load(m, bad, strlen(bad), &err), -EINVAL);
	ck_assert_str_eq(err.field, "datasets[0].todo[0]");
	free(bad);
	ck_assert_int_eq(shard_snapshot_load(m, a.data, a.len, &err), 0);
	rv_buf_release(&a);
	shard_free(other);
	shard_free(m);
}
END_TEST

/* The rules of a step-tied checkpoint, one at a time. */
START_TEST(test_ckpt_rules)
{
	struct shard_mgr *m = mgr1(dset("d", 1000, 100, 1, false, 0), 0, 0);
	struct rv_err err = { 0 };
	/* A: t1 (finished, done not sent yet), t2 (30 consumed at S), t4 later (prefetch). */
	struct shard_task t1 = next_ok(m, 0, 1, 0), t2 = next_ok(m, 0, 1, 0);
	struct shard_task t3 = next_ok(m, 0, 2, 0);      /* B: 50 consumed at S */
	struct shard_task t5 = next_ok(m, 0, 3, 0);      /* C never reports */
	ck_assert_int_eq(shard_done(m, t5.id, 3, 0), 1); /* done before the first report: DONE */
	ck_assert_int_eq(shard_ckpt_report(m, 7, 1, t2.id, 30, &err), 0);
	struct shard_task t4 = next_ok(m, 0, 1, 0);
	ck_assert_int_eq(shard_done(m, t1.id, 1, 0), 1);
	ck_assert_int_eq(shard_done(m, t2.id, 1, 0), 1);
	ck_assert_int_eq(shard_done(m, t4.id, 1, 0),
			 1); /* consumed after S: TODO in the checkpoint */
	ck_assert_int_eq(shard_ckpt_report(m, 7, 2, t3.id, 50, &err), 0);
	struct shard_task t6 = next_ok(m, 0, 3, 0);
	ck_assert_int_eq(shard_done(m, t6.id, 3, 0), 1); /* C after the first report: TODO */
	/* Retries and conflicts. */
	ck_assert_int_eq(shard_ckpt_report(m, 7, 2, t3.id, 50, &err), 0);
	ck_assert_int_eq(shard_ckpt_report(m, 7, 2, t3.id, 60, &err), -EEXIST);
	ck_assert_int_eq(shard_ckpt_report(m, 7, 2, t3.id, 101, &err), -EINVAL);
	ck_assert_int_eq(shard_ckpt_report(m, 7, 4, t3.id, 10, &err), -ERANGE);
	ck_assert_int_eq(shard_ckpt_report(m, 7, 4, 12345, 10, &err), -ERANGE);
	ck_assert_int_eq(shard_ckpt_report(m, -1, 4, 0, 0, &err), -EINVAL);

	struct rv_buf b = { 0 };
	ck_assert_int_eq(shard_ckpt_export(m, 8, &b, &err), -ENOENT);
	ck_assert_int_eq(shard_ckpt_export(m, 7, &b, &err), 0);
	/* A new manager (any number of workers) resumes at S. */
	struct shard_mgr *n = mgr1(dset("d", 1000, 100, 1, false, 0), 0, 0);
	ck_assert_int_eq(shard_ckpt_import(n, b.data, b.len, &err), 0);
	struct shard_stats st;
	shard_stats(n, 0, &st);
	ck_assert_int_eq(st.samples_done, 100 + 30 + 50 + 100); /* t1, t2[0,30), t3[0,50), t5 */
	uint8_t got[1000] = { 0 };
	struct shard_task t;
	int64_t last_id = 0;
	while (shard_next(n, 0, 9, 0, &t) == 1) {
		ck_assert_int_gt(t.id, t6.id); /* ids keep increasing */
		ck_assert_int_gt(t.id, last_id);
		last_id = t.id;
		for (int64_t i = t.start; i < t.end; i++)
			got[i]++;
		ck_assert_int_eq(shard_done(n, t.id, 9, 0), 1);
	}
	for (int i = 0; i < 1000; i++) {
		bool done_at_s = (i >= t1.start && i < t1.end) ||
				 (i >= t2.start && i < t2.start + 30) ||
				 (i >= t3.start && i < t3.start + 50) ||
				 (i >= t5.start && i < t5.end);
		ck_assert_msg(got[i] == !done_at_s, "sample %d served %d times", i, got[i]);
	}
	shard_stats(n, 0, &st);
	ck_assert(st.finished);
	/* An old task's done after the import counts nothing. */
	ck_assert_int_eq(shard_done(n, t6.id, 3, 0), 0);
	rv_buf_release(&b);
	shard_free(n);
	shard_free(m);
}
END_TEST

/* A reporter whose task was handed out after the first report, straight
 * from the shuffled order: the checkpoint cursor moves past it and what it
 * skipped is TODO. */
START_TEST(test_ckpt_ahead_of_cursor)
{
	struct shard_dataset d = dset("d", 997, 10, 2, true, 77);
	struct shard_mgr *m = mgr1(d, 0, 0);
	struct shard_task a = next_ok(m, 0, 1, 0);
	ck_assert_int_eq(shard_ckpt_report(m, 3, 1, a.id, 4, NULL), 0);
	for (int i = 0; i < 5; i++)
		next_ok(m, 0, 3, 0); /* positions 1..5: skipped by b */
	struct shard_task b = next_ok(m, 0, 2, 0);
	ck_assert_int_eq(shard_ckpt_report(m, 3, 2, b.id, 6, NULL), 0);
	struct rv_buf doc = { 0 };
	ck_assert_int_eq(shard_ckpt_export(m, 3, &doc, NULL), 0);
	struct shard_mgr *n = mgr1(d, 0, 0);
	ck_assert_int_eq(shard_ckpt_import(n, doc.data, doc.len, NULL), 0);
	struct shard_stats st;
	shard_stats(n, 0, &st);
	ck_assert_int_eq(st.samples_done, 10);
	ck_assert_int_eq(st.todo_ranges, 7); /* rests of a and b, the 5 skipped */
	uint8_t *got = calloc(997 * 2, 1);
	struct shard_task t;
	while (shard_next(n, 0, 5, 0, &t) == 1) {
		for (int64_t i = t.start; i < t.end; i++)
			got[t.epoch * 997 + i]++;
		ck_assert_int_eq(shard_done(n, t.id, 5, 0), 1);
	}
	for (int i = 0; i < 997 * 2; i++) {
		int s = i % 997;
		bool done_at_s = i < 997 && ((s >= a.start && s < a.start + 4) ||
					     (s >= b.start && s < b.start + 6));
		ck_assert_msg(got[i] == !done_at_s, "sample %d served %d times", i, got[i]);
	}
	free(got);
	rv_buf_release(&doc);
	shard_free(n);
	shard_free(m);
}
END_TEST

START_TEST(test_ckpt_import_errors)
{
	struct shard_mgr *m = mgr1(dset("d", 100, 10, 1, false, 0), 0, 0);
	struct shard_task a = next_ok(m, 0, 1, 0);
	ck_assert_int_eq(shard_ckpt_report(m, 1, 1, a.id, 5, NULL), 0);
	struct rv_buf b = { 0 };
	struct rv_err err = { 0 };
	ck_assert_int_eq(shard_ckpt_export(m, 1, &b, NULL), 0);
	struct shard_mgr *other = mgr1(dset("e", 100, 10, 1, false, 0), 0, 0);
	ck_assert_int_eq(shard_ckpt_import(other, b.data, b.len, &err), -EINVAL);
	ck_assert_str_eq(err.field, "datasets[0].name");
	shard_free(other);
	other = mgr1(dset("d", 100, 10, 1, true, 0), 0, 0);
	ck_assert_int_eq(shard_ckpt_import(other, b.data, b.len, &err), -EINVAL);
	ck_assert_str_eq(err.field, "datasets[0].shuffle");
	shard_free(other);
	/* A done count that the ranges do not add up to. */
	char *bad = strdup(b.data), *p = strstr(bad, "\"samples_done\":5");
	ck_assert_ptr_nonnull(p);
	p[15] = '6';
	ck_assert_int_eq(shard_ckpt_import(m, bad, strlen(bad), &err), -EINVAL);
	ck_assert_str_eq(err.field, "datasets[0].samples_done");
	free(bad);
	struct shard_stats st;
	shard_stats(m, 0, &st);
	ck_assert_int_eq(st.tasks_doing, 1);
	ck_assert_int_eq(shard_ckpt_import(m, b.data, b.len, &err), 0);
	shard_stats(m, 0, &st);
	ck_assert_int_eq(st.tasks_doing, 0);
	ck_assert_int_eq(st.samples_done, 5);
	ck_assert_int_eq(shard_done(m, a.id, 1, 0), 0);
	ck_assert_int_eq(shard_ckpt_export(m, 1, &b, NULL), -ENOENT); /* pending steps gone */
	rv_buf_release(&b);
	shard_free(m);
}
END_TEST

/* At most SHARD_MAX_PENDING_STEPS steps are kept: the oldest goes, and a
 * late first report of it is refused rather than based on a later state. */
START_TEST(test_ckpt_steps_kept)
{
	struct shard_mgr *m = mgr1(dset("d", 1000, 10, 1, false, 0), 0, 0);
	struct rv_buf b = { 0 };
	struct rv_err err = { 0 };
	for (int step = 1; step <= SHARD_MAX_PENDING_STEPS + 1; step++) {
		struct shard_task t = next_ok(m, 0, 1, 0);
		ck_assert_int_eq(shard_ckpt_report(m, step * 100, 1, t.id, 0, &err), 0);
		ck_assert_int_eq(shard_done(m, t.id, 1, 0), 1);
	}
	ck_assert_int_eq(shard_ckpt_export(m, 100, &b, &err), -ENOENT);
	ck_assert_int_eq(shard_ckpt_report(m, 100, 2, 0, 0, &err), -ERANGE);
	ck_assert_str_eq(err.field, "step");
	ck_assert_int_eq(shard_ckpt_report(m, 50, 2, 0, 0, &err), -ERANGE);
	for (int step = 2; step <= SHARD_MAX_PENDING_STEPS + 1; step++) {
		rv_buf_truncate(&b, 0);
		ck_assert_int_eq(shard_ckpt_export(m, step * 100, &b, &err), 0);
		/* Step S was reported in the S-th task, nothing of it consumed. */
		struct shard_mgr *n = mgr1(dset("d", 1000, 10, 1, false, 0), 0, 0);
		ck_assert_int_eq(shard_ckpt_import(n, b.data, b.len, &err), 0);
		struct shard_stats st;
		shard_stats(n, 0, &st);
		ck_assert_int_eq(st.samples_done, (step - 1) * 10);
		shard_free(n);
	}
	/* After an import every step is gone, and old step numbers are new again. */
	ck_assert_int_eq(shard_ckpt_import(m, b.data, b.len, &err), 0);
	ck_assert_int_eq(shard_ckpt_report(m, 100, 2, 0, 0, &err), 0);
	rv_buf_release(&b);
	shard_free(m);
}
END_TEST

/* A step its world of 2 ranks reported only in part is no checkpoint
 * (409): the other rank's consumed samples would be trained twice.  Whole
 * once both reported, also after a snapshot and load; a later world's count
 * does not change it. */
START_TEST(test_ckpt_whole_world)
{
	struct shard_mgr *m = mgr1(dset("d", 1000, 100, 1, false, 0), 0, 0);
	struct rv_err err = { 0 };
	struct rv_buf b = { 0 };
	struct shard_task a = next_ok(m, 0, 0, 0), c = next_ok(m, 0, 1, 0);
	ck_assert_int_eq(shard_ckpt_expect(m, 5, 2), -ENOENT); /* no report yet */
	ck_assert_int_eq(shard_ckpt_report(m, 5, 0, a.id, 40, &err), 0);
	ck_assert_int_eq(shard_ckpt_expect(m, 5, 2), 0);
	ck_assert_int_eq(shard_ckpt_expect(m, 5, 3), 0); /* the first count stays */
	ck_assert_int_eq(shard_ckpt_export(m, 5, &b, &err), -EBUSY);
	ck_assert_str_eq(err.field, "step");
	ck_assert_msg(strstr(err.msg, "1 of its 2 ranks"), "%s", err.msg);
	ck_assert_int_eq(b.len, 0);
	/* a snapshot keeps the count */
	struct rv_buf s = { 0 };
	ck_assert_int_eq(shard_snapshot_save(m, &s), 0);
	struct shard_mgr *n = mgr1(dset("d", 1000, 100, 1, false, 0), 0, 0);
	ck_assert_int_eq(shard_snapshot_load(n, s.data, s.len, &err), 0);
	ck_assert_int_eq(shard_ckpt_export(n, 5, &b, &err), -EBUSY);
	/* the second rank reports: whole, with both ranks' samples done */
	ck_assert_int_eq(shard_ckpt_report(m, 5, 1, c.id, 60, &err), 0);
	ck_assert_int_eq(shard_ckpt_export(m, 5, &b, &err), 0);
	struct shard_mgr *k = mgr1(dset("d", 1000, 100, 1, false, 0), 0, 0);
	ck_assert_int_eq(shard_ckpt_import(k, b.data, b.len, &err), 0);
	struct shard_stats st;
	shard_stats(k, 0, &st);
	ck_assert_int_eq(st.samples_done, 40 + 60);
	/* without a known world (0) nothing is waited for, as before */
	ck_assert_int_eq(shard_ckpt_report(m, 6, 0, a.id, 50, &err), 0);
	ck_assert_int_eq(shard_ckpt_expect(m, 6, 0), 0);
	rv_buf_truncate(&b, 0);
	ck_assert_int_eq(shard_ckpt_export(m, 6, &b, &err), 0);
	rv_buf_release(&s);
	rv_buf_release(&b);
	shard_free(k);
	shard_free(n);
	shard_free(m);
}
END_TEST

/* A step reported in part is never whole once the missing ranks will not
 * report it: one reported a later step (ranks saving at different steps)
 * or died since the step's first report (410, so the persister stops
 * waiting for it).  While one of them still may, it is only not whole yet. */
START_TEST(test_ckpt_never_whole)
{
	struct shard_mgr *m = mgr1(dset("d", 1000, 100, 1, false, 0), 0, 0);
	struct rv_err err = { 0 };
	struct rv_buf b = { 0 };
	/* rank 0 saves at 5, rank 1 at 7 */
	ck_assert_int_eq(shard_ckpt_report(m, 5, 0, 0, 0, &err), 0);
	ck_assert_int_eq(shard_ckpt_expect(m, 5, 2), 0);
	ck_assert_int_eq(shard_ckpt_export(m, 5, &b, &err), -EBUSY);
	ck_assert_int_eq(shard_ckpt_report(m, 7, 1, 0, 0, &err), 0);
	ck_assert_int_eq(shard_ckpt_expect(m, 7, 2), 0);
	ck_assert_int_eq(shard_ckpt_export(m, 5, &b, &err), -ESTALE);
	ck_assert_msg(strstr(err.msg, "will not report"), "%s", err.msg);
	ck_assert_int_eq(b.len, 0);
	/* rank 0 has said nothing past 7: it still may report it */
	ck_assert_int_eq(shard_ckpt_export(m, 7, &b, &err), -EBUSY);
	/* rank 0 dies: its report of 7 would be refused */
	ck_assert_int_ge(shard_worker_dead(m, 0), 0);
	ck_assert_int_eq(shard_ckpt_export(m, 7, &b, &err), -ESTALE);
	ck_assert_int_eq(shard_ckpt_report(m, 7, 0, 0, 0, &err), -ERANGE);
	/* a step both ranks reported is whole whatever came after */
	ck_assert_int_eq(shard_ckpt_report(m, 9, 0, 0, 0, &err), 0);
	ck_assert_int_eq(shard_ckpt_expect(m, 9, 2), 0);
	ck_assert_int_eq(shard_ckpt_export(m, 9, &b, &err), -EBUSY);
	ck_assert_int_eq(shard_ckpt_report(m, 9, 1, 0, 0, &err), 0);
	ck_assert_int_eq(shard_ckpt_export(m, 9, &b, &err), 0);
	rv_buf_release(&b);
	shard_free(m);
}
END_TEST

/* ---- the property test ---- */

enum { PW = 48, PMAXHELD = 3, PSTEPS = 3 };

struct ptask {
	int64_t id, start, end, consumed, deadline;
	int ds, epoch;
};

struct pstream {
	struct ptask held[PMAXHELD]; /* in id order; consumed in that order */
	int nheld, prefetch;
	struct ptask *acc; /* accepted dones, in order */
	int nacc, capacc;
	struct ptask voided; /* the last task taken back, for a late done */
	bool has_voided;
};

struct pworker {
	int64_t id;
	bool live, ever;
	bool vanished;    /* gone without a word: its tasks wait for their deadline */
	int64_t died_at;  /* event of the last death, -1 */
	int64_t *done_at; /* events of its accepted dones (the manager's ring) */
	int64_t *done_id;
	int ndone, capdone;
	struct pstream s[2];
};

struct pstep {
	bool used, based;
	int64_t step, base_at;
	uint8_t *truth, *base; /* DONE at S as known so far; DONE at the first report */
	bool reported[PW];
};

struct psim {
	int nds;
	struct shard_dataset d[2];
	struct shard_conf c;
	struct shard_mgr *m;
	int64_t now, ev, next_step;
	size_t off[2], nsamples; /* bitmap offsets per dataset: [epoch][sample] */
	uint8_t *consumed, *committed;
	size_t ncommitted;
	struct pworker w[PW];
	struct pstep st[PSTEPS];
	int seed;
	int64_t n_restores, n_restarts, n_reports, n_erange, n_expired, n_dead, n_renewed;
};

/* check records the location of every passing ck_assert (a write to its
 * pipe): hot loops test first and only call into check on failure. */
#define PASSERT(sim, cond, fmt, ...)                                                               \
	do {                                                                                       \
		if (!(cond))                                                                       \
			ck_abort_msg("seed %d event %" PRId64 ": " fmt, (sim)->seed, (sim)->ev,    \
				     ##__VA_ARGS__);                                               \
	} while (0)

static uint8_t *bit(struct psim *p, uint8_t *map, int ds, int epoch, int64_t i)
{
	return &map[p->off[ds] + (size_t)epoch * (size_t)p->d[ds].size + (size_t)i];
}

static size_t popcount_map(const struct psim *p, const uint8_t *map)
{
	size_t n = 0;
	for (size_t i = 0; i < p->nsamples; i++)
		n += map[i];
	return n;
}

static void consume(struct psim *p, struct ptask *t, int64_t upto)
{
	for (int64_t i = t->start + t->consumed; i < t->start + upto; i++) {
		uint8_t *b = bit(p, p->consumed, t->ds, t->epoch, i);
		PASSERT(p, *b == 0, "sample %" PRId64 " of epoch %d consumed twice", i, t->epoch);
		*b = 1;
	}
	t->consumed = upto;
}

/* The work of a worker that is gone on a task taken back is lost: its
 * samples are TODO again.  Never called for a live worker: it goes on
 * training what it holds, however late. */
static void void_task(struct psim *p, struct pworker *w, int si, int k)
{
	struct pstream *s = &w->s[si];
	struct ptask *t = &s->held[k];
	for (int64_t i = t->start; i < t->start + t->consumed; i++)
		*bit(p, p->consumed, t->ds, t->epoch, i) = 0;
	s->voided = *t;
	s->has_voided = true;
	memmove(&s->held[k], &s->held[k + 1], (size_t)(s->nheld - k - 1) * sizeof(*t));
	s->nheld--;
}

static void worker_start(struct pworker *w, int64_t id)
{
	w->id = id;
	w->live = w->ever = true;
	w->vanished = false;
	for (int si = 0; si < 2; si++) {
		w->s[si].nheld = 0;
		w->s[si].prefetch = 1 + (int)rndn(PMAXHELD);
		w->s[si].has_voided = false;
	}
}

static int live_workers(const struct psim *p)
{
	int n = 0;
	for (int i = 0; i < PW; i++)
		n += p->w[i].live;
	return n;
}

static int pick_live(struct psim *p)
{
	int n = live_workers(p);
	if (n == 0)
		return -1;
	int k = (int)rndn(n);
	for (int i = 0; i < PW; i++)
		if (p->w[i].live && k-- == 0)
			return i;
	return -1;
}

static void do_death(struct psim *p, int wi);

static void join(struct psim *p)
{
	int free_slot = -1, dead_slot = -1;
	for (int i = 0; i < PW; i++) {
		if (!p->w[i].ever && free_slot < 0)
			free_slot = i;
		if (p->w[i].ever && !p->w[i].live && dead_slot < 0)
			dead_slot = i;
	}
	/* Now and then a restarted worker comes back under its old id. */
	int i = dead_slot >= 0 && (free_slot < 0 || rndn(4) == 0) ? dead_slot : free_slot;
	if (i < 0)
		return;
	if (p->w[i].vanished)
		do_death(p, i); /* its agent joins again: what it held is free */
	worker_start(&p->w[i], 1000 + 17 * i);
}

static void do_next(struct psim *p, int wi, int si)
{
	struct pstream *s = &p->w[wi].s[si];
	if (s->nheld >= s->prefetch)
		return;
	struct shard_task t;
	int rc = shard_next(p->m, si, p->w[wi].id, p->now, &t);
	PASSERT(p, rc == 1 || rc == 0 || rc == -ENOSPC, "next returned %d", rc);
	if (rc != 1)
		return;
	PASSERT(p, t.ds == si && t.end > t.start && t.end <= p->d[si].size, "bad task");
	PASSERT(p, s->nheld == 0 || t.id > s->held[s->nheld - 1].id, "ids must increase");
	s->held[s->nheld++] = (struct ptask){
		t.id,
		t.start,
		t.end,
		0,
		p->c.doing_timeout_ms > 0 ? p->now + p->c.doing_timeout_ms : INT64_MAX,
		t.ds,
		t.epoch
	};
}

static void do_consume(struct psim *p, int wi, int si)
{
	struct pstream *s = &p->w[wi].s[si];
	for (int k = 0; k < s->nheld; k++) {
		struct ptask *t = &s->held[k];
		if (t->consumed < t->end - t->start) {
			int64_t len = t->end - t->start;
			consume(p, t, t->consumed + 1 + rndn(len - t->consumed));
			return;
		}
	}
}

static void do_done(struct psim *p, int wi, int si)
{
	struct pworker *w = &p->w[wi];
	struct pstream *s = &w->s[si];
	int fin = 0;
	while (fin < s->nheld && s->held[fin].consumed == s->held[fin].end - s->held[fin].start)
		fin++;
	if (fin == 0)
		return;
	int k = (int)rndn(fin); /* dones may arrive out of order */
	struct ptask t = s->held[k];
	int rc = shard_done(p->m, t.id, w->id, p->now);
	PASSERT(p, rc == 1, "done of a held task returned %d", rc);
	for (int64_t i = t.start; i < t.end; i++) {
		uint8_t *b = bit(p, p->committed, t.ds, t.epoch, i);
		PASSERT(p, *b == 0, "sample committed twice");
		*b = 1;
	}
	p->ncommitted += (size_t)(t.end - t.start);
	memmove(&s->held[k], &s->held[k + 1], (size_t)(s->nheld - k - 1) * sizeof(t));
	s->nheld--;
	if (s->nacc == s->capacc) {
		s->capacc = s->capacc ? 2 * s->capacc : 16;
		s->acc = realloc(s->acc, (size_t)s->capacc * sizeof(*s->acc));
	}
	s->acc[s->nacc++] = t;
	if (w->ndone == w->capdone) {
		w->capdone = w->capdone ? 2 * w->capdone : 16;
		w->done_at = realloc(w->done_at, (size_t)w->capdone * sizeof(*w->done_at));
		w->done_id = realloc(w->done_id, (size_t)w->capdone * sizeof(*w->done_id));
	}
	w->done_at[w->ndone] = p->ev;
	w->done_id[w->ndone++] = t.id;
	/* A repeated done counts nothing. */
	if (rndn(8) == 0)
		PASSERT(p, shard_done(p->m, t.id, w->id, p->now) == 0, "repeated done counted");
}

static void do_late_or_foreign(struct psim *p, int wi, int si)
{
	struct pworker *w = &p->w[wi];
	if (w->s[si].has_voided) {
		int rc = shard_done(p->m, w->s[si].voided.id, w->id, p->now);
		PASSERT(p, rc == 0, "late done of a task taken back returned %d", rc);
	}
	int oi = pick_live(p);
	if (oi >= 0 && oi != wi && p->w[oi].s[si].nheld > 0) {
		int rc = shard_done(p->m, p->w[oi].s[si].held[0].id, w->id, p->now);
		PASSERT(p, rc == -EPERM, "foreign done returned %d", rc);
	}
}

static void do_death(struct psim *p, int wi)
{
	struct pworker *w = &p->w[wi];
	int held = 0;
	for (int si = 0; si < p->nds; si++)
		held += w->s[si].nheld;
	int rc = shard_worker_dead(p->m, w->id);
	PASSERT(p, rc == held, "worker_dead returned %d, held %d", rc, held);
	for (int si = 0; si < p->nds; si++)
		while (w->s[si].nheld)
			void_task(p, w, si, 0);
	w->live = w->vanished = false;
	w->died_at = p->ev;
	w->ndone = 0; /* the manager drops its recent dones with it */
	p->n_dead++;
}

/* A worker's process is gone and no one told the manager (a client of no
 * agent): only the doing timeout gives its tasks back. */
static void do_vanish(struct psim *p, int wi)
{
	p->w[wi].live = false;
	p->w[wi].vanished = true;
}

/* The manager's view of who is alive: a live worker of the sim. */
static bool psim_held(const void *arg, int64_t worker)
{
	const struct psim *p = arg;
	for (int i = 0; i < PW; i++)
		if (p->w[i].live && p->w[i].id == worker)
			return true;
	return false;
}

/* Time passes: due tasks of live workers (stalled, not gone) stay theirs
 * with a new deadline, and they go on consuming them later; only those of
 * vanished workers go back.  A manager that took a live worker's task back
 * would hand its samples to another worker: consume() catches that. */
static void expire_now(struct psim *p)
{
	int want = 0;
	for (int i = 0; i < PW; i++)
		for (int si = 0; si < p->nds; si++)
			for (int k = 0; k < p->w[i].s[si].nheld; k++) {
				struct ptask *t = &p->w[i].s[si].held[k];
				if (t->deadline > p->now)
					continue;
				if (p->w[i].vanished)
					want++;
				else {
					t->deadline = p->now + p->c.doing_timeout_ms;
					p->n_renewed++;
				}
			}
	int rc = shard_expire(p->m, p->now, psim_held, p);
	PASSERT(p, rc == want, "expire returned %d, want %d", rc, want);
	int64_t min = INT64_MAX;
	for (int i = 0; i < PW; i++)
		for (int si = 0; si < p->nds; si++)
			for (int k = 0; k < p->w[i].s[si].nheld;) {
				struct ptask *t = &p->w[i].s[si].held[k];
				if (p->w[i].vanished && t->deadline <= p->now) {
					void_task(p, &p->w[i], si, k);
					continue;
				}
				if (t->deadline < min)
					min = t->deadline;
				k++;
			}
	PASSERT(p, shard_next_deadline(p->m) == (p->c.doing_timeout_ms > 0 ? min : INT64_MAX),
		"next deadline");
	p->n_expired += rc;
}

static void do_expire(struct psim *p)
{
	p->now += rndn(p->c.doing_timeout_ms > 0 ? p->c.doing_timeout_ms : 5);
	expire_now(p);
}

static void restart_master(struct psim *p)
{
	p->m = reload(p->m, p->d, p->nds, &p->c);
	p->n_restarts++;
}

static struct pstep *step_by_slot(struct psim *p, int i)
{
	return p->st[i].used ? &p->st[i] : NULL;
}

static void ckpt_begin(struct psim *p)
{
	for (int i = 0; i < PSTEPS; i++) {
		if (p->st[i].used)
			continue;
		p->st[i] = (struct pstep){ .used = true, .step = p->next_step++ };
		p->st[i].truth = malloc(p->nsamples);
		p->st[i].base = malloc(p->nsamples);
		return;
	}
}

/* The position worker w reports for stream si: the task it is in with what
 * it consumed of it, else the last it finished, whole, else 0. */
static void position(const struct pworker *w, int si, int64_t *task, int64_t *consumed)
{
	const struct pstream *s = &w->s[si];
	*task = *consumed = 0;
	for (int k = 0; k < s->nheld; k++) {
		if (s->held[k].consumed < s->held[k].end - s->held[k].start) {
			*task = s->held[k].id;
			*consumed = s->held[k].consumed;
			return;
		}
	}
	/* Every held task is finished: the newest finished, held or accepted. */
	const struct ptask *last = s->nheld ? &s->held[s->nheld - 1] : NULL;
	for (int k = 0; k < s->nacc; k++)
		if (!last || s->acc[k].id > last->id)
			last = &s->acc[k];
	if (last) {
		*task = last->id;
		*consumed = last->end - last->start;
	}
}

/* Whether the manager can no longer reconcile a report of w for step st. */
static bool report_may_fail(const struct psim *p, const struct pworker *w, const struct pstep *st,
			    int si, int64_t task)
{
	if (st->based) {
		int since = 0;
		for (int i = 0; i < w->ndone; i++)
			since += w->done_at[i] > st->base_at;
		if (w->died_at > st->base_at || since > SHARD_RING)
			return true;
	}
	if (p->nds > 1 && task != 0) {
		/* A task the manager forgot (pushed out of the ring): its dataset is unknown. */
		bool known = false;
		for (int k = 0; k < w->s[si].nheld; k++)
			known |= w->s[si].held[k].id == task;
		for (int i = w->ndone > SHARD_RING ? w->ndone - SHARD_RING : 0; i < w->ndone; i++)
			known |= w->done_id[i] == task;
		return !known;
	}
	return false;
}

/* Whether samples worker w claims for S are already DONE at S: another
 * reporter claimed them before they were taken back from it (a stall) and
 * handed to w. */
static bool claims_twice(struct psim *p, const struct pstep *st, const struct pworker *w, int si,
			 int64_t task)
{
	if (!st->based)
		return false;
	const struct pstream *s = &w->s[si];
	for (int k = 0; k < s->nacc + s->nheld; k++) {
		const struct ptask *t = k < s->nacc ? &s->acc[k] : &s->held[k - s->nacc];
		int64_t n = k < s->nacc ? t->end - t->start : t->consumed;
		if (t->id > task)
			continue;
		for (int64_t i = t->start; i < t->start + n; i++)
			if (*bit(p, st->truth, t->ds, t->epoch, i) &&
			    !*bit(p, st->base, t->ds, t->epoch, i))
				return true;
	}
	return false;
}

static void truth_add(struct psim *p, struct pstep *st, const struct ptask *t, int64_t n)
{
	for (int64_t i = t->start; i < t->start + n; i++)
		*bit(p, st->truth, t->ds, t->epoch, i) = 1;
}

static void do_report(struct psim *p, struct pstep *st, int wi)
{
	struct pworker *w = &p->w[wi];
	if (st->reported[wi])
		return;
	st->reported[wi] = true;
	for (int si = 0; si < p->nds; si++) {
		int64_t task, consumed;
		position(w, si, &task, &consumed);
		struct rv_err err = { 0 };
		bool may_fail = report_may_fail(p, w, st, si, task) ||
				claims_twice(p, st, w, si, task);
		int rc = shard_ckpt_report(p->m, st->step, w->id, task, consumed, &err);
		p->n_reports++;
		if (rc == -ERANGE && may_fail) {
			p->n_erange++;
			continue;
		}
		PASSERT(p, rc == 0,
			"report of worker %" PRId64 " task %" PRId64 " at %" PRId64
			" returned %d: %s",
			w->id, task, consumed, rc, err.msg);
		if (!st->based) {
			st->based = true;
			st->base_at = p->ev;
			memcpy(st->truth, p->committed, p->nsamples);
			memcpy(st->base, p->committed, p->nsamples);
		}
		/* What this worker consumed by S: its accepted tasks up to task, the
		 * held ones before it, and the part of task. */
		struct pstream *s = &w->s[si];
		for (int k = 0; k < s->nacc; k++)
			if (s->acc[k].id <= task)
				truth_add(p, st, &s->acc[k], s->acc[k].end - s->acc[k].start);
		for (int k = 0; k < s->nheld; k++)
			if (s->held[k].id <= task)
				truth_add(p, st, &s->held[k], s->held[k].consumed);
		if (rndn(6) == 0)
			PASSERT(p,
				shard_ckpt_report(p->m, st->step, w->id, task, consumed, NULL) == 0,
				"a repeated report failed");
	}
}

static void reset_workers(struct psim *p)
{
	for (int i = 0; i < PW; i++) {
		struct pworker *w = &p->w[i];
		w->live = w->vanished = false;
		w->ever = false;
		w->ndone = 0;
		w->died_at = -1;
		for (int si = 0; si < 2; si++) {
			w->s[si].nheld = 0;
			w->s[si].nacc = 0;
			w->s[si].has_voided = false;
		}
	}
}

static void do_export(struct psim *p, struct pstep *st)
{
	if (!st->based)
		return;
	struct rv_buf doc = { 0 };
	struct rv_err err = { 0 };
	int rc = shard_ckpt_export(p->m, st->step, &doc, &err);
	PASSERT(p, rc == 0, "export returned %d: %s", rc, err.msg);
	if (rndn(3) == 0) {
		rv_buf_release(&doc);
		return; /* saved, not restored */
	}
	/* Restore: every worker restarts from the checkpoint; the world has
	 * another size now. */
	int old = live_workers(p), nw;
	do
		nw = 1 + (int)rndn(8);
	while (nw == old);
	struct shard_mgr *into = rndn(2) == 0 ? shard_new(p->d, p->nds, &p->c, NULL) : p->m;
	rc = shard_ckpt_import(into, doc.data, doc.len, &err);
	PASSERT(p, rc == 0, "import returned %d: %s (%s)", rc, err.msg, err.field);
	if (into == p->m) {
		/* Old workers' dones for the same manager count nothing. */
		for (int i = 0; i < PW; i++)
			for (int si = 0; p->w[i].live && si < p->nds; si++)
				for (int k = 0; k < p->w[i].s[si].nheld; k++)
					PASSERT(p,
						shard_done(p->m, p->w[i].s[si].held[k].id,
							   p->w[i].id, p->now) == 0,
						"a done from before the restore counted");
	} else {
		shard_free(p->m);
		p->m = into;
	}
	memcpy(p->consumed, st->truth, p->nsamples);
	memcpy(p->committed, st->truth, p->nsamples);
	p->ncommitted = popcount_map(p, st->truth);
	struct shard_stats ss;
	shard_stats(p->m, -1, &ss);
	PASSERT(p, (size_t)ss.samples_done == popcount_map(p, st->truth),
		"restored %" PRId64 " done, want %zu", ss.samples_done, popcount_map(p, st->truth));
	rv_buf_release(&doc);
	for (int i = 0; i < PSTEPS; i++) {
		free(p->st[i].truth);
		free(p->st[i].base);
		p->st[i] = (struct pstep){ 0 };
	}
	reset_workers(p);
	for (int i = 0; i < nw; i++)
		join(p);
	p->n_restores++;
}

static void check_stats(struct psim *p)
{
	struct shard_stats ss;
	shard_stats(p->m, -1, &ss);
	int64_t held = 0;
	for (int i = 0; i < PW; i++)
		for (int si = 0; si < p->nds; si++)
			held += p->w[i].s[si].nheld;
	PASSERT(p, ss.tasks_doing == held, "%" PRId64 " tasks DOING, workers hold %" PRId64,
		ss.tasks_doing, held);
	PASSERT(p, (size_t)ss.samples_done == p->ncommitted, "done count");
}

static void property_run(int seed, int events)
{
	struct psim *p = calloc(1, sizeof(*p));
	rnd_state = (uint64_t)seed * 7919 + 1;
	p->seed = seed;
	p->nds = rndn(4) == 0 ? 2 : 1;
	for (int ds = 0; ds < p->nds; ds++) {
		int64_t size = 1 + rndn(300);
		int64_t ss = 1 + rndn(size < 40 ? size : 40);
		p->d[ds] = dset(ds ? "eval" : "train", size, ss, 1 + (int)rndn(3), rndn(2) == 0,
				rnd());
		p->off[ds] = p->nsamples;
		p->nsamples += (size_t)size * (size_t)p->d[ds].epochs;
	}
	p->c.doing_timeout_ms = rndn(5) == 0 ? 0 : 20 + rndn(80);
	p->c.max_tasks_in_flight = rndn(3) == 0 ? 2 + (int)rndn(8) : 0;
	p->m = shard_new(p->d, p->nds, &p->c, NULL);
	ck_assert_ptr_nonnull(p->m);
	p->consumed = calloc(p->nsamples, 1);
	p->committed = calloc(p->nsamples, 1);
	reset_workers(p);
	for (int i = 0, n = 1 + (int)rndn(6); i < n; i++)
		join(p);

	for (p->ev = 0; p->ev < events; p->ev++) {
		p->now++;
		int wi = pick_live(p), si = (int)rndn(p->nds), op = (int)rndn(100);
		if (wi < 0) {
			join(p);
			continue;
		}
		if (op < 25)
			do_next(p, wi, si);
		else if (op < 50)
			do_consume(p, wi, si);
		else if (op < 68)
			do_done(p, wi, si);
		else if (op < 71)
			do_late_or_foreign(p, wi, si);
		else if (op < 73)
			rndn(3) == 0 ? do_vanish(p, wi) : do_death(p, wi);
		else if (op < 77)
			join(p);
		else if (op < 83)
			do_expire(p);
		else if (op < 85)
			restart_master(p);
		else if (op < 87)
			ckpt_begin(p);
		else if (op < 97) {
			struct pstep *st = step_by_slot(p, (int)rndn(PSTEPS));
			if (st)
				do_report(p, st, wi);
		} else {
			struct pstep *st = step_by_slot(p, (int)rndn(PSTEPS));
			if (st && rndn(3) == 0)
				do_export(p, st);
		}
		check_stats(p);
	}

	/* To the end: no more failures; vanished workers' tasks go back (by
	 * their deadline, else as their agents join again); the workers left
	 * finish every epoch. */
	if (p->c.doing_timeout_ms > 0) {
		p->now += p->c.doing_timeout_ms;
		expire_now(p);
	}
	for (int i = 0; i < PW; i++)
		if (p->w[i].vanished)
			do_death(p, i);
	if (live_workers(p) == 0)
		join(p);
	struct shard_stats ss;
	for (int64_t guard = 0;; guard++) {
		PASSERT(p, guard < 10000000, "the run never finishes");
		shard_stats(p->m, -1, &ss);
		if (ss.finished)
			break;
		for (int i = 0; i < PW; i++) {
			for (int si = 0; p->w[i].live && si < p->nds; si++) {
				do_next(p, i, si);
				struct pstream *s = &p->w[i].s[si];
				for (int k = 0; k < s->nheld; k++)
					consume(p, &s->held[k], s->held[k].end - s->held[k].start);
				while (s->nheld)
					do_done(p, i, si);
			}
		}
		p->ev++;
	}
	check_stats(p);
	for (size_t i = 0; i < p->nsamples; i++) {
		PASSERT(p, p->consumed[i] == 1 && p->committed[i] == 1,
			"sample %zu consumed %d times", i, p->consumed[i]);
	}
	struct shard_task t;
	for (int ds = 0; ds < p->nds; ds++)
		PASSERT(p, shard_next(p->m, ds, 1, p->now, &t) == 0, "a task after the end");

	if (getenv("SHARD_VERBOSE"))
		fprintf(stderr,
			"seed=%d nds=%d restores=%" PRId64 " restarts=%" PRId64 " reports=%" PRId64
			" erange=%" PRId64 " expired=%" PRId64 " renewed=%" PRId64 " dead=%" PRId64
			"\n",
			seed, p->nds, p->n_restores, p->n_restarts, p->n_reports, p->n_erange,
			p->n_expired, p->n_renewed, p->n_dead);
	shard_free(p->m);
	for (int i = 0; i < PSTEPS; i++) {
		free(p->st[i].truth);
		free(p->st[i].base);
	}
	for (int i = 0; i < PW; i++) {
		free(p->w[i].done_at);
		free(p->w[i].done_id);
		for (int si = 0; si < 2; si++)
			free(p->w[i].s[si].acc);
	}
	free(p->consumed);
	free(p->committed);
	free(p);
}

START_TEST(test_property_exactly_once)
{
	const char *n = getenv("SHARD_SEEDS"), *s0 = getenv("SHARD_SEED0");
	int seeds = n ? (int)strtol(n, NULL, 10) : 200, first = s0 ? (int)strtol(s0, NULL, 10) : 1;
	for (int seed = first; seed < first + seeds; seed++)
		property_run(seed, 3000);
}
END_TEST

/* A node that leaves tells the master before its workers stopped: a
 * worker's step report that lands after the leave names a task the leave
 * took back.  What it consumed of it went into that step (the others'
 * model has it), so the step's checkpoint counts it consumed: before, the
 * data checkpoint put those samples back in TODO and the restored world
 * trained them twice. */
START_TEST(test_report_after_death_places_consumed)
{
	struct shard_dataset d[1] = { dset("a", 100, 10, 1, false, 0) };
	struct shard_conf c = { 0 };
	struct shard_mgr *m = shard_new(d, 1, &c, NULL);
	struct shard_task a = next_ok(m, 0, 0, 0), b = next_ok(m, 0, 1, 0);
	ck_assert_int_eq(shard_worker_dead(m, 1), 1);
	struct rv_err err = { 0 };
	ck_assert_msg(shard_ckpt_report(m, 9, 1, b.id, 6, &err) == 0, "%s", err.msg);
	ck_assert_msg(shard_ckpt_report(m, 9, 0, a.id, 4, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(shard_ckpt_expect(m, 9, 2), 0);
	struct rv_buf doc = { 0 };
	ck_assert_msg(shard_ckpt_export(m, 9, &doc, &err) == 0, "%s", err.msg);
	/* the step's TODO: a's last 6, b's last 4, and the rest */
	char want[64];
	snprintf(want, sizeof(want), "[0,%" PRId64 ",", b.start + 6);
	ck_assert_msg(strstr(doc.data, want), "b's unconsumed part %s not TODO in %s", want,
		      doc.data);
	snprintf(want, sizeof(want), "[0,%" PRId64 ",", b.start);
	ck_assert_msg(!strstr(doc.data, want), "b's consumed part TODO again in %s", doc.data);
	rv_buf_release(&doc);
	/* more than it held is refused */
	ck_assert_int_eq(shard_ckpt_report(m, 10, 1, b.id, 11, &err), -EINVAL);
	shard_free(m);
}
END_TEST

static Suite *shard_suite(void)
{
	TCase *tc =
		RV_TEST_TCASE("shard", 60, test_new_validation,
			      test_report_after_death_places_consumed, test_sizes_epochs_in_order,
			      test_shuffle_permutation, test_pull_fast_worker_gets_more,
			      test_dead_worker_back_at_once, test_stall_timeout, test_stall_held,
			      test_late_repeated_foreign_done, test_in_flight_cap,
			      test_snapshot_round_trip, test_snapshot_named_and_positional,
			      test_snapshot_load_errors, test_ckpt_rules, test_ckpt_ahead_of_cursor,
			      test_ckpt_import_errors, test_ckpt_steps_kept, test_ckpt_whole_world,
			      test_ckpt_never_whole);
	TCase *big =
		RV_TEST_TCASE("scale", 120, test_big_dataset_memory, test_property_exactly_once);
	return RV_TEST_SUITE("shard", tc, big);
}

RV_TEST_MAIN(shard_suite)
