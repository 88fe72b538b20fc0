/*
 * brain_load: requests per second and p99 latency of rover-brain under wrk
 * (64 connections), against a bare libmicrohttpd handler answering a fixed
 * body with the same threading (an epoll pool of server.threads, 4), in the
 * same run on the same machine:
 *   bare:        GET of the fixed body from the bare handler
 *   get:         GET /v1/jobs/{uid}/plan (a stored plan)
 *   post:        POST /v1/jobs/{uid}/metrics, two speed samples a batch, to
 *                a brain with its default planner (plan.debounce_ms 1000,
 *                plan.interval_s 30)
 *   post_noplan: the same to a second brain whose planner never runs
 * Each brain runs its own embedded PostgreSQL (fsync on, as deployed).  The
 * four run in turn, ROUNDS rounds of ROVER_BENCH_LOAD_S / ROUNDS seconds
 * (30 s in all by default); rates and p99s are the medians of the rounds,
 * the ratios the medians of each round's ratio to that round's bare.
 * Ends with:
 *   bench=brain_load bare_rps=N get_rps=N get_p99_ms=N post_rps=N
 *   post_p99_ms=N post_ratio=R post_noplan_rps=N post_noplan_p99_ms=N
 *   post_noplan_ratio=R fsync=on rounds=3 errors=N
 * errors counts non-2xx replies and socket errors over every run.
 */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"
#include "brainfix.h"
#include "buf.h"
#include "proc.h"

#define CONNS        64
#define BARE_THREADS 4 /* the brain's server.threads default */
#define ROUNDS       3

static const char bare_body[] = "{\"ok\":true}";

static enum MHD_Result bare_access(void *cls, struct MHD_Connection *conn, const char *url,
				   const char *method, const char *version, const char *data,
				   size_t *data_size, void **con_cls)
{
	(void)cls;
	(void)url;
	(void)method;
	(void)version;
	(void)data;
	(void)data_size;
	/* The usual two calls: the first sees only the head; a reply queued
	 * there would close the connection after it. */
	static int seen;
	if (!*con_cls) {
		*con_cls = &seen;
		return MHD_YES;
	}
	struct MHD_Response *r = MHD_create_response_from_buffer(sizeof(bare_body) - 1,
								 (void *)bare_body,
								 MHD_RESPMEM_PERSISTENT);
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
	enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ret;
}

struct wrk_result {
	double rps;
	double p99_ms;
	long errors;
};

/* "12.34ms" / "850.00us" / "1.20s" in ms. */
static double latency_ms(const char *s)
{
	char *end;
	double v = strtod(s, &end);
	if (strncmp(end, "us", 2) == 0)
		return v / 1000;
	if (strncmp(end, "ms", 2) == 0)
		return v;
	if (end[0] == 's')
		return v * 1000;
	if (end[0] == 'm')
		return v * 60000;
	return v;
}

/* Run wrk on url for secs (script: a Lua file or NULL) and read its report. */
static int run_wrk(const char *name, const char *url, const char *script, int secs,
		   struct wrk_result *out)
{
	char dur[16], conns[16];
	snprintf(dur, sizeof(dur), "%ds", secs);
	snprintf(conns, sizeof(conns), "%d", CONNS);
	const char *argv[16] = { "wrk", "-t2",       "-c",        conns, "-d",
				 dur,   "--latency", "--timeout", "10s" };
	int n = 9;
	if (script) {
		argv[n++] = "-s";
		argv[n++] = script;
	}
	argv[n++] = url;
	argv[n] = NULL;
	struct rv_proc_opts o = { .argv = argv };
	int st = 0;
	struct rv_buf text;
	rv_buf_init(&text);
	int rc = rv_proc_run(&o, (secs + 30) * 1000, &st, &text);
	const char *t = rv_buf_failed(&text) ? NULL : text.data;
	if (rc < 0 || !t) {
		fprintf(stderr, "brain_load: could not run wrk (%d)\n", rc);
		rv_buf_release(&text);
		return -1;
	}
	fprintf(stderr, "brain_load: %s\n%s\n", name, t);
	*out = (struct wrk_result){ 0 };
	const char *p = strstr(t, "Requests/sec:");
	if (p)
		out->rps = strtod(p + 13, NULL);
	p = strstr(t, " 99% ");
	if (p)
		out->p99_ms = latency_ms(p + strspn(p + 5, " ") + 5);
	p = strstr(t, "Non-2xx or 3xx responses:");
	if (p)
		out->errors += atol(p + 25);
	p = strstr(t, "Socket errors:");
	if (p) {
		long a = 0, b = 0, c = 0, d = 0;
		sscanf(p, "Socket errors: connect %ld, read %ld, write %ld, timeout %ld", &a, &b,
		       &c, &d);
		out->errors += a + b + c + d;
	}
	rv_buf_release(&text);
	return out->rps > 0 ? 0 : -1;
}

