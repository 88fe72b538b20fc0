/*
 * check_run_stream.c: online learning from a real Redis stream.  A private
 * redis-server (a unix socket in a temp folder, no persistence), the real
 * rover-master with a streaming dataset of two partitions, the bridge
 * (python3 -m rover.redis_feed --trim), a producer adding records with
 * XADD * while training runs, and rover-run training
 * examples/stream_rover.py with real PyTorch.  The worker, the bridge, the
 * master and rover-run are each killed with -9 in turn; at the end every
 * record the producer added was trained exactly once (the training log
 * against the producer's record ids, steps after a loaded checkpoint
 * dropped), the consumer lag showed in /metrics and is 0, and the bridge
 * trimmed what was committed.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "brainfix.h"
#include "masterfix.h"
#include "proc.h"
#include "runfix.h"
#include "testutil.h"

#define EXAMPLE "examples/stream_rover.py"
#define PYTHON  "/usr/bin/python3"
#define TOTAL   6000 /* records the producer adds, 100 a second */

static const char spec_json[] =
	"{\"apiVersion\":\"elastic.rover.dev/v1alpha1\",\"kind\":\"ElasticJob\","
	"\"metadata\":{\"name\":\"online\"},"
	"\"spec\":{\"distributionStrategy\":\"AllreduceStrategy\","
	"\"replicaSpecs\":{\"worker\":{\"replicas\":1}},"
	"\"datasets\":[{\"name\":\"clicks\",\"streaming\":true,\"shardSize\":40,\"partitions\":["
	"{\"name\":\"p0\",\"end_offset\":0},{\"name\":\"p1\",\"end_offset\":0}]}]}}";

/* A process of the test with its output appended to a file. */
static void spawn_logged(struct rv_proc *p, const char *const *argv, const char *const *env,
			 const char *log)
{
	int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	ck_assert_int_ge(fd, 0);
	struct rv_proc_opts o = {
		.argv = argv,
		.env = env,
		.io = { { RV_PROC_NULL, 0 }, { RV_PROC_FD, fd }, { RV_PROC_STDOUT, 0 } },
		.pdeathsig = SIGKILL
	};
	int rc = rv_proc_spawn(p, &o);
	close(fd);
	ck_assert_msg(rc == 0, "could not start %s: %s", argv[0], strerror(-rc));
}

struct redis {
	struct rv_proc proc;
	char dir[64], sock[128], url[160];
};

