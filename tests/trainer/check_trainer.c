/*
 * check_trainer.c: librover-trainer from a plain C training loop against
 * the real rover-master (tests/lib/masterfix): every sample of every epoch
 * exactly once over two ranks; the flash checkpoint saves and loads bit for
 * bit, a writer killed with SIGKILL in the middle of a save leaves the
 * previous checkpoint loadable, a corrupted slot is refused, an overlapped
 * save holds the state of its step while the next one runs and a crash in
 * it leaves the previous checkpoint; and the Python package (python/rover)
 * restores a PyTorch model and optimizer bit for bit in a new process after
 * the saving one was killed, and from overlapped saves.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdbool.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "masterfix.h"
#include "rover_trainer.h"
#include "testutil.h"

/* The runner's pid, set before check forks the tests: names every job of
 * this run, so the teardown (in the runner, also after a failed test) finds
 * what the tests left in /dev/shm. */
static int runner_pid;

static void record_runner(void)
{
	runner_pid = (int)getpid();
	setenv("ROVER_COURIER", "1", 1); /* the thread off the step's path, opt-in */
}

static void remove_segments(void)
{
	char prefix[64];
	int n = snprintf(prefix, sizeof(prefix), "rover-check-%d-", runner_pid);
	DIR *d = opendir("/dev/shm");
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, prefix, (size_t)n)) {
			char name[300];
			snprintf(name, sizeof(name), "/%s", e->d_name);
			shm_unlink(name);
		}
	closedir(d);
}

/* A master for one dataset of size samples in shards of shard, for up to
 * max workers. */
static void start_master(struct rv_test_master *m, long size, long shard, int epochs, int max)
{
	char *spec = rv_test_master_spec(size, shard, epochs, 1, max);
	ck_assert_ptr_nonnull(spec);
	ck_assert_int_eq(rv_test_master_init(m, spec), 0);
	free(spec);
	ck_assert_int_eq(rv_test_master_start(m, NULL), 0);
}

/* A job name of its own per test and run, so runs share no segment. */
static void job_name(char *out, size_t size, const char *what)
{
	snprintf(out, size, "check-%d-%s", runner_pid, what);
}

static struct rv_trainer *open_local(const char *job, int rank)
{
	struct rv_trainer_opts o = { .job = job, .node = "n0", .rank = rank, .world_size = 2 };
	struct rv_err err = { 0 };
	struct rv_trainer *t = rv_trainer_open_opts(&o, &err);
	ck_assert_msg(t != NULL, "open: %s", err.msg);
	return t;
}

static void fill(unsigned char *p, size_t n, unsigned seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ULL + 1;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = (unsigned char)x;
	}
}

static int save1(struct rv_trainer *t, int64_t step, const void *p, uint64_t n)
{
	const void *bufs[] = { p };
	uint64_t sizes[] = { n };
	struct rv_err err = { 0 };
	int rc = rv_trainer_save(t, step, bufs, sizes, 1, NULL, &err);
	ck_assert_msg(rc == 0, "save %lld: %s", (long long)step, err.msg);
	return rc;
}

/* Load and check the newest checkpoint is step with buffer want. */
static void expect_loaded(struct rv_trainer *t, int64_t step, const void *want, uint64_t n)
{
	int64_t got_step = -1;
	int nbufs = -1;
	struct rv_err err = { 0 };
	ck_assert_int_eq(rv_trainer_load(t, &got_step, &nbufs, &err), 1);
	ck_assert_int_eq(got_step, step);
	ck_assert_int_eq(nbufs, 1);
	const void *p;
	uint64_t size;
	ck_assert_int_eq(rv_trainer_loaded(t, 0, &p, &size), 0);
	ck_assert_uint_eq(size, n);
	ck_assert_msg(memcmp(p, want, n) == 0, "step %lld: bytes differ", (long long)step);
}

START_TEST(test_open_needs_rover_run)
{
	static const char *const vars[] = { "ROVER_MASTER_ADDR", "ROVER_NODE_NAME", "RANK",
					    "LOCAL_RANK", "WORLD_SIZE" };
	for (size_t i = 0; i < 5; i++)
		unsetenv(vars[i]);
	struct rv_err err = { 0 };
	ck_assert_ptr_null(rv_trainer_open(&err));
	ck_assert_int_eq(err.code, -EINVAL);
	ck_assert_str_eq(err.field, "ROVER_MASTER_ADDR");
	ck_assert_msg(strstr(err.msg, "rover-run"), "%s", err.msg);
	setenv("ROVER_MASTER_ADDR", "127.0.0.1:1", 1);
	setenv("ROVER_NODE_NAME", "n0", 1);
	setenv("RANK", "0", 1);
	setenv("LOCAL_RANK", "0", 1);
	ck_assert_ptr_null(rv_trainer_open(&err));
	ck_assert_str_eq(err.field, "WORLD_SIZE");
	setenv("WORLD_SIZE", "x", 1);
	ck_assert_ptr_null(rv_trainer_open(&err));
	ck_assert_str_eq(err.field, "WORLD_SIZE");
	ck_assert_msg(strstr(err.msg, "\"x\""), "%s", err.msg);
}
END_TEST

/* Continue pid after ms (a thread: the test's loop may wait meanwhile). */
struct cont_after {
	pid_t pid;
	int ms;
	atomic_bool done;
};

static void *cont_after_main(void *arg)
{
	struct cont_after *c = arg;
	usleep((useconds_t)c->ms * 1000);
	kill(c->pid, SIGCONT);
	atomic_store(&c->done, true);
	return NULL;
}

/* The master stopped (SIGSTOP) for 3 s under a loop that takes a shard,
 * reports a step and a done every 20 ms: the loop goes on from the
 * window of shards fetched ahead, none of its calls waiting for the
 * master; continued, the master gets every report, in order, once, and
 * every sample is trained once. */
