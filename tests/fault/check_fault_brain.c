/*
 * check_fault_brain.c: the real rover-brain when its PostgreSQL cannot
 * write: turned read-only under it (default_transaction_read_only set for
 * the whole server and reloaded: what a standby promoted the wrong way
 * round, a full disk's emergency or an operator does), or out of disk (its
 * own server's data folder on a small tmpfs, filled by another file).
 * Every metrics batch it cannot store is refused with 503 naming the
 * cause, the brain stays up, and it stores again by itself once the
 * server can write; at the end the job holds exactly the samples of the
 * batches answered 200 (none of the refused ones, none twice).  The time
 * from the server writable again to the first batch stored is printed.
 * The full disk needs root (a tmpfs mount): otherwise a counted skip, a
 * failure under CI=true.
 * And two brains on one database, one killed (-9) in the middle of a
 * planning pass: the other makes the plan the dead pass was making, once
 * (no two plans from the same samples), and plans on.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libpq-fe.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "brainfix.h"
#include "faultfix.h"
#include "parse.h"
#include "pgfix.h"
#include "testutil.h"

static struct rv_test_brain brain;

/* The server's default_transaction_read_only, reloaded: on or off. */
static void server_read_only(bool on)
{
	PGconn *c = PQconnectdb(rv_test_pg_admin_conninfo());
	ck_assert_msg(PQstatus(c) == CONNECTION_OK, "%s", PQerrorMessage(c));
	const char *sql[] = { on ? "ALTER SYSTEM SET default_transaction_read_only = on"
				 : "ALTER SYSTEM RESET default_transaction_read_only",
			      "SELECT pg_reload_conf()" };
	for (int i = 0; i < 2; i++) {
		PGresult *r = PQexec(c, sql[i]);
		ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK ||
				      PQresultStatus(r) == PGRES_TUPLES_OK,
			      "%s: %s", sql[i], PQerrorMessage(c));
		PQclear(r);
	}
	PQfinish(c);
}

/* POST batch i (two speed samples) to job uid: the HTTP status, the body
 * into body (may be NULL). */
static long post_batch(const char *uid, int i, char *body, size_t size)
{
	char path[128], doc[512];
	snprintf(path, sizeof(path), "/v1/jobs/%s/metrics", uid);
	snprintf(doc, sizeof(doc),
		 "{\"samples\":[{\"kind\":\"speed\",\"ts\":%d,\"speed\":10,\"step\":%d,"
		 "\"workers\":2,\"ps\":0},{\"kind\":\"speed\",\"ts\":%d,\"speed\":11,"
		 "\"step\":%d,\"workers\":2,\"ps\":0}]}",
		 1000 + 2 * i, 2 * i, 1001 + 2 * i, 2 * i + 1);
	struct rv_test_reply r;
	ck_assert_int_eq(rv_test_http(&brain, "POST", path, doc, NULL, &r), 0);
	long st = r.status;
	if (body)
		snprintf(body, size, "%s", r.body ? r.body : "");
	rv_test_reply_release(&r);
	return st;
}

static long speed_samples(const char *uid)
{
	return (long)rv_test_brain_job_num(&brain, uid, "speed_samples");
}

/* Register examples/job.json: its uid into uid. */
static void register_job(char *uid, size_t size)
{
	char *doc = rv_test_read_file("examples/job.json");
	ck_assert_ptr_nonnull(doc);
	rv_test_brain_register(&brain, doc, uid, size);
	free(doc);
}

/* Start the brain with args, register examples/job.json (its uid into uid)
 * and store FILLED batches (0 to FILLED-1), each answered 200. */
#define FILLED 10
static void start_filled(const char *const *args, char *uid, size_t size)
{
	ck_assert_int_eq(rv_test_brain_start(&brain, args), 0);
	register_job(uid, size);
	for (int i = 0; i < FILLED; i++)
		ck_assert_int_eq(post_batch(uid, i, NULL, 0), 200);
}

