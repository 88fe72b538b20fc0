/*
 * check_journal.c: the master's journal on a real file system (a temp folder
 * per test, real fsyncs): records come back in order after a reopen, many
 * threads share few fsyncs, a snapshot replaces the records it covers, a torn
 * tail is cut (at every byte of the last record), a damaged record in the
 * middle is an error naming its offset, a crash at either point of a snapshot
 * replays correctly, a short write is cut back, and a process killed with
 * SIGKILL loses no record whose sync had returned; records appended and
 * synced while a snapshot is written survive it, and a kill -9 at each of
 * its steps.
 */
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "journal.h"
#include "testutil.h"

/* The byte layout, from journal.c. */
#define REC_HDR   20
#define BATCH_HDR 28
#define FILE_HDR  24
#define PAYLOAD   "abcdefghijklmnopqrstuvwxyz0123"
#define REC_LEN   (REC_HDR + strlen("rec-1-" PAYLOAD))

static char tmp[64];

static void setup(void)
{
	snprintf(tmp, sizeof(tmp), "/tmp/rv-journal-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmp));
}

static void teardown(void)
{
	rv_test_rm_rf(tmp);
}

static char *path_in(const char *name)
{
	static char p[128];
	snprintf(p, sizeof(p), "%s/%s", tmp, name);
	return p;
}

/* What a replay handed over. */
#define SEEN_MAX 4096
struct seen {
	int nsnap;
	char snap[256];
	int n;
	int type[SEEN_MAX];
	char data[SEEN_MAX][128];
	int fail_at; /* on_rec fails with -EPROTO at this record (1-based), 0 never */
};

static int on_snap(void *ctx, int type, const void *d, size_t len, struct rv_err *err)
{
	(void)err;
	struct seen *s = ctx;
	ck_assert_int_eq(type, 0);
	ck_assert_uint_lt(len, sizeof(s->snap));
	memcpy(s->snap, d, len);
	s->snap[len] = 0;
	s->nsnap++;
	return 0;
}

static int on_rec(void *ctx, int type, const void *d, size_t len, struct rv_err *err)
{
	struct seen *s = ctx;
	if (s->fail_at && s->n + 1 == s->fail_at)
		return rv_err_set(err, -EPROTO, NULL, "record %d refused", s->n + 1);
	ck_assert_int_lt(s->n, SEEN_MAX);
	ck_assert_uint_lt(len, sizeof(s->data[0]));
	memcpy(s->data[s->n], d, len);
	s->data[s->n][len] = 0;
	s->type[s->n] = type;
	s->n++;
	return 0;
}

static struct journal *open_ok(struct seen *s, bool nosync)
{
	struct journal_opts o = { .dir = tmp, .nosync = nosync };
	struct rv_err err = { 0 };
	memset(s, 0, sizeof(*s));
	struct journal *j = journal_open(&o, on_snap, on_rec, s, &err);
	ck_assert_msg(j != NULL, "journal_open: %d %s", err.code, err.msg);
	return j;
}

static int64_t append_str(struct journal *j, int type, const char *str)
{
	int64_t seq = journal_append(j, type, str, strlen(str));
	ck_assert_msg(seq > 0, "append: %s", strerror((int)-seq));
	return seq;
}

static void read_file(const char *p, char **data, size_t *len)
{
	FILE *f = fopen(p, "rb");
	ck_assert_ptr_nonnull(f);
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	*data = malloc((size_t)n + 1);
	ck_assert_uint_eq(fread(*data, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
}

static void write_file(const char *p, const char *data, size_t len)
{
	FILE *f = fopen(p, "wb");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(data, 1, len, f), len);
	fclose(f);
}

/* The end of what was written in data: zeros after it are the journal's
 * prewritten room. */
static size_t data_end(const char *data, size_t from, size_t len)
{
	while (len > from && data[len - 1] == 0)
		len--;
	return len;
}

static bool file_has(const char *p, const char *needle)
{
	char *data;
	size_t len;
	read_file(p, &data, &len);
	bool has = memmem(data, len, needle, strlen(needle)) != NULL;
	free(data);
	return has;
}

static bool exists(const char *p)
{
	struct stat sb;
	return stat(p, &sb) == 0;
}

START_TEST(test_replay_in_order)
{
	struct seen s;
	struct journal *j = open_ok(&s, false);
	ck_assert_int_eq(s.n, 0);
	ck_assert_int_eq(s.nsnap, 0);
	char buf[64];
	for (int i = 1; i <= 100; i++) {
		snprintf(buf, sizeof(buf), "op-%d%.*s", i, i % 20, "xxxxxxxxxxxxxxxxxxxx");
		ck_assert_int_eq(append_str(j, i % 7, buf), i);
	}
	ck_assert_int_eq(journal_append(j, 9, NULL, 0), 101); /* an empty record */
	ck_assert_int_eq(journal_sync(j, 0, 5000), 0);
	struct journal_stats st;
	journal_stats(j, &st);
	ck_assert_int_eq(st.records, 101);
	ck_assert_int_eq(st.durable_seq, 101);
	ck_assert_int_ge(st.fsyncs, 1);
	journal_close(j);

	j = open_ok(&s, false);
	ck_assert_int_eq(s.n, 101);
	for (int i = 1; i <= 100; i++) {
		snprintf(buf, sizeof(buf), "op-%d%.*s", i, i % 20, "xxxxxxxxxxxxxxxxxxxx");
		ck_assert_str_eq(s.data[i - 1], buf);
		ck_assert_int_eq(s.type[i - 1], i % 7);
	}
	ck_assert_str_eq(s.data[100], "");
	ck_assert_int_eq(s.type[100], 9);
	journal_stats(j, &st);
	ck_assert_int_eq(st.replayed, 101);
	ck_assert_int_eq(st.torn_records, 0);
	ck_assert_int_eq(append_str(j, 1, "after"), 102);
	journal_close(j);
	j = open_ok(&s, false);
	ck_assert_int_eq(s.n, 102);
	ck_assert_str_eq(s.data[101], "after");
	journal_close(j);
}
END_TEST

START_TEST(test_bad_calls)
{
	struct seen s;
	struct journal *j = open_ok(&s, true);
	char big[2000] = { 0 };
	ck_assert_int_eq(journal_append(j, -1, "x", 1), -EINVAL);
	ck_assert_int_eq(journal_sync(j, 5, 100), -EINVAL); /* never appended */
	journal_close(j);

	struct journal_opts o = { .dir = tmp, .max_record = 1000 };
	struct rv_err err = { 0 };
	j = journal_open(&o, NULL, NULL, NULL, &err);
	ck_assert_ptr_nonnull(j);
	ck_assert_int_eq(journal_append(j, 1, big, sizeof(big)), -EMSGSIZE);
	ck_assert_int_eq(journal_append(j, 1, big, 1000), 1);
	/* A second open of the same folder is refused while this one holds it. */
	struct journal *j2 = journal_open(&o, NULL, NULL, NULL, &err);
	ck_assert_ptr_null(j2);
	ck_assert_int_eq(err.code, -EBUSY);
	journal_close(j);

	/* A record above a lowered max_record is an error, not a torn tail. */
	o.max_record = 500;
	j = journal_open(&o, NULL, NULL, NULL, &err);
	ck_assert_ptr_null(j);
	ck_assert_int_eq(err.code, -EMSGSIZE);
	ck_assert_msg(strstr(err.msg, "offset 52"), "%s", err.msg);
	o.max_record = 0;
	j = journal_open(&o, NULL, NULL, NULL, &err);
	ck_assert_ptr_nonnull(j);
	journal_close(j);
	o.commit_delay_us = -1;
	ck_assert_ptr_null(journal_open(&o, NULL, NULL, NULL, &err));
	ck_assert_int_eq(err.code, -EINVAL);
}
END_TEST

/* ---- group commit ---- */

#define GC_THREADS 8
#define GC_RECORDS 100

struct gc_arg {
	struct journal *j;
	int t;
	int failures;
};

static void *gc_thread(void *p)
{
	struct gc_arg *a = p;
	char buf[32];
	for (int i = 0; i < GC_RECORDS; i++) {
		snprintf(buf, sizeof(buf), "t%d-%d", a->t, i);
		int64_t seq = journal_append(a->j, a->t, buf, strlen(buf));
		if (seq <= 0 || journal_sync(a->j, seq, 10000) != 0)
			a->failures++;
	}
	return NULL;
}

/* Loop 0: no commit delay, fsyncs at least halved; loop 1: a 2 ms commit
 * delay gathers more per fsync. */
START_TEST(test_group_commit)
{
	static const int delay_us[] = { 0, 2000 }, factor[] = { 2, 6 };
	struct seen s;
	struct journal_opts o = { .dir = tmp, .commit_delay_us = delay_us[_i] };
	struct rv_err err = { 0 };
	struct journal *j = journal_open(&o, NULL, NULL, NULL, &err);
	ck_assert_ptr_nonnull(j);
	pthread_t th[GC_THREADS];
	struct gc_arg a[GC_THREADS];
	for (int t = 0; t < GC_THREADS; t++) {
		a[t] = (struct gc_arg){ .j = j, .t = t };
		ck_assert_int_eq(pthread_create(&th[t], NULL, gc_thread, &a[t]), 0);
	}
	for (int t = 0; t < GC_THREADS; t++) {
		pthread_join(th[t], NULL);
		ck_assert_int_eq(a[t].failures, 0);
	}
	struct journal_stats st;
	journal_stats(j, &st);
	ck_assert_int_eq(st.records, GC_THREADS * GC_RECORDS);
	ck_assert_int_eq(st.durable_seq, GC_THREADS * GC_RECORDS);
	/* Each record was synced before its thread appended the next: one
	 * fsync per record without group commit. */
	ck_assert_msg(st.fsyncs * factor[_i] < st.records,
		      "delay %d us: %" PRId64 " fsyncs for %" PRId64 " records", delay_us[_i],
		      st.fsyncs, st.records);
	journal_close(j);

	j = open_ok(&s, false);
	ck_assert_int_eq(s.n, GC_THREADS * GC_RECORDS);
	int next[GC_THREADS] = { 0 };
	for (int i = 0; i < s.n; i++) {
		int t, k;
		ck_assert_int_eq(sscanf(s.data[i], "t%d-%d", &t, &k), 2);
		ck_assert_int_eq(t, s.type[i]);
		ck_assert_int_eq(k, next[t]); /* each thread's records in its order */
		next[t]++;
	}
	journal_close(j);
}
END_TEST

struct delay_arg {
	struct journal *j;
	int64_t seq;
	int rc;
};

static void *delay_leader(void *p)
{
	struct delay_arg *a = p;
	a->rc = journal_sync(a->j, a->seq, 10000);
	return NULL;
}

START_TEST(test_sync_timeout)
{
	struct journal_opts o = { .dir = tmp, .commit_delay_us = 100000 };
	struct rv_err err = { 0 };
	struct journal *j = journal_open(&o, NULL, NULL, NULL, &err);
	ck_assert_ptr_nonnull(j);
	struct delay_arg a = { .j = j, .seq = append_str(j, 1, "first") };
	pthread_t th;
	ck_assert_int_eq(pthread_create(&th, NULL, delay_leader, &a), 0);
	usleep(20000); /* the leader is inside its 100 ms commit delay */
	int64_t seq = append_str(j, 1, "second");
	ck_assert_int_eq(journal_sync(j, seq, 10), -ETIMEDOUT);
	ck_assert_int_eq(journal_sync(j, seq, 5000), 0);
	pthread_join(th, NULL);
	ck_assert_int_eq(a.rc, 0);
	journal_close(j);
}
END_TEST

/* ---- snapshots ---- */

START_TEST(test_snapshot_then_records)
{
	struct seen s;
	struct journal *j = open_ok(&s, false);
	char buf[32];
	for (int i = 1; i <= 10; i++) {
		snprintf(buf, sizeof(buf), "op-%d", i);
		append_str(j, 1, buf);
	}
	ck_assert_int_eq(journal_sync(j, 0, 5000), 0);
	ck_assert(file_has(path_in("journal"), "op-10"));
	struct rv_err err = { 0 };
	ck_assert_int_eq(journal_snapshot(j, "state@10", 8, &err), 0);
	ck_assert(!file_has(path_in("journal"), "op-1")); /* compacted */
	for (int i = 11; i <= 15; i++) {
		snprintf(buf, sizeof(buf), "op-%d", i);
		ck_assert_int_eq(append_str(j, 2, buf), i);
	}
	ck_assert_int_eq(journal_sync(j, 0, 5000), 0);
	struct journal_stats st;
	journal_stats(j, &st);
	ck_assert_int_eq(st.snapshots, 1);
	journal_close(j);

	j = open_ok(&s, false);
	ck_assert_int_eq(s.nsnap, 1);
	ck_assert_str_eq(s.snap, "state@10");
	ck_assert_int_eq(s.n, 5);
	for (int i = 11; i <= 15; i++) {
		snprintf(buf, sizeof(buf), "op-%d", i);
		ck_assert_str_eq(s.data[i - 11], buf);
	}
	ck_assert_int_eq(append_str(j, 1, "op-16"), 16);
	/* Records appended but not synced are covered by the next snapshot. */
	ck_assert_int_eq(journal_snapshot(j, "state@16", 8, &err), 0);
	journal_stats(j, &st);
	ck_assert_int_eq(st.durable_seq, 16);
	journal_close(j);
	j = open_ok(&s, false);
	ck_assert_str_eq(s.snap, "state@16");
	ck_assert_int_eq(s.n, 0);
	ck_assert_int_eq(append_str(j, 1, "op-17"), 17);
	journal_close(j);
}
END_TEST

/* A crash while the temp snapshot was written: the old snapshot and the
 * journal hold everything; the leftovers are removed. */
START_TEST(test_crash_before_snapshot_rename)
{
	struct seen s;
	struct journal *j = open_ok(&s, false);
	for (int i = 0; i < 5; i++)
		append_str(j, 1, "old");
	struct rv_err err = { 0 };
	ck_assert_int_eq(journal_snapshot(j, "state@5", 7, &err), 0);
	append_str(j, 1, "op-6");
	append_str(j, 1, "op-7");
	journal_close(j);
	write_file(path_in("snapshot.tmp"), "RVSNAP01\x07\0\0\0half", 16);
	write_file(path_in("journal.tmp"), "RVJRNL", 6);

	j = open_ok(&s, false);
	ck_assert_int_eq(s.nsnap, 1);
	ck_assert_str_eq(s.snap, "state@5");
	ck_assert_int_eq(s.n, 2);
	ck_assert_str_eq(s.data[0], "op-6");
	ck_assert_str_eq(s.data[1], "op-7");
	ck_assert(!exists(path_in("snapshot.tmp")));
	ck_assert(!exists(path_in("journal.tmp")));
	journal_close(j);
}
END_TEST

/* A crash after the snapshot's rename but before the fresh journal's: the
 * old journal is still there, every record in it covered by the snapshot
 * (here the last two were buffered, never written: the snapshot covers them
 * too). */
START_TEST(test_crash_after_snapshot_rename)
{
	struct seen s;
	struct journal *j = open_ok(&s, false);
	for (int i = 1; i <= 5; i++)
		append_str(j, 1, "old");
	ck_assert_int_eq(journal_sync(j, 0, 5000), 0);
	char *old;
	size_t oldlen;
	read_file(path_in("journal"), &old, &oldlen);
	append_str(j, 1, "old-unsynced-6");
	append_str(j, 1, "old-unsynced-7");
	struct rv_err err = { 0 };
	ck_assert_int_eq(journal_snapshot(j, "state@7", 7, &err), 0);
	journal_close(j);
	write_file(path_in("journal"), old, oldlen);
	free(old);

	j = open_ok(&s, false);
	ck_assert_int_eq(s.nsnap, 1);
	ck_assert_str_eq(s.snap, "state@7");
	ck_assert_int_eq(s.n, 0);
	ck_assert_int_eq(append_str(j, 3, "op-8"), 8);
	journal_close(j);
	j = open_ok(&s, false);
	ck_assert_str_eq(s.snap, "state@7");
	ck_assert_int_eq(s.n, 1);
	ck_assert_str_eq(s.data[0], "op-8");
	journal_close(j);
}
END_TEST

/* The snapshot is in place but the fresh journal cannot be started (here a
 * folder sits where its temp file goes): the journal goes on in the old
 * file, after records the snapshot covers, and a reopen replays the
 * snapshot and only the records after it; damage there is still told from a
 * torn tail across the jump in sequence numbers. */
START_TEST(test_snapshot_without_fresh_journal)
{
	struct seen s;
	struct journal *j = open_ok(&s, false);
	ck_assert_int_eq(journal_sync(j, append_str(j, 1, "op-1"), 5000), 0);
	for (int i = 2; i <= 300; i++) /* buffered, never written: the snapshot covers them */
		append_str(j, 1, "op-n");
	ck_assert_int_eq(mkdir(path_in("journal.tmp"), 0700), 0);
	struct rv_err err = { 0 };
	ck_assert_int_lt(journal_snapshot(j, "state@300", 9, &err), 0);
	ck_assert_msg(strstr(err.msg, "journal.tmp"), "%s", err.msg);
	ck_assert(exists(path_in("snapshot")));
	ck_assert_int_eq(rmdir(path_in("journal.tmp")), 0);
	struct journal_stats st;
	journal_stats(j, &st);
	ck_assert_int_eq(st.durable_seq, 300);
	ck_assert_int_eq(journal_sync(j, append_str(j, 2, "op-301"), 5000), 0);
	ck_assert_int_eq(journal_sync(j, append_str(j, 2, "op-302"), 5000), 0);
	journal_close(j);

	j = open_ok(&s, false);
	ck_assert_str_eq(s.snap, "state@300");
	ck_assert_int_eq(s.n, 2);
	ck_assert_str_eq(s.data[0], "op-301");
	ck_assert_str_eq(s.data[1], "op-302");
	journal_close(j);

	char *data;
	size_t len;
	read_file(path_in("journal"), &data, &len);
	size_t rec301 = data_end(data, 0, len) - 2 * (REC_HDR + strlen("op-301")) - BATCH_HDR;
	data[rec301] ^= 1;
	write_file(path_in("journal"), data, len);
	free(data);
	struct journal_opts o = { .dir = tmp };
	ck_assert_ptr_null(journal_open(&o, on_snap, on_rec, &s, &err));
	ck_assert_int_eq(err.code, -EUCLEAN);
}
END_TEST

/* What the snapshot steps do: at WRITTEN (snapshot.tmp synced, nothing
 * held) op-11..op-13 are appended and synced, op-14 appended; at RENAMED
 * (the writer slot held) op-15 appended; kill_at: SIGKILL at that step,
 * after its records. */
struct step_ctx {
	struct journal *j;
	int kill_at;
	int synced; /* journal_sync of op-13 returned 0 during the write */
};

static void step_records(void *arg, int step)
{
	struct step_ctx *c = arg;
	char buf[32];
	if (step == JOURNAL_SNAP_WRITTEN) {
		int64_t seq = 0;
		for (int i = 11; i <= 13; i++) {
			snprintf(buf, sizeof(buf), "op-%d", i);
			seq = journal_append(c->j, 1, buf, strlen(buf));
		}
		c->synced = seq == 13 && journal_sync(c->j, seq, 5000) == 0;
		journal_append(c->j, 1, "op-14", 5);
	} else if (step == JOURNAL_SNAP_RENAMED) {
		journal_append(c->j, 1, "op-15", 5);
	}
	if (step == c->kill_at)
		raise(SIGKILL);
}

/* op-1..op-5 synced, op-6..op-10 buffered, then a snapshot of state@10
 * begun; its steps as step_records. */
static struct journal *snapshot_during_records(struct seen *s, struct step_ctx *c, int kill_at)
{
	struct journal_opts o = { .dir = tmp,
				  .snapshot_step = step_records,
				  .snapshot_step_ctx = c };
	struct rv_err err = { 0 };
	memset(s, 0, sizeof(*s));
	*c = (struct step_ctx){ .kill_at = kill_at };
	c->j = journal_open(&o, on_snap, on_rec, s, &err);
	ck_assert_msg(c->j != NULL, "journal_open: %s", err.msg);
	char buf[32];
	for (int i = 1; i <= 10; i++) {
		snprintf(buf, sizeof(buf), "op-%d", i);
		int64_t seq = append_str(c->j, 1, buf);
		if (i == 5)
			ck_assert_int_eq(journal_sync(c->j, seq, 5000), 0);
	}
	ck_assert_int_eq(journal_snapshot_begin(c->j), 10);
	ck_assert_int_eq(journal_snapshot_begin(c->j), -EBUSY);
	return c->j;
}

/* The replay is the ops in order from op-1 (the snapshot standing for
 * op-1..op-10): returns the last op. */
static int replayed_upto(const struct seen *s)
{
	int upto = 0;
	if (s->nsnap) {
		ck_assert_str_eq(s->snap, "state@10");
		upto = 10;
	}
	char buf[32];
	for (int i = 0; i < s->n; i++) {
		snprintf(buf, sizeof(buf), "op-%d", ++upto);
		ck_assert_str_eq(s->data[i], buf);
	}
	return upto;
}

/* Records are appended and made durable while the snapshot is written: the
 * sync does not wait for it, and the fresh journal holds them (copied from
 * the old one, whose batch began before the snapshot's point) and the ones
 * still buffered, never the buffered ones the snapshot covers. */
START_TEST(test_snapshot_records_during_write)
{
	struct seen s;
	struct step_ctx c;
	struct journal *j = snapshot_during_records(&s, &c, 0);
	struct rv_err err = { 0 };
	ck_assert_msg(journal_snapshot_write(j, "state@10", 8, &err) == 0, "%s", err.msg);
	ck_assert(c.synced);
	struct journal_stats st;
	journal_stats(j, &st);
	ck_assert_int_eq(st.durable_seq, 14); /* op-15 came after the take */
	ck_assert_int_eq(st.snapshots, 1);
	ck_assert(!file_has(path_in("journal"), "op-5"));
	ck_assert(file_has(path_in("journal"), "op-14"));
	ck_assert_int_eq(journal_sync(j, 0, 5000), 0);
	journal_close(j);
	j = open_ok(&s, false);
	ck_assert_int_eq(s.nsnap, 1);
	ck_assert_int_eq(replayed_upto(&s), 15);
	ck_assert_int_eq(append_str(j, 1, "op-16"), 16);
	journal_close(j);
}
END_TEST

/* kill -9 at each step of a snapshot written while records go on (loop:
 * WRITTEN, RENAMED, DONE): a reopen replays every op from op-1 in order,
 * through op-13 at least (synced during the write), and goes on after. */
START_TEST(test_snapshot_kill9_each_step)
{
	int step = JOURNAL_SNAP_WRITTEN + _i;
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct seen s;
		struct step_ctx c;
		struct journal *j = snapshot_during_records(&s, &c, step);
		struct rv_err err = { 0 };
		journal_snapshot_write(j, "state@10", 8, &err);
		_exit(3); /* not reached: killed at the step */
	}
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "step %d: status %d", step, st);
	struct seen s;
	struct journal *j = open_ok(&s, false);
	ck_assert_int_eq(s.nsnap, step >= JOURNAL_SNAP_RENAMED);
	int upto = replayed_upto(&s);
	ck_assert_int_ge(upto, 13);
	ck_assert_int_le(upto, 14);
	ck_assert_int_eq(append_str(j, 1, "op-next"), upto + 1);
	journal_close(j);
	j = open_ok(&s, false);
	ck_assert_int_eq(s.nsnap, step >= JOURNAL_SNAP_RENAMED);
	ck_assert_str_eq(s.data[s.n - 1], "op-next");
	journal_close(j);
}
END_TEST

