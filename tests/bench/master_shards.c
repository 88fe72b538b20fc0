/*
 * master_shards: shard next+done requests per second through the real
 * rover-master (journal on, fsync'd, group-committed) from 64 concurrent
 * keep-alive clients, against the same clients posting to a bare
 * libmicrohttpd handler that answers a fixed JSON body with the master's
 * threading (an epoll pool of server.threads, 2, as brain_load's baseline
 * copies the brain's): the HTTP stack's own limit on this machine.  Every
 * request counts as one op.  The two run in turn, PAIRS pairs of SECONDS
 * each, master first then bare; ratio is the median of the pairs' ratios,
 * the rates and the p99 the medians of the rounds.  Ends with:
 *   bench=master_shards ops_per_s=N bare_ops_per_s=N ratio=R p99_ms=N
 *   bare_p99_ms=N threads=2 pairs=3
 */
#include <inttypes.h>
#include <microhttpd.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "http.h"
#include "json.h"
#include "masterfix.h"
#include "parse.h"

#define CLIENTS 64
#define SECONDS 5
#define MAX_LAT 200000
#define PAIRS   3
#define THREADS 2 /* rover-master's server.threads default */

/* Read as a ShardTask by next and as a ShardDoneReply by done, so the very
 * same client code runs against both servers. */
static const char bare_reply[] = "{\"status\":\"task\",\"id\":5,\"dataset\":\"train\",\"epoch\":0,"
				 "\"start\":600,\"end\":700,\"counted\":true}";

struct client {
	pthread_t t;
	const char *url;
	int id;
	int64_t until;
	int64_t ops;
	int nlat;
	float *lat;
	int rc;
};

static void note(struct client *c, int64_t t0_us, int64_t t1_us)
{
	c->ops++;
	if (c->nlat < MAX_LAT)
		c->lat[c->nlat++] = (float)(t1_us - t0_us) / 1000.0f;
}

static int64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void *master_client_main(void *arg)
{
	struct client *c = arg;
	struct rv_master_opts o = { .url = c->url, .timeout_ms = 30000 };
	struct rv_err err = { 0 };
	struct rv_master_client *mc = rv_master_client_new(&o, &err);
	struct rv_shard_next req = { .worker = c->id };
	snprintf(req.node, sizeof(req.node), "node-%d", c->id);
	while (rv_mono_ms() < c->until) {
		struct rv_shard_task t;
		int64_t t0 = now_us();
		if ((c->rc = rv_master_shard_next(mc, &req, &t, &err)) < 0)
			break;
		note(c, t0, now_us());
		if (t.status != RV_SHARD_TASK)
			continue;
		struct rv_shard_done d = { .worker = c->id, .id = t.id };
		snprintf(d.node, sizeof(d.node), "%s", req.node);
		t0 = now_us();
		if ((c->rc = rv_master_shard_done(mc, &d, NULL, &err)) < 0)
			break;
		note(c, t0, now_us());
	}
	if (c->rc < 0)
		fprintf(stderr, "client %d: %s\n", c->id, err.msg);
	rv_master_client_free(mc);
	return NULL;
}

static enum MHD_Result bare_handler(void *cls, struct MHD_Connection *conn, const char *url,
				    const char *method, const char *version, const char *data,
				    size_t *size, void **state)
{
	(void)cls;
	(void)url;
	(void)method;
	(void)version;
	(void)data;
	if (!*state) { /* first call: headers only */
		*state = conn;
		return MHD_YES;
	}
	if (*size) { /* drop the body */
		*size = 0;
		return MHD_YES;
	}
	struct MHD_Response *r = MHD_create_response_from_buffer(strlen(bare_reply),
								 (void *)bare_reply,
								 MHD_RESPMEM_PERSISTENT);
	MHD_add_response_header(r, "Content-Type", "application/json");
	enum MHD_Result ok = MHD_queue_response(conn, 200, r);
	MHD_destroy_response(r);
	return ok;
}

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return x < y ? -1 : x > y;
}

