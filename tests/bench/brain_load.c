/*
 * brain_load: requests per second and p99 latency of rover-brain under wrk
 * (64 connections, 30 s each, ROVER_BENCH_LOAD_S to change), against a bare
 * libmicrohttpd handler answering a fixed body with the same threading, in
 * the same run on the same machine:
 *   bare:  GET of the fixed body from the bare handler
 *   get:   GET /v1/jobs/{uid}/plan (a stored plan)
 *   post:  POST /v1/jobs/{uid}/metrics, two speed samples a batch
 * The brain runs its own embedded PostgreSQL (fsync on, as deployed).
 * Ends with:
 *   bench=brain_load bare_rps=N get_rps=N get_p99_ms=N post_rps=N
 *   post_p99_ms=N errors=N
 * errors counts non-2xx replies and socket errors over the three runs.
 */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brainfix.h"
#include "buf.h"
#include "proc.h"

#define CONNS        64
#define BARE_THREADS 4 /* the brain's server.threads default */

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

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	int secs = 30;
	const char *e = getenv("ROVER_BENCH_LOAD_S");
	if (e && atoi(e) > 0)
		secs = atoi(e);
	if (getenv("ROVER_BENCH_QUICK"))
		secs = 3;

	char dir[] = "/tmp/rover-brain-load-XXXXXX";
	if (!mkdtemp(dir)) {
		perror("brain_load: mkdtemp");
		return 1;
	}
	char data_dir[256], lua[256];
	snprintf(data_dir, sizeof(data_dir), "%s/pg", dir);
	snprintf(lua, sizeof(lua), "%s/post.lua", dir);

	/* Listening like the brain's server does: its own socket on loopback. */
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(lfd, SOMAXCONN) < 0) {
		perror("brain_load: bare socket");
		return 1;
	}
	struct MHD_Daemon *bare =
		MHD_start_daemon(MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ITC, 0, NULL, NULL,
				 bare_access, NULL, MHD_OPTION_LISTEN_SOCKET, lfd,
				 MHD_OPTION_THREAD_POOL_SIZE, (unsigned int)BARE_THREADS,
				 MHD_OPTION_CONNECTION_LIMIT, (unsigned int)1024,
				 MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)8192, MHD_OPTION_END);
	const union MHD_DaemonInfo *di = bare ? MHD_get_daemon_info(bare, MHD_DAEMON_INFO_BIND_PORT)
					      : NULL;
	if (!di) {
		fprintf(stderr, "brain_load: could not start the bare handler\n");
		return 1;
	}
	int bare_port = di->port;
	if (!bare_port) {
		socklen_t len = sizeof(sa);
		getsockname(lfd, (struct sockaddr *)&sa, &len);
		bare_port = ntohs(sa.sin_port);
	}

	struct rv_test_brain brain;
	const char *args[] = { "--data-dir",
			       data_dir,
			       "--log-level",
			       "warn",
			       "--plan-debounce-ms",
			       "600000",
			       "--plan-interval-s",
			       "86400",
			       NULL };
	if (rv_test_brain_start(&brain, args) < 0) {
		fprintf(stderr, "brain_load: could not start rover-brain (log %s)\n", brain.log);
		return 1;
	}
	int status = 1;
	struct rv_test_reply r;
	const char *doc =
		"{\"kind\":\"ElasticJob\",\"metadata\":{\"name\":\"load\"},\"spec\":{"
		"\"distributionStrategy\":\"AllreduceStrategy\",\"replicaSpecs\":{"
		"\"worker\":{\"replicas\":4,\"resources\":{\"cpu\":4,\"memory\":\"8Gi\"}}}}}";
	if (rv_test_http(&brain, "POST", "/v1/jobs", doc, NULL, &r) < 0 || r.status != 201) {
		fprintf(stderr, "brain_load: could not register a job\n");
		goto out;
	}
	char uid[64];
	snprintf(uid, sizeof(uid), "%s", rv_test_json_str(r.json, "uid"));
	rv_test_reply_release(&r);

	/* Each wrk thread posts its own timestamps: two samples a batch. */
	FILE *f = fopen(lua, "w");
	if (!f)
		goto out;
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
	fclose(f);

	char url[256];
	struct wrk_result rb, rg, rp;
	snprintf(url, sizeof(url), "%s/v1/jobs/%s/plan", brain.url, uid);
	if (run_wrk("get plan", url, NULL, secs, &rg) < 0)
		goto out;
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/", bare_port);
	if (run_wrk("bare", url, NULL, secs, &rb) < 0)
		goto out;
	snprintf(url, sizeof(url), "%s/v1/jobs/%s/metrics", brain.url, uid);
	if (run_wrk("post metrics", url, lua, secs, &rp) < 0)
		goto out;
	/* How many batches a commit carried: the group commit at work. */
	double commits = 0, batches = 0;
	if (rv_test_http(&brain, "GET", "/metrics", NULL, NULL, &r) == 0 && r.body) {
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
	fprintf(stderr, "brain_load: %.0f batches in %.0f commits\n", batches, commits);
	printf("bench=brain_load bare_rps=%.0f get_rps=%.0f get_p99_ms=%.1f post_rps=%.0f "
	       "post_p99_ms=%.1f errors=%ld\n",
	       rb.rps, rg.rps, rg.p99_ms, rp.rps, rp.p99_ms, rb.errors + rg.errors + rp.errors);
	fflush(stdout);
	status = 0;
out:
	rv_test_brain_stop(&brain, SIGTERM, 30);
	MHD_stop_daemon(bare);
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "brain_load: could not remove %s\n", dir);
	return status;
}
