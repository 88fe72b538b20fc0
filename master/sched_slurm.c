/*
 * sched_slurm.c: the "slurm" scheduler backend (see sched_slurm.h).
 *
 * The owner thread (the master's node thread) changes the node table under
 * s->mu and signals the worker; the worker thread does the HTTP (one curl
 * easy handle, only its own), applies what it learnt under s->mu, queues
 * events and writes the eventfd.  A node's request body is built by the
 * owner at launch, so the worker never reads a spec.  The version table
 * below is the one place that knows how each REST API version shapes its
 * JSON.
 */
#include "clock.h"
#include "sched_slurm.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "buf.h"
#include "json.h"
#include "log.h"

extern char **environ;

/* ---- the REST API versions and their JSON shapes ---- */

struct slurm_api {
	const char *version;
	bool env_list;      /* environment: ["K=V", ...] (else {"K": "V"}) */
	bool num_objects;   /* numbers with a "no value": {"set":true,"number":N} */
	bool script_in_job; /* the script in job.script (else at the top) */
	bool gpus_as_tres;  /* GPUs as tres_per_node "gres/gpu:N" (else gpus_per_node) */
	/* the key of the Slurm nodes a job keeps off: excluded_nodes (a list)
	 * from v0.0.40, exclude_nodes ("a,b") in v0.0.38 */
	bool exclude_list;
};

/* Newest first: the first the server offers is used.  v0.0.38: Slurm
 * 22.05 (Debian 12); v0.0.40-41: 24.05; v0.0.42: 24.11; v0.0.43: 25.05;
 * v0.0.44: 25.11.  From v0.0.40 environment is a list and numbers that may
 * be unset are objects; from v0.0.41 the script goes inside the job. */
static const struct slurm_api slurm_apis[] = {
	{ "v0.0.44", true, true, true, true, true },
	{ "v0.0.43", true, true, true, true, true },
	{ "v0.0.42", true, true, true, true, true },
	{ "v0.0.41", true, true, true, true, true },
	{ "v0.0.40", true, true, false, true, true },
	{ "v0.0.38", false, false, false, false, false },
};

/* ---- the backend ---- */

#define SL_LOST_MAX  32
#define SL_AVOID_MAX 40 /* Slurm nodes one job excludes, at most */

enum sl_state { SL_SUBMIT, SL_SUBMITTING, SL_QUEUED, SL_RUNNING, SL_DONE };

struct sl_node {
	char name[SCHED_NAME_MAX], role[SCHED_ROLE_MAX];
	char host[SCHED_NAME_MAX]; /* the Slurm node it runs on, once it ran */
	int rank;
	struct sched_resources res;
	char *body; /* the submit request (NULL once sent or for an adopted job) */
	int64_t job_id;
	enum sl_state st;
	bool started, removed, silent; /* silent: its end was already told */
	int cancel_sig;                /* a signal still to send, 0 none */
	int64_t kill_at;               /* monotonic ms of the SIGKILL after a remove, 0 none */
	int64_t queued_ms;             /* monotonic ms it was submitted */
	int misses;                    /* polls that did not list its job */
	int64_t restarts;              /* the job's restart_cnt when first seen, -1 not yet */
};

struct ev_ring {
	struct sched_event *ev;
	int head, n, cap;
};

struct sched_slurm {
	struct sched base;
	const struct slurm_api *api;
	char url[PATH_MAX], sock[PATH_MAX]; /* sock: unix socket path or "" */
	char token[2048], user[64], partition[64], account[64], job[64];
	char workdir[PATH_MAX], log_dir[PATH_MAX];
	int poll_ms, timeout_ms, max_nodes;
	int64_t pend_max_ms;
	CURL *curl; /* the worker's, and new()'s before the worker starts */
	int efd;
	pthread_t thread;
	bool thread_started, stop;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	struct sl_node *nodes;
	int nn;
	struct sched_resources shape; /* the partition's largest node, set before the thread */
	/* Slurm nodes that lost a node of ours: new jobs exclude them (from
	 * v0.0.40; Slurm itself keeps off a node while it is DOWN) */
	char lost[SL_LOST_MAX][SCHED_NAME_MAX];
	int nlost;
	struct ev_ring q;
};

static struct sched_slurm *to_sl(struct sched *s)
{
	return (struct sched_slurm *)s;
}

/* ---- HTTP (worker thread, or new() before it starts) ---- */

struct sl_buf {
	char *p;
	size_t n;
};

static size_t sl_write(char *data, size_t size, size_t nmemb, void *arg)
{
	struct sl_buf *b = arg;
	size_t add = size * nmemb;
	if (b->n + add > 64u << 20)
		return 0; /* a runaway answer: give up on it */
	char *p = realloc(b->p, b->n + add + 1);
	if (!p)
		return 0;
	memcpy(p + b->n, data, add);
	b->n += add;
	p[b->n] = 0;
	b->p = p;
	return add;
}

/* method on path (below the url); *status the HTTP status.  Returns the
 * parsed JSON answer (the caller frees it) or NULL with *rc a negative
 * errno and detail filled. */
static cJSON *sl_http_on(struct sched_slurm *s, CURL *c, const char *method, const char *path,
			 const char *body, long *status, int *rc, char *detail, size_t dsize);

static cJSON *sl_http(struct sched_slurm *s, const char *method, const char *path, const char *body,
		      long *status, int *rc, char *detail, size_t dsize)
{
	return sl_http_on(s, s->curl, method, path, body, status, rc, detail, dsize);
}