/* Run CLIENTS clients of fn at url for SECONDS; ops/s and the p99 in ms. */
static double run(void *(*fn)(void *), const char *url, double *p99)
{
	static struct client c[CLIENTS];
	int64_t until = rv_mono_ms() + SECONDS * 1000;
	int64_t t0 = rv_mono_ms();
	for (int i = 0; i < CLIENTS; i++) {
		c[i] = (struct client){ .url = url, .id = i, .until = until };
		c[i].lat = malloc(sizeof(float) * MAX_LAT);
		pthread_create(&c[i].t, NULL, fn, &c[i]);
	}
	int64_t ops = 0, nlat = 0;
	for (int i = 0; i < CLIENTS; i++) {
		pthread_join(c[i].t, NULL);
		ops += c[i].ops;
		nlat += c[i].nlat;
	}
	double secs = (double)(rv_mono_ms() - t0) / 1000.0;
	float *all = malloc(sizeof(float) * (size_t)(nlat ? nlat : 1));
	int64_t k = 0;
	for (int i = 0; i < CLIENTS; i++) {
		memcpy(all + k, c[i].lat, sizeof(float) * (size_t)c[i].nlat);
		k += c[i].nlat;
		free(c[i].lat);
	}
	qsort(all, (size_t)nlat, sizeof(float), cmp_float);
	*p99 = nlat ? all[(int64_t)((double)nlat * 0.99)] : 0;
	free(all);
	return (double)ops / secs;
}

/* How well the journal grouped its commits, on stderr. */
static void journal_note(const char *base)
{
	struct rv_http_client *h = rv_http_client_new(NULL, 2000, 10000);
	struct rv_http_result res = { 0 };
	char murl[128];
	snprintf(murl, sizeof(murl), "%s/metrics", base);
	long long fsyncs = 0, records = 0;
	if (h && rv_http_request(h, "GET", murl, NULL, 0, 0, &res, NULL) == 0 && res.body) {
		const char *f = strstr(res.body, "\nrover_master_journal_fsyncs_total ");
		const char *r = strstr(res.body, "\nrover_master_journal_records_total ");
		if (f)
			fsyncs = atoll(strchr(f + 1, ' ') + 1);
		if (r)
			records = atoll(strchr(r + 1, ' ') + 1);
	}
	rv_http_result_release(&res);
	rv_http_client_free(h);
	fprintf(stderr, "journal: %lld records in %lld fsyncs (%.1f per fsync)\n", records, fsyncs,
		fsyncs ? (double)records / (double)fsyncs : 0.0);
}

/* The bare handler, served like the master serves (an epoll pool of
 * THREADS, 8 KiB a connection); its URL in url. */
static struct MHD_Daemon *bare_start(char *url, size_t len)
{
	struct MHD_Daemon *d = MHD_start_daemon(MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ITC, 0,
						NULL, NULL, bare_handler, NULL,
						MHD_OPTION_THREAD_POOL_SIZE, (unsigned int)THREADS,
						MHD_OPTION_CONNECTION_LIMIT, 1024u,
						MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)8192,
						MHD_OPTION_CONNECTION_TIMEOUT, 60u, MHD_OPTION_END);
	const union MHD_DaemonInfo *info = d ? MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT)
					     : NULL;
	if (!info) {
		if (d)
			MHD_stop_daemon(d);
		return NULL;
	}
	snprintf(url, len, "http://127.0.0.1:%u", info->port);
	return d;
}

int main(void)
{
	char *spec = rv_test_master_spec(100000000L, 100, 1, 1, 1);
	struct rv_test_master m;
	if (rv_test_master_bench_start(&m, spec) < 0)
		return 1;
	char url[64];
	struct MHD_Daemon *d = bare_start(url, sizeof(url));
	if (!d) {
		rv_test_master_cleanup(&m);
		return 1;
	}
	double ops[PAIRS], bare[PAIRS], ratio[PAIRS], p99[PAIRS], bare_p99[PAIRS];
	for (int i = 0; i < PAIRS; i++) {
		ops[i] = run(master_client_main, m.url, &p99[i]);
		bare[i] = run(master_client_main, url, &bare_p99[i]);
		ratio[i] = bare[i] > 0 ? ops[i] / bare[i] : 0;
		fprintf(stderr,
			"pair %d: master %.0f ops/s p99 %.2f ms; bare %.0f ops/s p99 %.2f ms\n",
			i + 1, ops[i], p99[i], bare[i], bare_p99[i]);
	}
	journal_note(m.url);
	MHD_stop_daemon(d);
	rv_test_master_cleanup(&m);
	free(spec);
	printf("bench=master_shards ops_per_s=%.0f bare_ops_per_s=%.0f ratio=%.2f p99_ms=%.2f "
	       "bare_p99_ms=%.2f threads=%d pairs=%d\n",
	       rv_test_median(ops, PAIRS), rv_test_median(bare, PAIRS),
	       rv_test_median(ratio, PAIRS), rv_test_median(p99, PAIRS),
	       rv_test_median(bare_p99, PAIRS), THREADS, PAIRS);
	return 0;
}