START_TEST(test_brain_postgres_read_only)
{
	char conninfo[512];
	ck_assert_int_eq(rv_test_pg_fresh_db(0, conninfo, sizeof(conninfo)), 0);
	const char *args[] = { "--db", conninfo, NULL };
	char uid[64];
	start_filled(args, uid, sizeof(uid));
	int i = FILLED, stored = FILLED;
	server_read_only(true);
	usleep(300 * 1000); /* the reload reaches every backend */
	char body[1024];
	for (int k = 0; k < 10; k++, i++) {
		long st = post_batch(uid, i, body, sizeof(body));
		ck_assert_msg(st == 503 && strstr(body, "read-only"),
			      "a batch on a read-only server: %ld %s", st, body);
	}
	ck_assert_msg(kill(brain.pid, 0) == 0, "the brain died");
	server_read_only(false);
	int64_t t0 = rv_mono_ms();
	long st;
	while ((st = post_batch(uid, i, body, sizeof(body))) != 200 && rv_mono_ms() - t0 < 10000)
		usleep(20 * 1000);
	ck_assert_msg(st == 200, "not back 10 s after the server was writable: %ld %s", st, body);
	rv_test_fault_report("brain_postgres_writable_again", rv_mono_ms() - t0);
	stored++;
	for (i++; i < 25; i++, stored++)
		ck_assert_int_eq(post_batch(uid, i, NULL, 0), 200);
	ck_assert_int_eq(speed_samples(uid), 2L * stored);
	rv_test_brain_stop(&brain, SIGTERM, 30);
}
END_TEST

/* POST batches to uid until one is refused (at most max): how many were
 * answered 200, added to *stored; the refusal's status and body. */
static long post_until_refused(const char *uid, int *i, int max, int *stored, char *body,
			       size_t size)
{
	long st = 200;
	for (int k = 0; k < max && st == 200; k++, (*i)++) {
		st = post_batch(uid, *i, body, size);
		*stored += st == 200;
	}
	return st;
}

/* The brain's own PostgreSQL (--data-dir on a 96 MiB tmpfs) out of disk:
 * the tmpfs filled by another file while metrics batches come in.  Each
 * batch it cannot store is refused with 503 naming the cause, the brain
 * (and its server) stays up, and once space returns it stores again by
 * itself; the job holds exactly the samples of the batches answered 200. */
START_TEST(test_brain_postgres_full)
{
	if (geteuid() != 0) {
		RV_TEST_SKIP(true, "mounting a small tmpfs for PostgreSQL's data needs root");
		return;
	}
	char dir[] = "/tmp/rover-fault-pgfull-XXXXXX", data[64], filler[96];
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(data, sizeof(data), "%s/data", dir);
	snprintf(filler, sizeof(filler), "%s/filler", data);
	ck_assert_int_eq(mkdir(data, 0755), 0);
	/* a mount namespace of this test's own: a failing run leaves no mount */
	ck_assert_int_eq(unshare(CLONE_NEWNS), 0);
	ck_assert_int_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
	ck_assert_msg(mount("tmpfs", data, "tmpfs", 0, "size=96m,mode=0755") == 0,
		      "could not mount a tmpfs on %s: %s", data, strerror(errno));
	ck_assert_int_eq(rv_test_pg_reaper(data, dir), 0);
	const char *args[] = { "--data-dir", data, NULL };
	char uid[64];
	start_filled(args, uid, sizeof(uid));
	int i = FILLED, stored = FILLED;
	int fd = open(filler, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	static const char block[4096];
	while (write(fd, block, sizeof(block)) > 0)
		;
	ck_assert_int_eq(errno, ENOSPC);
	close(fd);
	char body[1024];
	long st = post_until_refused(uid, &i, 2000, &stored, body, sizeof(body));
	ck_assert_msg(st == 503 && strstr(body, "No space left on device"),
		      "a batch on a full disk: %ld %s", st, body);
	for (int k = 0; k < 5; k++, i++) {
		st = post_batch(uid, i, body, sizeof(body));
		ck_assert_msg(st == 200 || (st == 503 && strstr(body, "No space left on device")),
			      "a batch on a full disk: %ld %s", st, body);
		stored += st == 200;
	}
	ck_assert_msg(kill(brain.pid, 0) == 0, "the brain died");
	ck_assert_int_eq(unlink(filler), 0);
	int64_t t0 = rv_mono_ms();
	while ((st = post_batch(uid, i, body, sizeof(body))) != 200 && rv_mono_ms() - t0 < 10000)
		usleep(20 * 1000);
	ck_assert_msg(st == 200, "not back 10 s after space returned: %ld %s", st, body);
	rv_test_fault_report("brain_postgres_space_back", rv_mono_ms() - t0);
	stored++;
	for (int k = 0; k < 10; k++, stored++)
		ck_assert_int_eq(post_batch(uid, ++i, NULL, 0), 200);
	ck_assert_int_eq(speed_samples(uid), 2L * stored);
	rv_test_brain_stop(&brain, SIGTERM, 30);
	ck_assert_int_eq(umount2(data, MNT_DETACH), 0);
}
END_TEST

/* ---- two brains on one PostgreSQL ---- */

static int64_t two_ts = 1700000000000LL;

/* n speed samples of a sync all-reduce job at w workers to brain b. */
static void two_post_speed(const struct rv_test_brain *b, const char *uid, int w, int n)
{
	struct rv_buf buf;
	rv_buf_init(&buf);
	rv_buf_puts(&buf, "{\"samples\":[");
	double speed = 100.0 / (2.0 / w + 0.01 + 0.004 * w);
	for (int i = 0; i < n; i++) {
		two_ts += 10000;
		rv_buf_printf(&buf,
			      "%s{\"kind\":\"speed\",\"ts\":%" PRId64 ",\"speed\":%.3f,\"step\":%d,"
			      "\"workers\":%d,\"ps\":0}",
			      i ? "," : "", two_ts, speed * (1.0 + 0.01 * ((i % 3) - 1)), i, w);
	}
	ck_assert_int_eq(rv_test_brain_post_batch(b, uid, &buf), 200);
}

/* One value of a query on pg (a count): its text as a number. */
static long two_count(PGconn *pg, const char *sql, const char *uid)
{
	const char *p[] = { uid };
	PGresult *r = PQexecParams(pg, sql, uid ? 1 : 0, NULL, uid ? p : NULL, NULL, NULL, 0);
	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1, "%s: %s", sql,
		      PQerrorMessage(pg));
	long n = atol(PQgetvalue(r, 0, 0));
	PQclear(r);
	return n;
}