/* sl_http on handle c (the owner thread's own, for an adoption). */
static cJSON *sl_http_on(struct sched_slurm *s, CURL *c, const char *method, const char *path,
			 const char *body, long *status, int *rc, char *detail, size_t dsize)
{
	char url[PATH_MAX + 512];
	snprintf(url, sizeof(url), "%s%s", s->sock[0] ? "http://slurmrestd" : s->url, path);
	struct sl_buf b = { 0 };
	struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
	char tok[2100], usr[100];
	if (s->token[0]) {
		snprintf(tok, sizeof(tok), "X-SLURM-USER-TOKEN: %s", s->token);
		h = curl_slist_append(h, tok);
	}
	if (s->user[0]) {
		snprintf(usr, sizeof(usr), "X-SLURM-USER-NAME: %s", s->user);
		h = curl_slist_append(h, usr);
	}
	curl_easy_reset(c);
	curl_easy_setopt(c, CURLOPT_URL, url);
	if (s->sock[0])
		curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, s->sock);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	if (body)
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sl_write);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)s->timeout_ms);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)s->timeout_ms);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	CURLcode cc = curl_easy_perform(c);
	curl_slist_free_all(h);
	*status = 0;
	cJSON *doc = NULL;
	if (cc != CURLE_OK) {
		*rc = cc == CURLE_OPERATION_TIMEDOUT ? -ETIMEDOUT : -ECONNREFUSED;
		snprintf(detail, dsize, "%s %s: %s", method, path, curl_easy_strerror(cc));
	} else {
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
		doc = b.p ? cJSON_Parse(b.p) : NULL;
		*rc = doc ? 0 : -EPROTO;
		if (!doc)
			snprintf(detail, dsize, "%s %s: HTTP %ld: %.120s", method, path, *status,
				 b.p ? b.p : "no body");
	}
	free(b.p);
	return doc;
}

/* Slurm's first error text in doc's "errors", or NULL. */
static const char *sl_error(const cJSON *doc)
{
	const cJSON *e = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(doc, "errors"), 0);
	const cJSON *d = cJSON_GetObjectItemCaseSensitive(e, "description");
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(e, "error");
	if (cJSON_IsString(d) && d->valuestring[0])
		return d->valuestring;
	return cJSON_IsString(t) ? t->valuestring : NULL;
}

/* A number as any version writes it: N, or {"set":true,"number":N};
 * dflt when absent or unset. */
static int64_t sl_num(const cJSON *o, const char *key, int64_t dflt)
{
	const cJSON *v = key ? cJSON_GetObjectItemCaseSensitive(o, key) : o;
	if (cJSON_IsObject(v)) {
		const cJSON *set = cJSON_GetObjectItemCaseSensitive(v, "set");
		if (cJSON_IsFalse(set))
			return dflt;
		v = cJSON_GetObjectItemCaseSensitive(v, "number");
	}
	return cJSON_IsNumber(v) ? (int64_t)v->valuedouble : dflt;
}

/* ---- events (under s->mu) ---- */

static void ev_push(struct sched_slurm *s, const struct sl_node *n, struct sched_event *ev)
{
	struct ev_ring *q = &s->q;
	if (q->n == q->cap) {
		int cap = q->cap ? q->cap * 2 : 64;
		struct sched_event *p = malloc(sizeof(*p) * (size_t)cap);
		if (!p)
			return;
		for (int i = 0; i < q->n; i++)
			p[i] = q->ev[(q->head + i) % q->cap];
		free(q->ev);
		q->ev = p;
		q->head = 0;
		q->cap = cap;
	}
	snprintf(ev->name, sizeof(ev->name), "%s", n->name);
	snprintf(ev->role, sizeof(ev->role), "%s", n->role);
	ev->rank = n->rank;
	q->ev[(q->head + q->n) % q->cap] = *ev;
	q->n++;
	uint64_t one = 1;
	if (write(s->efd, &one, sizeof(one)) < 0) {
		/* the counter is full: the owner is woken anyway */
	}
}

/* The node's end: told once, then its slot is freed. */
static void node_end(struct sched_slurm *s, struct sl_node *n, struct sched_event *ev)
{
	if (!n->silent) {
		ev->removed = ev->removed || n->removed;
		ev_push(s, n, ev);
	}
	free(n->body);
	*n = s->nodes[--s->nn];
}

/* A Slurm node lost one of ours; under s->mu. */
static void host_lost(struct sched_slurm *s, const char *host)
{
	if (!host[0] || s->nlost >= SL_LOST_MAX)
		return;
	for (int i = 0; i < s->nlost; i++)
		if (!strcmp(s->lost[i], host))
			return;
	snprintf(s->lost[s->nlost++], SCHED_NAME_MAX, "%s", host);
}

/* ---- requests (worker thread, s->mu not held) ---- */

static char *exclude_fit(struct sched_slurm *s, char *body, char *note, size_t nsize);

static void sl_submit(struct sched_slurm *s, int i)
{
	char *body = s->nodes[i].body;
	char name[SCHED_NAME_MAX];
	snprintf(name, sizeof(name), "%s", s->nodes[i].name);
	s->nodes[i].body = NULL;
	s->nodes[i].st = SL_SUBMITTING;
	pthread_mutex_unlock(&s->mu);
	char path[64], detail[SCHED_DETAIL_MAX] = "", note[SCHED_DETAIL_MAX] = "";
	body = exclude_fit(s, body, note, sizeof(note));
	if (note[0])
		rv_log_warn("slurm exclusion dropped", "node=%s reason=\"%s\"", name, note);
	snprintf(path, sizeof(path), "/slurm/%s/job/submit", s->api->version);
	long status = 0;
	int rc = 0;
	RV_CLEANUP_CJSON cJSON *doc =
		sl_http(s, "POST", path, body, &status, &rc, detail, sizeof(detail));
	free(body);
	int64_t id = sl_num(doc, "job_id", 0);
	const char *why = sl_error(doc);
	if (rc == 0 && (id <= 0 || status >= 300)) {
		rc = -EINVAL;
		snprintf(detail, sizeof(detail), "slurm refused the job (HTTP %ld): %.200s", status,
			 why ? why : "no job id");
	}
	pthread_mutex_lock(&s->mu);
	for (int k = 0; k < s->nn; k++) {
		struct sl_node *n = &s->nodes[k];
		if (strcmp(n->name, name) != 0 || n->st != SL_SUBMITTING)
			continue;
		if (rc < 0) {
			struct sched_event ev = { .type = SCHED_EV_FAILED, .err = rc };
			snprintf(ev.detail, sizeof(ev.detail), "%s", detail);
			node_end(s, n, &ev);
			return;
		}
		n->job_id = id;
		n->st = SL_QUEUED;
		n->queued_ms = rv_mono_ms();
	}
}

