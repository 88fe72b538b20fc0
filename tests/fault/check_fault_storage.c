/*
 * check_fault_storage.c: the real rover-master when its storage fails:
 *   - a torn journal tail, as a power cut leaves it: the journal cut at
 *     every byte offset of its last batch (a shard's done), and the same
 *     bytes zeroed in place (the prewritten room after them), then a
 *     restart on each copy: it starts, and holds exactly the samples
 *     acknowledged before the batch, or the batch too when it is whole;
 *   - the state folder full (a 1 MiB tmpfs, filled by another file, the
 *     journal's prewritten room 16 KiB) while a worker takes shards: once
 *     the room is used up the writes it cannot journal are refused with a
 *     503 naming the folder and the cause, the master stays up, and once
 *     space returns it carries on by itself; killed (-9) while full, it
 *     restarts on the full folder holding exactly the acknowledged dones;
 *     every sample processed exactly once; and the same under real
 *     training (make fault only): the job trains through it, every sample
 *     once, at its accuracy.
 * make test cuts at every 7th offset (and the first and last 8); make
 * fault (ROVER_FAULT_ALL=1) at every one.  The full folder needs root (a
 * tmpfs mount): otherwise a counted skip, a failure under CI=true.
 */
#include <errno.h>
#include <sched.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "brainfix.h"
#include "faultfix.h"
#include "masterfix.h"
#include "netnsfix.h"
#include "runfix.h"
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

/* ---- the state folder full ---- */

#define FULL_SIZE   1200
#define FULL_EPOCHS 2

/* One worker of the full-folder scenario: the task it holds, the request
 * id of its shard request (kept until a reply came, as the client's own
 * retries keep it), and what was acknowledged. */
struct full_worker {
	struct rv_master_client *c;
	int64_t req;
	bool have;
	struct rv_shard_task t;
	atomic_int counts[FULL_SIZE * FULL_EPOCHS];
	int64_t acked; /* samples whose done was answered 200 */
	char err[512]; /* the last refusal */
	int refusals;  /* 503s answered */
};

/* A client that never retries: each refusal is seen. */
static void full_connect(struct full_worker *w, const struct rv_test_master *m)
{
	rv_master_client_free(w->c);
	struct rv_master_opts o = { .url = m->url, .timeout_ms = 10000, .max_attempts = 1 };
	w->c = rv_master_client_new(&o, NULL);
	ck_assert_ptr_nonnull(w->c);
}

/* One call: a shard request, or the done of the task held.  1 when a done
 * was answered, 0 another call answered, -EAGAIN a refusal (w->err), 2 the
 * dataset finished. */
static int full_step(struct full_worker *w)
{
	struct rv_err err = { 0 };
	int rc;
	if (!w->have) {
		struct rv_shard_next req = {
			.node = "n0", .worker = 0, .dataset = "train", .req = w->req
		};
		rc = rv_master_shard_next(w->c, &req, &w->t, &err);
		if (rc == 0 && w->t.status == RV_SHARD_FINISHED)
			return 2;
		if (rc == 0 && w->t.status == RV_SHARD_TASK) {
			w->have = true;
			w->req++;
		}
	} else {
		struct rv_shard_done d = { .node = "n0", .worker = 0, .id = w->t.id };
		bool counted = false;
		/* a done refused (503) was applied in memory all the same: its
		 * repeat is answered "not counted", and it is this worker's */
		rc = rv_master_shard_done(w->c, &d, &counted, &err);
		if (rc == 0) {
			for (int64_t i = w->t.start; i < w->t.end; i++)
				atomic_fetch_add(&w->counts[w->t.epoch * FULL_SIZE + i], 1);
			w->acked += w->t.end - w->t.start;
			w->have = false;
			return 1;
		}
	}
	if (rc == -EAGAIN) {
		snprintf(w->err, sizeof(w->err), "%s", err.msg);
		w->refusals++;
		return -EAGAIN;
	}
	ck_assert_msg(rc == 0, "a shard call failed: %d %s", rc, err.msg);
	return 0;
}

/* Fill the file system of dir with dir/filler until it refuses. */
static void full_fill(const char *dir)
{
	char path[400];
	snprintf(path, sizeof(path), "%s/filler", dir);
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	static const char block[4096];
	while (write(fd, block, sizeof(block)) > 0)
		;
	ck_assert_int_eq(errno, ENOSPC);
	close(fd);
}