/* Records that need a snapshot that is gone are an error, not a replay from
 * the middle. */
START_TEST(test_snapshot_missing)
{
	struct seen s;
	struct journal *j = open_ok(&s, false);
	append_str(j, 1, "a");
	struct rv_err err = { 0 };
	ck_assert_int_eq(journal_snapshot(j, "s", 1, &err), 0);
	append_str(j, 1, "b");
	journal_close(j);
	ck_assert_int_eq(unlink(path_in("snapshot")), 0);
	struct journal_opts o = { .dir = tmp };
	memset(&s, 0, sizeof(s));
	ck_assert_ptr_null(journal_open(&o, on_snap, on_rec, &s, &err));
	ck_assert_int_eq(err.code, -EUCLEAN);
	ck_assert_msg(strstr(err.msg, "snapshot missing"), "%s", err.msg);
	ck_assert_int_eq(s.n, 0);
}
END_TEST

/* ---- torn tail and damage ---- */

/* Five records of "rec-N-" + 30 bytes, each synced on its own (one batch
 * each): the last batch starts at *last. */
static void five_records(char **data, size_t *len, size_t *last)
{
	struct seen s;
	struct journal *j = open_ok(&s, true);
	char buf[64];
	for (int i = 1; i <= 5; i++) {
		snprintf(buf, sizeof(buf), "rec-%d-%s", i, PAYLOAD);
		ck_assert_int_eq(journal_sync(j, append_str(j, 1, buf), 5000), 0);
	}
	journal_close(j);
	read_file(path_in("journal"), data, len);
	ck_assert_uint_eq(*len, FILE_HDR + 5 * (BATCH_HDR + REC_LEN));
	*last = FILE_HDR + 4 * (BATCH_HDR + REC_LEN);
}

