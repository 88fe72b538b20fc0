/*
 * check_state.c: the master's snapshot is written without the state lock.
 * A master state (journal in a temp folder, real fsyncs) is built as main.c
 * does, without the API, and snapshots after every record; the journal's
 * test hook (journal_opts.snapshot_step, through master.snapshot_step)
 * stops the snapshot at each of its steps.  While the snapshot file is
 * written another thread takes the state lock, applies an operation and
 * has it made durable; a kill -9 at each step loses nothing that was
 * durable.  The state lock's holds: a long one is logged with its
 * holder's name, a wait on a condition ends the hold, a long wait names
 * the holder it waited for.  The node manager's wake is told after the
 * unlock.  A state opened without the node manager applies, journals and
 * restores the node table.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "json.h"
#include "log.h"
#include "master.h"
#include "nodemgr.h"
#include "nodetable.h"
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
	state_unlock(m);
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
	state_lock(m, "test");
	int64_t step = m->step;
	state_unlock(m);
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

/* ---- the state lock's holders ---- */

/* stderr into file path from now on (the log's lines); the old fd back. */
static int stderr_to(const char *path)
{
	fflush(stderr);
	int old = dup(2);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ck_assert_int_ge(old, 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(dup2(fd, 2), 2);
	close(fd);
	return old;
}

/* stderr back to old; what was logged meanwhile (the caller frees). */
static char *stderr_back(int old, const char *path)
{
	fflush(stderr);
	dup2(old, 2);
	close(old);
	FILE *f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	static char text[1 << 16];
	size_t n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = '\0';
	return strdup(text);
}

/* The ms= of the first line holding both needles, else -1. */
static long logged_ms(const char *log, const char *msg, const char *who)
{
	for (const char *l = log; l && *l;) {
		const char *end = strchr(l, '\n');
		size_t len = end ? (size_t)(end - l) : strlen(l);
		char line[1024];
		snprintf(line, sizeof(line), "%.*s", (int)len, l);
		const char *ms = strstr(line, " ms=");
		if (strstr(line, msg) && strstr(line, who) && ms)
			return strtol(ms + 4, NULL, 10);
		l = end ? end + 1 : NULL;
	}
	return -1;
}

static const struct master_holder *holder_find(const struct master_holder *h, int n,
					       const char *who)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(h[i].who, who))
			return &h[i];
	return NULL;
}

/* A holder that keeps the lock 700 ms is logged with its name and ms,
 * and counted under its name. */
START_TEST(test_long_hold_logged_with_holder)
{
	struct master *m = master_open(NULL);
	char path[128];
	snprintf(path, sizeof(path), "%s/log", dir);
	int old = stderr_to(path);
	state_lock(m, "slow_holder");
	usleep(700 * 1000);
	state_unlock(m);
	state_lock(m, "quick_holder");
	state_unlock(m);
	RV_CLEANUP_FREE char *text = stderr_back(old, path);
	long ms = logged_ms(text, "the state lock was held long", "who=slow_holder");
	ck_assert_msg(ms >= 700 && ms < 5000, "no long hold logged for slow_holder: %s", text);
	ck_assert_int_eq(logged_ms(text, "held long", "who=quick_holder"), -1);
	struct master_holder h[MASTER_HOLDERS];
	int n = state_holders(m, h, MASTER_HOLDERS);
	const struct master_holder *slow = holder_find(h, n, "slow_holder");
	ck_assert_ptr_nonnull(slow);
	ck_assert_uint_eq(slow->n, 1);
	ck_assert_uint_ge(slow->max_us, 700000);
	ck_assert_ptr_nonnull(holder_find(h, n, "quick_holder"));
	ck_assert_uint_ge(atomic_load(&m->lock_holds_long), 1);
	master_free(m);
}
END_TEST

/* A wait on a condition releases the lock: a holder that waits 700 ms
 * holds it twice, briefly, and is not logged as holding it long. */