static void full_free(const char *dir)
{
	char path[400];
	snprintf(path, sizeof(path), "%s/filler", dir);
	ck_assert_int_eq(unlink(path), 0);
}

/* Calls until one is refused; each refusal names the cause. */
static void full_until_refused(struct full_worker *w, const struct rv_test_master *m)
{
	int rc = 0;
	int i = 0;
	for (; i < 2000 && rc != -EAGAIN; i++) {
		rc = full_step(w);
		ck_assert_int_ne(rc, 2);
	}
	ck_assert_msg(rc == -EAGAIN, "no call refused with the state folder full");
	printf("diag: refused after %d calls\n", i);
	ck_assert_msg(strstr(w->err, "No space left on device") && strstr(w->err, m->state),
		      "the refusal does not name the full state folder: %s", w->err);
}

/* The state folder full while a worker takes and finishes shards, twice:
 * once space returns the master carries on by itself (the time from the
 * space freed to the first call answered is the recovery); killed (-9)
 * while full, it restarts on the full folder holding exactly what was
 * acknowledged.  At the end every sample was processed exactly once. */
START_TEST(test_state_full)
{
	if (geteuid() != 0) {
		RV_TEST_SKIP(true, "mounting a small tmpfs as the state folder needs root");
		return;
	}
	struct rv_test_master m;
	char *spec = rv_test_master_spec(FULL_SIZE, 10, FULL_EPOCHS, 1, 1);
	ck_assert_int_eq(rv_test_master_init(&m, spec), 0);
	free(spec);
	ck_assert_int_eq(mkdir(m.state, 0700), 0);
	/* a mount namespace of this test's own: a failing run leaves no mount */
	ck_assert_int_eq(unshare(CLONE_NEWNS), 0);
	ck_assert_int_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
	ck_assert_msg(mount("tmpfs", m.state, "tmpfs", 0, "size=1m,mode=0700") == 0,
		      "could not mount a tmpfs on %s: %s", m.state, strerror(errno));
	const char *args[] = { "--journal-prewrite-kb", "16", "--journal-snapshot-every", "40",
			       NULL };
	ck_assert_int_eq(rv_test_master_start(&m, args), 0);
	struct full_worker *w = calloc(1, sizeof(*w));
	w->req = 1000;
	full_connect(w, &m);
	for (int n = 0; n < 8;)
		n += full_step(w) == 1;

	/* full: refused, naming the cause; the master up, reads answered */
	full_fill(m.state);
	full_until_refused(w, &m);
	for (int i = 0; i < 5; i++)
		ck_assert_int_eq(full_step(w), -EAGAIN);
	ck_assert_msg(kill(m.pid, 0) == 0, "the master died of a full state folder");
	ck_assert_int_ge(samples_done(&m), w->acked);
	full_free(m.state);
	int64_t t0 = rv_mono_ms();
	int rc;
	while ((rc = full_step(w)) == -EAGAIN && rv_mono_ms() - t0 < 10000)
		usleep(20 * 1000);
	ck_assert_msg(rc >= 0, "not back 10 s after space returned: %s", w->err);
	rv_test_fault_report("state_full_space_back", rv_mono_ms() - t0);
	for (int n = 0; n < 4;)
		n += full_step(w) == 1;

	/* full again, then killed and restarted on the full folder: exactly
	 * the acknowledged samples */
	full_fill(m.state);
	full_until_refused(w, &m);
	ck_assert_int_ge(rv_test_master_stop(&m, SIGKILL, 5000), 0);
	ck_assert_msg(rv_test_master_restart(&m) == 0, "the master did not start on a full folder");
	ck_assert_int_eq(samples_done(&m), w->acked);
	full_connect(w, &m);
	full_free(m.state);
	int64_t t1 = rv_mono_ms();
	while ((rc = full_step(w)) != 2 && rv_mono_ms() - t1 < 60000)
		;
	ck_assert_msg(rc == 2, "the dataset did not finish once space returned");
	long lost, twice;
	rv_test_count_once(w->counts, FULL_SIZE * FULL_EPOCHS, &lost, &twice);
	printf("diag: state full: %d refusals, last: %s\n", w->refusals, w->err);
	ck_assert_msg(lost == 0 && twice == 0, "%ld samples lost, %ld processed twice", lost,
		      twice);
	ck_assert_int_eq(samples_done(&m), (int64_t)FULL_SIZE * FULL_EPOCHS);
	char *log = rv_test_read_file(m.log);
	ck_assert_msg(log && strstr(log, "msg=\"could not make an operation durable\"") &&
			      strstr(log, "reason=\"No space left on device\""),
		      "the master's log does not name the full folder");
	free(log);
	rv_master_client_free(w->c);
	free(w);
	ck_assert_int_ge(rv_test_master_stop(&m, SIGKILL, 5000), 0);
	ck_assert_int_eq(umount(m.state), 0);
	rv_test_master_cleanup(&m);
}
END_TEST