/* Wait (up to 10 s) for a planner pass blocked on job_planned (the table
 * held by the test): the application_name of its brain into who. */
static void two_wait_blocked(PGconn *pg, char *who, size_t size)
{
	int64_t until = rv_mono_ms() + 10000;
	*who = '\0';
	while (!*who && rv_mono_ms() < until) {
		PGresult *r = PQexec(pg, "SELECT a.application_name FROM pg_locks l JOIN "
					 "pg_stat_activity a USING (pid) WHERE NOT l.granted AND "
					 "l.relation = 'job_planned'::regclass");
		ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "%s", PQerrorMessage(pg));
		if (PQntuples(r) == 1)
			snprintf(who, size, "%s", PQgetvalue(r, 0, 0));
		PQclear(r);
		if (!*who)
			usleep(20 * 1000);
	}
	ck_assert_msg(*who, "no planner pass reached the job's planned_ts");
}

/* The running plan of uid newer than *last at brain b, marked applied
 * (what a master does); whether there was one. */
static bool two_apply_plan(const struct rv_test_brain *b, const char *uid, int64_t *last, int *w)
{
	cJSON *p = NULL;
	long st = rv_test_brain_running_plan(b, uid, *last, &p);
	ck_assert_msg(st == 200 || st == 204, "plan: %ld", st);
	if (!p)
		return false;
	*last = (int64_t)rv_test_json_num(p, "id", 0);
	*w = (int)rv_test_json_num(p, "groups.worker.count", *w);
	cJSON_Delete(p);
	char path[128], body[160];
	snprintf(path, sizeof(path), "/v1/jobs/%s/events", uid);
	snprintf(body, sizeof(body),
		 "{\"type\":\"plan_applied\",\"ts\":%" PRId64 ",\"plan_id\":%" PRId64 "}",
		 two_ts + 1, *last);
	struct rv_test_reply r;
	ck_assert_int_eq(rv_test_http(b, "POST", path, body, NULL, &r), 0);
	ck_assert_msg(r.status == 200, "applied: %ld %s", r.status, r.body);
	rv_test_reply_release(&r);
	return true;
}

/* Two brains on one database, both planning (each revisits running jobs
 * every second).  The job's first running plan (2 -> 3 workers) is
 * applied; the pass over the samples at 3 workers, which makes the next
 * plan, is held by the test at its last write (the plan inserted, not
 * committed) and its brain killed (-9).  The other brain makes that plan,
 * once, and goes on planning; no two plans were made from the same
 * samples (one running plan per based_on_ts at most), and every sample
 * answered 200 is stored once. */