START_TEST(test_trains_through_master_stop)
{
	enum { SIZE = 1600, SHARD = 8 };
	struct rv_test_master m;
	start_master(&m, SIZE, SHARD, 1, 1);
	char job[64];
	job_name(job, sizeof(job), "mstop");
	struct rv_trainer_opts o = { .master = m.url, .node = "n0", .job = job, .world_size = 1 };
	struct rv_err err = { 0 };
	struct rv_trainer *t = rv_trainer_open_opts(&o, &err);
	ck_assert_msg(t != NULL, "%s", err.msg);
	int seen[SIZE] = { 0 };
	int64_t step = 0, steps_stopped = 0;
	struct cont_after ca = { .pid = m.pid, .ms = 3000 };
	pthread_t th;
	bool stopped = false;
	for (;;) {
		if (step == 30 && !stopped) {
			/* a window of 30 shards (it grows by one per shard taken) */
			for (int k = 0; k < 1000 && rv_trainer_ahead(t) < 30; k++)
				usleep(10000);
			ck_assert_int_ge(rv_trainer_ahead(t), 30);
			ck_assert_int_eq(kill(m.pid, SIGSTOP), 0);
			ck_assert_int_eq(pthread_create(&th, NULL, cont_after_main, &ca), 0);
			stopped = true;
		}
		struct rv_trainer_shard s;
		int rc = rv_trainer_next(t, &s, &err);
		ck_assert_msg(rc >= 0, "next: %s", err.msg);
		if (rc == RV_TRAINER_FINISHED)
			break;
		if (rc == RV_TRAINER_WAIT) {
			usleep(1000);
			continue;
		}
		for (int64_t i = s.start; i < s.end; i++)
			seen[i]++;
		ck_assert_int_eq(rv_trainer_consumed(t, s.end - s.start), 0);
		ck_assert_int_eq(rv_trainer_report_step(t, ++step, s.end - s.start, &err), 0);
		ck_assert_int_eq(rv_trainer_done(t, &err), 0);
		if (stopped && !atomic_load(&ca.done))
			steps_stopped++;
		usleep(20000);
	}
	pthread_join(th, NULL);
	/* 3 s at a step per 20 ms (a shard each): the loop trained its
	 * window's shards while the master was stopped, never waiting for a
	 * report or a done */
	ck_assert_msg(steps_stopped >= 30, "%lld steps trained while the master was stopped",
		      (long long)steps_stopped);
	ck_assert_msg(rv_trainer_flush(t, 10000, &err) == 0, "%s", err.msg);
	for (int i = 0; i < SIZE; i++)
		ck_assert_msg(seen[i] == 1, "sample %d trained %d times", i, seen[i]);
	struct rv_master_client *c = rv_test_master_client(&m);
	struct rv_job_status js;
	ck_assert_int_eq(rv_master_job(c, &js, &err), 0);
	ck_assert(js.finished);
	ck_assert_int_eq(js.step, step);
	rv_master_client_free(c);
	rv_trainer_close(t);
	rv_trainer_unlink(job, 0);
	rv_test_master_cleanup(&m);
}
END_TEST

/* Two ranks in one plain loop take shards in turn until the master says
 * finished: each sample of each epoch is trained once; the step reports
 * reach the master; a save records the shard position. */
START_TEST(test_shards_exactly_once)
{
	enum { SIZE = 1009, EPOCHS = 2 };
	struct rv_test_master m;
	start_master(&m, SIZE, 23, EPOCHS, 2);

	char job[64];
	job_name(job, sizeof(job), "shards");
	/* rank 0 as rover-run starts it, rank 1 from explicit options */
	setenv("ROVER_MASTER_ADDR", m.url + strlen("http://"), 1);
	setenv("ROVER_NODE_NAME", "node-a", 1);
	setenv("ROVER_JOB_NAME", job, 1);
	setenv("RANK", "0", 1);
	setenv("LOCAL_RANK", "0", 1);
	setenv("WORLD_SIZE", "2", 1);
	struct rv_err err = { 0 };
	struct rv_trainer *t[2];
	t[0] = rv_trainer_open(&err);
	ck_assert_msg(t[0] != NULL, "%s", err.msg);
	struct rv_trainer_opts o = {
		.master = m.url, .node = "node-b", .job = job, .rank = 1, .world_size = 2
	};
	t[1] = rv_trainer_open_opts(&o, &err);
	ck_assert_msg(t[1] != NULL, "%s", err.msg);

	int *seen = calloc(SIZE * EPOCHS, sizeof(*seen));
	bool finished[2] = { false, false };
	int64_t step = 0;
	double weights[4] = { 0 };
	for (int r = 0; !(finished[0] && finished[1]); r = !r) {
		if (finished[r])
			continue;
		struct rv_trainer_shard s;
		int rc = rv_trainer_next(t[r], &s, &err);
		ck_assert_msg(rc >= 0, "next: %s", err.msg);
		if (rc == RV_TRAINER_FINISHED) {
			finished[r] = true;
			continue;
		}
		if (rc == RV_TRAINER_WAIT) {
			usleep(1000);
			continue;
		}
		ck_assert_int_eq(rv_trainer_next(t[r], &s, NULL), -EBUSY);
		for (int64_t i = s.start; i < s.end; i++) {
			seen[s.epoch * SIZE + i]++;
			weights[i % 4] += 1;
			ck_assert_int_eq(rv_trainer_consumed(t[r], i - s.start + 1), 0);
		}
		ck_assert_int_eq(rv_trainer_consumed(t[r], s.end - s.start + 1), -ERANGE);
		ck_assert_int_eq(rv_trainer_report_step(t[r], ++step, s.end - s.start, &err), 0);
		if (step == 3) {
			/* half-way through a shard: the position goes with the save */
			ck_assert_int_eq(rv_trainer_consumed(t[r], 2), 0);
			struct rv_trainer_save_stats st;
			const void *b[] = { weights };
			uint64_t n[] = { sizeof(weights) };
			ck_assert_int_eq(rv_trainer_save(t[r], step, b, n, 1, &st, &err), 0);
			ck_assert_msg(st.reported, "%s", rv_trainer_last_error(t[r]));
			int64_t ls, task, consumed;
			int nb;
			ck_assert_int_eq(rv_trainer_load(t[r], &ls, &nb, &err), 1);
			ck_assert_int_eq(rv_trainer_loaded_position(t[r], &task, &consumed), 0);
			ck_assert_int_eq(task, s.id);
			ck_assert_int_eq(consumed, 2);
			rv_trainer_consumed(t[r], s.end - s.start);
		}
		ck_assert_int_eq(rv_trainer_done(t[r], &err), 0);
		ck_assert_int_eq(rv_trainer_done(t[r], NULL), -ENOENT);
	}
	for (int i = 0; i < SIZE * EPOCHS; i++)
		ck_assert_msg(seen[i] == 1, "epoch %d sample %d trained %d times", i / SIZE,
			      i % SIZE, seen[i]);
	for (int r = 0; r < 2; r++)
		ck_assert_msg(rv_trainer_flush(t[r], 10000, &err) == 0, "%s", err.msg);
	struct rv_master_client *c = rv_test_master_client(&m);
	struct rv_job_status js;
	ck_assert_int_eq(rv_master_job(c, &js, &err), 0);
	ck_assert(js.finished);
	ck_assert_int_eq(js.step, step);
	/* the data position of step 3 is the master's too */
	struct rv_data_ckpt dc = { 0 };
	ck_assert_int_eq(rv_master_ckpt_export(c, 3, &dc, &err), 0);
	rv_data_ckpt_release(&dc);
	rv_master_client_free(c);
	for (int r = 0; r < 2; r++)
		rv_trainer_close(t[r]);
	rv_trainer_unlink(job, 0);
	rv_trainer_unlink(job, 1);
	free(seen);
	rv_test_master_cleanup(&m);
}
END_TEST