static void sl_cancel(struct sched_slurm *s, int i)
{
	struct sl_node *n = &s->nodes[i];
	char path[128], detail[SCHED_DETAIL_MAX];
	snprintf(path, sizeof(path), "/slurm/%s/job/%" PRId64 "?signal=%s", s->api->version,
		 n->job_id, n->cancel_sig == SIGKILL ? "SIGKILL" : "SIGTERM");
	n->cancel_sig = 0;
	pthread_mutex_unlock(&s->mu);
	long status;
	int rc;
	cJSON *doc = sl_http(s, "DELETE", path, NULL, &status, &rc, detail, sizeof(detail));
	cJSON_Delete(doc);
	pthread_mutex_lock(&s->mu);
}

/* ---- job states (under s->mu) ---- */

/* The job's state name, as either shape writes it: "RUNNING" or ["RUNNING", ...]. */
static const char *sl_state_of(const cJSON *j)
{
	const cJSON *st = cJSON_GetObjectItemCaseSensitive(j, "job_state");
	if (cJSON_IsArray(st))
		st = cJSON_GetArrayItem(st, 0);
	return cJSON_IsString(st) ? st->valuestring : "";
}

/* Exit code and signal: v0.0.38 gives the wait status; v0.0.40 on an object
 * {"return_code":N,"signal":{"id":N}}. */
static void sl_exit_of(const cJSON *j, struct sched_event *ev)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(j, "exit_code");
	int code = 0, sig = 0;
	if (cJSON_IsObject(x)) {
		code = (int)sl_num(x, "return_code", 0);
		sig = (int)sl_num(cJSON_GetObjectItemCaseSensitive(x, "signal"), "id", 0);
	} else {
		int w = (int)sl_num(j, "exit_code", 0);
		code = (w >> 8) & 0xff;
		sig = w & 0x7f;
	}
	ev->exit_code = sig ? -1 : code;
	ev->signal = sig;
}

static bool sl_in(const char *st, const char *const *set)
{
	for (; *set; set++)
		if (!strcmp(st, *set))
			return true;
	return false;
}

/* A job left pending too long: cancelled, and FAILED naming Slurm's reason. */
static void sl_pend_check(struct sched_slurm *s, struct sl_node *n, const cJSON *j)
{
	int64_t waited = rv_mono_ms() - n->queued_ms;
	if (!s->pend_max_ms || n->started || n->removed || waited < s->pend_max_ms)
		return;
	const cJSON *r = cJSON_GetObjectItemCaseSensitive(j, "state_reason");
	struct sched_event ev = { .type = SCHED_EV_FAILED, .err = -ETIMEDOUT };
	snprintf(ev.detail, sizeof(ev.detail),
		 "slurm job %" PRId64 " still pending after %" PRId64 " s: reason %s", n->job_id,
		 waited / 1000, cJSON_IsString(r) ? r->valuestring : "?");
	ev_push(s, n, &ev);
	n->silent = true;
	n->removed = true;
	n->cancel_sig = SIGKILL;
}

static void sl_started(struct sched_slurm *s, struct sl_node *n, const cJSON *j)
{
	const cJSON *h = cJSON_GetObjectItemCaseSensitive(j, "nodes");
	struct sched_event ev = { .type = SCHED_EV_STARTED };
	ev.pid = (int)n->job_id;
	ev.start_ticks = sl_num(j, "start_time", 1);
	snprintf(ev.host, sizeof(ev.host), "%s", cJSON_IsString(h) ? h->valuestring : "");
	n->started = true;
	snprintf(n->host, sizeof(n->host), "%s", ev.host);
	n->st = SL_RUNNING;
	if (!n->silent)
		ev_push(s, n, &ev);
}

/* Slurm requeued the job (its node failed, it was preempted): v0.0.38
 * ignores "requeue": false, and a clusters' JobRequeue may requeue anyway.
 * The node is lost: told so, and the requeued job killed unheard. */
static bool sl_requeued(struct sched_slurm *s, struct sl_node *n, const cJSON *j, const char *st)
{
	int64_t rc = sl_num(j, "restart_cnt", 0);
	if (n->restarts < 0)
		n->restarts = rc;
	bool again = rc > n->restarts ||
		     (n->started && (!strcmp(st, "PENDING") || !strncmp(st, "REQUEUE", 7)));
	if (!again || n->removed)
		return false;
	struct sched_event ev = { .type = SCHED_EV_EXITED, .lost = true, .exit_code = -1 };
	ev.signal = SIGKILL;
	ev.memory_limit_mb = n->res.memory_mb;
	snprintf(ev.host, sizeof(ev.host), "%s", n->host);
	snprintf(ev.detail, sizeof(ev.detail),
		 "slurm requeued job %" PRId64 " from %s (its node failed or it was preempted)",
		 n->job_id, n->host[0] ? n->host : "?");
	host_lost(s, n->host);
	ev_push(s, n, &ev);
	n->silent = true;
	n->removed = true;
	n->cancel_sig = SIGKILL;
	return true;
}

/* Apply job j's state to node k; returns 1 when the node ended (its slot
 * now holds another node). */
static int sl_apply(struct sched_slurm *s, int k, const cJSON *j)
{
	static const char *const running[] = { "RUNNING", "COMPLETING", "SUSPENDED", "STOPPED",
					       NULL };
	static const char *const lost[] = { "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", NULL };
	static const char *const ended[] = { "COMPLETED", "FAILED",       "CANCELLED", "TIMEOUT",
					     "DEADLINE",  "SPECIAL_EXIT", NULL };
	struct sl_node *n = &s->nodes[k];
	const char *st = sl_state_of(j);
	const cJSON *h = cJSON_GetObjectItemCaseSensitive(j, "nodes");
	struct sched_event ev = { .type = SCHED_EV_EXITED };
	snprintf(ev.host, sizeof(ev.host), "%s", cJSON_IsString(h) ? h->valuestring : "");
	n->misses = 0;
	if (sl_requeued(s, n, j, st))
		return 0;
	if (sl_in(st, running) && !n->started)
		sl_started(s, n, j);
	if (!strcmp(st, "PENDING") || !strcmp(st, "CONFIGURING"))
		sl_pend_check(s, n, j);
	if (sl_in(st, running) || !strcmp(st, "PENDING") || !strcmp(st, "CONFIGURING") || !st[0] ||
	    !strncmp(st, "REQUEUE", 7) || !strcmp(st, "RESIZING"))
		return 0;
	if (!strcmp(st, "OUT_OF_MEMORY")) {
		ev.type = SCHED_EV_OOM;
		ev.signal = SIGKILL;
		ev.exit_code = -1;
		ev.memory_limit_mb = n->res.memory_mb;
	} else if (sl_in(st, lost)) {
		ev.lost = true;
		host_lost(s, ev.host[0] ? ev.host : n->host);
		ev.exit_code = -1;
		ev.signal = SIGKILL;
	} else {
		sl_exit_of(j, &ev);
		if (!strcmp(st, "CANCELLED") && !ev.signal && ev.exit_code == 0)
			ev.signal = SIGTERM, ev.exit_code = -1;
		if ((!strcmp(st, "TIMEOUT") || !strcmp(st, "DEADLINE")) && !ev.signal)
			ev.signal = SIGKILL, ev.exit_code = -1;
		if (!sl_in(st, ended) && !ev.signal && ev.exit_code == 0)
			ev.exit_code = 1; /* a state not known here: not a success */
	}
	ev.memory_limit_mb = n->res.memory_mb;
	snprintf(ev.detail, sizeof(ev.detail), "slurm job %" PRId64 " %s on %s", n->job_id, st,
		 ev.host[0] ? ev.host : "no node");
	node_end(s, n, &ev);
	return 1;
}