/* Open what is in the folder: four records survive, the fifth is counted as
 * torn (torn_bytes of it cut), and a new record goes where it was. */
static void expect_torn(size_t torn_bytes, const char *what, size_t at)
{
	struct seen s;
	struct journal_opts o = { .dir = tmp, .nosync = true };
	struct rv_err err = { 0 };
	memset(&s, 0, sizeof(s));
	struct journal *j = journal_open(&o, on_snap, on_rec, &s, &err);
	ck_assert_msg(j != NULL, "%s at %zu: %s", what, at, err.msg);
	ck_assert_msg(s.n == 4, "%s at %zu: %d records", what, at, s.n);
	ck_assert_str_eq(s.data[3], "rec-4-" PAYLOAD);
	struct journal_stats st;
	journal_stats(j, &st);
	ck_assert_int_eq(st.torn_bytes_truncated, (int64_t)torn_bytes);
	ck_assert_int_eq(st.torn_records, torn_bytes ? 1 : 0);
	ck_assert_int_eq(append_str(j, 2, "new"), 5);
	journal_close(j);
	j = open_ok(&s, true);
	ck_assert_int_eq(s.n, 5);
	ck_assert_str_eq(s.data[4], "new");
	journal_stats(j, &st);
	ck_assert_int_eq(st.torn_records, 0);
	journal_close(j);
}