/* A streaming dataset: each task names its partition and offsets, and the
 * partitions' offsets all come out once. */
START_TEST(test_stream_task_names_partition)
{
	static const char spec[] =
		"{\"apiVersion\":\"elastic.rover.dev/v1alpha1\",\"kind\":\"ElasticJob\","
		"\"metadata\":{\"name\":\"online\"},"
		"\"spec\":{\"distributionStrategy\":\"AllreduceStrategy\","
		"\"replicaSpecs\":{\"worker\":{\"replicas\":1}},"
		"\"datasets\":[{\"name\":\"clicks\",\"streaming\":true,\"shardSize\":4,"
		"\"partitions\":[{\"name\":\"east\",\"end_offset\":10},"
		"{\"name\":\"west\",\"end_offset\":6}]}]}}";
	struct rv_test_master m;
	ck_assert_int_eq(rv_test_master_init(&m, spec), 0);
	ck_assert_int_eq(rv_test_master_start(&m, NULL), 0);
	char job[64];
	job_name(job, sizeof(job), "stream");
	struct rv_trainer_opts o = { .master = m.url, .node = "n0", .job = job, .world_size = 1 };
	struct rv_err err = { 0 };
	struct rv_trainer *t = rv_trainer_open_opts(&o, &err);
	ck_assert_msg(t != NULL, "%s", err.msg);
	int seen[2][10] = { { 0 } };
	for (int guard = 0; guard < 100; guard++) {
		struct rv_trainer_shard s;
		int rc = rv_trainer_next(t, &s, &err);
		ck_assert_msg(rc >= 0, "next: %s", err.msg);
		ck_assert_int_ne(rc, RV_TRAINER_FINISHED); /* a stream never finishes */
		if (rc == RV_TRAINER_WAIT)
			break;
		ck_assert_str_eq(s.dataset, "clicks");
		int p = -1;
		if (strcmp(s.partition, "east") == 0 || strcmp(s.partition, "west") == 0)
			p = s.partition[0] == 'w';
		ck_assert_msg(p >= 0, "task %lld names partition \"%s\"", (long long)s.id,
			      s.partition);
		ck_assert_int_le(s.end, p == 0 ? 10 : 6);
		for (int64_t i = s.start; i < s.end; i++)
			seen[p][i]++;
		ck_assert_int_eq(rv_trainer_consumed(t, s.end - s.start), 0);
		ck_assert_int_eq(rv_trainer_done(t, &err), 0);
	}
	for (int i = 0; i < 10; i++) {
		ck_assert_int_eq(seen[0][i], 1);
		ck_assert_int_eq(seen[1][i], i < 6 ? 1 : 0);
	}
	rv_trainer_close(t);
	rv_trainer_unlink(job, 0);
	rv_test_master_cleanup(&m);
}
END_TEST

/* The master is gone: a save still keeps its copy, and does not wait for
 * the master: its position is queued (a flush says it never arrived). */
START_TEST(test_save_without_master)
{
	struct rv_test_master m;
	start_master(&m, 100, 10, 1, 1);
	char job[64];
	job_name(job, sizeof(job), "nomaster");
	struct rv_trainer_opts o = { .master = m.url, .node = "n0", .job = job, .world_size = 1 };
	struct rv_err err = { 0 };
	struct rv_trainer *t = rv_trainer_open_opts(&o, &err);
	ck_assert_msg(t != NULL, "%s", err.msg);
	ck_assert_int_ge(rv_test_master_stop(&m, SIGKILL, 5000), 0);
	double w[16] = { 1, 2, 3 };
	const void *b[] = { w };
	uint64_t n[] = { sizeof(w) };
	struct rv_trainer_save_stats st;
	ck_assert_int_eq(rv_trainer_save(t, 4, b, n, 1, &st, &err), 0);
	ck_assert_msg(st.stall_s < 3, "the save waited %.1f s for the master", st.stall_s);
	ck_assert_int_eq(rv_trainer_flush(t, 300, &err), -ETIMEDOUT);
	expect_loaded(t, 4, w, sizeof(w));
	rv_trainer_close(t);
	rv_trainer_unlink(job, 0);
	rv_test_master_cleanup(&m);
}
END_TEST