/* The state folder full under real training (make fault): the workers'
 * shard calls are refused (503) while it is,
 * and retried; held full for 8 s after the first refusal (under the
 * clients' retry budget and rover-run's master timeout of 30 s), then
 * freed.  The master stays up, the job trains on and ends at its accuracy
 * with every sample of both epochs trained exactly once. */
START_TEST(test_state_full_training)
{
	if (geteuid() != 0) {
		RV_TEST_SKIP(true, "mounting a small tmpfs as the state folder needs root");
		return;
	}
	struct rv_test_master m;
	char *spec = rv_test_master_spec(1200, 16, 2, 1, 1);
	ck_assert_int_eq(rv_test_master_init(&m, spec), 0);
	free(spec);
	ck_assert_int_eq(mkdir(m.state, 0700), 0);
	ck_assert_int_eq(unshare(CLONE_NEWNS), 0);
	ck_assert_int_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
	ck_assert_int_eq(mount("tmpfs", m.state, "tmpfs", 0, "size=1m,mode=0700"), 0);
	const char *margs[] = { "--journal-prewrite-kb", "16", NULL };
	ck_assert_int_eq(rv_test_master_start(&m, margs), 0);
	struct rv_test_run r;
	ck_assert_int_eq(rv_test_run_init(&r), 0);
	char log[400], job[96];
	snprintf(log, sizeof(log), "%s/shards.log", r.dir);
	rv_test_fault_job_env(job, sizeof(job), "full");
	const char *env[] = { job, NULL };
	const char *a[24];
	rv_test_fault_node_args(a, "1", "2", m.addr, "60", log);
	ck_assert_int_eq(rv_test_run_start(&r, a, env), 0);
	if (!rv_test_wait_lines(log, 40, 120000))
		rv_test_run_dump(&r, 1, m.log);
	ck_assert_msg(rv_test_wait_lines(log, 40, 0), "no 40 steps trained");

	full_fill(m.state);
	int64_t until = rv_mono_ms() + 60000;
	char *mlog = NULL;
	while (rv_mono_ms() < until) {
		free(mlog);
		mlog = rv_test_read_file(m.log);
		if (mlog && strstr(mlog, "reason=\"No space left on device\""))
			break;
		usleep(50 * 1000);
	}
	ck_assert_msg(mlog && strstr(mlog, "reason=\"No space left on device\""),
		      "no write refused within 60 s of the state folder full");
	free(mlog);
	usleep(8000 * 1000);
	ck_assert_msg(kill(m.pid, 0) == 0, "the master died of a full state folder");
	int at = rv_test_count_lines(log);
	full_free(m.state);
	int64_t t0 = rv_mono_ms();
	int64_t rec = rv_test_fault_wait_steps(log, at, 2, 60000);
	if (rec < 0)
		rv_test_run_dump(&r, 1, m.log);
	ck_assert_msg(rec >= 0, "no step of both ranks after space returned");
	rv_test_fault_report("state_full_training", rec - t0);
	free(rv_test_run_expect_exit(&r, 0, 240000));
	rv_test_fault_expect_trained(&r, 1, log, 1200, 2, 3);
	rv_test_run_end(&r);
	ck_assert_int_ge(rv_test_master_stop(&m, SIGKILL, 5000), 0);
	ck_assert_int_eq(umount(m.state), 0);
	rv_test_master_cleanup(&m);
}
END_TEST

/* ---- a disk that stands still ---- */

#define SLOW_FREEZE_MS 3000
#define SLOW_REPLY_MS  500 /* what a heartbeat or GET /v1/job may take meanwhile */

/* A shard's done and the next task, journaled: its replies wait for the
 * disk. */
