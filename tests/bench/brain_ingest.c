/*
 * brain_ingest: samples/s committed through POST /v1/jobs/{uid}/metrics
 * (batches of 500 node samples, 8 concurrent clients, each on its own job)
 * against raw libpq COPY of the same rows into the same table, with the same
 * batch size and concurrency, in the same run on the same private
 * PostgreSQL.  That PostgreSQL runs durable (fsync on, synchronous_commit
 * on: a COPY is answered once its commit is flushed, as a batch's reply is),
 * ROVER_BENCH_NOSYNC=1 runs it with fsync off instead; the line says which.
 * The brain runs with its default planner.  ROUNDS rounds, COPY then REST
 * in each; ratio is the median of the rounds' ratios, the rates medians.
 * Ends with:
 *   bench=brain_ingest fsync=on rest_sps=N copy_sps=N ratio=R rounds=3
 */
#include <inttypes.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "brainfix.h"
#include "buf.h"
#include "http.h"
#include "parse.h"
#include "pgfix.h"

#define CLIENTS 8
#define BATCH   500
#define NODES   16
#define ROUNDS  3

static int batches_per_client = 60;
/* Payloads are built before timing so neither side pays for formatting. */
static char **rest_bodies, **copy_rows;
static struct rv_test_brain brain;
static char conninfo[1024];
static char uids[CLIENTS][64];
static int64_t job_ids[CLIENTS];

/* The k-th batch of client c: 500 node samples over 16 nodes. */
static int64_t sample_ts(int c, int k, int i)
{
	return 1700000000000LL + (int64_t)k * 100000 + (int64_t)(i / NODES) * 1000 + c;
}

static char *batch_json(int c, int k)
{
	struct rv_buf b;
	rv_buf_init(&b);
	rv_buf_puts(&b, "{\"samples\":[");
	for (int i = 0; i < BATCH; i++)
		rv_buf_printf(&b,
			      "%s{\"kind\":\"node\",\"ts\":%" PRId64 ",\"node\":\"worker-%d\","
			      "\"role\":\"worker\",\"rank\":%d,\"cpu\":%.3f,\"memory_mb\":%d,"
			      "\"cpu_limit\":4,\"memory_limit_mb\":8192,\"step_time\":%.4f}",
			      i ? "," : "", sample_ts(c, k, i), i % NODES, i % NODES,
			      1.0 + (i % 7) * 0.3, 2000 + (i * 37) % 3000, 0.2 + (i % 5) * 0.01);
	rv_buf_puts(&b, "]}");
	return rv_buf_steal(&b);
}

static char *batch_copy(int c, int k)
{
	struct rv_buf b;
	rv_buf_init(&b);
	for (int i = 0; i < BATCH; i++)
		rv_buf_printf(&b,
			      "%" PRId64 "\t%" PRId64
			      "\tworker-%d\tworker\t%d\t%.3f\t%d\t4\t8192\t%.4f\n",
			      job_ids[c], sample_ts(c, k, i) + 500, i % NODES, i % NODES,
			      1.0 + (i % 7) * 0.3, 2000 + (i * 37) % 3000, 0.2 + (i % 5) * 0.01);
	return rv_buf_steal(&b);
}

static void *rest_client(void *arg)
{
	int c = (int)(intptr_t)arg;
	struct rv_http_client *h = rv_http_client_new(NULL, 2000, 60000);
	char url[256];
	snprintf(url, sizeof(url), "%s/v1/jobs/%s/metrics", brain.url, uids[c]);
	long fails = 0;
	for (int k = 0; k < batches_per_client; k++) {
		const char *body = rest_bodies[c * batches_per_client + k];
		struct rv_http_result r = { 0 };
		struct rv_err err = { 0 };
		int rc = rv_http_request(h, "POST", url, body, strlen(body), 0, &r, &err);
		if (rc < 0 || r.status != 200) {
			fprintf(stderr, "rest batch failed: rc=%d status=%ld %s %s\n", rc, r.status,
				err.msg, r.body ? r.body : "");
			fails++;
		}
		rv_http_result_release(&r);
	}
	rv_http_client_free(h);
	return (void *)fails;
}

static void *copy_client(void *arg)
{
	int c = (int)(intptr_t)arg;
	PGconn *pg = PQconnectdb(conninfo);
	long fails = 0;
	for (int k = 0; k < batches_per_client && PQstatus(pg) == CONNECTION_OK; k++) {
		const char *rows = copy_rows[c * batches_per_client + k];
		PGresult *r =
			PQexec(pg, "COPY node_usage (job_id, ts_ms, node, role, rank, cpu,"
				   " memory_mb, cpu_limit, memory_limit_mb, step_time) FROM STDIN");
		if (PQresultStatus(r) != PGRES_COPY_IN)
			fails++;
		PQclear(r);
		if (PQputCopyData(pg, rows, (int)strlen(rows)) != 1 || PQputCopyEnd(pg, NULL) != 1)
			fails++;
		r = PQgetResult(pg);
		if (PQresultStatus(r) != PGRES_COMMAND_OK) {
			fprintf(stderr, "copy failed: %s\n", PQerrorMessage(pg));
			fails++;
		}
		PQclear(r);
		while ((r = PQgetResult(pg)))
			PQclear(r);
	}
	PQfinish(pg);
	return (void *)fails;
}