/* A job the server no longer lists (purged after MinJobAge, or never
 * known): after three polls it ended, how is not known. */
static int sl_missing(struct sched_slurm *s, int k)
{
	struct sl_node *n = &s->nodes[k];
	if (++n->misses < 3)
		return 0;
	struct sched_event ev = { .type = SCHED_EV_EXITED, .exit_code = -1, .signal = SIGKILL };
	ev.status_unknown = true;
	snprintf(ev.detail, sizeof(ev.detail), "slurm job %" PRId64 " is no longer listed",
		 n->job_id);
	node_end(s, n, &ev);
	return 1;
}

/* One job's state, asked for by its id (never the whole cluster's list):
 * 1 with *out (the caller frees it), 0 when Slurm does not know the job
 * (purged), -1 when slurmrestd did not answer.  s->mu not held. */
static int sl_job_get(struct sched_slurm *s, int64_t id, cJSON **out)
{
	char path[96], detail[SCHED_DETAIL_MAX];
	snprintf(path, sizeof(path), "/slurm/%s/job/%" PRId64, s->api->version, id);
	long status;
	int rc;
	cJSON *doc = sl_http(s, "GET", path, NULL, &status, &rc, detail, sizeof(detail));
	const cJSON *jobs = cJSON_GetObjectItemCaseSensitive(doc, "jobs"), *j;
	*out = NULL;
	cJSON_ArrayForEach(j, jobs) if (sl_num(j, "job_id", 0) == id && !*out) *out =
		cJSON_DetachItemViaPointer((cJSON *)jobs, (cJSON *)j);
	bool answered = rc == 0 && status > 0 && (cJSON_IsArray(jobs) || sl_error(doc));
	cJSON_Delete(doc);
	return *out ? 1 : answered ? 0 : -1;
}

/* Each job of ours in flight, one request each; under s->mu (dropped
 * around each request). */
static void sl_poll(struct sched_slurm *s)
{
	int n = 0;
	int64_t *ids = malloc(sizeof(*ids) * (size_t)(s->nn ? s->nn : 1));
	for (int k = 0; ids && k < s->nn; k++)
		if ((s->nodes[k].st == SL_QUEUED || s->nodes[k].st == SL_RUNNING) &&
		    s->nodes[k].job_id > 0)
			ids[n++] = s->nodes[k].job_id;
	for (int i = 0; i < n && !s->stop; i++) {
		pthread_mutex_unlock(&s->mu);
		cJSON *j = NULL;
		int got = sl_job_get(s, ids[i], &j);
		pthread_mutex_lock(&s->mu);
		for (int k = 0; got >= 0 && k < s->nn; k++) {
			struct sl_node *nd = &s->nodes[k];
			if (nd->job_id != ids[i] || (nd->st != SL_QUEUED && nd->st != SL_RUNNING))
				continue;
			if (j)
				sl_apply(s, k, j);
			else
				sl_missing(s, k);
			break;
		}
		cJSON_Delete(j);
	}
	free(ids);
}

/* The next request to make (index, and whether a cancel), -1 none. */
static int sl_next_work(struct sched_slurm *s, bool *cancel, int64_t *wake)
{
	int64_t now = rv_mono_ms();
	for (int i = 0; i < s->nn; i++) {
		struct sl_node *n = &s->nodes[i];
		if (n->kill_at && now >= n->kill_at && n->job_id > 0) {
			n->kill_at = 0;
			n->cancel_sig = SIGKILL;
		}
		if (n->kill_at && n->kill_at < *wake)
			*wake = n->kill_at;
		if (n->st == SL_SUBMIT) {
			*cancel = false;
			return i;
		}
		if (n->cancel_sig && n->job_id > 0) {
			*cancel = true;
			return i;
		}
	}
	return -1;
}

