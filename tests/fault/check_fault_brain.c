/*
 * check_fault_brain.c: the real rover-brain when its PostgreSQL turns
 * read-only under it (default_transaction_read_only set for the whole
 * server and reloaded: what a standby promoted the wrong way round, a full
 * disk's emergency or an operator does): every metrics batch it cannot
 * store is refused with 503 naming the cause, the brain stays up, and it
 * stores again by itself once the server is writable; at the end the job
 * holds exactly the samples of the batches answered 200 (none of the
 * refused ones, none twice).  The time from the server writable again to
 * the first batch stored is printed.
 */
#include <libpq-fe.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brainfix.h"
#include "faultfix.h"
#include "parse.h"
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
	char path[128];
	snprintf(path, sizeof(path), "/v1/jobs/%s", uid);
	struct rv_test_reply r;
	ck_assert_int_eq(rv_test_http(&brain, "GET", path, NULL, NULL, &r), 0);
	ck_assert_msg(r.status == 200, "status %ld body %s", r.status, r.body);
	long n = (long)rv_test_json_num(r.json, "speed_samples", -1);
	rv_test_reply_release(&r);
	return n;
}

START_TEST(test_brain_postgres_read_only)
{
	char conninfo[512];
	ck_assert_int_eq(rv_test_pg_fresh_db(0, conninfo, sizeof(conninfo)), 0);
	const char *args[] = { "--db", conninfo, NULL };
	ck_assert_int_eq(rv_test_brain_start(&brain, args), 0);
	char *doc = rv_test_read_file("examples/job.json");
	ck_assert_ptr_nonnull(doc);
	struct rv_test_reply r;
	ck_assert_int_eq(rv_test_http(&brain, "POST", "/v1/jobs", doc, NULL, &r), 0);
	free(doc);
	ck_assert_msg(r.status == 201, "status %ld body %s", r.status, r.body);
	char uid[64];
	snprintf(uid, sizeof(uid), "%s", rv_test_json_str(r.json, "uid"));
	rv_test_reply_release(&r);

	int i = 0, stored = 0;
	for (; i < 10; i++, stored++)
		ck_assert_int_eq(post_batch(uid, i, NULL, 0), 200);
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

static Suite *fault_brain_suite(void)
{
	Suite *s = suite_create("fault_brain");
	rv_test_fault_add(s, "brain_read_only", test_brain_postgres_read_only, true);
	return s;
}

RV_TEST_MAIN_PG(fault_brain_suite)