START_TEST(test_torn_tail_every_offset)
{
	char *data;
	size_t len, last;
	five_records(&data, &len, &last);
	for (size_t cut = last; cut < len; cut++) {
		write_file(path_in("journal"), data, cut);
		/* cleared up to the last byte that is not zero */
		expect_torn(data_end(data, last, cut) - last, "cut", cut);
	}
	free(data);
}
END_TEST

START_TEST(test_torn_tail_flipped_byte)
{
	char *data;
	size_t len, last;
	five_records(&data, &len, &last);
	for (size_t i = last; i < len; i++) {
		data[i] ^= 0x41;
		write_file(path_in("journal"), data, len);
		data[i] ^= 0x41;
		expect_torn(len - last, "flip", i);
	}
	/* Zeros after the last record (prewritten room, or a file extended
	 * by a crash): the end of the log, nothing torn. */
	char *z = calloc(1, len + 100);
	memcpy(z, data, len);
	write_file(path_in("journal"), z, len + 100);
	struct seen s;
	struct journal *j = open_ok(&s, true);
	ck_assert_int_eq(s.n, 5);
	struct journal_stats st;
	journal_stats(j, &st);
	ck_assert_int_eq(st.torn_bytes_truncated, 0);
	ck_assert_int_eq(st.torn_records, 0);
	journal_close(j);
	free(z);
	free(data);
}
END_TEST