START_TEST(test_wait_ends_the_hold)
{
	struct master *m = master_open(NULL);
	char path[128];
	snprintf(path, sizeof(path), "%s/log", dir);
	pthread_cond_t cond;
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&cond, &ca);
	int old = stderr_to(path);
	state_lock(m, "waiter");
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_nsec += 700 * 1000000L;
	ts.tv_sec += ts.tv_nsec / 1000000000L;
	ts.tv_nsec %= 1000000000L;
	ck_assert_int_eq(state_wait(m, &cond, &ts), ETIMEDOUT);
	state_unlock(m);
	RV_CLEANUP_FREE char *text = stderr_back(old, path);
	ck_assert_int_eq(logged_ms(text, "held long", "who=waiter"), -1);
	struct master_holder h[MASTER_HOLDERS];
	int n = state_holders(m, h, MASTER_HOLDERS);
	const struct master_holder *w = holder_find(h, n, "waiter");
	ck_assert_ptr_nonnull(w);
	ck_assert_uint_eq(w->n, 2);
	ck_assert_uint_lt(w->max_us, STATE_LOCK_SLOW_MS * 1000);
	pthread_cond_destroy(&cond);
	master_free(m);
}
END_TEST

struct holder_ctx {
	struct master *m;
	atomic_bool held;
};

static void *hold_1200ms(void *arg)
{
	struct holder_ctx *c = arg;
	state_lock(c->m, "slow_holder");
	atomic_store(&c->held, true);
	usleep(1200 * 1000);
	state_unlock(c->m);
	return NULL;
}

/* A long wait for the lock names the holder it waited behind. */
START_TEST(test_long_wait_names_the_holder)
{
	struct master *m = master_open(NULL);
	char path[128];
	snprintf(path, sizeof(path), "%s/log", dir);
	struct holder_ctx c = { .m = m };
	int old = stderr_to(path);
	pthread_t t;
	ck_assert_int_eq(pthread_create(&t, NULL, hold_1200ms, &c), 0);
	while (!atomic_load(&c.held))
		usleep(1000);
	state_lock(m, "heartbeat");
	state_unlock(m);
	pthread_join(t, NULL);
	RV_CLEANUP_FREE char *text = stderr_back(old, path);
	ck_assert_msg(logged_ms(text, "the state lock was waited for long",
				"who=heartbeat held_by=slow_holder") >= JOURNAL_SLOW_MS - 300,
		      "the wait does not name its holder: %s", text);
	master_free(m);
}
END_TEST

/* ---- effects after the unlock ---- */

static struct {
	int calls;
	int trylock; /* pthread_mutex_trylock's code in the last call */
	const char *holder;
} probe;

/* desired_changed: is the state lock held while it is told? */
static void probe_desired(struct master *m)
{
	probe.calls++;
	probe.holder = atomic_load(&m->lock_who);
	probe.trylock = pthread_mutex_trylock(&m->lock);
	if (probe.trylock == 0)
		pthread_mutex_unlock(&m->lock);
}

/* A plan that moves the desired state wakes the node manager's entry once,
 * after the state lock was dropped: the lock is free and nobody holds it
 * when it is called. */
START_TEST(test_desired_changed_told_after_unlock)
{
	struct master *m = master_open(NULL);
	memset(&probe, 0, sizeof(probe));
	probe.trylock = -1;
	state_lock(m, "test");
	m->svc.desired_changed = probe_desired;
	state_unlock(m);
	const char *plan = "{\"job\":\"j\",\"id\":7,\"stage\":\"running\",\"algorithm\":\"x\","
			   "\"reason\":\"grow\",\"groups\":{\"worker\":{\"count\":2}}}";
	struct master_op op = { 0 };
	struct master_result res;
	int64_t seq = 0;
	state_lock(m, "plan_test");
	int64_t v0 = m->desired.version;
	op.now_ms = state_now(m);
	ck_assert_int_eq(state_apply(m, MASTER_OP_PLAN, &op, plan, strlen(plan), &res, &seq), 0);
	ck_assert_int_gt(m->desired.version, v0);
	ck_assert_int_eq(probe.calls, 0); /* not while the lock is held */
	state_unlock(m);
	ck_assert_int_eq(probe.calls, 1);
	ck_assert_msg(probe.trylock == 0, "desired_changed ran with the state lock held (%d)",
		      probe.trylock);
	ck_assert_ptr_null(probe.holder);
	ck_assert_int_eq(state_sync(m, seq), 0);
	master_free(m);
}
END_TEST