START_TEST(test_save_load)
{
	char job[64];
	job_name(job, sizeof(job), "saveload");
	struct rv_trainer *t = open_local(job, 1);
	struct rv_err err = { 0 };
	int64_t step;
	int nbufs;
	ck_assert_int_eq(rv_trainer_load(t, &step, &nbufs, &err), 0); /* nothing yet */
	enum { A = 100003, B = 7 };
	unsigned char *a = malloc(A), b[B] = { 1, 2, 3, 4, 5, 6, 7 };
	fill(a, A, 1);
	const void *bufs[] = { a, b };
	uint64_t sizes[] = { A, B };
	struct rv_trainer_save_stats st;
	ck_assert_int_eq(rv_trainer_save(t, 10, bufs, sizes, 2, &st, &err), 0);
	ck_assert_uint_eq(st.bytes, A + B);
	ck_assert_int_eq(st.reported, 0); /* no master */
	fill(a, A, 2);
	ck_assert_int_eq(rv_trainer_save(t, 11, bufs, sizes, 2, &st, &err), 0);
	rv_trainer_close(t);

	/* another process (a new handle) loads the newest */
	t = open_local(job, 1);
	ck_assert_int_eq(rv_trainer_load(t, &step, &nbufs, &err), 1);
	ck_assert_int_eq(step, 11);
	ck_assert_int_eq(nbufs, 2);
	const void *p;
	uint64_t n;
	ck_assert_int_eq(rv_trainer_loaded(t, 0, &p, &n), 0);
	ck_assert_uint_eq(n, A);
	ck_assert(memcmp(p, a, A) == 0);
	ck_assert_int_eq(rv_trainer_loaded(t, 1, &p, &n), 0);
	ck_assert_uint_eq(n, B);
	ck_assert(memcmp(p, b, B) == 0);
	ck_assert_int_eq(rv_trainer_loaded(t, 2, &p, &n), -ERANGE);
	/* the next save keeps the loaded one and grows past the old size */
	unsigned char *big = malloc(3 * A);
	fill(big, 3 * A, 3);
	save1(t, 12, big, 3 * A);
	rv_trainer_close(t);
	t = open_local(job, 1);
	expect_loaded(t, 12, big, 3 * A);
	/* rank 0 of the same job has none */
	struct rv_trainer *t0 = open_local(job, 0);
	ck_assert_int_eq(rv_trainer_load(t0, &step, &nbufs, &err), 0);
	rv_trainer_close(t0);
	rv_trainer_close(t);
	ck_assert_int_eq(rv_trainer_unlink(job, 1), 0);
	free(a);
	free(big);
}
END_TEST

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A restart (a new process) lists its steps, then loads: each slot's
 * payload is checked (CRC) once, at the listing; the load of what the
 * listing checked reads no payload again.  With 2 x 128 MiB the check takes
 * a while, so a load that checks again costs about as much as the listing:
 * the fastest of five loads must stay under a third of the listing. */
START_TEST(test_restart_checks_each_slot_once)
{
	enum { BIG = 128 << 20 };
	char job[64];
	job_name(job, sizeof(job), "crconce");
	struct rv_trainer *t = open_local(job, 1);
	unsigned char *a = malloc(BIG);
	ck_assert_ptr_nonnull(a);
	fill(a, BIG, 5);
	save1(t, 1, a, BIG);
	save1(t, 2, a, BIG);
	rv_trainer_close(t);
	t = open_local(job, 1);
	struct rv_err err = { 0 };
	int64_t steps[8], step;
	int nbufs;
	double t0 = now_s();
	ck_assert_int_eq(rv_trainer_steps(t, steps, 8, &err), 2);
	double list_s = now_s() - t0, load_s = 1e9;
	for (int i = 0; i < 5; i++) {
		t0 = now_s();
		ck_assert_int_eq(rv_trainer_load(t, &step, &nbufs, &err), 1);
		double d = now_s() - t0;
		load_s = d < load_s ? d : load_s;
		ck_assert_int_eq(step, 2);
	}
	ck_assert_msg(load_s < list_s / 3, "a load took %.1f ms after a listing of %.1f ms",
		      load_s * 1e3, list_s * 1e3);
	expect_loaded(t, 2, a, BIG);
	rv_trainer_close(t);
	rv_trainer_unlink(job, 1);
	free(a);
}
END_TEST