/* Damage with a later batch after it: the damaged data had been synced. */
START_TEST(test_corrupt_middle)
{
	char *data;
	size_t len, last;
	five_records(&data, &len, &last);
	size_t batch2 = FILE_HDR + BATCH_HDR + REC_LEN, rec2 = batch2 + BATCH_HDR;
	/* batch header: checksum, length, seq, type, size; record: checksum,
	 * length, seq, type, payload */
	struct {
		size_t byte, reported;
	} where[] = {
		{ batch2, batch2 },           { batch2 + 4, batch2 },       { batch2 + 9, batch2 },
		{ batch2 + 16, batch2 },      { batch2 + 21, batch2 },      { rec2, rec2 },
		{ rec2 + 5, rec2 },           { rec2 + 8, rec2 },           { rec2 + 17, rec2 },
		{ rec2 + REC_HDR + 3, rec2 }, { rec2 + REC_LEN - 1, rec2 },
	};
	for (size_t w = 0; w < RV_ARRAY_SIZE(where); w++) {
		char want[64];
		snprintf(want, sizeof(want), "offset %zu ", where[w].reported);
		data[where[w].byte] ^= 0x10;
		write_file(path_in("journal"), data, len);
		struct seen s;
		memset(&s, 0, sizeof(s));
		struct journal_opts o = { .dir = tmp };
		struct rv_err err = { 0 };
		ck_assert_ptr_null(journal_open(&o, on_snap, on_rec, &s, &err));
		ck_assert_int_eq(err.code, -EUCLEAN);
		ck_assert_msg(strstr(err.msg, want) && strstr(err.msg, "/journal"), "byte %zu: %s",
			      where[w].byte, err.msg);
		ck_assert_int_eq(s.n, 0); /* nothing applied */
		char *now;
		size_t nowlen;
		read_file(path_in("journal"), &now, &nowlen);
		ck_assert_uint_eq(nowlen, len); /* nothing cut */
		ck_assert(memcmp(now, data, len) == 0);
		free(now);
		data[where[w].byte] ^= 0x10;
	}
	free(data);
}
END_TEST

/* Damage anywhere in the last batch (a power cut may lose any page of a
 * write whose fdatasync had not returned, so valid records can follow the
 * damage): the whole batch is cut, nothing before it. */