/* ---- the node table, the state's own ---- */

/* A state opened by hand with plans_init only (no nodemgr_register). */
static struct master *open_bare(int64_t snapshot_every)
{
	char state[96];
	snprintf(state, sizeof(state), "%s/state", dir);
	struct master *m = unitmaster_new(spec_json, state, 1, 2);
	m->cfg.snapshot_every = snapshot_every;
	plans_init(m);
	struct rv_err err = { 0 };
	ck_assert_msg(state_open(m, &err) == 0, "%s", err.msg);
	return m;
}

/* Apply a node document and make it durable: its result code. */
static int apply_node_doc(struct master *m, int type, const char *doc)
{
	struct master_result res;
	int64_t seq = 0;
	state_lock(m, "test");
	int rc = state_apply(m, type, NULL, doc, strlen(doc), &res, &seq);
	state_unlock(m);
	ck_assert_msg(rc == 0, "node document refused: %d %s", rc, res.err.msg);
	return state_sync(m, seq);
}

/* Without the node manager registered, a launch and an end are applied
 * and journaled, and a reopened state (replay, or the snapshot with
 * snapshot_every 1) has the node table back. */
START_TEST(test_node_table_without_node_manager)
{
	int64_t every = _i == 0 ? 100000 : 1;
	struct master *m = open_bare(every);
	const char *launched =
		"{\"name\":\"worker-0\",\"instance\":\"worker-0.1\",\"role\":\"worker\","
		"\"host\":\"h1\",\"rank\":0,\"attempt\":1,\"restarts\":1,\"ooms\":0,"
		"\"state\":\"launched\",\"hosts\":[{\"name\":\"h0\",\"crashes\":2,\"bad\":true}]}";
	const char *ended = "{\"name\":\"worker-0\",\"instance\":\"worker-0.1\",\"state\":"
			    "\"exited\",\"exit_code\":3}";
	ck_assert_int_eq(apply_node_doc(m, MASTER_OP_NODE_LAUNCHED, launched), 0);
	ck_assert_int_eq(apply_node_doc(m, MASTER_OP_NODE_ENDED, ended), 0);
	if (every == 1) /* the reopened state loads it from the snapshot */
		ck_assert_uint_ge(atomic_load(&m->snapshots), 1);
	master_free(m);
	m = open_bare(100000);
	state_lock(m, "test");
	ck_assert_int_eq(m->nnodes, 1);
	const struct master_node *n = nodetable_find(m, "worker-0");
	ck_assert_ptr_nonnull(n);
	ck_assert_str_eq(n->instance, "worker-0.1");
	ck_assert_int_eq(n->state, MASTER_NODE_EXITED);
	ck_assert_int_eq(n->exit_code, 3);
	ck_assert_int_eq(n->restarts, 1);
	ck_assert_int_eq(m->nhosts, 1);
	ck_assert_str_eq(m->hosts[0].name, "h0");
	ck_assert(m->hosts[0].bad);
	state_unlock(m);
	master_free(m);
}
END_TEST

static Suite *state_suite(void)
{
	TCase *tc = RV_TEST_TCASE("snapshot", 60, test_requests_answered_during_snapshot_write);
	tcase_add_loop_test(tc, test_kill9_at_each_snapshot_step, 0, 3);
	tcase_add_checked_fixture(tc, setup, teardown);
	TCase *lock = RV_TEST_TCASE("lock", 30, test_long_hold_logged_with_holder,
				    test_wait_ends_the_hold, test_long_wait_names_the_holder);
	tcase_add_checked_fixture(lock, setup, teardown);
	TCase *fx = RV_TEST_TCASE("effects", 30, test_desired_changed_told_after_unlock);
	tcase_add_checked_fixture(fx, setup, teardown);
	TCase *nt = tcase_create("nodetable");
	tcase_set_timeout(nt, 30);
	tcase_add_loop_test(nt, test_node_table_without_node_manager, 0, 2);
	tcase_add_checked_fixture(nt, setup, teardown);
	return RV_TEST_SUITE("state", tc, lock, fx, nt);
}

RV_TEST_MAIN(state_suite)