static unsigned char *map_slot(const char *job, int rank, int s, size_t *len)
{
	char path[200];
	snprintf(path, sizeof(path), "/dev/shm/rover-%s-%d-%d", job, rank, s);
	int fd = open(path, O_RDWR);
	if (fd < 0)
		return NULL;
	struct stat st;
	ck_assert_int_eq(fstat(fd, &st), 0);
	if (st.st_size < RV_TRAINER_SLOT_HEADER) { /* created, not sized yet */
		close(fd);
		return NULL;
	}
	*len = (size_t)st.st_size;
	void *m = mmap(NULL, *len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	ck_assert(m != MAP_FAILED);
	return m;
}

/* The writer gets SIGKILL while it copies a large buffer into the slot:
 * the checkpoint before it is what a new process loads. */
START_TEST(test_kill_during_save)
{
	enum { BIG = 256 << 20 };
	char job[64];
	job_name(job, sizeof(job), "kill");
	unsigned char *first = malloc(BIG);
	fill(first, BIG, 7);
	int pfd[2];
	ck_assert_int_eq(pipe(pfd), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct rv_trainer *t = open_local(job, 0);
		save1(t, 1, first, BIG);
		/* the second save writes slot 1, byte 0 first */
		memset(first, 0xab, BIG);
		if (write(pfd[1], "s", 1) != 1)
			_exit(3);
		save1(t, 2, first, BIG);
		pause();
		_exit(0);
	}
	close(pfd[1]);
	char c;
	ck_assert_int_eq(read(pfd[0], &c, 1), 1);
	close(pfd[0]);
	/* wait for the copy of step 2 to begin, then kill the writer */
	unsigned char *slot1 = NULL;
	size_t len = 0;
	struct timespec t0, now;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		if (!slot1)
			slot1 = map_slot(job, 0, 1, &len);
		if (slot1 && len > RV_TRAINER_SLOT_HEADER + 64 &&
		    slot1[RV_TRAINER_SLOT_HEADER] == 0xab &&
		    slot1[RV_TRAINER_SLOT_HEADER + 1] == 0xab)
			break;
		clock_gettime(CLOCK_MONOTONIC, &now);
		ck_assert_msg(now.tv_sec - t0.tv_sec < 30, "the second save never began");
		usleep(50);
	}
	kill(pid, SIGKILL);
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	/* the copy was cut short: the end of the slot is not the new bytes */
	ck_assert_msg(slot1[RV_TRAINER_SLOT_HEADER + BIG - 1] != 0xab ||
			      slot1[RV_TRAINER_SLOT_HEADER + BIG - 2] != 0xab,
		      "the writer finished its copy before it was killed");
	munmap(slot1, len);

	struct rv_trainer *t = open_local(job, 0);
	expect_loaded(t, 1, first, BIG); /* the child's memset was its own copy */
	rv_trainer_close(t);
	rv_trainer_unlink(job, 0);
	free(first);
}
END_TEST

/* An overlapped save of step 1 runs while step 2's forward and backward
 * read the buffer; step 2's update waits for it, then writes every byte:
 * what loads, here and in another process, is step 1's state. */
START_TEST(test_overlap_saves_step)
{
	enum { BIG = 128 << 20 };
	char job[64];
	job_name(job, sizeof(job), "overlap");
	struct rv_trainer *t = open_local(job, 0);
	unsigned char *w = malloc(BIG), *want = malloc(BIG);
	ck_assert(w && want);
	fill(w, BIG, 11);
	memcpy(want, w, BIG);
	struct rv_err err = { 0 };
	ck_assert_int_eq(rv_trainer_reserve(t, BIG, &err), 0);
	const void *b[] = { w };
	uint64_t n[] = { BIG };
	ck_assert_int_eq(rv_trainer_save_start(t, 1, b, n, 1, &err), 0);
	/* step 2's forward and backward read the parameters (briefly: the
	 * update comes while the copy runs) */
	uint64_t sum = 0;
	for (size_t i = 0; i < BIG; i += 1 << 20)
		sum += w[i];
	struct rv_trainer_save_stats st;
	ck_assert_int_eq(rv_trainer_save_wait(t, &st), 1);
	memset(w, (int)(sum | 1) & 0xff, BIG); /* step 2's update */
	ck_assert_uint_eq(st.bytes, BIG);
	ck_assert_int_eq(st.slot, 0);
	ck_assert_int_eq(rv_trainer_save_wait(t, &st), 0); /* none in flight */
	ck_assert_int_eq(st.slot, -1);
	expect_loaded(t, 1, want, BIG);
	rv_trainer_close(t);
	t = open_local(job, 0);
	expect_loaded(t, 1, want, BIG);
	/* the next overlapped save goes to the other slot; close waits for it */
	ck_assert_int_eq(rv_trainer_save_start(t, 2, b, n, 1, &err), 0);
	rv_trainer_close(t);
	t = open_local(job, 0);
	expect_loaded(t, 2, w, BIG);
	rv_trainer_close(t);
	rv_trainer_unlink(job, 0);
	free(w);
	free(want);
}
END_TEST

/* An overlapped save names a task half consumed; the next step finishes
 * that task (reporting it done) while the copy still runs.  The save's data
 * position still reaches the master, so a restore can resume there (a
 * report sent after the copy was refused as inexact, and a job killed
 * again and again went back to steps long past). */
START_TEST(test_overlap_reports_before_next_task)
{
	enum { BIG = 64 << 20 };
	struct rv_test_master m;
	start_master(&m, 64, 16, 1, 1);
	char job[64];
	job_name(job, sizeof(job), "overlapreport");
	struct rv_trainer_opts o = { .master = m.url, .node = "n0", .job = job, .world_size = 1 };
	struct rv_err err = { 0 };
	struct rv_trainer *t = rv_trainer_open_opts(&o, &err);
	ck_assert_msg(t != NULL, "%s", err.msg);
	unsigned char *w = malloc(BIG);
	ck_assert_ptr_nonnull(w);
	fill(w, BIG, 5);
	struct rv_trainer_shard sh;
	ck_assert_int_eq(rv_trainer_next(t, &sh, &err), RV_TRAINER_SHARD);
	ck_assert_int_eq(rv_trainer_consumed(t, 8), 0);
	const void *b[] = { w };
	uint64_t n[] = { BIG };
	ck_assert_int_eq(rv_trainer_save_start(t, 1, b, n, 1, &err), 0);
	/* step 2 takes the rest of the task and finishes it */
	ck_assert_int_eq(rv_trainer_consumed(t, sh.end - sh.start), 0);
	ck_assert_int_eq(rv_trainer_done(t, &err), 0);
	struct rv_trainer_save_stats st;
	ck_assert_int_eq(rv_trainer_save_wait(t, &st), 1);
	ck_assert_msg(st.reported && !st.report_failed, "%s", rv_trainer_last_error(t));
	ck_assert_msg(rv_trainer_flush(t, 10000, &err) == 0, "%s", err.msg);
	struct rv_master_client *c = rv_test_master_client(&m);
	struct rv_data_ckpt dc = { 0 };
	ck_assert_msg(rv_master_ckpt_export(c, 1, &dc, &err) == 0, "%s", err.msg);
	rv_data_ckpt_release(&dc);
	rv_master_client_free(c);
	rv_trainer_close(t);
	rv_trainer_unlink(job, 0);
	free(w);
	rv_test_master_cleanup(&m);
}
END_TEST

