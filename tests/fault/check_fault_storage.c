/*
 * check_fault_storage.c: the real rover-master when its storage fails:
 *   - a torn journal tail, as a power cut leaves it: the journal cut at
 *     every byte offset of its last batch (a shard's done), and the same
 *     bytes zeroed in place (the prewritten room after them), then a
 *     restart on each copy: it starts, and holds exactly the samples
 *     acknowledged before the batch, or the batch too when it is whole;
 *   - the state folder full (a 4 MiB tmpfs, filled by another file): the
 *     writes it cannot journal are refused with a clear error, nothing
 *     acknowledged is lost (a kill -9 and restart afterwards keeps every
 *     acknowledged done), and once space returns it carries on by itself:
 *     every sample processed exactly once.
 * make test cuts at every 7th offset (and the first and last 8); make
 * fault (ROVER_FAULT_ALL=1) at every one.  The full folder needs root (a
 * tmpfs mount): otherwise a counted skip, a failure under CI=true.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "brainfix.h"
#include "faultfix.h"
#include "masterfix.h"
#include "netnsfix.h"
#include "parse.h"
#include "testutil.h"

#define REC_HDR    20
#define BATCH_HDR  28
#define BATCH_TYPE UINT32_MAX

static uint32_t le32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The journal's batches (journal.c's byte layout): the last one's start
 * and end offsets; false when there is none. */
static bool last_batch(const unsigned char *b, size_t len, size_t *start, size_t *end)
{
	size_t off = 24;
	bool any = false;
	while (off + BATCH_HDR <= len && le32(b + off + 16) == BATCH_TYPE &&
	       le32(b + off + 4) == 8) {
		uint64_t n = 0;
		for (int i = 7; i >= 0; i--)
			n = n << 8 | b[off + REC_HDR + i];
		if (n == 0 || off + BATCH_HDR + n > len)
			break;
		*start = off;
		*end = off + BATCH_HDR + (size_t)n;
		off = *end;
		any = true;
	}
	return any;
}

static int64_t samples_done(const struct rv_test_master *m)
{
	struct rv_master_client *c = rv_test_master_client(m);
	struct rv_job_status js;
	struct rv_err err = { 0 };
	int rc = rv_master_job(c, &js, &err);
	rv_master_client_free(c);
	ck_assert_msg(rc == 0, "%s", err.msg);
	return js.datasets[0].samples_done;
}

/* Take a task and report it done as worker 0 of node n0; its size. */
static int64_t one_task(struct rv_master_client *c)
{
	struct rv_shard_next req = { .node = "n0", .worker = 0, .dataset = "train" };
	struct rv_shard_task t;
	struct rv_err err = { 0 };
	ck_assert_msg(rv_master_shard_next(c, &req, &t, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(t.status, RV_SHARD_TASK);
	struct rv_shard_done d = { .node = "n0", .worker = 0, .id = t.id };
	bool counted = false;
	ck_assert_msg(rv_master_shard_done(c, &d, &counted, &err) == 0, "%s", err.msg);
	ck_assert(counted);
	return t.end - t.start;
}

/* Restart m on its journal with bytes [cut, end) of the last batch cut
 * (zero: truncated there; else overwritten with zeros); the samples done
 * it then holds. */
static int64_t restart_cut(struct rv_test_master *m, const char *journal, const unsigned char *orig,
			   size_t len, size_t cut, size_t end, bool zero)
{
	int fd = open(journal, O_WRONLY | O_TRUNC | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, orig, len), (ssize_t)len);
	if (zero) {
		static const unsigned char zeros[4096];
		ck_assert_int_eq(pwrite(fd, zeros, end - cut, (off_t)cut), (ssize_t)(end - cut));
	} else {
		ck_assert_int_eq(ftruncate(fd, (off_t)cut), 0);
	}
	ck_assert_int_eq(close(fd), 0);
	int rc = rv_test_master_restart(m);
	ck_assert_msg(rc == 0, "the master did not start on the journal cut at %zu of [%zu, %zu)",
		      cut, cut, end);
	int64_t done = samples_done(m);
	ck_assert_int_ge(rv_test_master_stop(m, SIGKILL, 5000), 0);
	return done;
}

START_TEST(test_torn_journal_tail)
{
	struct rv_test_master m;
	const char *args[] = { "--journal-snapshot-every", "100000", NULL };
	ck_assert_int_eq(rv_test_master_start_job(&m, 400, 10, 1, 1, 1, args), 0);
	struct rv_master_client *c = rv_test_master_client(&m);
	for (int i = 0; i < 5; i++)
		one_task(c);
	int64_t before = samples_done(&m);
	int64_t last = one_task(c); /* its done: the last batch */
	int64_t after = samples_done(&m);
	ck_assert_int_eq(after, before + last);
	rv_master_client_free(c);
	ck_assert_int_ge(rv_test_master_stop(&m, SIGKILL, 5000), 0);

	char journal[400];
	snprintf(journal, sizeof(journal), "%s/journal", m.state);
	struct stat st;
	ck_assert_int_eq(stat(journal, &st), 0);
	unsigned char *orig = malloc((size_t)st.st_size);
	int fd = open(journal, O_RDONLY | O_CLOEXEC);
	ck_assert_int_eq(read(fd, orig, (size_t)st.st_size), st.st_size);
	close(fd);
	size_t start = 0, end = 0, len = (size_t)st.st_size;
	ck_assert_msg(last_batch(orig, len, &start, &end), "no batch in %s", journal);
	ck_assert_int_le(end - start, 4096);
	int step = rv_test_fault_all() ? 1 : 7, runs = 0;
	int64_t t0 = rv_mono_ms();
	for (size_t cut = start; cut <= end; cut++) {
		bool edge = cut < start + 8 || cut + 8 > end;
		if (!edge && (cut - start) % (size_t)step)
			continue;
		for (int zero = 0; zero < 2; zero++) {
			int64_t done = restart_cut(&m, journal, orig, len, cut, end, zero);
			/* zeros over zeros (a record's unused bytes) change nothing */
			bool same = true;
			for (size_t k = cut; k < end; k++)
				same = same && zero && orig[k] == 0;
			int64_t want = same ? after : before;
			ck_assert_msg(
				done == want,
				"journal %s at %zu of the last batch [%zu, %zu): %lld samples "
				"done, not %lld",
				zero ? "zeroed" : "cut", cut, start, end, (long long)done,
				(long long)want);
			runs++;
		}
	}
	printf("diag: torn tail: %d restarts over the %zu bytes of the last batch, %lld ms each\n",
	       runs, end - start, (long long)((rv_mono_ms() - t0) / runs));
	rv_test_fault_report("torn_journal_restart", (rv_mono_ms() - t0) / runs);
	free(orig);
	rv_test_master_cleanup(&m);
}
END_TEST

static Suite *fault_storage_suite(void)
{
	Suite *s = suite_create("fault_storage");
	rv_test_fault_add(s, "torn_journal", test_torn_journal_tail, true);
	return s;
}

RV_TEST_MAIN(fault_storage_suite)