/* redis-server on a unix socket in its own temp folder, nothing saved. */
static void redis_start(struct redis *r)
{
	snprintf(r->dir, sizeof(r->dir), "/tmp/rover-redis-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(r->dir));
	snprintf(r->sock, sizeof(r->sock), "%s/redis.sock", r->dir);
	snprintf(r->url, sizeof(r->url), "unix://%s", r->sock);
	char log[128];
	snprintf(log, sizeof(log), "%s/redis.log", r->dir);
	const char *argv[] = { "redis-server", "--port", "0",
			       "--unixsocket", r->sock,  "--unixsocketperm",
			       "700",          "--save", "",
			       "--appendonly", "no",     "--dir",
			       r->dir,         NULL };
	spawn_logged(&r->proc, argv, NULL, log);
	for (int i = 0; i < 1000 && access(r->sock, F_OK) != 0; i++)
		usleep(10000);
	ck_assert_msg(access(r->sock, F_OK) == 0, "redis-server made no socket %s", r->sock);
}

static void redis_stop(struct redis *r)
{
	int st;
	rv_proc_stop(&r->proc, 3000, &st);
	rv_proc_release(&r->proc);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", r->dir);
	ck_assert_int_eq(system(cmd), 0);
}

/* redis-cli's answer to one command (the first line, as a number). */
static long redis_num(const struct redis *r, const char *cmd, const char *key)
{
	const char *argv[] = { "redis-cli", "-s", r->sock, cmd, key, NULL };
	struct rv_proc_opts o = { .argv = argv };
	struct rv_buf b;
	rv_buf_init(&b);
	int st = -1;
	ck_assert_int_eq(rv_proc_run(&o, 10000, &st, &b), 0);
	long v = b.data ? strtol(b.data, NULL, 10) : -1;
	rv_buf_release(&b);
	return v;
}

static void bridge_start(struct rv_proc *p, const struct redis *r, const struct rv_test_master *m,
			 const char *log)
{
	const char *argv[] = {
		PYTHON,      "-m",     "rover.redis_feed", "--redis",  r->url, "--master", m->addr,
		"--dataset", "clicks", "--trim",           "--trim-s", "0.5",  NULL
	};
	const char *env[] = { "PYTHONPATH=python", NULL };
	spawn_logged(p, argv, env, log);
}

/* Lines "load S" in the training log. */
static int loads(const char *log)
{
	char *s = rv_test_read_file(log);
	int n = 0;
	for (const char *p = s; p && (p = strstr(p, "load ")); p++)
		n++;
	free(s);
	return n;
}

/* Wait until the training log has n more lines than now (steps trained). */
static void trains_on(const char *log, int n, struct rv_test_run *r, const char *mlog)
{
	int want = rv_test_count_lines(log) + n;
	if (!rv_test_wait_lines(log, want, 180000))
		rv_test_run_dump(r, 1, mlog);
	ck_assert_msg(rv_test_wait_lines(log, want, 0), "training stopped at %d lines",
		      rv_test_count_lines(log));
}

static long long master_metric(const struct rv_test_master *m, const char *series)
{
	struct rv_test_brain b = { .port = m->port };
	snprintf(b.url, sizeof(b.url), "%s", m->url);
	return rv_test_brain_metric(&b, series);
}

START_TEST(test_kill9_each_part_exactly_once)
{
	if (access("/usr/bin/redis-server", X_OK) != 0) {
		RV_TEST_SKIP(true, "no redis-server (scripts/install-deps.sh installs it)");
		return;
	}
	struct redis rd;
	redis_start(&rd);
	struct rv_test_master m;
	ck_assert_int_eq(rv_test_master_init(&m, spec_json), 0);
	ck_assert_int_eq(rv_test_master_start(&m, NULL), 0);
	struct rv_test_run r, r2;
	ck_assert_int_eq(rv_test_run_init(&r), 0);
	char log[400], blog[400], plog[400], ckdir[400], redis_env[200], job[96], total[16];
	snprintf(log, sizeof(log), "%s/records.log", r.dir);
	snprintf(blog, sizeof(blog), "%s/bridge.log", r.dir);
	snprintf(plog, sizeof(plog), "%s/producer.log", r.dir);
	snprintf(ckdir, sizeof(ckdir), "%s/ckpt", r.dir);
	snprintf(redis_env, sizeof(redis_env), "ROVER_REDIS_URL=%s", rd.url);
	snprintf(job, sizeof(job), "ROVER_JOB_NAME=ck-%d-stream", (int)getpid());
	snprintf(total, sizeof(total), "%d", TOTAL);

	struct rv_proc bridge, producer;
	bridge_start(&bridge, &rd, &m, blog);
	const char *pargv[] = { PYTHON, EXAMPLE,  "produce", "--redis", rd.url, "--records",
				total,  "--rate", "100",     "--batch", "10",   NULL };
	spawn_logged(&producer, pargv, NULL, plog);
	const char *env[] = { redis_env, job, NULL };
	const char *args[] = { "--rdzv-endpoint",
			       m.addr,
			       "--nproc-per-node",
			       "1",
			       "--max-restarts",
			       "5",
			       "--ckpt-dir",
			       ckdir,
			       EXAMPLE,
			       "train",
			       "--until-committed",
			       total,
			       "--batch-size",
			       "16",
			       "--step-sleep",
			       "0.02",
			       "--record-log",
			       log,
			       NULL };
	ck_assert_int_eq(rv_test_run_start(&r, args, env), 0);
	trains_on(log, 20, &r, m.log);
	/* the consumer lag is a metric of each partition */
	ck_assert_int_ge(
		master_metric(&m, "rover_master_stream_lag{dataset=\"clicks\",partition=\"p0\"}"),
		0);

	/* 1: the worker; rover-run starts it again, from its checkpoint */
	pid_t w[4];
	ck_assert_int_eq(rv_test_run_workers(&r, r.proc.pid, 0, w, 4), 1);
	ck_assert_int_eq(kill(w[0], SIGKILL), 0);
	for (int i = 0; i < 1200 && loads(log) < 2; i++)
		usleep(100000);
	ck_assert_int_eq(loads(log), 2);
	trains_on(log, 20, &r, m.log);

	/* 2: the bridge; a new one resumes after its last chunk */
	int st;
	ck_assert_int_eq(rv_proc_kill(&bridge, SIGKILL), 0);
	ck_assert_int_eq(rv_proc_wait(&bridge, 5000, &st), 0);
	rv_proc_release(&bridge);
	usleep(300000);
	bridge_start(&bridge, &rd, &m, blog);
	trains_on(log, 20, &r, m.log);

	/* 3: the master; restarted on its state folder */
	ck_assert_int_ge(rv_test_master_stop(&m, SIGKILL, 5000), 0);
	ck_assert_int_eq(rv_test_master_restart(&m), 0);
	trains_on(log, 20, &r, m.log);

	/* 4: rover-run and its worker; a new rover-run loads the checkpoint */
	rv_test_run_kill(&r, 20000);
	ck_assert_int_eq(rv_test_run_init(&r2), 0);
	ck_assert_int_eq(rv_test_run_start(&r2, args, env), 0);
	char *err = rv_test_run_expect_exit(&r2, 0, 400000);
	free(err);
	char *out = rv_test_run_output(&r2, 1);
	ck_assert_msg(strstr(out, "trained="), "%s", out);
	free(out);
	ck_assert_int_eq(rv_proc_wait(&producer, 120000, &st), 0);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "producer: %#x", st);
	rv_proc_release(&producer);

	long lost, twice;
	unsigned ranks;
	int nloads;
	rv_test_shard_account(log, TOTAL, 1, &lost, &twice, &ranks, &nloads);
	ck_assert_int_ge(nloads, 3);
	ck_assert_msg(lost == 0 && twice == 0, "%ld records lost, %ld trained twice", lost, twice);
	for (int p = 0; p < 2; p++) {
		char s[128];
		const char *labels = "{dataset=\"clicks\",partition=\"p";
		snprintf(s, sizeof(s), "rover_master_stream_lag%s%d\"}", labels, p);
		ck_assert_int_eq(master_metric(&m, s), 0);
		snprintf(s, sizeof(s), "rover_master_stream_committed_offset%s%d\"}", labels, p);
		ck_assert_int_eq(master_metric(&m, s), TOTAL / 2);
	}
	/* what was committed went from redis (the newest chunk stays) */
	for (int i = 0; i < 100 && redis_num(&rd, "XLEN", "clicks:p0") >= TOTAL / 4; i++)
		usleep(100000);
	ck_assert_int_lt(redis_num(&rd, "XLEN", "clicks:p0"), TOTAL / 4);

	rv_proc_stop(&bridge, 3000, &st);
	rv_proc_release(&bridge);
	rv_test_run_end(&r2);
	rv_test_run_cleanup(&r);
	redis_stop(&rd);
	rv_test_master_cleanup(&m);
}
END_TEST

RV_TEST_MAIN_TCASE("run_stream", "core", 900, test_kill9_each_part_exactly_once)