struct slow_call {
	const struct rv_test_master *m;
	struct rv_shard_task t;
	int64_t answered_ms; /* monotonic, once both were answered */
	int rc;
	char err[600];
};

static void *slow_call_main(void *arg)
{
	struct slow_call *a = arg;
	struct rv_master_client *c = rv_test_master_client(a->m);
	struct rv_shard_done d = { .node = "n0", .worker = 0, .id = a->t.id };
	struct rv_shard_next req = { .node = "n0", .worker = 0, .dataset = "train", .req = 2 };
	struct rv_err err = { 0 };
	bool counted = false;
	a->rc = rv_master_shard_done(c, &d, &counted, &err);
	if (a->rc == 0)
		a->rc = counted ? rv_master_shard_next(c, &req, &a->t, &err) : -EPROTO;
	snprintf(a->err, sizeof(a->err), "%s", err.msg);
	a->answered_ms = rv_mono_ms();
	rv_master_client_free(c);
	return NULL;
}

/* An ext4 image of 32 MiB on a free loop device (which goes once it is
 * unmounted), mounted on dir; the device's path into dev.  false when the
 * machine has no free loop device (a container without /dev/loop*). */
static bool slow_mount(const char *dir, const char *img, char *dev, size_t size)
{
	char cmd[1200];
	snprintf(cmd, sizeof(cmd), "truncate -s 32M %s && mkfs.ext4 -q -F %s", img, img);
	ck_assert_msg(system(cmd) == 0, "could not make an ext4 image: %s", cmd);
	snprintf(cmd, sizeof(cmd), "losetup -f --show %s", img);
	FILE *p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	bool got = fgets(dev, (int)size, p) != NULL;
	pclose(p);
	if (!got)
		return false;
	dev[strcspn(dev, "\n")] = 0;
	int rc = mount(dev, dir, "ext4", 0, NULL);
	int e = errno;
	/* detached once unmounted: by the end of this test's mount namespace
	 * when a check fails */
	snprintf(cmd, sizeof(cmd), "losetup -d %s", dev);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_msg(rc == 0, "could not mount %s on %s: %s", dev, dir, strerror(e));
	ck_assert_int_eq(chmod(dir, 0700), 0);
	return true;
}

/* One unlabelled value of m's /metrics as a double, -1 when absent. */
static double slow_metric(const struct rv_test_master *m, const char *name)
{
	struct rv_test_brain as = { .port = m->port };
	snprintf(as.url, sizeof(as.url), "%s", m->url);
	return rv_test_metric(&as, name);
}

/* While the state folder's file system is frozen (FIFREEZE: every write
 * and fdatasync waits, a disk that stands still) for 3 s: a journaled
 * call is answered only once the disk is back (nothing acknowledged
 * before it is durable), while the node's heartbeats and GET /v1/job are
 * answered within 500 ms all along and the timer's journaled ticks (a
 * shard's doing timeout, 300 ms) never make the master stand still.  The
 * sync is measured (/metrics, the log) and, killed -9 after, the
 * restarted master holds exactly what was acknowledged. */