static void *sl_main(void *arg)
{
	struct sched_slurm *s = arg;
	int64_t next_poll = 0;
	pthread_mutex_lock(&s->mu);
	while (!s->stop) {
		int64_t wake = next_poll;
		bool cancel = false;
		int i = sl_next_work(s, &cancel, &wake);
		if (i >= 0) {
			if (cancel)
				sl_cancel(s, i);
			else
				sl_submit(s, i);
			continue;
		}
		int64_t now = rv_mono_ms();
		if (now >= next_poll) {
			if (s->nn > 0)
				sl_poll(s);
			next_poll = rv_mono_ms() + s->poll_ms;
			continue;
		}
		struct timespec ts;
		rv_mono_timespec(&ts, rv_mono_ms() + (wake - now));
		pthread_cond_timedwait(&s->cond, &s->mu, &ts);
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

/* ---- the submit request (owner thread) ---- */

/* 'a' quoted for sh; appended to b. */
static void sh_quote(struct rv_buf *b, const char *a)
{
	rv_buf_append(b, "'", 1);
	for (const char *p = a; *p; p++) {
		if (*p == '\'')
			rv_buf_append(b, "'\\''", 4);
		else
			rv_buf_append(b, p, 1);
	}
	rv_buf_append(b, "' ", 2);
}

static void env_add(const struct slurm_api *api, cJSON *env, const char *kv)
{
	const char *eq = strchr(kv, '=');
	if (!eq || eq == kv)
		return;
	if (api->env_list) {
		cJSON_AddItemToArray(env, cJSON_CreateString(kv));
		return;
	}
	char key[256];
	snprintf(key, sizeof(key), "%.*s", (int)(eq - kv < 255 ? eq - kv : 255), kv);
	cJSON_DeleteItemFromObjectCaseSensitive(env, key);
	cJSON_AddStringToObject(env, key, eq + 1);
}

/* Our environment without Slurm's own (a master inside an allocation must
 * not hand its SLURM_* to the jobs), then the node's. */
static cJSON *env_build(const struct slurm_api *api, const char *const *add)
{
	cJSON *env = api->env_list ? cJSON_CreateArray() : cJSON_CreateObject();
	for (char **e = environ; env && e && *e; e++)
		if (strncmp(*e, "SLURM_", 6) != 0)
			env_add(api, env, *e);
	for (; env && add && *add; add++)
		env_add(api, env, *add);
	return env;
}

static void num_add(const struct slurm_api *api, cJSON *o, const char *key, int64_t v)
{
	if (!api->num_objects) {
		cJSON_AddNumberToObject(o, key, (double)v);
		return;
	}
	cJSON *n = cJSON_AddObjectToObject(o, key);
	cJSON_AddBoolToObject(n, "set", true);
	cJSON_AddBoolToObject(n, "infinite", false);
	cJSON_AddNumberToObject(n, "number", (double)v);
}

static void res_add(const struct slurm_api *api, cJSON *job, const struct sched_resources *r)
{
	int cpus = r->cpu > 0 ? (int)(r->cpu + 0.999) : 1;
	cJSON_AddNumberToObject(job, "cpus_per_task", cpus);
	if (r->memory_mb > 0)
		num_add(api, job, "memory_per_node", r->memory_mb);
	if (r->gpu > 0) {
		char g[32];
		snprintf(g, sizeof(g), api->gpus_as_tres ? "gres/gpu:%d" : "%d", r->gpu);
		cJSON_AddStringToObject(job, api->gpus_as_tres ? "tres_per_node" : "gpus_per_node",
					g);
	}
}

static bool name_in(const char *const *names, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(names[i], name))
			return true;
	return false;
}

/* The Slurm nodes the job keeps off (those that lost a node of ours, then
 * the spec's avoid list: a straggler's or crashed node's host, bad hosts),
 * at most SL_AVOID_MAX: excluded_nodes, or v0.0.38's exclude_nodes "a,b". */
static void exclude_add(struct sched_slurm *s, cJSON *job, const char *const *avoid)
{
	const char *names[SL_AVOID_MAX];
	int n = 0;
	pthread_mutex_lock(&s->mu);
	for (int i = 0; i < s->nlost && n < SL_AVOID_MAX; i++)
		names[n++] = s->lost[i]; /* s->lost only grows: the strings stay */
	pthread_mutex_unlock(&s->mu);
	for (int i = 0; avoid && avoid[i] && n < SL_AVOID_MAX; i++)
		if (avoid[i][0] && !strchr(avoid[i], ',') && !name_in(names, n, avoid[i]))
			names[n++] = avoid[i];
	if (!n)
		return;
	if (s->api->exclude_list) {
		cJSON *x = cJSON_AddArrayToObject(job, "excluded_nodes");
		for (int i = 0; x && i < n; i++)
			cJSON_AddItemToArray(x, cJSON_CreateString(names[i]));
		return;
	}
	struct rv_buf b = { 0 };
	for (int i = 0; i < n; i++)
		rv_buf_printf(&b, "%s%s", i ? "," : "", names[i]);
	cJSON_AddStringToObject(job, "exclude_nodes", b.data ? b.data : "");
	rv_buf_release(&b);
}

/* The job's exclusion as a list of names in out (at most max); returns
 * the count. */
static int exclude_names(const cJSON *job, char out[][SCHED_NAME_MAX], int max)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(job, "excluded_nodes"), *it;
	int n = 0;
	if (cJSON_IsArray(x)) {
		cJSON_ArrayForEach(it, x) if (cJSON_IsString(it) && n < max)
			snprintf(out[n++], SCHED_NAME_MAX, "%s", it->valuestring);
		return n;
	}
	x = cJSON_GetObjectItemCaseSensitive(job, "exclude_nodes");
	const char *p = cJSON_GetStringValue(x);
	while (p && *p && n < max) {
		size_t k = strcspn(p, ",");
		snprintf(out[n++], SCHED_NAME_MAX, "%.*s", (int)k, p);
		p += k + (p[k] == ',');
	}
	return n;
}

/* Would the exclusion in body leave no Slurm node of the partition?  Then
 * it goes (a job that can never run helps nobody) and the detail says so.
 * Worker thread, s->mu not held.  Returns body, or a new one (the old
 * freed). */
/* GET /nodes: the cluster's nodes (the caller frees the answer), NULL when
 * Slurm did not say. */
static cJSON *sl_nodes_get(struct sched_slurm *s)
{
	char path[64], detail[SCHED_DETAIL_MAX];
	snprintf(path, sizeof(path), "/slurm/%s/nodes", s->api->version);
	long status = 0;
	int rc = 0;
	cJSON *doc = sl_http(s, "GET", path, NULL, &status, &rc, detail, sizeof(detail));
	if (rc < 0 || !cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(doc, "nodes"))) {
		cJSON_Delete(doc);
		return NULL;
	}
	return doc;
}

/* A node's name when it is in our partition (any without one), else NULL. */
static const char *sl_node_ours(const struct sched_slurm *s, const cJSON *it)
{
	const char *nm = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "name"));
	const cJSON *parts = cJSON_GetObjectItemCaseSensitive(it, "partitions"), *p;
	bool in = !s->partition[0];
	cJSON_ArrayForEach(p, parts)
		in = in || !strcmp(cJSON_GetStringValue(p) ? p->valuestring : "", s->partition);
	return in ? nm : NULL;
}