/* Buffers of odd sizes, empty ones among them, across the pieces a save is
 * cut into (4 MiB) and shared by two threads: each save, synchronous or
 * overlapped, loads back byte for byte with its CRC checked. */
START_TEST(test_save_odd_sizes)
{
	enum { NB = 7 };
	const uint64_t sizes[NB] = {
		1, (4 << 20) + 3, 0, (5 << 20) - 7, (17 << 20) + 1, 12345, (8 << 20) - 4096,
	};
	char job[64];
	job_name(job, sizeof(job), "odd");
	struct rv_trainer *t = open_local(job, 0);
	unsigned char *b[NB];
	const void *p[NB];
	for (int i = 0; i < NB; i++) {
		b[i] = malloc(sizes[i] + 1);
		fill(b[i], sizes[i], 20 + i);
		p[i] = b[i];
	}
	struct rv_err err = { 0 };
	for (int64_t step = 1; step <= 2; step++) {
		if (step == 1)
			ck_assert_int_eq(rv_trainer_save(t, step, p, sizes, NB, NULL, &err), 0);
		else
			ck_assert_int_eq(rv_trainer_save_start(t, step, p, sizes, NB, &err), 0);
		int64_t got = -1;
		int nbufs = -1;
		ck_assert_int_eq(rv_trainer_load(t, &got, &nbufs, &err), 1);
		ck_assert_int_eq(got, step);
		ck_assert_int_eq(nbufs, NB);
		for (int i = 0; i < NB; i++) {
			const void *d;
			uint64_t n;
			ck_assert_int_eq(rv_trainer_loaded(t, i, &d, &n), 0);
			ck_assert_uint_eq(n, sizes[i]);
			ck_assert_msg(!memcmp(d, b[i], n), "step %lld: buffer %d differs",
				      (long long)step, i);
		}
	}
	rv_trainer_close(t);
	rv_trainer_unlink(job, 0);
	for (int i = 0; i < NB; i++)
		free(b[i]);
}
END_TEST

static int crash_fd = -1;

/* The saving thread faulted: say so and wait for the SIGKILL. */
static void on_crash(int sig)
{
	(void)sig;
	if (write(crash_fd, "c", 1) != 1)
		_exit(4);
	for (;;)
		pause();
}

/* A process dies while its overlapped save copies (the saving thread stops
 * at a page it cannot read, half-way, and the process gets SIGKILL there):
 * the slot it wrote stays uncommitted and the step before loads. */