START_TEST(test_damage_in_last_batch)
{
	struct seen s;
	struct journal *j = open_ok(&s, true);
	char buf[64];
	for (int i = 1; i <= 5; i++) {
		snprintf(buf, sizeof(buf), "rec-%d-%s", i, PAYLOAD);
		int64_t seq = append_str(j, 1, buf);
		if (i == 2 || i == 5) /* batches: 1-2, 3-5 */
			ck_assert_int_eq(journal_sync(j, seq, 5000), 0);
	}
	journal_close(j);
	char *data;
	size_t len;
	read_file(path_in("journal"), &data, &len);
	size_t batch2 = FILE_HDR + BATCH_HDR + 2 * REC_LEN;
	ck_assert_uint_eq(len, batch2 + BATCH_HDR + 3 * REC_LEN);
	for (size_t i = batch2; i < len; i += 7) {
		data[i] ^= 0x08;
		write_file(path_in("journal"), data, len);
		data[i] ^= 0x08;
		j = open_ok(&s, true);
		ck_assert_msg(s.n == 2, "flip at %zu: %d records", i, s.n);
		ck_assert_str_eq(s.data[1], "rec-2-" PAYLOAD);
		struct journal_stats st;
		journal_stats(j, &st);
		ck_assert_int_eq(st.torn_records, 1);
		ck_assert_int_eq(st.torn_bytes_truncated, (int64_t)(len - batch2));
		ck_assert_int_eq(append_str(j, 1, "new"), 3);
		journal_close(j);
		j = open_ok(&s, true);
		ck_assert_int_eq(s.n, 3);
		ck_assert_str_eq(s.data[2], "new");
		journal_close(j);
	}
	free(data);
}
END_TEST

START_TEST(test_callback_error)
{
	struct seen s;
	struct journal *j = open_ok(&s, true);
	for (int i = 0; i < 5; i++)
		append_str(j, 1, "r");
	journal_close(j);
	memset(&s, 0, sizeof(s));
	s.fail_at = 3;
	struct journal_opts o = { .dir = tmp };
	struct rv_err err = { 0 };
	ck_assert_ptr_null(journal_open(&o, on_snap, on_rec, &s, &err));
	ck_assert_int_eq(err.code, -EPROTO);
	ck_assert_str_eq(err.msg, "record 3 refused");
	j = open_ok(&s, true);
	ck_assert_int_eq(s.n, 5);
	journal_close(j);
}
END_TEST

/* A write cut short (the file size limit here) is cut back to the last good
 * record; the record stays buffered and a later sync writes it. */
START_TEST(test_short_write)
{
	signal(SIGXFSZ, SIG_IGN);
	struct seen s;
	struct journal *j = open_ok(&s, false);
	char a[50], b[70];
	memset(a, 'a', sizeof(a) - 1);
	a[sizeof(a) - 1] = 0;
	memset(b, 'b', sizeof(b) - 1);
	b[sizeof(b) - 1] = 0;
	struct rlimit old, lim;
	ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
	lim = old;
	lim.rlim_cur = FILE_HDR + BATCH_HDR + 100;
	ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
	int rc1 = journal_sync(j, append_str(j, 1, a), 5000);
	int64_t seq = append_str(j, 1, b);
	int rc2 = journal_sync(j, seq, 5000);
	struct stat sb;
	int rc3 = stat(path_in("journal"), &sb);
	/* Back to the old limit before asserting: check writes its report
	 * to a file. */
	ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &old), 0);
	ck_assert_int_eq(rc1, 0);
	ck_assert_int_eq(rc2, -EFBIG);
	ck_assert_int_eq(rc3, 0);
	ck_assert_int_eq(sb.st_size, FILE_HDR + BATCH_HDR + REC_HDR + (off_t)strlen(a));
	ck_assert_int_eq(journal_sync(j, seq, 5000), 0);
	journal_close(j);
	j = open_ok(&s, false);
	ck_assert_int_eq(s.n, 2);
	ck_assert_str_eq(s.data[0], a);
	ck_assert_str_eq(s.data[1], b);
	struct journal_stats st;
	journal_stats(j, &st);
	ck_assert_int_eq(st.torn_records, 0);
	journal_close(j);
}
END_TEST

/* ---- the prewritten room: zeros ahead of the records ---- */

#define ROOM 4096 /* small, so that a few records cross it */

static struct journal *open_room(struct seen *s)
{
	struct journal_opts o = { .dir = tmp, .prewrite = ROOM };
	struct rv_err err = { 0 };
	memset(s, 0, sizeof(*s));
	struct journal *j = journal_open(&o, on_snap, on_rec, s, &err);
	ck_assert_msg(j != NULL, "journal_open: %d %s", err.code, err.msg);
	return j;
}

static off_t file_size(const char *p)
{
	struct stat sb;
	ck_assert_int_eq(stat(p, &sb), 0);
	return sb.st_size;
}

/* Records synced one by one run through several extensions of the room; a
 * reopen replays exactly them, and the next record goes right after the
 * last one, inside the room, not at the end of the file. */
START_TEST(test_room_reopen_and_append)
{
	struct seen s;
	struct journal *j = open_room(&s);
	ck_assert_int_eq(file_size(path_in("journal")), FILE_HDR + ROOM);
	char buf[64];
	for (int i = 1; i <= 300; i++) {
		snprintf(buf, sizeof(buf), "rec-%d-%s", i, PAYLOAD);
		ck_assert_int_eq(journal_sync(j, append_str(j, 1, buf), 5000), 0);
	}
	journal_close(j);
	char *data;
	size_t len;
	read_file(path_in("journal"), &data, &len);
	size_t end = data_end(data, 0, len);
	ck_assert_uint_gt(end, 4 * ROOM); /* crossed the first room several times */
	ck_assert_uint_ge(len - end, ROOM / 2);
	ck_assert_uint_le(len - end, 2 * ROOM); /* bounded */
	free(data);

	j = open_room(&s);
	ck_assert_int_eq(s.n, 300);
	for (int i = 1; i <= 300; i++) {
		snprintf(buf, sizeof(buf), "rec-%d-%s", i, PAYLOAD);
		ck_assert_str_eq(s.data[i - 1], buf);
	}
	struct journal_stats st;
	journal_stats(j, &st);
	ck_assert_int_eq(st.torn_records, 0);
	ck_assert_int_eq(st.torn_bytes_truncated, 0);
	ck_assert_int_eq(journal_sync(j, append_str(j, 2, "after-reopen"), 5000), 0);
	journal_close(j);
	read_file(path_in("journal"), &data, &len);
	ck_assert_uint_eq(data_end(data, 0, len),
			  end + BATCH_HDR + REC_HDR + strlen("after-reopen"));
	ck_assert(memcmp(data + end + BATCH_HDR + REC_HDR, "after-reopen", 12) == 0);
	free(data);

	j = open_room(&s);
	ck_assert_int_eq(s.n, 301);
	ck_assert_str_eq(s.data[300], "after-reopen");
	ck_assert_int_eq(s.type[300], 2);
	journal_close(j);
}
END_TEST