START_TEST(test_slow_disk)
{
	if (geteuid() != 0) {
		RV_TEST_SKIP(true, "a loop-mounted ext4 state folder needs root");
		return;
	}
	struct rv_test_master m;
	char *spec = rv_test_master_spec(FULL_SIZE, 10, 1, 1, 1);
	ck_assert_int_eq(rv_test_master_init(&m, spec), 0);
	free(spec);
	ck_assert_int_eq(mkdir(m.state, 0700), 0);
	ck_assert_int_eq(unshare(CLONE_NEWNS), 0);
	ck_assert_int_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
	char img[400], dev[64];
	snprintf(img, sizeof(img), "%s/ext4.img", m.dir);
	if (!slow_mount(m.state, img, dev, sizeof(dev))) {
		RV_TEST_SKIP(false, "no free loop device for an ext4 state folder (losetup -f)");
		rv_test_master_cleanup(&m);
		return;
	}
	const char *args[] = { "--journal-prewrite-kb",
			       "1024",
			       "--rdzv-heartbeat-timeout-ms",
			       "2000",
			       "--shard-doing-timeout-ms",
			       "300",
			       NULL };
	ck_assert_int_eq(rv_test_master_start(&m, args), 0);
	struct rv_master_client *c = rv_test_master_client(&m);
	struct rv_rdzv_join j = { .node = "n0", .local_world_size = 1 };
	struct rv_rdzv_world_reply w;
	ck_assert_int_eq(rv_master_rendezvous(c, &j, 20000, &w, NULL), 0);
	int64_t acked = one_task(c);
	struct slow_call a = { .m = &m };
	struct rv_shard_next req = { .node = "n0", .worker = 0, .dataset = "train", .req = 1 };
	struct rv_err err = { 0 };
	ck_assert_msg(rv_master_shard_next(c, &req, &a.t, &err) == 0, "%s", err.msg);

	int fd = open(m.state, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_msg(ioctl(fd, FIFREEZE, 0) == 0, "could not freeze %s: %s", m.state,
		      strerror(errno));
	int64_t t0 = rv_mono_ms(), worst = 0;
	char failed[700] = "";
	pthread_t th;
	ck_assert_int_eq(pthread_create(&th, NULL, slow_call_main, &a), 0);
	while (rv_mono_ms() - t0 < SLOW_FREEZE_MS) {
		struct rv_heartbeat_reply hb;
		struct rv_job_status js;
		int64_t c0 = rv_mono_ms();
		int rc = rv_master_heartbeat(c, "n0", &hb, &err);
		int64_t c1 = rv_mono_ms();
		int rj = rv_master_job(c, &js, &err);
		int64_t c2 = rv_mono_ms();
		if ((rc < 0 || rj < 0 || hb.rejoin) && !failed[0])
			snprintf(failed, sizeof(failed), "heartbeat %d rejoin %d, job %d: %s", rc,
				 hb.rejoin, rj, err.msg);
		worst = c1 - c0 > worst ? c1 - c0 : worst;
		worst = c2 - c1 > worst ? c2 - c1 : worst;
		usleep(100 * 1000);
	}
	int64_t thaw = rv_mono_ms(), early = a.answered_ms;
	ck_assert_msg(ioctl(fd, FITHAW, 0) == 0, "could not thaw: %s", strerror(errno));
	close(fd);
	pthread_join(th, NULL);
	ck_assert_msg(early == 0, "a journaled call answered with the disk frozen");
	ck_assert_msg(!failed[0], "a call failed with the disk frozen: %s", failed);
	printf("diag: slow disk: slowest heartbeat or status %lld ms, the journaled call "
	       "answered %lld ms after the thaw\n",
	       (long long)worst, (long long)(a.answered_ms - thaw));
	ck_assert_msg(worst < SLOW_REPLY_MS, "a heartbeat or GET /v1/job took %lld ms",
		      (long long)worst);
	ck_assert_msg(a.rc == 0 && a.t.status == RV_SHARD_TASK, "%d %s", a.rc, a.err);
	acked += 10;
	/* the sync is measured, and no stall */
	ck_assert(slow_metric(&m, "rover_master_journal_sync_max_seconds") >=
		  (SLOW_FREEZE_MS - 500) / 1000.0);
	ck_assert(slow_metric(&m, "rover_master_stalls_total") == 0);
	char *log = rv_test_read_file(m.log);
	ck_assert_msg(log && strstr(log, "msg=\"a journal commit was slow") &&
			      !strstr(log, "stood still"),
		      "the master's log does not show the slow commit, or shows a stall");
	free(log);

	ck_assert_int_ge(rv_test_master_stop(&m, SIGKILL, 5000), 0);
	ck_assert_int_eq(rv_test_master_restart(&m), 0);
	ck_assert_int_eq(samples_done(&m), acked);
	rv_master_client_free(c);
	ck_assert_int_ge(rv_test_master_stop(&m, SIGKILL, 5000), 0);
	ck_assert_int_eq(umount(m.state), 0);
	rv_test_master_cleanup(&m);
}
END_TEST

static Suite *fault_storage_suite(void)
{
	Suite *s = suite_create("fault_storage");
	rv_test_fault_add(s, "torn_journal", test_torn_journal_tail, true);
	rv_test_fault_add(s, "state_full", test_state_full, true);
	rv_test_fault_add(s, "state_full_training", test_state_full_training, false);
	rv_test_fault_add(s, "slow_disk", test_slow_disk, true);
	return s;
}

RV_TEST_MAIN(fault_storage_suite)
