/*
 * check_master_snapshot.c: the real rover-master restores its job from a
 * snapshot in the form it writes now (named fields) and in the form it
 * wrote before (positional arrays), the second from a state folder a
 * master of that time left: tests/integration/fixtures/snapshot-v1/.
 *
 * The job: rv_test_master_spec(100, 10, 1, 1, 2); node-0 and node-1 joined
 * round 1; worker 0 took a shard with request id 7 and finished it, worker
 * 1 took one with request id 9 and still holds it.  The master snapshots
 * after every record, so its snapshot holds all of that.  With
 * ROVER_SNAPSHOT_FIXTURE=DIR set, test_make_fixture also runs and writes the
 * state folder to DIR: the fixture is that of a master of commit dcde0f9,
 * its journal cut to the first 64 bytes (the rest was zeros written ahead)
 * and its lock file left out.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "masterfix.h"
#include "testutil.h"

#define FIXTURE "tests/integration/fixtures/snapshot-v1"

static const char *const snap_args[] = { "--journal-snapshot-every", "1", NULL };

static void next(struct rv_master_client *c, const char *node, int worker, int64_t req,
		 struct rv_shard_task *t)
{
	struct rv_shard_next n = { .worker = worker, .req = req };
	struct rv_err err = { 0 };
	snprintf(n.node, sizeof(n.node), "%s", node);
	ck_assert_msg(rv_master_shard_next(c, &n, t, &err) == 0, "next: %s", err.msg);
	ck_assert_int_eq(t->status, RV_SHARD_TASK);
}

static void join(struct rv_master_client *c, const char *node, int64_t *round)
{
	struct rv_rdzv_join j = { .local_world_size = 1 };
	struct rv_err err = { 0 };
	snprintf(j.node, sizeof(j.node), "%s", node);
	ck_assert_msg(rv_master_join(c, &j, round, &err) == 0, "join: %s", err.msg);
}

/* The job above, on a started master; *held gets worker 1's task. */
static void scenario(struct rv_test_master *m, struct rv_shard_task *held)
{
	struct rv_master_client *c = rv_test_master_client(m);
	int64_t r0, r1;
	join(c, "node-0", &r0);
	join(c, "node-1", &r1);
	struct rv_shard_task t0, t1;
	next(c, "node-0", 0, 7, &t0);
	struct rv_shard_done d = { .node = "node-0", .worker = 0, .id = t0.id };
	bool counted = false;
	struct rv_err err = { 0 };
	ck_assert_msg(rv_master_shard_done(c, &d, &counted, &err) == 0, "done: %s", err.msg);
	ck_assert(counted);
	next(c, "node-1", 1, 9, &t1);
	*held = t1;
	rv_master_client_free(c);
}

/* What the restored master must know: the samples done, and worker 1's
 * answer to its request 9 (held), repeated as it was. */
