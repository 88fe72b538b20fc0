/*
 * check_state.c: the master's snapshot is written without the state lock.
 * A master state (journal in a temp folder, real fsyncs) is built as main.c
 * does, without the API, and snapshots after every record; the journal's
 * test hook (journal_opts.snapshot_step, through master.snapshot_step)
 * stops the snapshot at each of its steps.  While the snapshot file is
 * written another thread takes the state lock, applies an operation and
 * has it made durable; a kill -9 at each step loses nothing that was
 * durable.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "json.h"
#include "log.h"
#include "master.h"
#include "nodemgr.h"
#include "plans.h"
#include "testutil.h"
#include "unitmaster.h"

static const char spec_json[] =
	"{\"apiVersion\":\"elastic.rover.dev/v1alpha1\",\"kind\":\"ElasticJob\","
	"\"metadata\":{\"name\":\"state-unit\"},\"spec\":{\"distributionStrategy\":"
	"\"AllreduceStrategy\",\"replicaSpecs\":{\"worker\":{\"replicas\":1,\"minReplicas\":1,"
	"\"maxReplicas\":2}},\"datasets\":[{\"name\":\"train\",\"size\":100,\"shardSize\":10}]}}";

static char dir[64];

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/rover-state-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
	rv_test_rm_rf(dir);
}

/* What the snapshot's steps do (step_apply). */
struct step_ctx {
	struct master *m;
	int kill_at;   /* SIGKILL at this step, after its work; 0 never */
	bool answered; /* the other thread's operation was durable within 5 s */
	int sync_rc;
	pthread_t t;
	bool started;
};

/* Apply STEP step under the lock and make it durable: 0 or the error. */
static int apply_step(struct master *m, int64_t step)
{
	struct master_result res;
	int64_t seq = 0;
	state_lock(m, "test");
	struct master_op op = { .now_ms = state_now(m), .step = step, .speed = 1 };
	int rc = state_apply(m, MASTER_OP_STEP, &op, NULL, 0, &res, &seq);
	pthread_mutex_unlock(&m->lock);
	return rc < 0 ? rc : state_sync(m, seq);
}

static void *other_request(void *arg)
{
	struct step_ctx *c = arg;
	c->sync_rc = apply_step(c->m, 2);
	return NULL;
}

static void step_apply(void *arg, int step)
{
	struct step_ctx *c = arg;
	if (step == JOURNAL_SNAP_WRITTEN) {
		ck_assert_int_eq(pthread_create(&c->t, NULL, other_request, c), 0);
		c->started = true;
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 5;
		if (pthread_timedjoin_np(c->t, NULL, &ts) == 0) {
			c->started = false;
			c->answered = c->sync_rc == 0;
		}
	}
	if (step == c->kill_at)
		raise(SIGKILL);
}

static struct master *master_open(struct step_ctx *c)
{
	rv_log_setup("master", RV_LOG_WARN);
	char state[96];
	snprintf(state, sizeof(state), "%s/state", dir);
	struct master *m = unitmaster_new(spec_json, state, 1, 2);
	m->cfg.snapshot_every = 1;
	plans_init(m);
	nodemgr_register(m);
	if (c) {
		c->m = m;
		m->snapshot_step = step_apply;
		m->snapshot_step_ctx = c;
	}
	struct rv_err err = { 0 };
	ck_assert_msg(state_open(m, &err) == 0, "%s", err.msg);
	return m;
}

static void master_free(struct master *m)
{
	state_close(m);
	rv_job_spec_release(&m->spec);
	free(m);
}

/* The step a reopened master restored. */
static int64_t restored_step(void)
{
	struct master *m = master_open(NULL);
	pthread_mutex_lock(&m->lock);
	int64_t step = m->step;
	pthread_mutex_unlock(&m->lock);
	master_free(m);
	return step;
}

/* STEP 1 brings a snapshot; while its file is written (the hook holds it
 * there up to 5 s) STEP 2 is applied under the state lock and made durable
 * on another thread: with the lock held through the write that thread
 * would wait the whole 5 s. */
START_TEST(test_requests_answered_during_snapshot_write)
{
	struct step_ctx c = { 0 };
	struct master *m = master_open(&c);
	ck_assert_int_eq(apply_step(m, 1), 0);
	if (c.started)
		pthread_join(c.t, NULL);
	ck_assert_msg(c.answered, "the state lock was held while the snapshot was written");
	ck_assert_uint_ge(atomic_load(&m->snapshots), 1);
	master_free(m);
	ck_assert_int_eq(restored_step(), 2);
}
END_TEST

/* kill -9 at each step of that snapshot (loop: WRITTEN, RENAMED, DONE):
 * STEP 2, durable before the kill, is restored. */
START_TEST(test_kill9_at_each_snapshot_step)
{
	int step = JOURNAL_SNAP_WRITTEN + _i;
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct step_ctx c = { .kill_at = step };
		struct master *m = master_open(&c);
		apply_step(m, 1);
		_exit(3); /* not reached: killed at the step */
	}
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "step %d: status %d", step, st);
	ck_assert_int_eq(restored_step(), 2);
}
END_TEST

static Suite *state_suite(void)
{
	TCase *tc = RV_TEST_TCASE("snapshot", 60, test_requests_answered_during_snapshot_write);
	tcase_add_loop_test(tc, test_kill9_at_each_snapshot_step, 0, 3);
	tcase_add_checked_fixture(tc, setup, teardown);
	return RV_TEST_SUITE("state", tc);
}

RV_TEST_MAIN(state_suite)