/* The bare handler on its own loopback socket, served like the brain
 * serves; its port in *port. */
static struct MHD_Daemon *bare_start(int *port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(lfd, SOMAXCONN) < 0) {
		perror("brain_load: bare socket");
		return NULL;
	}
	struct MHD_Daemon *bare =
		MHD_start_daemon(MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ITC, 0, NULL, NULL,
				 bare_access, NULL, MHD_OPTION_LISTEN_SOCKET, lfd,
				 MHD_OPTION_THREAD_POOL_SIZE, (unsigned int)BARE_THREADS,
				 MHD_OPTION_CONNECTION_LIMIT, (unsigned int)1024,
				 MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)8192, MHD_OPTION_END);
	if (!bare) {
		fprintf(stderr, "brain_load: could not start the bare handler\n");
		return NULL;
	}
	socklen_t len = sizeof(sa);
	getsockname(lfd, (struct sockaddr *)&sa, &len);
	*port = ntohs(sa.sin_port);
	return bare;
}

/* A brain on its own embedded PostgreSQL under dir/name, with the extra
 * planner args (NULL: defaults), and a job registered: its uid in uid. */
static int brain_up(struct rv_test_brain *brain, const char *dir, const char *name, bool planner,
		    char *uid, size_t uid_len)
{
	char data_dir[256];
	snprintf(data_dir, sizeof(data_dir), "%s/%s", dir, name);
	const char *args[] = { "--data-dir",
			       data_dir,
			       "--log-level",
			       "warn",
			       "--plan-debounce-ms",
			       "600000",
			       "--plan-interval-s",
			       "86400",
			       NULL };
	if (planner)
		args[4] = NULL; /* the planner's defaults */
	if (rv_test_brain_start(brain, args) < 0) {
		fprintf(stderr, "brain_load: could not start rover-brain (log %s)\n", brain->log);
		return -1;
	}
	struct rv_test_reply r;
	const char *doc =
		"{\"kind\":\"ElasticJob\",\"metadata\":{\"name\":\"load\"},\"spec\":{"
		"\"distributionStrategy\":\"AllreduceStrategy\",\"replicaSpecs\":{"
		"\"worker\":{\"replicas\":4,\"resources\":{\"cpu\":4,\"memory\":\"8Gi\"}}}}}";
	if (rv_test_http(brain, "POST", "/v1/jobs", doc, NULL, &r) < 0 || r.status != 201) {
		fprintf(stderr, "brain_load: could not register a job\n");
		rv_test_reply_release(&r);
		return -1;
	}
	snprintf(uid, uid_len, "%s", rv_test_json_str(r.json, "uid"));
	rv_test_reply_release(&r);
	return 0;
}

/* The wrk script posting two speed samples a batch: each wrk thread posts
 * its own timestamps. */
static int write_lua(const char *lua)
{
	FILE *f = fopen(lua, "w");
	if (!f)
		return -1;
	fprintf(f, "local threads = 0\n"
		   "function setup(thread)\n"
		   "  thread:set(\"tid\", threads)\n"
		   "  threads = threads + 1\n"
		   "end\n"
		   "local n = 0\n"
		   "wrk.method = \"POST\"\n"
		   "wrk.headers[\"Content-Type\"] = \"application/json\"\n"
		   "request = function()\n"
		   "  n = n + 1\n"
		   "  local ts = 1700000000000 + n * 16 + tid * 2\n"
		   "  return wrk.format(nil, nil, nil, string.format("
		   "'{\"samples\":[{\"kind\":\"speed\",\"ts\":%%d,\"step\":%%d,\"speed\":10.5,"
		   "\"workers\":4},{\"kind\":\"speed\",\"ts\":%%d,\"step\":%%d,\"speed\":10.4,"
		   "\"workers\":4}]}', ts, n * 2, ts + 1, n * 2 + 1))\n"
		   "end\n");
	return fclose(f) == 0 ? 0 : -1;
}