static void check_restored(struct rv_test_master *m, const struct rv_shard_task *held)
{
	struct rv_master_client *c = rv_test_master_client(m);
	struct rv_job_status js;
	struct rv_err err = { 0 };
	ck_assert_msg(rv_master_job(c, &js, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(js.ndatasets, 1);
	ck_assert_int_eq(js.datasets[0].samples_done, 10);
	ck_assert(js.desired[RV_ROLE_WORKER].present);
	ck_assert_int_eq(js.desired[RV_ROLE_WORKER].count, 1);
	struct rv_shard_task again, fresh;
	next(c, "node-1", 1, 9, &again);
	ck_assert_int_eq(again.id, held->id);
	ck_assert_int_eq(again.start, held->start);
	ck_assert_int_eq(again.end, held->end);
	ck_assert_str_eq(again.dataset, "train");
	ck_assert_int_eq(again.epoch, held->epoch);
	/* a new request gets another shard, not a second copy of that one */
	next(c, "node-1", 1, 10, &fresh);
	ck_assert_int_ne(fresh.id, again.id);
	ck_assert_int_ne(fresh.start, again.start);
	rv_master_client_free(c);
}

/* A snapshot file whole: it holds binary bytes before its text. */
static size_t read_file(const char *path, char *buf, size_t size)
{
	FILE *f = fopen(path, "rb");
	ck_assert_msg(f, "could not open %s", path);
	size_t n = fread(buf, 1, size - 1, f);
	fclose(f);
	buf[n] = '\0';
	return n;
}

/* Worker 1's task as the old snapshot holds it: its positional entry
 * [1,"node-1",9,status,id,"train",epoch,start,end,""]. */
static void fixture_task(struct rv_shard_task *t)
{
	static char buf[1 << 16];
	size_t n = read_file(FIXTURE "/snapshot", buf, sizeof(buf));
	static const char entry[] = "[1,\"node-1\",9,";
	const char *at = memmem(buf, n, entry, strlen(entry));
	ck_assert_ptr_nonnull(at);
	int status, epoch;
	long long id, start, end;
	ck_assert_int_eq(sscanf(at, "[1,\"node-1\",9,%d,%lld,\"train\",%d,%lld,%lld", &status, &id,
				&epoch, &start, &end),
			 5);
	memset(t, 0, sizeof(*t));
	t->id = id;
	t->epoch = epoch;
	t->start = start;
	t->end = end;
}

static int copy(const char *from, const char *to)
{
	char *cmd = NULL;
	if (asprintf(&cmd, "mkdir -p '%s' && cp -r '%s'/. '%s'/", to, from, to) < 0)
		return -ENOMEM;
	int rc = system(cmd);
	free(cmd);
	return rc == 0 ? 0 : -EIO;
}

/* A master for the job, fresh (run: the job above, then kill -9) or on
 * a state folder copied from fixture. */
static void master_for_job(struct rv_test_master *m, bool run, struct rv_shard_task *held)
{
	char *spec = rv_test_master_spec(100, 10, 1, 1, 2);
	ck_assert_int_eq(rv_test_master_init(m, spec), 0);
	free(spec);
	if (!run) {
		fixture_task(held);
		ck_assert_int_eq(copy(FIXTURE, m->state), 0);
	}
	ck_assert_int_eq(rv_test_master_start(m, snap_args), 0);
	if (!run)
		return;
	scenario(m, held);
	int st = rv_test_master_stop(m, SIGKILL, 5000);
	ck_assert(st >= 0 && WIFSIGNALED(st));
}

START_TEST(test_make_fixture)
{
	struct rv_test_master m;
	struct rv_shard_task held;
	master_for_job(&m, true, &held);
	ck_assert_int_eq(copy(m.state, getenv("ROVER_SNAPSHOT_FIXTURE")), 0);
	rv_test_master_cleanup(&m);
}
END_TEST

/* Written now, read back after a kill -9. */
START_TEST(test_restores_its_snapshot)
{
	struct rv_test_master m;
	struct rv_shard_task held;
	master_for_job(&m, true, &held);
	char path[400];
	snprintf(path, sizeof(path), "%s/snapshot", m.state);
	static char buf[1 << 16];
	size_t n = read_file(path, buf, sizeof(buf));
	/* named, not positional: worker 1's entry says what each number is */
	static const char named[] = "{\"id\":1,\"node\":\"node-1\",\"last_req\":9,\"task\":{";
	ck_assert_msg(memmem(buf, n, named, strlen(named)), "no %s in the snapshot", named);
	static const char section[] = "rover-master-snapshot-2\nrdzv ";
	ck_assert_msg(memmem(buf, n, section, strlen(section)), "no %s in the snapshot", section);
	static const char group[] = "\"groups\":[{\"count\":1,\"has_resources\":false,";
	ck_assert_msg(memmem(buf, n, group, strlen(group)), "no %s in the snapshot", group);
	ck_assert_int_eq(rv_test_master_restart(&m), 0);
	check_restored(&m, &held);
	rv_test_master_cleanup(&m);
}
END_TEST

/* Written by a master before the named form (a user upgrading mid-job). */
START_TEST(test_restores_an_old_snapshot)
{
	struct rv_test_master m;
	struct rv_shard_task held;
	master_for_job(&m, false, &held);
	check_restored(&m, &held);
	rv_test_master_cleanup(&m);
}
END_TEST

static Suite *master_snapshot_suite(void)
{
	Suite *s = suite_create("master_snapshot");
	TCase *tc = tcase_create("snapshot");
	tcase_set_timeout(tc, 60);
	if (getenv("ROVER_SNAPSHOT_FIXTURE")) /* only when asked: see the header */
		tcase_add_test(tc, test_make_fixture);
	tcase_add_test(tc, test_restores_its_snapshot);
	tcase_add_test(tc, test_restores_an_old_snapshot);
	suite_add_tcase(s, tc);
	return s;
}

RV_TEST_MAIN(master_snapshot_suite)
