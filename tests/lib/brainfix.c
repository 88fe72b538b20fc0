/*
 * brainfix.c: start/stop the real rover-brain for integration tests (see
 * brainfix.h).  Runs in the test process (a check fork); the brain runs
 * through common/proc in its own process group.
 */
#include "brainfix.h"

#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "http.h"
#include "json.h"
#include "parse.h"
#include "pgfix.h"

static const char *bin_dir(void)
{
	const char *d = getenv("ROVER_BIN_DIR");
	return d && *d ? d : "build/bin";
}

static int start_brain(struct rv_test_brain *b, const char *const *wrap, const char *const *args);

/* Start; when the brain does not come up, its log goes to stderr so the test
 * output says why. */
int rv_test_brain_start(struct rv_test_brain *b, const char *const *args)
{
	return rv_test_brain_start_wrapped(b, NULL, args);
}

int rv_test_brain_start_wrapped(struct rv_test_brain *b, const char *const *wrap,
				const char *const *args)
{
	int rc = start_brain(b, wrap, args);
	if (rc < 0) {
		char *log = rv_test_read_file(b->log);
		fprintf(stderr, "rover-brain did not start (%s); its log:\n%s\n", strerror(-rc),
			log ? log : "(none)");
		free(log);
	}
	return rc;
}

/* A fresh database, then a brain on it with "--db" conninfo, args, extra. */
int rv_test_brain_start_fresh(struct rv_test_brain *b, int migrate, char *conninfo, size_t size,
			      const char *const *args, const char *const *extra)
{
	int rc = rv_test_pg_fresh_db(migrate, conninfo, size);
	if (rc != 0)
		return rc < 0 ? rc : -EIO;
	const char *argv[64] = { "--db", conninfo };
	int n = 2;
	for (int i = 0; args && args[i] && n < 63; i++)
		argv[n++] = args[i];
	for (int i = 0; extra && extra[i] && n < 63; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;
	return rv_test_brain_start(b, argv);
}

static int start_brain(struct rv_test_brain *b, const char *const *wrap, const char *const *args)
{
	memset(b, 0, sizeof(*b));
	b->proc.pidfd = -1;
	char tmpl[] = "/tmp/rover-brain-log-XXXXXX";
	int lfd = mkstemp(tmpl);
	if (lfd < 0)
		return -errno;
	snprintf(b->log, sizeof(b->log), "%s", tmpl);
	char exe[512];
	snprintf(exe, sizeof(exe), "%s/rover-brain", bin_dir());
	const char *argv[80];
	int n = 0;
	for (; wrap && *wrap && n < 16; wrap++)
		argv[n++] = *wrap;
	argv[n++] = exe;
	argv[n++] = "--listen";
	argv[n++] = "127.0.0.1:0";
	if (getenv("ROVER_SQL_DIR")) {
		argv[n++] = "--sql-dir";
		argv[n++] = getenv("ROVER_SQL_DIR");
	}
	for (int i = 0; args && args[i] && n < 78; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	bool wrapped = argv[0] != exe;
	struct rv_proc_opts o = {
		.argv = argv,
		.io = { { RV_PROC_NULL }, { RV_PROC_PIPE }, { RV_PROC_FD, lfd } },
		.pdeathsig = SIGKILL,
	};
	int rc = rv_proc_spawn(&b->proc, &o);
	if (rc < 0)
		dprintf(lfd, "could not run %s: %s\n", exe, strerror(-rc));
	close(lfd);
	if (rc < 0)
		return rc;
	b->pid = b->proc.pid;
	/* Its embedded PostgreSQL outlives a brain killed with the test
	 * process (SIGKILL, pdeathsig): a watchdog stops it then. */
	const char *data_dir = NULL;
	bool external = false;
	for (int i = 0; args && args[i]; i++) {
		if (strcmp(args[i], "--db") == 0)
			external = true;
		if (strcmp(args[i], "--data-dir") == 0 && args[i + 1])
			data_dir = args[i + 1];
	}
	if (data_dir && !external) {
		char pgdata[600];
		snprintf(pgdata, sizeof(pgdata), "%s/pgdata", data_dir);
		rv_test_pg_reaper(pgdata, NULL);
	}
	char addr[256];
	rc = rv_test_proc_listening(&b->proc, 30000, addr, sizeof(addr), NULL);
	if (rc == 0) {
		char *colon = strrchr(addr, ':');
		b->port = colon ? atoi(colon + 1) : 0;
		/* wrapped (another network namespace): the address it was told
		 * to listen on, not loopback */
		snprintf(b->url, sizeof(b->url), "http://%.*s:%d",
			 wrapped && colon ? (int)(colon - addr) : 9,
			 wrapped && colon ? addr : "127.0.0.1", b->port);
		return b->port > 0 ? 0 : -EPROTO;
	}
	if (rc == -ECHILD) {
		b->pid = 0;
		rv_proc_release(&b->proc);
		return -ECHILD;
	}
	rv_proc_kill(&b->proc, SIGKILL);
	rv_proc_wait(&b->proc, -1, NULL);
	rv_proc_release(&b->proc);
	b->pid = 0;
	return -ETIMEDOUT;
}

int rv_test_proc_listening(struct rv_proc *p, int timeout_ms, char *addr, size_t size, int *status)
{
	static const char mark[] = "listening on http://";
	char buf[512];
	size_t len = 0;
	int64_t until = rv_mono_ms() + timeout_ms;
	while (rv_mono_ms() < until) {
		if (len == sizeof(buf) - 1)
			len = 0; /* a line this long is not the one */
		struct pollfd pf = { .fd = p->fd[1], .events = POLLIN };
		bool ready = poll(&pf, 1, 100) > 0;
		ssize_t k = ready ? read(p->fd[1], buf + len, sizeof(buf) - len - 1) : -1;
		if (k > 0) {
			len += (size_t)k;
			buf[len] = 0;
			const char *l = strstr(buf, mark);
			const char *nl = l ? strchr(l, '\n') : NULL;
			if (nl) {
				l += strlen(mark);
				snprintf(addr, size, "%.*s", (int)(nl - l), l);
				rv_proc_close_fd(p, 1);
				return 0;
			}
		}
		/* at end of file its exit is due: wait for that a while */
		if (rv_proc_wait(p, ready && k == 0 ? 1000 : 0, status) != -ETIMEDOUT)
			return -ECHILD;
	}
	return -ETIMEDOUT;
}

int rv_test_brain_stop(struct rv_test_brain *b, int sig, int timeout_s)
{
	if (b->pid <= 0)
		return -ESRCH;
	int st = 0;
	int r = rv_proc_kill(&b->proc, sig ? sig : SIGTERM);
	if (r == 0 || r == -ESRCH)
		r = rv_proc_wait(&b->proc, timeout_s * 1000, &st);
	if (r == -ETIMEDOUT) {
		rv_proc_kill(&b->proc, SIGKILL);
		rv_proc_wait(&b->proc, -1, &st);
	}
	rv_proc_release(&b->proc);
	b->pid = 0;
	return r < 0 ? r : st;
}

int rv_test_http(const struct rv_test_brain *b, const char *method, const char *path,
		 const char *body, const char *token, struct rv_test_reply *out)
{
	memset(out, 0, sizeof(*out));
	struct rv_http_client *c = rv_http_client_new(token, 2000, 30000);
	if (!c)
		return -ENOMEM;
	char url[1024];
	snprintf(url, sizeof(url), "%s%s", b->url, path);
	struct rv_http_result res = { 0 };
	struct rv_err err = { 0 };
	int rc = rv_http_request(c, method, url, body, body ? strlen(body) : 0, 0, &res, &err);
	rv_http_client_free(c);
	if (rc < 0)
		return rc;
	out->status = res.status;
	out->body = res.body;
	if (res.body && res.body_len)
		out->json = cJSON_Parse(res.body);
	return 0;
}

void rv_test_reply_release(struct rv_test_reply *r)
{
	free(r->body);
	cJSON_Delete(r->json);
	memset(r, 0, sizeof(*r));
}

char *rv_test_read_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
	if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
		free(s);
		s = NULL;
	}
	if (s)
		s[n] = 0;
	fclose(f);
	return s;
}