static char *exclude_fit(struct sched_slurm *s, char *body, char *note, size_t nsize)
{
	RV_CLEANUP_CJSON cJSON *root = cJSON_Parse(body);
	cJSON *job = cJSON_GetObjectItemCaseSensitive(root, "job");
	char names[SL_AVOID_MAX][SCHED_NAME_MAX];
	int n = exclude_names(job, names, SL_AVOID_MAX);
	if (n == 0)
		return body;
	RV_CLEANUP_CJSON cJSON *doc = sl_nodes_get(s);
	const cJSON *it;
	if (!doc)
		return body; /* not known: Slurm says so itself if nothing fits */
	int left = 0, all = 0;
	cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(doc, "nodes"))
	{
		const char *nm = sl_node_ours(s, it);
		if (!nm)
			continue;
		all++;
		bool out = false;
		for (int i = 0; i < n; i++)
			out = out || !strcmp(names[i], nm);
		left += !out;
	}
	if (left > 0 || all == 0)
		return body;
	cJSON_DeleteItemFromObjectCaseSensitive(job, "excluded_nodes");
	cJSON_DeleteItemFromObjectCaseSensitive(job, "exclude_nodes");
	snprintf(note, nsize,
		 "the exclusion would leave none of the %d Slurm node(s) of the partition: "
		 "not excluded",
		 all);
	char *again = cJSON_PrintUnformatted(root);
	if (!again)
		return body;
	free(body);
	return again;
}

/* The submit request of spec, malloc'd; NULL out of memory. */
static char *body_build(struct sched_slurm *s, const struct sched_node_spec *sp, const char *log)
{
	struct rv_buf script = { 0 };
	rv_buf_printf(&script, "#!/bin/sh\n# rover node %s\nexec ", sp->name);
	for (const char *const *a = sp->argv; *a; a++)
		sh_quote(&script, *a);
	rv_buf_append(&script, "\n", 1);
	RV_CLEANUP_CJSON cJSON *root = cJSON_CreateObject();
	cJSON *job = cJSON_AddObjectToObject(root, "job");
	char name[SCHED_NAME_MAX + 80];
	snprintf(name, sizeof(name), "rover-%s-%s", s->job, sp->name);
	cJSON_AddStringToObject(job, "name", name);
	cJSON_AddStringToObject(s->api->script_in_job ? job : root, "script",
				script.data ? script.data : "");
	rv_buf_release(&script);
	if (s->api->num_objects)
		cJSON_AddNumberToObject(job, "minimum_nodes", 1);
	else
		cJSON_AddNumberToObject(job, "nodes", 1);
	cJSON_AddNumberToObject(job, "tasks", 1);
	res_add(s->api, job, &sp->res);
	cJSON_AddBoolToObject(job, "requeue", false); /* a lost node is ours to relaunch */
	cJSON_AddStringToObject(job, "current_working_directory", s->workdir);
	cJSON_AddStringToObject(job, "standard_output", log);
	cJSON_AddStringToObject(job, "standard_error", log);
	if (s->partition[0])
		cJSON_AddStringToObject(job, "partition", s->partition);
	if (s->account[0])
		cJSON_AddStringToObject(job, "account", s->account);
	cJSON_AddItemToObject(job, "environment", env_build(s->api, sp->env));
	exclude_add(s, job, sp->avoid);
	return cJSON_PrintUnformatted(root);
}

/* ---- the operations (owner thread) ---- */

static struct sl_node *node_find(struct sched_slurm *s, const char *name)
{
	for (int i = 0; name && i < s->nn; i++)
		if (!strcmp(s->nodes[i].name, name) && !s->nodes[i].silent)
			return &s->nodes[i];
	return NULL;
}

/* Room for one more node, its name checked; under s->mu. */
static struct sl_node *node_new(struct sched_slurm *s, const struct sched_node_spec *sp,
				struct rv_err *err)
{
	if (!sp || !sp->name || !sp->name[0] || strlen(sp->name) >= SCHED_NAME_MAX)
		return rv_err_set(err, -EINVAL, "name", "a node needs a name of 1 to %d bytes",
				  SCHED_NAME_MAX - 1),
		       NULL;
	if (node_find(s, sp->name))
		return rv_err_set(err, -EEXIST, "name", "node \"%s\" is live", sp->name), NULL;
	if (s->nn >= s->max_nodes)
		return rv_err_set(err, -ENOSPC, "", "%d nodes live already", s->nn), NULL;
	struct sl_node *n = &s->nodes[s->nn++];
	memset(n, 0, sizeof(*n));
	snprintf(n->name, sizeof(n->name), "%s", sp->name);
	snprintf(n->role, sizeof(n->role), "%s", sp->role ? sp->role : "");
	n->rank = sp->rank;
	n->res = sp->res;
	n->restarts = -1;
	return n;
}

/* The node log made beforehand and open to everyone: the job writes it as
 * the Slurm user it runs as, who may not be us. */
static int log_prepare(const char *path, struct rv_err *err)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
	if (fd < 0)
		return rv_err_set(err, -errno, "log_path", "could not open \"%s\": %s", path,
				  strerror(errno));
	int rc = fchmod(fd, 0666);
	close(fd);
	return rc < 0 ? rv_err_set(err, -errno, "log_path", "could not chmod \"%s\"", path) : 0;
}

static int sl_launch(struct sched *b, const struct sched_node_spec *sp, struct rv_err *err)
{
	struct sched_slurm *s = to_sl(b);
	if (!sp || !sp->argv || !sp->argv[0])
		return rv_err_set(err, -EINVAL, "argv", "a node needs a command");
	char log[PATH_MAX];
	if (sp->log_path && sp->log_path[0])
		snprintf(log, sizeof(log), "%s", sp->log_path);
	else
		snprintf(log, sizeof(log), "%.3000s/%s.log", s->log_dir, sp->name);
	int rc = log_prepare(log, err);
	if (rc < 0)
		return rc;
	char *body = body_build(s, sp, log);
	if (!body)
		return rv_err_set(err, -ENOMEM, "", "out of memory");
	pthread_mutex_lock(&s->mu);
	struct sl_node *n = node_new(s, sp, err);
	if (n) {
		n->body = body;
		n->st = SL_SUBMIT;
		pthread_cond_signal(&s->cond);
	}
	pthread_mutex_unlock(&s->mu);
	if (!n)
		free(body);
	return n ? 0 : err->code;
}