START_TEST(test_two_brains_one_killed)
{
	char conninfo[512], ci[2][600];
	ck_assert_int_eq(rv_test_pg_fresh_db(0, conninfo, sizeof(conninfo)), 0);
	struct rv_test_brain bs[2];
	for (int i = 0; i < 2; i++) {
		snprintf(ci[i], sizeof(ci[i]), "%s application_name=brain%d", conninfo, i);
		const char *args[] = {
			"--db", ci[i], "--plan-debounce-ms", "0", "--plan-interval-s", "1", NULL
		};
		ck_assert_int_eq(rv_test_brain_start(&bs[i], args), 0);
	}
	brain = bs[0];
	char uid[64];
	register_job(uid, sizeof(uid));
	int w = 2, posted = 8;
	int64_t last = 0;
	two_post_speed(&bs[0], uid, w, 8);
	ck_assert_int_eq(rv_test_brain_wait_planned(&bs[0], uid, two_ts, 500), 0);
	ck_assert_msg(two_apply_plan(&bs[0], uid, &last, &w), "no first running plan");

	PGconn *pg = PQconnectdb(conninfo);
	ck_assert_msg(PQstatus(pg) == CONNECTION_OK, "%s", PQerrorMessage(pg));
	PGresult *r = PQexec(pg, "BEGIN; LOCK TABLE job_planned IN SHARE MODE");
	ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK, "%s", PQerrorMessage(pg));
	PQclear(r);
	two_post_speed(&bs[0], uid, w, 8);
	posted += 8;
	int64_t held_ts = two_ts;
	char who[64];
	two_wait_blocked(pg, who, sizeof(who));
	int dead = !strcmp(who, "brain1"), alive = !dead;
	ck_assert_msg(!strcmp(who, "brain0") || dead, "a pass of %s", who);
	ck_assert_int_eq(rv_test_brain_stop(&bs[dead], SIGKILL, 5), SIGKILL);
	int64_t t0 = rv_mono_ms();
	r = PQexec(pg, "COMMIT");
	PQclear(r);
	ck_assert_int_eq(rv_test_brain_wait_planned(&bs[alive], uid, held_ts, 500), 0);
	rv_test_fault_report("two_brains_other_planned", rv_mono_ms() - t0);
	char held_s[24];
	snprintf(held_s, sizeof(held_s), "%" PRId64, held_ts);
	ck_assert_int_eq(two_count(pg,
				   "SELECT count(*) FROM scale_plans WHERE stage = 'running' AND "
				   "based_on_ts_ms = $1::bigint",
				   held_s),
			 1);
	/* plans keep flowing from the other */
	int after = 0;
	for (int round = 0; round < 4; round++, posted += 8) {
		after += two_apply_plan(&bs[alive], uid, &last, &w);
		two_post_speed(&bs[alive], uid, w, 8);
		ck_assert_int_eq(rv_test_brain_wait_planned(&bs[alive], uid, two_ts, 500), 0);
	}
	printf("diag: two brains: %s killed mid-pass, %d plans applied after\n", who, after);
	ck_assert_msg(after >= 1, "the plan the killed pass was making never came");
	ck_assert_int_eq(
		two_count(pg,
			  "SELECT count(*) FROM (SELECT based_on_ts_ms FROM scale_plans p "
			  "JOIN jobs j ON j.id = p.job_id WHERE j.uid = $1 AND "
			  "p.stage = 'running' GROUP BY based_on_ts_ms HAVING count(*) > 1) d",
			  uid),
		0);
	brain = bs[alive];
	ck_assert_int_eq(speed_samples(uid), posted);
	PQfinish(pg);
	rv_test_brain_stop(&bs[alive], SIGTERM, 30);
}
END_TEST

static Suite *fault_brain_suite(void)
{
	Suite *s = suite_create("fault_brain");
	rv_test_fault_add(s, "brain_read_only", test_brain_postgres_read_only, true);
	rv_test_fault_add(s, "brain_postgres_full", test_brain_postgres_full, true);
	rv_test_fault_add(s, "two_brains", test_two_brains_one_killed, true);
	return s;
}

RV_TEST_MAIN_PG(fault_brain_suite)