START_TEST(test_overlap_crash_keeps_previous)
{
	enum { HALF = 16 << 20 };
	char job[64];
	job_name(job, sizeof(job), "overcrash");
	unsigned char *first = malloc(2 * HALF);
	fill(first, 2 * HALF, 5);
	int pfd[2];
	ck_assert_int_eq(pipe(pfd), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct rv_trainer *t = open_local(job, 0);
		save1(t, 1, first, 2 * HALF);
		unsigned char *second = mmap(NULL, 2 * HALF, PROT_READ | PROT_WRITE,
					     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (second == MAP_FAILED || mprotect(second + HALF, HALF, PROT_NONE) < 0)
			_exit(3);
		memset(second, 0xab, HALF);
		crash_fd = pfd[1];
		signal(SIGSEGV, on_crash);
		const void *b[] = { second };
		uint64_t n[] = { 2 * HALF };
		if (rv_trainer_save_start(t, 2, b, n, 1, NULL) < 0)
			_exit(5);
		rv_trainer_save_wait(t, NULL); /* the next step's update */
		_exit(0);
	}
	close(pfd[1]);
	char c;
	ck_assert_int_eq(read(pfd[0], &c, 1), 1);
	close(pfd[0]);
	kill(pid, SIGKILL);
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	/* the copy had begun: slot 1 holds new bytes and is not committed */
	size_t len;
	unsigned char *s1 = map_slot(job, 0, 1, &len);
	ck_assert_ptr_nonnull(s1);
	ck_assert_uint_eq(s1[RV_TRAINER_SLOT_HEADER], 0xab);
	ck_assert_uint_eq(s1[RV_TRAINER_SLOT_HEADER + HALF - 1], 0xab);
	munmap(s1, len);

	struct rv_trainer *t = open_local(job, 0);
	expect_loaded(t, 1, first, 2 * HALF);
	int64_t steps[4];
	ck_assert_int_eq(rv_trainer_steps(t, steps, 4, NULL), 1);
	rv_trainer_close(t);
	rv_trainer_unlink(job, 0);
	free(first);
}
END_TEST

#define TWO_SAVES_N 65536

/* Rank 0 of job saves step 5 (*a, filled with 1s) and step 6 (*b, 2s) of
 * TWO_SAVES_N bytes each, one per slot, and closes. */
static void two_saves(const char *job, unsigned char **a, unsigned char **b)
{
	struct rv_trainer *t = open_local(job, 0);
	*a = malloc(TWO_SAVES_N);
	*b = malloc(TWO_SAVES_N);
	ck_assert(*a && *b);
	fill(*a, TWO_SAVES_N, 1);
	fill(*b, TWO_SAVES_N, 2);
	save1(t, 5, *a, TWO_SAVES_N);
	save1(t, 6, *b, TWO_SAVES_N);
	rv_trainer_close(t);
}

START_TEST(test_corrupted_refused)
{
	char job[64];
	job_name(job, sizeof(job), "corrupt");
	enum { N = TWO_SAVES_N };
	unsigned char *a, *b;
	two_saves(job, &a, &b);
	struct rv_trainer *t;
	/* one bit of step 6's payload flips: step 5 is loaded */
	size_t len;
	unsigned char *s1 = map_slot(job, 0, 1, &len);
	ck_assert_ptr_nonnull(s1);
	s1[RV_TRAINER_SLOT_HEADER + 1234] ^= 0x10;
	t = open_local(job, 0);
	expect_loaded(t, 5, a, N);
	rv_trainer_close(t);
	/* and step 5's header too: nothing is loaded */
	unsigned char *s0 = map_slot(job, 0, 0, &len);
	ck_assert_ptr_nonnull(s0);
	s0[16] ^= 0x01; /* its sequence number */
	t = open_local(job, 0);
	int64_t step;
	int nbufs;
	ck_assert_int_eq(rv_trainer_load(t, &step, &nbufs, NULL), 0);
	/* a save after that still works and loads */
	save1(t, 7, a, N);
	expect_loaded(t, 7, a, N);
	rv_trainer_close(t);
	munmap(s0, len);
	munmap(s1, len);
	rv_trainer_unlink(job, 0);
	free(a);
	free(b);
}
END_TEST

/* A restart lists the older slot by its header and reads the whole of the
 * newest only (the one it loads): the older is checked if it is loaded. */
START_TEST(test_older_slot_checked_when_loaded)
{
	char job[64];
	job_name(job, sizeof(job), "olderslot");
	enum { N = TWO_SAVES_N };
	unsigned char *a, *b;
	two_saves(job, &a, &b);
	struct rv_trainer *t;
	size_t len;
	unsigned char *s0 = map_slot(job, 0, 0, &len); /* step 5's */
	ck_assert_ptr_nonnull(s0);
	s0[RV_TRAINER_SLOT_HEADER + 4321] ^= 0x04;
	t = open_local(job, 0);
	struct rv_err err = { 0 };
	int64_t steps[8], step;
	int nbufs;
	ck_assert_int_eq(rv_trainer_steps(t, steps, 8, &err), 2);
	ck_assert_int_eq(steps[0], 6);
	ck_assert_int_eq(steps[1], 5);
	/* step 5 asked for: its CRC fails now, and nothing else holds it */
	ck_assert_int_eq(rv_trainer_load_step(t, 5, &step, &nbufs, &err), 0);
	expect_loaded(t, 6, b, N);
	rv_trainer_close(t);
	munmap(s0, len);
	rv_trainer_unlink(job, 0);
	free(a);
	free(b);
}
END_TEST

START_TEST(test_crc32c)
{
	/* the standard check value, and the same in pieces of every length */
	ck_assert_uint_eq(rv_trainer_crc32c(0, "123456789", 9), 0xe3069283u);
	enum { N = 40000 };
	unsigned char *p = malloc(N);
	fill(p, N, 9);
	uint32_t whole = rv_trainer_crc32c(0, p, N);
	uint32_t part = rv_trainer_crc32c(0, p, 12289);
	part = rv_trainer_crc32c(part, p + 12289, N - 12289);
	ck_assert_uint_eq(whole, part);
	uint32_t bytes = 0;
	for (int i = 0; i < N; i++)
		bytes = rv_trainer_crc32c(bytes, p + i, 1);
	ck_assert_uint_eq(whole, bytes);
	free(p);
}
END_TEST

/* Run /usr/bin/python3 tests/trainer/torch_ckpt.py MODE OUT with the
 * package and the library of this build; its pid. */
static pid_t spawn_torch(const char *mode, const char *out, const char *url, const char *job)
{
	const char *b = getenv("B") ? getenv("B") : "build";
	char cwd[1024], lib[1400], pypath[1100];
	ck_assert_ptr_nonnull(getcwd(cwd, sizeof(cwd)));
	snprintf(lib, sizeof(lib), "%s/%s/lib/librover-trainer.so", cwd, b);
	snprintf(pypath, sizeof(pypath), "%s/python", cwd);
	char asan[1024] = "";
	if (getenv("MODE") && !strcmp(getenv("MODE"), "asan")) {
		/* the library of an asan build needs its runtime loaded first */
		FILE *p = popen("${CC:-cc} -print-file-name=libasan.so", "r");
		if (p && fgets(asan, sizeof(asan), p))
			asan[strcspn(asan, "\n")] = '\0';
		if (p)
			pclose(p);
	}
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		setenv("ROVER_MASTER_ADDR", url, 1);
		setenv("ROVER_NODE_NAME", "node-py", 1);
		setenv("ROVER_JOB_NAME", job, 1);
		setenv("RANK", "0", 1);
		setenv("LOCAL_RANK", "0", 1);
		setenv("WORLD_SIZE", "1", 1);
		setenv("PYTHONPATH", pypath, 1);
		setenv("ROVER_TRAINER_LIB", lib, 1);
		setenv("OMP_NUM_THREADS", "1", 1);
		if (asan[0]) {
			setenv("LD_PRELOAD", asan, 1);
			setenv("ASAN_OPTIONS", "detect_leaks=0", 1);
		}
		execl("/usr/bin/python3", "python3", "tests/trainer/torch_ckpt.py", mode, out,
		      (char *)NULL);
		_exit(127);
	}
	return pid;
}

static bool read_line(const char *path, char *out, size_t size)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return false;
	bool ok = fgets(out, (int)size, f) && strchr(out, '\n');
	fclose(f);
	return ok;
}

/* A master for the PyTorch tests (1000 samples in shards of 10) and the
 * name of job what (size bytes) into job. */