/* How many batches a commit carried: the group commit at work. */
static void commits_note(const struct rv_test_brain *brain, const char *name)
{
	struct rv_test_reply r;
	double commits = 0, batches = 0;
	if (rv_test_http(brain, "GET", "/metrics", NULL, NULL, &r) == 0 && r.body) {
		static const char kc[] = "\nrover_brain_ingest_commits_total ";
		static const char kb[] = "\nrover_brain_batches_ingested_total ";
		const char *m = strstr(r.body, kc);
		if (m)
			commits = strtod(m + sizeof(kc) - 1, NULL);
		m = strstr(r.body, kb);
		if (m)
			batches = strtod(m + sizeof(kb) - 1, NULL);
	}
	rv_test_reply_release(&r);
	fprintf(stderr, "brain_load: %s: %.0f batches in %.0f commits\n", name, batches, commits);
}

enum { K_BARE, K_GET, K_POST, K_NOPLAN, K_N };

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	int secs = 30;
	const char *e = getenv("ROVER_BENCH_LOAD_S");
	if (e && atoi(e) > 0)
		secs = atoi(e);
	if (getenv("ROVER_BENCH_QUICK"))
		secs = 3;
	int round_s = secs / ROUNDS > 0 ? secs / ROUNDS : 1;

	char dir[] = "/tmp/rover-brain-load-XXXXXX";
	if (!mkdtemp(dir)) {
		perror("brain_load: mkdtemp");
		return 1;
	}
	char lua[256];
	snprintf(lua, sizeof(lua), "%s/post.lua", dir);
	int bare_port = 0, status = 1;
	struct MHD_Daemon *bare = bare_start(&bare_port);
	struct rv_test_brain brain = { 0 }, quiet = { 0 };
	char uid[64], quiet_uid[64];
	if (!bare || brain_up(&brain, dir, "pg", true, uid, sizeof(uid)) < 0 ||
	    brain_up(&quiet, dir, "pg-noplan", false, quiet_uid, sizeof(quiet_uid)) < 0 ||
	    write_lua(lua) < 0)
		goto out;

	static const char *const names[K_N] = { "bare", "get plan", "post metrics",
						"post metrics, planner off" };
	char urls[K_N][256];
	snprintf(urls[K_BARE], sizeof(urls[K_BARE]), "http://127.0.0.1:%d/", bare_port);
	snprintf(urls[K_GET], sizeof(urls[K_GET]), "%s/v1/jobs/%s/plan", brain.url, uid);
	snprintf(urls[K_POST], sizeof(urls[K_POST]), "%s/v1/jobs/%s/metrics", brain.url, uid);
	snprintf(urls[K_NOPLAN], sizeof(urls[K_NOPLAN]), "%s/v1/jobs/%s/metrics", quiet.url,
		 quiet_uid);
	double rps[K_N][ROUNDS], p99[K_N][ROUNDS], ratio[K_N][ROUNDS];
	long errors = 0;
	for (int r = 0; r < ROUNDS; r++)
		for (int k = 0; k < K_N; k++) {
			struct wrk_result w;
			if (run_wrk(names[k], urls[k], k >= K_POST ? lua : NULL, round_s, &w) < 0)
				goto out;
			rps[k][r] = w.rps;
			p99[k][r] = w.p99_ms;
			ratio[k][r] = w.rps / rps[K_BARE][r];
			errors += w.errors;
		}
	commits_note(&brain, "planner on");
	commits_note(&quiet, "planner off");
	printf("bench=brain_load bare_rps=%.0f get_rps=%.0f get_p99_ms=%.1f post_rps=%.0f "
	       "post_p99_ms=%.1f post_ratio=%.3f post_noplan_rps=%.0f post_noplan_p99_ms=%.1f "
	       "post_noplan_ratio=%.3f fsync=on rounds=%d errors=%ld\n",
	       rv_test_median(rps[K_BARE], ROUNDS), rv_test_median(rps[K_GET], ROUNDS),
	       rv_test_median(p99[K_GET], ROUNDS), rv_test_median(rps[K_POST], ROUNDS),
	       rv_test_median(p99[K_POST], ROUNDS), rv_test_median(ratio[K_POST], ROUNDS),
	       rv_test_median(rps[K_NOPLAN], ROUNDS), rv_test_median(p99[K_NOPLAN], ROUNDS),
	       rv_test_median(ratio[K_NOPLAN], ROUNDS), ROUNDS, errors);
	fflush(stdout);
	status = 0;
out:
	if (brain.pid)
		rv_test_brain_stop(&brain, SIGTERM, 30);
	if (quiet.pid)
		rv_test_brain_stop(&quiet, SIGTERM, 30);
	if (bare)
		MHD_stop_daemon(bare);
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "brain_load: could not remove %s\n", dir);
	return status;
}