static int sl_remove(struct sched *b, const char *name, int grace_ms)
{
	struct sched_slurm *s = to_sl(b);
	pthread_mutex_lock(&s->mu);
	struct sl_node *n = node_find(s, name);
	if (n && !n->removed) {
		n->removed = true;
		n->cancel_sig = grace_ms > 0 ? SIGTERM : SIGKILL;
		n->kill_at = rv_mono_ms() + (grace_ms > 0 ? grace_ms : 0);
		pthread_cond_signal(&s->cond);
	}
	pthread_mutex_unlock(&s->mu);
	return n ? 0 : -ENOENT;
}

static int sl_resize(struct sched *b, const char *name, const struct sched_resources *res,
		     struct rv_err *err)
{
	(void)res;
	struct sched_slurm *s = to_sl(b);
	pthread_mutex_lock(&s->mu);
	bool live = node_find(s, name) != NULL;
	pthread_mutex_unlock(&s->mu);
	if (!live)
		return -ENOENT;
	return rv_err_set(err, -EOPNOTSUPP, "", "a Slurm job's limits are fixed: relaunch it");
}

static int sl_fd(struct sched *b)
{
	return to_sl(b)->efd;
}

static int sl_next_event(struct sched *b, struct sched_event *ev)
{
	struct sched_slurm *s = to_sl(b);
	uint64_t v;
	pthread_mutex_lock(&s->mu);
	int got = s->q.n > 0;
	if (got) {
		*ev = s->q.ev[s->q.head];
		s->q.head = (s->q.head + 1) % s->q.cap;
		s->q.n--;
	}
	if (s->q.n == 0 && read(s->efd, &v, sizeof(v)) < 0) {
		/* nothing was counted: fine */
	}
	pthread_mutex_unlock(&s->mu);
	return got;
}

static int sl_usage(struct sched *b, const char *name, struct sched_usage *u)
{
	(void)b;
	(void)name;
	(void)u;
	return -EOPNOTSUPP;
}

/* The newest job named rover-<job>-<instance>: a previous master that was
 * killed between its submit and journaling the job id left it (the name
 * is the instance's, so no other launch has it).  Its id, 0 when none, or
 * a negative errno (slurmrestd did not answer).  Owner thread: a curl
 * handle of its own. */
static int64_t sl_find_by_name(struct sched_slurm *s, const char *instance, struct rv_err *err)
{
	char name[SCHED_NAME_MAX + 80], path[64], detail[SCHED_DETAIL_MAX] = "";
	snprintf(name, sizeof(name), "rover-%s-%s", s->job, instance);
	snprintf(path, sizeof(path), "/slurm/%s/jobs", s->api->version);
	CURL *c = curl_easy_init();
	if (!c)
		return rv_err_set(err, -ENOMEM, "", "could not make a curl handle");
	long status = 0;
	int rc = 0;
	RV_CLEANUP_CJSON cJSON *doc =
		sl_http_on(s, c, "GET", path, NULL, &status, &rc, detail, sizeof(detail));
	curl_easy_cleanup(c);
	const cJSON *jobs = cJSON_GetObjectItemCaseSensitive(doc, "jobs"), *j;
	if (rc < 0 || !cJSON_IsArray(jobs))
		return rv_err_set(err, rc < 0 ? rc : -EPROTO, "slurm.url",
				  "could not list the Slurm jobs: %s", detail);
	int64_t id = 0;
	cJSON_ArrayForEach(j, jobs)
	{
		const char *n = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "name"));
		if (n && !strcmp(n, name) && sl_num(j, "job_id", 0) > id)
			id = sl_num(j, "job_id", 0);
	}
	return id;
}

/* Take back job pid (its Slurm job id) of a previous master, or with pid
 * 0 the job it submitted under the instance's name without journaling its
 * id: it is watched from the next poll on (STARTED once it runs, or its
 * end). */
static int sl_adopt(struct sched *b, const struct sched_node_spec *sp, int pid, int64_t start_ticks,
		    struct rv_err *err)
{
	(void)start_ticks;
	struct sched_slurm *s = to_sl(b);
	if (pid <= 0 && sp && sp->name) {
		int64_t id = sl_find_by_name(s, sp->name, err);
		if (id < 0)
			return (int)id;
		pid = (int)id;
	}
	if (pid <= 0)
		return rv_err_set(err, -ESRCH, "pid", "no Slurm job id, and no job named for it");
	pthread_mutex_lock(&s->mu);
	struct sl_node *n = node_new(s, sp, err);
	if (n) {
		n->job_id = pid;
		n->st = SL_QUEUED;
		n->queued_ms = rv_mono_ms();
		pthread_cond_signal(&s->cond);
	}
	pthread_mutex_unlock(&s->mu);
	return n ? 0 : err->code;
}

static void sl_free(struct sched *b)
{
	struct sched_slurm *s = to_sl(b);
	if (s->thread_started) {
		pthread_mutex_lock(&s->mu);
		s->stop = true;
		pthread_cond_signal(&s->cond);
		pthread_mutex_unlock(&s->mu);
		pthread_join(s->thread, NULL);
	}
	/* every node still known is killed (the worker has stopped: ours now) */
	for (int i = 0; s->curl && i < s->nn; i++) {
		pthread_mutex_lock(&s->mu);
		if (s->nodes[i].job_id > 0) {
			s->nodes[i].cancel_sig = SIGKILL;
			sl_cancel(s, i);
		}
		pthread_mutex_unlock(&s->mu);
	}
	for (int i = 0; i < s->nn; i++)
		free(s->nodes[i].body);
	if (s->curl)
		curl_easy_cleanup(s->curl);
	if (s->efd >= 0)
		close(s->efd);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cond);
	free(s->q.ev);
	free(s->nodes);
	free(s);
}

/* The largest node of the partition (at start: Slurm's nodes rarely grow
 * while a job runs); left 0 when Slurm does not say. */
static void sl_shape_learn(struct sched_slurm *s)
{
	RV_CLEANUP_CJSON cJSON *doc = sl_nodes_get(s);
	const cJSON *it;
	cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(doc, "nodes"))
	{
		if (!sl_node_ours(s, it))
			continue;
		int64_t mem = sl_num(it, "real_memory", 0), cpus = sl_num(it, "cpus", 0);
		if (mem > s->shape.memory_mb)
			s->shape.memory_mb = mem;
		if ((double)cpus > s->shape.cpu)
			s->shape.cpu = (double)cpus;
	}
}