/* The default room (16 MiB) is made again a step (1 MiB) at a time once
 * half of it is used: a commit that made it all at once wrote 16 MiB of
 * zeros and fsynced them before its waiters were answered, and every
 * fdatasync meanwhile flushed them too. */
START_TEST(test_room_grows_in_steps)
{
	enum { PREWRITE = 16 << 20, STEP = 1 << 20, REC = 60 << 10 };
	struct journal_opts o = { .dir = tmp, .prewrite = PREWRITE };
	struct rv_err err = { 0 };
	struct journal *j = journal_open(&o, NULL, NULL, NULL, &err);
	ck_assert_msg(j != NULL, "journal_open: %d %s", err.code, err.msg);
	char *rec = malloc(REC);
	memset(rec, 'r', REC);
	off_t most = 0;
	for (int i = 0; i < 12 * 17; i++) { /* 12 MiB of records, 1 MiB a commit */
		int64_t seq = journal_append(j, 1, rec, REC);
		ck_assert_int_gt(seq, 0);
		if (i % 17 == 16) {
			ck_assert_int_eq(journal_sync(j, seq, 10000), 0);
			off_t used = (off_t)(seq * (REC + REC_HDR) + (i / 17 + 1) * BATCH_HDR);
			off_t room = file_size(path_in("journal")) - FILE_HDR - used;
			ck_assert_msg(room >= PREWRITE / 2 - 2 * STEP,
				      "the room fell to %lld bytes", (long long)room);
			if (used > PREWRITE / 2 + STEP) /* made again since */
				most = room > most ? room : most;
		}
	}
	printf("diag: the room at most %lld bytes\n", (long long)most);
	ck_assert_msg(most > 0 && most <= PREWRITE / 2 + 2 * STEP,
		      "the room grew to %lld bytes at once", (long long)most);
	struct journal_stats st;
	journal_stats(j, &st);
	ck_assert_int_gt(st.extend_us_max, 0);
	free(rec);
	journal_close(j);
}
END_TEST

/* A batch torn inside the room (zeros after it, as a crash mid-write leaves
 * a prewritten file): cut at every byte, the records before it come back
 * and the next record takes its place. */
START_TEST(test_room_torn_tail)
{
	char *data;
	size_t len, last;
	five_records(&data, &len, &last);
	size_t padded = len + 3 * ROOM;
	char *z = calloc(1, padded);
	for (size_t cut = last; cut < len; cut++) {
		memset(z, 0, padded);
		memcpy(z, data, cut);
		write_file(path_in("journal"), z, padded);
		expect_torn(data_end(data, last, cut) - last, "cut in room", cut);
		ck_assert_int_eq(file_size(path_in("journal")), (off_t)padded); /* kept */
	}
	free(z);
	free(data);
}
END_TEST

/* A torn batch of two records is cleared, not cut: a shorter batch written
 * in its place after a reopen must not leave the torn batch's second record
 * behind it (a record outside any batch on the next open). */
START_TEST(test_room_torn_batch_overwritten)
{
	struct seen s;
	struct journal *j = open_room(&s);
	char buf[64];
	for (int i = 1; i <= 5; i++) {
		snprintf(buf, sizeof(buf), "rec-%d-%s", i, PAYLOAD);
		int64_t seq = append_str(j, 1, buf);
		if (i != 4) /* batches: 1, 2, 3, 4-5 */
			ck_assert_int_eq(journal_sync(j, seq, 5000), 0);
	}
	journal_close(j);
	char *data;
	size_t len;
	read_file(path_in("journal"), &data, &len);
	size_t end = data_end(data, 0, len);
	size_t batch4 = end - BATCH_HDR - 2 * REC_LEN;
	data[batch4 + BATCH_HDR + REC_HDR + 3] ^= 0x20; /* record 4's payload */
	write_file(path_in("journal"), data, len);
	free(data);

	j = open_room(&s);
	ck_assert_int_eq(s.n, 3);
	struct journal_stats st;
	journal_stats(j, &st);
	ck_assert_int_eq(st.torn_records, 1);
	ck_assert_int_eq(st.torn_bytes_truncated, (int64_t)(end - batch4));
	snprintf(buf, sizeof(buf), "rec-%d-%s", 4, PAYLOAD); /* as long as the torn one */
	ck_assert_int_eq(journal_sync(j, append_str(j, 1, buf), 5000), 0);
	journal_close(j);

	j = open_room(&s);
	ck_assert_int_eq(s.n, 4);
	ck_assert_str_eq(s.data[3], buf);
	journal_stats(j, &st);
	ck_assert_int_eq(st.torn_records, 0);
	journal_close(j);
}
END_TEST

/* Damage in the middle is still an error with megabytes of room after the
 * log, and so is a lost page of zeros with a later batch behind it. */
START_TEST(test_room_corrupt_middle)
{
	char *data;
	size_t len, last;
	five_records(&data, &len, &last);
	size_t padded = len + (4 << 20);
	char *z = calloc(1, padded);
	size_t batch2 = FILE_HDR + BATCH_HDR + REC_LEN;
	for (int zero_it = 0; zero_it < 2; zero_it++) {
		memcpy(z, data, len);
		if (zero_it)
			memset(z + batch2, 0, BATCH_HDR + REC_LEN);
		else
			z[batch2 + BATCH_HDR + REC_HDR + 1] ^= 0x10;
		write_file(path_in("journal"), z, padded);
		struct seen s;
		memset(&s, 0, sizeof(s));
		struct journal_opts o = { .dir = tmp, .prewrite = ROOM };
		struct rv_err err = { 0 };
		ck_assert_ptr_null(journal_open(&o, on_snap, on_rec, &s, &err));
		ck_assert_int_eq(err.code, -EUCLEAN);
		char want[64];
		snprintf(want, sizeof(want), "offset %zu ", zero_it ? batch2 : batch2 + BATCH_HDR);
		ck_assert_msg(strstr(err.msg, want), "%s", err.msg);
		ck_assert_int_eq(s.n, 0);
		ck_assert_int_eq(file_size(path_in("journal")), (off_t)padded);
	}
	free(z);
	free(data);
}
END_TEST