const cJSON *rv_test_json_at(const cJSON *root, const char *dotted)
{
	char path[256];
	snprintf(path, sizeof(path), "%s", dotted);
	const cJSON *cur = root;
	char *save = NULL;
	for (char *tok = strtok_r(path, ".", &save); tok && cur; tok = strtok_r(NULL, ".", &save)) {
		if (cJSON_IsArray(cur))
			cur = cJSON_GetArrayItem(cur, atoi(tok));
		else
			cur = cJSON_GetObjectItemCaseSensitive(cur, tok);
	}
	return cur;
}

double rv_test_json_num(const cJSON *root, const char *dotted, double dflt)
{
	const cJSON *v = rv_test_json_at(root, dotted);
	return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

const char *rv_test_json_str(const cJSON *root, const char *dotted)
{
	const cJSON *v = rv_test_json_at(root, dotted);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

int rv_test_brain_wait_planned(const struct rv_test_brain *b, const char *uid, int64_t ts,
			       int tries)
{
	char path[160];
	snprintf(path, sizeof(path), "/v1/jobs/%s", uid);
	for (int i = 0; i < tries; i++) {
		struct rv_test_reply r;
		int rc = rv_test_http(b, "GET", path, NULL, NULL, &r);
		if (rc < 0)
			return rc;
		int64_t planned = (int64_t)rv_test_json_num(r.json, "planned_ts", 0);
		rv_test_reply_release(&r);
		if (planned >= ts)
			return 0;
		usleep(20000);
	}
	return -ETIMEDOUT;
}

long rv_test_brain_running_plan(const struct rv_test_brain *b, const char *uid, int64_t after,
				cJSON **plan)
{
	char path[200];
	snprintf(path, sizeof(path), "/v1/jobs/%s/plan?stage=running&after=%" PRId64, uid, after);
	struct rv_test_reply r;
	*plan = NULL;
	int rc = rv_test_http(b, "GET", path, NULL, NULL, &r);
	if (rc < 0)
		return rc;
	long status = r.status;
	if (status == 200) {
		*plan = r.json;
		r.json = NULL;
	}
	rv_test_reply_release(&r);
	return status;
}

void rv_test_brain_expect_planned(const struct rv_test_brain *b, const char *uid, int64_t ts,
				  int tries)
{
	int rc = rv_test_brain_wait_planned(b, uid, ts, tries);
	ck_assert_msg(rc == 0, "planned_ts never reached %" PRId64 ": %s", ts, strerror(-rc));
}

cJSON *rv_test_brain_expect_running_plan(const struct rv_test_brain *b, const char *uid,
					 int64_t after)
{
	cJSON *p;
	long st = rv_test_brain_running_plan(b, uid, after, &p);
	ck_assert_msg(st == 200 || st == 204, "plan: %ld", st);
	return p;
}

void rv_test_brain_register(const struct rv_test_brain *b, const char *doc, char *uid, size_t size)
{
	struct rv_test_reply r;
	ck_assert_int_eq(rv_test_http(b, "POST", "/v1/jobs", doc, NULL, &r), 0);
	ck_assert_msg(r.status == 201, "status %ld body %s", r.status, r.body);
	snprintf(uid, size, "%s", rv_test_json_str(r.json, "uid"));
	rv_test_reply_release(&r);
}

double rv_test_brain_job_num(const struct rv_test_brain *b, const char *uid, const char *key)
{
	char path[128];
	snprintf(path, sizeof(path), "/v1/jobs/%s", uid);
	struct rv_test_reply r;
	ck_assert_int_eq(rv_test_http(b, "GET", path, NULL, NULL, &r), 0);
	ck_assert_msg(r.status == 200, "status %ld body %s", r.status, r.body);
	double n = rv_test_json_num(r.json, key, -1);
	rv_test_reply_release(&r);
	return n;
}

long rv_test_brain_post_batch(const struct rv_test_brain *b, const char *uid, struct rv_buf *batch)
{
	rv_buf_puts(batch, "]}");
	char path[128];
	snprintf(path, sizeof(path), "/v1/jobs/%s/metrics", uid);
	struct rv_test_reply r;
	int rc = rv_buf_failed(batch) ? -ENOMEM
				      : rv_test_http(b, "POST", path, batch->data, NULL, &r);
	rv_buf_release(batch);
	if (rc < 0)
		return rc;
	long status = r.status;
	if (status != 200)
		fprintf(stderr, "metrics: %ld %s\n", status, r.body ? r.body : "");
	rv_test_reply_release(&r);
	return status;
}

/* The text after "series " in GET /metrics of b into *out: 0, -ENOENT when
 * /metrics (a status other than 200 included) has no such series, or the
 * request's negative errno; *status gets the reply's status. */
static int brainfix_metric_find(const struct rv_test_brain *b, const char *series, double *out,
				long *status)
{
	struct rv_test_reply r;
	int rc = rv_test_http(b, "GET", "/metrics", NULL, NULL, &r);
	if (rc < 0)
		return rc;
	*status = r.status;
	rc = -ENOENT;
	size_t n = strlen(series);
	for (const char *l = r.status == 200 ? r.body : NULL; l && *l;) {
		if (!strncmp(l, series, n) && l[n] == ' ') {
			*out = strtod(l + n + 1, NULL);
			rc = 0;
			break;
		}
		l = strchr(l, '\n');
		l = l ? l + 1 : NULL;
	}
	rv_test_reply_release(&r);
	return rc;
}

long long rv_test_brain_metric(const struct rv_test_brain *b, const char *series)
{
	double v;
	long status;
	int rc = brainfix_metric_find(b, series, &v, &status);
	return rc < 0 ? rc : (long long)v;
}

double rv_test_metric(const struct rv_test_brain *b, const char *series)
{
	double v;
	long status = 0;
	int rc = brainfix_metric_find(b, series, &v, &status);
	ck_assert_msg(rc == 0 || rc == -ENOENT, "could not get %s/metrics: %s", b->url,
		      strerror(-rc));
	ck_assert_int_eq(status, 200);
	return rc == 0 ? v : -1;
}