static int sl_shape(struct sched *b, struct sched_resources *out)
{
	struct sched_slurm *s = to_sl(b);
	*out = s->shape;
	return s->shape.memory_mb > 0 || s->shape.cpu > 0 ? 0 : -EOPNOTSUPP;
}

static const struct sched_ops slurm_ops = {
	.name = "slurm",
	.launch = sl_launch,
	.remove = sl_remove,
	.resize = sl_resize,
	.fd = sl_fd,
	.next_event = sl_next_event,
	.usage = sl_usage,
	.adopt = sl_adopt,
	.free = sl_free,
	.shape = sl_shape,
};

/* ---- start ---- */

/* The newest version of slurm_apis[] the server's OpenAPI document has a
 * submit path for. */
static int sl_probe(struct sched_slurm *s, struct rv_err *err)
{
	static const char *const docs[] = { "/openapi/v3", "/openapi" };
	char detail[SCHED_DETAIL_MAX] = "";
	int rc = 0;
	for (size_t d = 0; d < RV_ARRAY_SIZE(docs); d++) {
		long status = 0;
		RV_CLEANUP_CJSON cJSON *doc =
			sl_http(s, "GET", docs[d], NULL, &status, &rc, detail, sizeof(detail));
		const cJSON *paths = cJSON_GetObjectItemCaseSensitive(doc, "paths");
		if (rc == -ECONNREFUSED || rc == -ETIMEDOUT)
			return rv_err_set(err, rc, "slurm.url", "could not reach slurmrestd: %s",
					  detail);
		for (size_t i = 0; paths && i < RV_ARRAY_SIZE(slurm_apis); i++) {
			char p[64];
			snprintf(p, sizeof(p), "/slurm/%s/job/submit", slurm_apis[i].version);
			if (cJSON_GetObjectItemCaseSensitive(paths, p)) {
				s->api = &slurm_apis[i];
				return 0;
			}
		}
		if (status == 401 || status == 403)
			return rv_err_set(err, -EACCES, "slurm.token",
					  "slurmrestd refused us (HTTP %ld): a token is needed",
					  status);
	}
	return rv_err_set(err, -EPROTONOSUPPORT, "slurm.url",
			  "slurmrestd offers no API version known here (v0.0.38, v0.0.40 to "
			  "v0.0.44)%s%s",
			  detail[0] ? ": " : "", detail);
}

static int sl_opts(struct sched_slurm *s, const struct sched_slurm_opts *o, struct rv_err *err)
{
	if (!o || !o->url || !o->url[0])
		return rv_err_set(err, -EINVAL, "slurm.url",
				  "the slurm scheduler needs slurmrestd's url (unix:/path or "
				  "http://host:port)");
	if (!strncmp(o->url, "unix:", 5))
		snprintf(s->sock, sizeof(s->sock), "%s", o->url + 5);
	else if (strncmp(o->url, "http://", 7) != 0 && strncmp(o->url, "https://", 8) != 0)
		return rv_err_set(err, -EINVAL, "slurm.url",
				  "slurm.url \"%s\" must be unix:/path or http(s)://host:port",
				  o->url);
	snprintf(s->url, sizeof(s->url), "%s", o->url);
	snprintf(s->token, sizeof(s->token), "%s", o->token ? o->token : "");
	snprintf(s->user, sizeof(s->user), "%s", o->user ? o->user : "");
	snprintf(s->partition, sizeof(s->partition), "%s", o->partition ? o->partition : "");
	snprintf(s->account, sizeof(s->account), "%s", o->account ? o->account : "");
	snprintf(s->job, sizeof(s->job), "%s", o->job && o->job[0] ? o->job : "job");
	if (o->workdir && o->workdir[0])
		snprintf(s->workdir, sizeof(s->workdir), "%s", o->workdir);
	else if (!getcwd(s->workdir, sizeof(s->workdir)))
		snprintf(s->workdir, sizeof(s->workdir), "/tmp");
	snprintf(s->log_dir, sizeof(s->log_dir), "%s", o->log_dir ? o->log_dir : ".");
	s->poll_ms = o->poll_ms > 0 ? o->poll_ms : 500;
	s->timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : 10000;
	s->max_nodes = o->max_nodes > 0 ? o->max_nodes : 1024;
	s->pend_max_ms = o->pend_max_ms > 0 ? o->pend_max_ms : 0;
	return 0;
}

struct sched *sched_slurm_new(const struct sched_slurm_opts *o, struct rv_err *err)
{
	struct sched_slurm *s = calloc(1, sizeof(*s));
	if (!s)
		return rv_err_set(err, -ENOMEM, "", "out of memory"), NULL;
	s->base.ops = &slurm_ops;
	s->efd = -1;
	pthread_mutex_init(&s->mu, NULL);
	rv_cond_init_mono(&s->cond);
	int rc = sl_opts(s, o, err);
	if (rc == 0 && !(s->nodes = calloc((size_t)s->max_nodes, sizeof(*s->nodes))))
		rc = rv_err_set(err, -ENOMEM, "", "out of memory");
	if (rc == 0 && (s->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
		rc = rv_err_set(err, -errno, "", "could not make an eventfd");
	if (rc == 0 && !(s->curl = curl_easy_init()))
		rc = rv_err_set(err, -ENOMEM, "", "could not make a curl handle");
	if (rc == 0)
		rc = sl_probe(s, err);
	if (rc == 0)
		sl_shape_learn(s);
	if (rc == 0 && pthread_create(&s->thread, NULL, sl_main, s) != 0)
		rc = rv_err_set(err, -EAGAIN, "", "could not start the slurm thread");
	if (rc < 0) {
		sl_free(&s->base);
		return NULL;
	}
	s->thread_started = true;
	return &s->base;
}

const char *sched_slurm_version(struct sched *b)
{
	return to_sl(b)->api->version;
}

int64_t sched_slurm_job_id(struct sched *b, const char *name)
{
	struct sched_slurm *s = to_sl(b);
	pthread_mutex_lock(&s->mu);
	const struct sl_node *n = node_find(s, name);
	int64_t id = n ? n->job_id : -1;
	pthread_mutex_unlock(&s->mu);
	return id;
}