/* A snapshot's fresh journal comes with its room; the room of the old one
 * goes with it. */
START_TEST(test_room_snapshot)
{
	struct seen s;
	struct journal *j = open_room(&s);
	for (int i = 1; i <= 200; i++)
		ck_assert_int_eq(journal_sync(j, append_str(j, 1, "op-" PAYLOAD), 5000), 0);
	ck_assert_int_gt(file_size(path_in("journal")), 2 * ROOM);
	struct rv_err err = { 0 };
	ck_assert_int_eq(journal_snapshot(j, "state@200", 9, &err), 0);
	char *data;
	size_t len;
	read_file(path_in("journal"), &data, &len);
	ck_assert_uint_eq(len, FILE_HDR + ROOM);
	ck_assert_uint_le(data_end(data, 0, len), FILE_HDR); /* a header, then zeros */
	free(data);
	ck_assert_int_eq(journal_sync(j, append_str(j, 1, "op-201"), 5000), 0);
	journal_close(j);
	j = open_room(&s);
	ck_assert_str_eq(s.snap, "state@200");
	ck_assert_int_eq(s.n, 1);
	ck_assert_str_eq(s.data[0], "op-201");
	journal_close(j);
}
END_TEST

/* ---- kill -9 mid-stream ---- */

#define K9_THREADS 4

struct k9_arg {
	struct journal *j;
	int t;
	int fd;
};

static void *k9_thread(void *p)
{
	struct k9_arg *a = p;
	char buf[64];
	for (int i = 0;; i++) {
		snprintf(buf, sizeof(buf), "t%d-%d", a->t, i);
		int64_t seq = journal_append(a->j, a->t, buf, strlen(buf));
		if (seq <= 0 || journal_sync(a->j, seq, 10000) != 0)
			_exit(3);
		/* Acknowledged: one write, shorter than PIPE_BUF, so whole. */
		int n = snprintf(buf, sizeof(buf), "%" PRId64 " t%d-%d\n", seq, a->t, i);
		if (write(a->fd, buf, (size_t)n) != n)
			_exit(4);
	}
	return NULL;
}

static void k9_child(int fd)
{
	alarm(30); /* never outlive a failed parent */
	struct journal_opts o = { .dir = tmp };
	struct journal *j = journal_open(&o, NULL, NULL, NULL, NULL);
	if (!j)
		_exit(2);
	pthread_t th[K9_THREADS];
	struct k9_arg a[K9_THREADS];
	for (int t = 0; t < K9_THREADS; t++) {
		a[t] = (struct k9_arg){ .j = j, .t = t, .fd = fd };
		pthread_create(&th[t], NULL, k9_thread, &a[t]);
	}
	pthread_join(th[0], NULL);
	_exit(0);
}

START_TEST(test_kill9_acknowledged_durable)
{
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(p[0]);
		k9_child(p[1]);
	}
	close(p[1]);
	FILE *in = fdopen(p[0], "r");
	ck_assert_ptr_nonnull(in);
	static char acked[SEEN_MAX][32];
	int64_t maxseq = 0;
	int nack = 0;
	char line[128];
	bool killed = false;
	while (fgets(line, sizeof(line), in)) {
		int64_t seq;
		char what[32];
		ck_assert_int_eq(sscanf(line, "%" SCNd64 " %31s", &seq, what), 2);
		ck_assert(seq > 0 && seq < SEEN_MAX);
		snprintf(acked[seq], sizeof(acked[seq]), "%s", what);
		if (seq > maxseq)
			maxseq = seq;
		if (++nack == 400 && !killed) {
			kill(pid, SIGKILL); /* mid-stream: threads are appending and syncing */
			killed = true;
		}
	}
	fclose(in);
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "child status %d",
		      status);

	struct seen s;
	struct journal *j = open_ok(&s, false);
	ck_assert_int_ge(s.n, maxseq);
	for (int i = 0; i < s.n; i++) {
		int t, k;
		ck_assert_msg(sscanf(s.data[i], "t%d-%d", &t, &k) == 2 && t == s.type[i],
			      "record %d: %s", i + 1, s.data[i]);
		if (i + 1 < SEEN_MAX && acked[i + 1][0])
			ck_assert_str_eq(s.data[i], acked[i + 1]);
	}
	for (int64_t q = 1; q <= maxseq; q++)
		if (acked[q][0])
			ck_assert_int_le(q, s.n);
	journal_close(j);
}
END_TEST

static Suite *journal_suite(void)
{
	TCase *tc = RV_TEST_TCASE("journal", 60, test_replay_in_order, test_bad_calls,
				  test_sync_timeout, test_snapshot_then_records,
				  test_crash_before_snapshot_rename,
				  test_crash_after_snapshot_rename, test_snapshot_missing,
				  test_snapshot_without_fresh_journal, test_torn_tail_every_offset,
				  test_torn_tail_flipped_byte, test_corrupt_middle,
				  test_damage_in_last_batch, test_callback_error, test_short_write,
				  test_room_reopen_and_append, test_room_torn_tail,
				  test_room_torn_batch_overwritten, test_room_corrupt_middle,
				  test_room_snapshot, test_kill9_acknowledged_durable,
				  test_room_grows_in_steps);
	tcase_add_loop_test(tc, test_group_commit, 0, 2);
	tcase_add_test(tc, test_snapshot_records_during_write);
	tcase_add_loop_test(tc, test_snapshot_kill9_each_step, 0, 3);
	tcase_add_checked_fixture(tc, setup, teardown);
	return RV_TEST_SUITE("journal", tc);
}

RV_TEST_MAIN(journal_suite)