static double run_clients(void *(*fn)(void *), long *fails)
{
	pthread_t th[CLIENTS];
	int64_t t0 = rv_mono_ms();
	for (int c = 0; c < CLIENTS; c++)
		pthread_create(&th[c], NULL, fn, (void *)(intptr_t)c);
	*fails = 0;
	for (int c = 0; c < CLIENTS; c++) {
		void *f;
		pthread_join(th[c], &f);
		*fails += (long)f;
	}
	double secs = (double)(rv_mono_ms() - t0) / 1000.0;
	return (double)CLIENTS * batches_per_client * BATCH / secs;
}

static long count(const char *sql)
{
	PGconn *pg = PQconnectdb(conninfo);
	PGresult *r = PQexec(pg, sql);
	long n = PQresultStatus(r) == PGRES_TUPLES_OK ? atol(PQgetvalue(r, 0, 0)) : -1;
	PQclear(r);
	PQfinish(pg);
	return n;
}

int main(int argc, char **argv)
{
	if (argc > 1)
		batches_per_client = atoi(argv[1]);
	if (getenv("ROVER_BENCH_QUICK"))
		batches_per_client = 5;
	signal(SIGPIPE, SIG_IGN);
	const char *e = getenv("ROVER_BENCH_NOSYNC");
	bool nosync = e && strcmp(e, "1") == 0;
	setenv("ROVER_PG_NOSYNC", nosync ? "1" : "0", 1);
	if (rv_test_pg_global_start() < 0 ||
	    rv_test_pg_fresh_db(1, conninfo, sizeof(conninfo)) < 0) {
		fprintf(stderr, "brain_ingest: could not start PostgreSQL\n");
		return 1;
	}
	const char *args[] = { "--db", conninfo, "--log-level", "warn", NULL };
	if (rv_test_brain_start(&brain, args) < 0) {
		fprintf(stderr, "brain_ingest: could not start rover-brain (log %s)\n", brain.log);
		rv_test_pg_global_stop();
		return 1;
	}
	for (int c = 0; c < CLIENTS; c++) {
		char doc[1024];
		snprintf(doc, sizeof(doc),
			 "{\"kind\":\"ElasticJob\",\"metadata\":{\"name\":\"ingest-%d\"},\"spec\":{"
			 "\"distributionStrategy\":\"AllreduceStrategy\",\"replicaSpecs\":{"
			 "\"worker\":{"
			 "\"replicas\":16,\"resources\":{\"cpu\":4,\"memory\":\"8Gi\"}}}}}",
			 c);
		struct rv_test_reply r;
		if (rv_test_http(&brain, "POST", "/v1/jobs", doc, NULL, &r) < 0 ||
		    r.status != 201) {
			fprintf(stderr, "brain_ingest: could not register a job\n");
			return 1;
		}
		snprintf(uids[c], sizeof(uids[c]), "%s", rv_test_json_str(r.json, "uid"));
		rv_test_reply_release(&r);
		char q[160];
		snprintf(q, sizeof(q), "SELECT id FROM jobs WHERE name = 'ingest-%d'", c);
		job_ids[c] = count(q);
	}
	int nb = CLIENTS * batches_per_client;
	rest_bodies = calloc((size_t)nb, sizeof(char *));
	copy_rows = calloc((size_t)nb, sizeof(char *));
	for (int c = 0; c < CLIENTS; c++)
		for (int k = 0; k < batches_per_client; k++) {
			rest_bodies[c * batches_per_client + k] = batch_json(c, k);
			copy_rows[c * batches_per_client + k] = batch_copy(c, k);
		}
	fprintf(stderr, "brain_ingest: %d clients x %d batches x %d samples, REST then COPY\n",
		CLIENTS, batches_per_client, BATCH);
	/* Alternate COPY and REST rounds so neither runs only on the bigger table. */
	long rest_fails = 0, copy_fails = 0, f;
	double rest[ROUNDS], copy[ROUNDS], ratio[ROUNDS];
	long per_round = (long)CLIENTS * batches_per_client * BATCH;
	for (int round = 0; round < ROUNDS; round++) {
		copy[round] = run_clients(copy_client, &f);
		copy_fails += f;
		rest[round] = run_clients(rest_client, &f);
		rest_fails += f;
		ratio[round] = rest[round] / copy[round];
		fprintf(stderr, "brain_ingest: round %d: rest %.0f copy %.0f samples/s (%.2f)\n",
			round + 1, rest[round], copy[round], ratio[round]);
	}
	long total = count("SELECT count(*) FROM node_usage");
	long after_rest = count("SELECT sum(node_samples) FROM (SELECT (SELECT count(*) FROM"
				" node_usage u WHERE u.job_id = j.id AND u.ts_ms % 1000 < 100) AS"
				" node_samples FROM jobs j) x");
	rv_test_brain_stop(&brain, 0, 10);
	for (int i = 0; i < nb; i++) {
		free(rest_bodies[i]);
		free(copy_rows[i]);
	}
	free(rest_bodies);
	free(copy_rows);
	rv_test_pg_global_stop();
	long want = ROUNDS * per_round;
	fprintf(stderr,
		"brain_ingest: rest stored %ld of %ld (%ld failed), copy %ld (%ld failed)\n",
		after_rest, want, rest_fails, total - after_rest, copy_fails);
	if (rest_fails || copy_fails || after_rest != want || total != 2 * want)
		return 1;
	printf("bench=brain_ingest fsync=%s rest_sps=%.0f copy_sps=%.0f ratio=%.2f rounds=%d\n",
	       nosync ? "off" : "on", rv_test_median(rest, ROUNDS), rv_test_median(copy, ROUNDS),
	       rv_test_median(ratio, ROUNDS), ROUNDS);
	return 0;
}