static void torch_start(struct rv_test_master *m, char *job, size_t size, const char *what)
{
	start_master(m, 1000, 10, 1, 1);
	job_name(job, size, what);
}

/* torch_ckpt.py's mode run to its end for job on m: it must exit 0 (who
 * names it when it does not); the first line it wrote (to m's folder/mode)
 * into got. */
static void run_torch(const struct rv_test_master *m, const char *mode, const char *job,
		      const char *who, char *got, size_t size)
{
	char out[400];
	snprintf(out, sizeof(out), "%s/%s", m->dir, mode);
	pid_t pid = spawn_torch(mode, out, m->url, job);
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the %s process: %d", who,
		      status);
	ck_assert_msg(read_line(out, got, size), "the %s process wrote no line", who);
}

/* The job's status as m's master reports it. */
static struct rv_job_status master_job(struct rv_test_master *m)
{
	struct rv_master_client *c = rv_test_master_client(m);
	struct rv_job_status js;
	struct rv_err err = { 0 };
	ck_assert_msg(rv_master_job(c, &js, &err) == 0, "%s", err.msg);
	rv_master_client_free(c);
	return js;
}

/* PyTorch: a model and its Adam state saved each step by rover.Checkpointer;
 * the process is killed with SIGKILL after the save; a new process with a
 * differently initialised model loads the same weights and optimizer state
 * bit for bit, at the step saved. */
START_TEST(test_torch_kill_after_save)
{
	struct rv_test_master m;
	char job[64], saved[400];
	torch_start(&m, job, sizeof(job), "torch");
	snprintf(saved, sizeof(saved), "%s/saved", m.dir);

	pid_t pid = spawn_torch("save", saved, m.url, job);
	char want[200] = "", got[200] = "";
	for (int i = 0; i < 1200 && !read_line(saved, want, sizeof(want)); i++) {
		int status;
		ck_assert_msg(waitpid(pid, &status, WNOHANG) == 0, "the saving process exited: %d",
			      status);
		usleep(100000);
	}
	ck_assert_msg(want[0], "the saving process never saved");
	usleep(200000); /* it trains on, unsaved */
	kill(pid, SIGKILL);
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFSIGNALED(status));

	run_torch(&m, "load", job, "loading", got, sizeof(got));
	ck_assert_str_eq(got, want); /* "5 <sha256 of weights and optimizer state>" */
	ck_assert_msg(strncmp(want, "5 ", 2) == 0, "%s", want);

	/* what a load gives the model, the optimizer and an extra state stays
	 * theirs while later saves overwrite both slots */
	run_torch(&m, "alias", job, "aliasing", got, sizeof(got));
	ck_assert_str_eq(got, "1 True\n");

	/* rover.ShardSampler in a DataLoader takes each sample once */
	run_torch(&m, "shards", job, "sampling", got, sizeof(got));
	ck_assert_str_eq(got, "1000 1000\n");
	struct rv_job_status js = master_job(&m);
	ck_assert(js.finished);
	ck_assert_int_eq(js.step, 125); /* 1000 samples in batches of 8 */
	rv_trainer_unlink(job, 0);
	rv_test_master_cleanup(&m);
}
END_TEST

/* PyTorch, rover.ComputeTimer under DDP: a step's compute is its forward
 * and backward (50 ms of sleep in the forward), not the 500 ms the loop
 * spends elsewhere; the gradients are those of DDP's own reduce, and the
 * step report with the compute time is taken. */
START_TEST(test_torch_compute_time)
{
	struct rv_test_master m;
	char job[64], got[200] = "";
	torch_start(&m, job, sizeof(job), "torchcompute");
	run_torch(&m, "compute", job, "DDP", got, sizeof(got));
	char before[16], after[16];
	double mean = 0;
	int equal = 0;
	ck_assert_int_eq(sscanf(got, "%15s %lf %d %15s", before, &mean, &equal, after), 4);
	ck_assert_str_eq(before, "None");
	ck_assert_msg(mean >= 0.05 && mean < 0.5, "compute %.3f s", mean);
	ck_assert_int_eq(equal, 1);
	ck_assert_str_eq(after, "None");
	ck_assert_int_eq(master_job(&m).step, 4);
	rv_trainer_unlink(job, 0);
	rv_test_master_cleanup(&m);
}
END_TEST

/* PyTorch, rover.Checkpointer's overlapped save: each step's save is still
 * copying when the next step begins, whose optimizer.step() waits for it;
 * every step loads back as the state saved, bit for bit. */
START_TEST(test_torch_overlap)
{
	struct rv_test_master m;
	char job[64], got[200] = "";
	torch_start(&m, job, sizeof(job), "torchover");
	run_torch(&m, "overlap", job, "training", got, sizeof(got));
	ck_assert_str_eq(got, "5 5\n"); /* 5 steps, 5 loaded as saved */
	rv_trainer_unlink(job, 0);
	rv_test_master_cleanup(&m);
}
END_TEST

static Suite *trainer_suite(void)
{
	TCase *tc = RV_TEST_TCASE("trainer", 120, test_crc32c, test_open_needs_rover_run,
				  test_shards_exactly_once, test_stream_task_names_partition,
				  test_save_load, test_restart_checks_each_slot_once,
				  test_save_without_master, test_trains_through_master_stop,
				  test_kill_during_save, test_corrupted_refused,
				  test_save_odd_sizes, test_overlap_saves_step,
				  test_overlap_crash_keeps_previous,
				  test_overlap_reports_before_next_task, test_torch_kill_after_save,
				  test_torch_overlap, test_older_slot_checked_when_loaded,
				  test_torch_compute_time);
	tcase_add_unchecked_fixture(tc, record_runner, remove_segments);
	return RV_TEST_SUITE("trainer", tc);
}

RV_TEST_MAIN(trainer_suite)
