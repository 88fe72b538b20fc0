/*
 * sched_k8s.c: the "k8s" scheduler backend (see sched_k8s.h): pods through
 * the Kubernetes API, a worker thread on a curl multi handle running the
 * creates, deletes, the list and the watch.
 *
 * Invariants, all under s->lock: a node is in the table from launch (or
 * adopt) until its end was queued as an event; the event queue is non-empty
 * exactly when the eventfd counter is non-zero; a node's created_seq is the
 * create count when its POST was answered, and a LIST sweeps (treats as
 * gone) only nodes created before the LIST was sent.  The worker owns the
 * multi handle, the requests and the watch position (rv).
 */
#include "sched_k8s.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "buf.h"
#include "cleanup.h"
#include "json.h"
#include "k8s_client.h"
#include "k8s_pod.h"
#include "log.h"
#include "parse.h"

#define MAX_INFLIGHT 64
#define WATCH_S      50 /* the server ends a watch after this */
#define BACKOFF_MAX  5000
#define TOKEN_EVERY  60000 /* re-read a token file this often, ms */

struct knode {
	char name[SCHED_NAME_MAX]; /* the instance */
	char pod[K8S_POD_NAME_MAX];
	char role[SCHED_ROLE_MAX];
	char container[SCHED_NAME_MAX];
	int rank;
	struct k8s_pod_track t;
	bool created; /* the POST was answered (or the pod adopted) */
	int64_t created_seq;
	bool delete_sent;
	int grace_s; /* a remove asked before the create was answered */
	bool delete_after_create;
	struct k8s_pod_state last;
	bool has_last;
	bool listed; /* seen in the LIST being read */
};

enum req_kind { REQ_CREATE, REQ_DELETE, REQ_LIST, REQ_WATCH };

struct req {
	enum req_kind kind;
	CURL *h;
	struct curl_slist *hdrs;
	char *body;
	struct rv_buf resp;
	struct sched_k8s *s;
	char node[SCHED_NAME_MAX];
	char pod[K8S_POD_NAME_MAX];
	int64_t seq; /* LIST: the create count when sent */
	bool gone;   /* WATCH: a 410 was seen in the stream */
	struct req *next;
};

struct cmd {
	enum req_kind kind; /* REQ_CREATE or REQ_DELETE */
	char node[SCHED_NAME_MAX];
	char pod[K8S_POD_NAME_MAX];
	char *body; /* CREATE: the pod */
	int grace_s;
	struct cmd *next;
};

struct sched_k8s {
	struct sched base;
	struct rv_k8s_conf conf;
	char job[64], ns[64], image[256], sched_name[128];
	char *tmpl_role[SCHED_K8S_MAX_TEMPLATES], *tmpl_json[SCHED_K8S_MAX_TEMPLATES];
	int ntmpl;
	int64_t max_pending_ms;
	int timeout_ms;
	bool can_resize;
	CURL *sync; /* the owner's handle: resize */
	int efd, wfd;
	pthread_t thread;
	bool started;
	atomic_bool stop;

	pthread_mutex_t lock;
	struct knode *nodes;
	int nnodes, capnodes;
	struct sched_event *evq;
	int nev, capev;
	struct cmd *cmds, **cmds_tail;
	int64_t create_seq;
	bool adopting;
	struct k8s_pod_state *found; /* the job's pods at start, until adoption ends */
	int nfound;
	int64_t token_at;

	/* the worker's own */
	CURLM *multi;
	struct req *reqs;
	int inflight;
	char rv[64];
	bool need_list, watching;
	int64_t next_watch_ms;
	int backoff_ms;
};

static struct sched_k8s *k8s(struct sched *s)
{
	return (struct sched_k8s *)s;
}

/* ---- requests ---- */

/* A configured easy handle (k8s_client.h) with the token read under the
 * lock: the owner reloads a rotated one. */
static CURL *easy_new(struct sched_k8s *s, const char *method, const char *url, const char *body,
		      const char *ctype, struct curl_slist **hdrs, long timeout_ms)
{
	char token[sizeof(s->conf.token)];
	pthread_mutex_lock(&s->lock);
	snprintf(token, sizeof(token), "%s", s->conf.token);
	pthread_mutex_unlock(&s->lock);
	return rv_k8s_easy_new(&s->conf, token, method, url, body, ctype, hdrs, timeout_ms);
}

/* The owner's (or new()'s) blocking call: status, body in *out. */
static int call_sync(struct sched_k8s *s, const char *method, const char *path, const char *body,
		     const char *ctype, long *status, struct rv_buf *out, struct rv_err *err)
{
	char token[sizeof(s->conf.token)];
	pthread_mutex_lock(&s->lock);
	snprintf(token, sizeof(token), "%s", s->conf.token);
	pthread_mutex_unlock(&s->lock);
	return rv_k8s_call(&s->conf, token, method, path, body, ctype, s->timeout_ms, status, out,
			   err);
}

/* ---- the node table and the event queue (s->lock held) ---- */

static struct knode *node_find(struct sched_k8s *s, const char *name)
{
	for (int i = 0; name && i < s->nnodes; i++)
		if (!strcmp(s->nodes[i].name, name))
			return &s->nodes[i];
	return NULL;
}

static struct knode *node_add(struct sched_k8s *s, const char *name)
{
	if (s->nnodes == s->capnodes) {
		int cap = s->capnodes ? s->capnodes * 2 : 32;
		struct knode *v = realloc(s->nodes, (size_t)cap * sizeof(*v));
		if (!v)
			return NULL;
		s->nodes = v;
		s->capnodes = cap;
	}
	struct knode *n = &s->nodes[s->nnodes++];
	memset(n, 0, sizeof(*n));
	snprintf(n->name, sizeof(n->name), "%s", name);
	return n;
}

static void node_drop(struct sched_k8s *s, struct knode *n)
{
	*n = s->nodes[--s->nnodes];
}

static void event_push(struct sched_k8s *s, const struct sched_event *ev)
{
	if (s->nev == s->capev) {
		int cap = s->capev ? s->capev * 2 : 64;
		struct sched_event *v = realloc(s->evq, (size_t)cap * sizeof(*v));
		if (!v)
			return; /* out of memory: a re-list brings it back */
		s->evq = v;
		s->capev = cap;
	}
	s->evq[s->nev++] = *ev;
	uint64_t one = 1;
	if (write(s->efd, &one, sizeof(one)) < 0) {
		/* the counter is full: the fd is readable anyway */
	}
}

static void cmd_push(struct sched_k8s *s, struct cmd *c)
{
	c->next = NULL;
	*s->cmds_tail = c;
	s->cmds_tail = &c->next;
	uint64_t one = 1;
	if (write(s->wfd, &one, sizeof(one)) < 0) {
		/* already awake */
	}
}

static void delete_queue(struct sched_k8s *s, const char *node, const char *pod, int grace_s)
{
	struct cmd *c = calloc(1, sizeof(*c));
	if (!c)
		return;
	c->kind = REQ_DELETE;
	snprintf(c->node, sizeof(c->node), "%s", node);
	snprintf(c->pod, sizeof(c->pod), "%s", pod);
	c->grace_s = grace_s;
	cmd_push(s, c);
}

/* A pod's state (NULL: gone) applied to its node: the events it means;
 * an ended node leaves the table and its pod is deleted. */
static void node_apply(struct sched_k8s *s, struct knode *n, const struct k8s_pod_state *st,
		       int64_t now)
{
	struct sched_event evs[2];
	if (st) {
		n->last = *st;
		n->has_last = true;
	}
	int k = k8s_pod_events(&n->t, st, n->name, now, s->max_pending_ms, evs);
	for (int i = 0; i < k; i++) {
		snprintf(evs[i].role, sizeof(evs[i].role), "%s", n->role);
		evs[i].rank = n->rank;
		event_push(s, &evs[i]);
	}
	if (!n->t.ended)
		return;
	if (st && !st->deleting && !n->delete_sent)
		delete_queue(s, n->name, n->pod, 0);
	node_drop(s, n);
}

/* A pod seen in a list or a watch (s->lock held).  While adoption runs,
 * a pod no node owns yet updates what sched_adopt will find. */
static struct knode *pod_seen_locked(struct sched_k8s *s, const struct k8s_pod_state *st,
				     bool deleted, int64_t now)
{
	struct knode *n = node_find(s, st->instance);
	if (n && !strcmp(n->pod, st->name)) {
		n->listed = true;
		node_apply(s, n, deleted ? NULL : st, now);
		return n;
	}
	if (n)
		return NULL; /* an older pod of a relaunched node */
	for (int i = 0; s->adopting && i < s->nfound; i++) {
		if (strcmp(s->found[i].name, st->name) != 0)
			continue;
		if (deleted)
			s->found[i] = s->found[--s->nfound];
		else
			s->found[i] = *st;
		return NULL;
	}
	if (!s->adopting && !deleted && !st->deleting)
		delete_queue(s, st->instance, st->name, 0); /* no node owns it */
	return NULL;
}

static void pod_seen(struct sched_k8s *s, const struct k8s_pod_state *st, bool deleted)
{
	int64_t now = rv_mono_ms();
	pthread_mutex_lock(&s->lock);
	pod_seen_locked(s, st, deleted, now);
	pthread_mutex_unlock(&s->lock);
}

/* ---- the worker: list, watch, commands ---- */

static void req_free(struct req *r)
{
	if (!r)
		return;
	if (r->h)
		curl_easy_cleanup(r->h);
	curl_slist_free_all(r->hdrs);
	free(r->body);
	rv_buf_release(&r->resp);
	free(r);
}

static struct req *req_start(struct sched_k8s *s, enum req_kind kind, const char *method,
			     const char *path, char *body, long timeout_ms)
{
	struct req *r = calloc(1, sizeof(*r));
	if (!r) {
		free(body);
		return NULL;
	}
	r->kind = kind;
	r->s = s;
	r->body = body;
	rv_buf_init(&r->resp);
	char url[1024];
	snprintf(url, sizeof(url), "%s%s", s->conf.server, path);
	r->h = easy_new(s, method, url, body, NULL, &r->hdrs, timeout_ms);
	if (!r->h) {
		req_free(r);
		return NULL;
	}
	curl_easy_setopt(r->h, CURLOPT_PRIVATE, r);
	curl_easy_setopt(r->h, CURLOPT_WRITEFUNCTION, rv_k8s_on_body);
	curl_easy_setopt(r->h, CURLOPT_WRITEDATA, &r->resp);
	r->next = s->reqs;
	s->reqs = r;
	s->inflight++;
	curl_multi_add_handle(s->multi, r->h);
	return r;
}

static void req_unlink(struct sched_k8s *s, struct req *r)
{
	for (struct req **p = &s->reqs; *p; p = &(*p)->next)
		if (*p == r) {
			*p = r->next;
			break;
		}
	curl_multi_remove_handle(s->multi, r->h);
	s->inflight--;
}

static void selector_path(struct sched_k8s *s, char *out, size_t size, const char *extra)
{
	snprintf(out, size, "/api/v1/namespaces/%s/pods?labelSelector=" K8S_LABEL_JOB "%%3D%s%s",
		 s->ns, s->job, extra);
}

static bool watch_line(void *arg, const char *line, size_t len)
{
	struct req *r = arg;
	struct sched_k8s *s = r->s;
	RV_CLEANUP_CJSON cJSON *j = cJSON_ParseWithLength(line, len);
	const char *type = cJSON_GetStringValue(cJSON_GetObjectItem(j, "type"));
	const cJSON *obj = cJSON_GetObjectItem(j, "object");
	if (!type || !obj)
		return true;
	if (!strcmp(type, "ERROR")) {
		const cJSON *code = cJSON_GetObjectItem(obj, "code");
		if (cJSON_IsNumber(code) && code->valueint == 410)
			r->gone = true;
		return !r->gone; /* a 410 ends the transfer: re-list */
	}
	const char *rv = cJSON_GetStringValue(
		cJSON_GetObjectItem(cJSON_GetObjectItem(obj, "metadata"), "resourceVersion"));
	if (strcmp(type, "BOOKMARK") != 0) {
		struct k8s_pod_state st;
		if (k8s_pod_parse(obj, &st) == 0 && st.instance[0])
			pod_seen(s, &st, !strcmp(type, "DELETED"));
	}
	/* Only after the change was applied: a cut before this line resumes
	 * from the version before it, and the change comes again. */
	if (rv)
		snprintf(s->rv, sizeof(s->rv), "%s", rv);
	return true;
}

/* Watch bytes: whole lines are events; a line cut short is never parsed. */
static size_t on_watch(char *p, size_t size, size_t n, void *arg)
{
	struct req *r = arg;
	return rv_k8s_lines(&r->resp, p, size * n, watch_line, r) == 0 ? size * n : 0;
}

static void watch_start(struct sched_k8s *s)
{
	char path[768], extra[160];
	if (s->need_list || !s->rv[0]) {
		selector_path(s, path, sizeof(path), "");
		struct req *r = req_start(s, REQ_LIST, "GET", path, NULL, s->timeout_ms * 3L);
		if (r) {
			pthread_mutex_lock(&s->lock);
			r->seq = s->create_seq;
			pthread_mutex_unlock(&s->lock);
			s->watching = true;
		}
		return;
	}
	snprintf(extra, sizeof(extra),
		 "&watch=1&allowWatchBookmarks=true&timeoutSeconds=%d&resourceVersion=%s", WATCH_S,
		 s->rv);
	selector_path(s, path, sizeof(path), extra);
	struct req *r = req_start(s, REQ_WATCH, "GET", path, NULL, (WATCH_S + 15) * 1000L);
	if (!r)
		return;
	curl_easy_setopt(r->h, CURLOPT_WRITEFUNCTION, on_watch);
	curl_easy_setopt(r->h, CURLOPT_WRITEDATA, r);
	s->watching = true;
}

/* A LIST's pods: each applied, and each node created before the LIST was
 * sent but missing from it is gone. */
static void list_done(struct sched_k8s *s, struct req *r, long code)
{
	RV_CLEANUP_CJSON cJSON *j = code == 200 ? cJSON_Parse(r->resp.data) : NULL;
	const char *rv = cJSON_GetStringValue(
		cJSON_GetObjectItem(cJSON_GetObjectItem(j, "metadata"), "resourceVersion"));
	if (!rv) {
		char m[256];
		rv_k8s_status_message(r->resp.data, code, m, sizeof(m));
		rv_log_warn("could not list the job's pods", "reason=\"%s\"", m);
		s->need_list = true;
		return;
	}
	int64_t now = rv_mono_ms();
	const cJSON *it;
	pthread_mutex_lock(&s->lock);
	for (int i = 0; i < s->nnodes; i++)
		s->nodes[i].listed = false;
	cJSON_ArrayForEach(it, cJSON_GetObjectItem(j, "items"))
	{
		struct k8s_pod_state st;
		if (k8s_pod_parse(it, &st) == 0 && st.instance[0])
			pod_seen_locked(s, &st, false, now);
	}
	/* backwards: an ended node's slot takes the last one, already seen */
	for (int i = s->nnodes - 1; i >= 0; i--) {
		struct knode *n = &s->nodes[i];
		if (!n->listed && n->created && n->created_seq <= r->seq)
			node_apply(s, n, NULL, now);
	}
	pthread_mutex_unlock(&s->lock);
	snprintf(s->rv, sizeof(s->rv), "%s", rv);
	s->need_list = false;
}

static void create_done(struct sched_k8s *s, struct req *r, long code)
{
	pthread_mutex_lock(&s->lock);
	struct knode *n = node_find(s, r->node);
	if (n && (code == 200 || code == 201)) {
		n->created = true;
		n->created_seq = ++s->create_seq;
		if (n->delete_after_create) {
			n->delete_sent = true;
			delete_queue(s, n->name, n->pod, n->grace_s);
		}
	} else if (n) {
		struct sched_event ev = { .type = SCHED_EV_FAILED, .rank = n->rank };
		snprintf(ev.name, sizeof(ev.name), "%s", n->name);
		snprintf(ev.role, sizeof(ev.role), "%s", n->role);
		ev.err = code ? rv_k8s_status_errno(code) : -ECONNREFUSED;
		if (code)
			rv_k8s_status_message(r->resp.data, code, ev.detail, sizeof(ev.detail));
		else
			snprintf(ev.detail, sizeof(ev.detail), "could not reach the API server");
		if (n->t.removing) {
			ev.type = SCHED_EV_EXITED;
			ev.removed = true;
			ev.exit_code = -1;
		}
		event_push(s, &ev);
		node_drop(s, n);
	}
	pthread_mutex_unlock(&s->lock);
}

static void delete_done(struct sched_k8s *s, struct req *r, long code)
{
	if (code == 200 || code == 202)
		return; /* the watch tells when it is gone */
	pthread_mutex_lock(&s->lock);
	struct knode *n = node_find(s, r->node);
	if (n && !strcmp(n->pod, r->pod)) {
		if (code == 404) {
			node_apply(s, n, NULL, rv_mono_ms());
		} else {
			n->delete_sent = false; /* asked again by the next remove */
			char m[256];
			rv_k8s_status_message(r->resp.data, code, m, sizeof(m));
			rv_log_warn("could not delete a pod", "pod=%s reason=\"%s\"", r->pod, m);
		}
	}
	pthread_mutex_unlock(&s->lock);
}

static void req_done(struct sched_k8s *s, struct req *r, CURLcode rc)
{
	long code = 0;
	curl_easy_getinfo(r->h, CURLINFO_RESPONSE_CODE, &code);
	if (rc != CURLE_OK && r->kind != REQ_WATCH)
		code = 0;
	switch (r->kind) {
	case REQ_CREATE:
		create_done(s, r, code);
		break;
	case REQ_DELETE:
		delete_done(s, r, code);
		break;
	case REQ_LIST:
		s->watching = false;
		list_done(s, r, code);
		break;
	case REQ_WATCH:
		s->watching = false;
		if (r->gone || code == 410) {
			s->need_list = true; /* too old: list again, at once */
			s->backoff_ms = 0;
			break;
		}
		if (rc == CURLE_OK && code == 200) {
			s->backoff_ms = 0; /* the server's timeout: resume at once */
			break;
		}
		s->backoff_ms = s->backoff_ms ? s->backoff_ms * 2 : 100;
		if (s->backoff_ms > BACKOFF_MAX)
			s->backoff_ms = BACKOFF_MAX;
		s->next_watch_ms = rv_mono_ms() + s->backoff_ms;
		rv_log_debug("pod watch ended", "rc=%d code=%ld backoff_ms=%d", (int)rc, code,
			     s->backoff_ms);
		break;
	}
	if (r->kind == REQ_LIST && s->need_list) {
		s->backoff_ms = s->backoff_ms ? s->backoff_ms * 2 : 200;
		if (s->backoff_ms > BACKOFF_MAX)
			s->backoff_ms = BACKOFF_MAX;
		s->next_watch_ms = rv_mono_ms() + s->backoff_ms;
	}
}

static void take_cmds(struct sched_k8s *s)
{
	while (s->inflight < MAX_INFLIGHT) {
		pthread_mutex_lock(&s->lock);
		struct cmd *c = s->cmds;
		if (c) {
			s->cmds = c->next;
			if (!s->cmds)
				s->cmds_tail = &s->cmds;
		}
		pthread_mutex_unlock(&s->lock);
		if (!c)
			return;
		char path[512];
		struct req *r;
		if (c->kind == REQ_CREATE) {
			snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods", s->ns);
			r = req_start(s, REQ_CREATE, "POST", path, c->body, s->timeout_ms);
		} else {
			snprintf(path, sizeof(path),
				 "/api/v1/namespaces/%s/pods/%s?gracePeriodSeconds=%d", s->ns,
				 c->pod, c->grace_s);
			r = req_start(s, REQ_DELETE, "DELETE", path, NULL, s->timeout_ms);
		}
		if (r) {
			snprintf(r->node, sizeof(r->node), "%s", c->node);
			snprintf(r->pod, sizeof(r->pod), "%s", c->pod);
		}
		free(c);
	}
}

/* Nodes waiting on the scheduler: their max wait runs without any change. */
static void check_pending(struct sched_k8s *s, int64_t now)
{
	pthread_mutex_lock(&s->lock);
	for (int i = s->nnodes - 1; i >= 0; i--) {
		struct knode *n = &s->nodes[i];
		if (n->t.unsched_since_ms && n->has_last && !n->t.ended) {
			struct k8s_pod_state st = n->last;
			node_apply(s, n, &st, now);
		}
	}
	if (s->conf.token_file[0] && now - s->token_at > TOKEN_EVERY) {
		rv_k8s_conf_token_reload(&s->conf);
		s->token_at = now;
	}
	pthread_mutex_unlock(&s->lock);
}

static void *worker(void *arg)
{
	struct sched_k8s *s = arg;
	while (!atomic_load(&s->stop)) {
		take_cmds(s);
		int64_t now = rv_mono_ms();
		if (!s->watching && now >= s->next_watch_ms)
			watch_start(s);
		int running = 0;
		curl_multi_perform(s->multi, &running);
		CURLMsg *msg;
		int left;
		while ((msg = curl_multi_info_read(s->multi, &left))) {
			if (msg->msg != CURLMSG_DONE)
				continue;
			struct req *r = NULL;
			curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&r);
			CURLcode rc = msg->data.result;
			req_unlink(s, r);
			req_done(s, r, rc);
			req_free(r);
		}
		check_pending(s, rv_mono_ms());
		struct curl_waitfd w = { .fd = s->wfd, .events = CURL_WAIT_POLLIN };
		int wait = s->watching ? 200 : 50;
		curl_multi_poll(s->multi, &w, 1, wait, NULL);
		if (w.revents) {
			uint64_t v;
			if (read(s->wfd, &v, sizeof(v)) < 0) {
				/* nothing to read: woken by curl */
			}
		}
	}
	return NULL;
}

/* ---- the sched.h operations (the owner thread) ---- */

static const char *template_for(struct sched_k8s *s, const char *role)
{
	for (int i = 0; i < s->ntmpl; i++)
		if (!strcmp(s->tmpl_role[i], role))
			return s->tmpl_json[i];
	return NULL;
}

static int k8s_launch(struct sched *b, const struct sched_node_spec *sp, struct rv_err *err)
{
	struct sched_k8s *s = k8s(b);
	const char *tmpl = template_for(s, sp->role);
	if (!tmpl && (!sp->argv || !sp->argv[0]))
		return rv_err_set(err, -EINVAL, "command",
				  "role %s has neither a pod template nor a command", sp->role);
	struct k8s_pod_args a = { .job = s->job,
				  .namespace_ = s->ns,
				  .template_json = tmpl,
				  .image = s->image,
				  .scheduler_name = s->sched_name,
				  .spec = sp };
	RV_CLEANUP_CJSON cJSON *pod = k8s_pod_build(&a, err);
	if (!pod)
		return err->code;
	struct k8s_pod_state st;
	k8s_pod_parse(pod, &st);
	struct cmd *c = calloc(1, sizeof(*c));
	char *body = cJSON_PrintUnformatted(pod);
	if (!c || !body) {
		free(c);
		free(body);
		return rv_err_set(err, -ENOMEM, "", "out of memory");
	}
	pthread_mutex_lock(&s->lock);
	struct knode *n = node_find(s, sp->name) ? NULL : node_add(s, sp->name);
	if (n) {
		snprintf(n->pod, sizeof(n->pod), "%s", st.name);
		snprintf(n->role, sizeof(n->role), "%s", sp->role);
		snprintf(n->container, sizeof(n->container), "%s", st.container);
		n->rank = sp->rank;
		c->kind = REQ_CREATE;
		snprintf(c->node, sizeof(c->node), "%s", sp->name);
		snprintf(c->pod, sizeof(c->pod), "%s", st.name);
		c->body = body;
		cmd_push(s, c);
	}
	pthread_mutex_unlock(&s->lock);
	if (n)
		return 0;
	free(c);
	free(body);
	return rv_err_set(err, -EEXIST, "name", "a live node is named %s", sp->name);
}

static int k8s_remove(struct sched *b, const char *name, int grace_ms)
{
	struct sched_k8s *s = k8s(b);
	pthread_mutex_lock(&s->lock);
	struct knode *n = node_find(s, name);
	if (n) {
		n->t.removing = true;
		n->grace_s = (grace_ms + 999) / 1000;
		if (!n->created) {
			n->delete_after_create = true;
		} else if (!n->delete_sent) {
			n->delete_sent = true;
			delete_queue(s, n->name, n->pod, n->grace_s);
		}
	}
	pthread_mutex_unlock(&s->lock);
	return n ? 0 : -ENOENT;
}

static int k8s_resize(struct sched *b, const char *name, const struct sched_resources *res,
		      struct rv_err *err)
{
	struct sched_k8s *s = k8s(b);
	if (!s->can_resize)
		return rv_err_set(err, -EOPNOTSUPP, "",
				  "the API server has no pods/resize: relaunch instead");
	char pod[K8S_POD_NAME_MAX] = "", container[SCHED_NAME_MAX] = "";
	pthread_mutex_lock(&s->lock);
	struct knode *n = node_find(s, name);
	if (n && n->created && !n->t.removing) {
		snprintf(pod, sizeof(pod), "%s", n->pod);
		snprintf(container, sizeof(container), "%s", n->container);
	}
	pthread_mutex_unlock(&s->lock);
	if (!pod[0])
		return rv_err_set(err, -ENOENT, "", "no live node %s", name);
	char cpu[32], mem[32], body[512], path[512];
	k8s_pod_cpu_quantity(cpu, sizeof(cpu), res->cpu);
	k8s_pod_memory_quantity(mem, sizeof(mem), res->memory_mb);
	snprintf(body, sizeof(body),
		 "{\"spec\":{\"containers\":[{\"name\":\"%s\",\"resources\":{\"requests\":{"
		 "\"cpu\":\"%s\",\"memory\":\"%s\"},\"limits\":{\"cpu\":\"%s\",\"memory\":\"%s\"}}}"
		 "]}}",
		 container, cpu, mem, cpu, mem);
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s/resize", s->ns, pod);
	long code = 0;
	struct rv_buf out;
	rv_buf_init(&out);
	int rc = call_sync(s, "PATCH", path, body, "application/strategic-merge-patch+json", &code,
			   &out, err);
	if (rc == 0 && code != 200) {
		char m[256];
		rv_k8s_status_message(out.data, code, m, sizeof(m));
		rc = rv_err_set(err, code == 404 ? -ENOENT : -EOPNOTSUPP, "",
				"pod %s refused the resize: %s", pod, m);
	} else if (rc < 0) {
		rc = -EOPNOTSUPP; /* relaunch rather than stay wrong */
	}
	rv_buf_release(&out);
	return rc;
}

static int k8s_fd(struct sched *b)
{
	return k8s(b)->efd;
}

/* Adoption ends with the first event taken: the pods no node claimed are
 * deleted. */
static void adoption_end(struct sched_k8s *s)
{
	for (int i = 0; i < s->nfound; i++)
		if (!node_find(s, s->found[i].instance))
			delete_queue(s, s->found[i].instance, s->found[i].name, 0);
	free(s->found);
	s->found = NULL;
	s->nfound = 0;
	s->adopting = false;
}

static int k8s_next_event(struct sched *b, struct sched_event *ev)
{
	struct sched_k8s *s = k8s(b);
	pthread_mutex_lock(&s->lock);
	if (s->adopting)
		adoption_end(s);
	int got = s->nev > 0;
	if (got) {
		*ev = s->evq[0];
		memmove(s->evq, s->evq + 1, (size_t)(--s->nev) * sizeof(*ev));
	}
	if (s->nev == 0) {
		uint64_t v;
		if (read(s->efd, &v, sizeof(v)) < 0) {
			/* already zero */
		}
	}
	pthread_mutex_unlock(&s->lock);
	return got;
}

static int k8s_usage(struct sched *b, const char *name, struct sched_usage *u)
{
	(void)b;
	(void)name;
	(void)u;
	return -EOPNOTSUPP; /* the nodes' rover-run report their own */
}

static int k8s_adopt(struct sched *b, const struct sched_node_spec *sp, int pid,
		     int64_t start_ticks, struct rv_err *err)
{
	struct sched_k8s *s = k8s(b);
	(void)pid;
	(void)start_ticks;
	int rc = -ESRCH;
	pthread_mutex_lock(&s->lock);
	for (int i = 0; s->adopting && i < s->nfound; i++) {
		const struct k8s_pod_state *st = &s->found[i];
		if (strcmp(st->instance, sp->name) != 0)
			continue;
		struct knode *n = node_find(s, sp->name) ? NULL : node_add(s, sp->name);
		rc = n ? 0 : -EEXIST;
		if (!n)
			break;
		snprintf(n->pod, sizeof(n->pod), "%s", st->name);
		snprintf(n->role, sizeof(n->role), "%s", sp->role);
		snprintf(n->container, sizeof(n->container), "%s", st->container);
		n->rank = sp->rank;
		n->created = true;
		n->delete_sent = st->deleting;
		struct k8s_pod_state copy = *st;
		node_apply(s, n, &copy, rv_mono_ms());
		break;
	}
	pthread_mutex_unlock(&s->lock);
	if (rc == -ESRCH)
		return rv_err_set(err, -ESRCH, "", "no pod of node %s", sp->name);
	if (rc == -EEXIST)
		return rv_err_set(err, -EEXIST, "", "node %s is already live", sp->name);
	return 0;
}

static void k8s_free(struct sched *b)
{
	struct sched_k8s *s = k8s(b);
	if (s->started) {
		atomic_store(&s->stop, true);
		uint64_t one = 1;
		if (write(s->wfd, &one, sizeof(one)) < 0) {
			/* awake */
		}
		pthread_join(s->thread, NULL);
	}
	while (s->reqs) {
		struct req *r = s->reqs;
		req_unlink(s, r);
		req_free(r);
	}
	while (s->cmds) {
		struct cmd *c = s->cmds;
		s->cmds = c->next;
		free(c->body);
		free(c);
	}
	if (s->multi)
		curl_multi_cleanup(s->multi);
	for (int i = 0; i < s->ntmpl; i++) {
		free(s->tmpl_role[i]);
		free(s->tmpl_json[i]);
	}
	if (s->efd >= 0)
		close(s->efd);
	if (s->wfd >= 0)
		close(s->wfd);
	rv_k8s_conf_release(&s->conf);
	pthread_mutex_destroy(&s->lock);
	free(s->nodes);
	free(s->evq);
	free(s->found);
	free(s);
}

static const struct sched_ops k8s_ops = {
	.name = "k8s",
	.launch = k8s_launch,
	.remove = k8s_remove,
	.resize = k8s_resize,
	.fd = k8s_fd,
	.next_event = k8s_next_event,
	.usage = k8s_usage,
	.adopt = k8s_adopt,
	.free = k8s_free,
};

/* ---- start: discovery and the first list ---- */

static int discover(struct sched_k8s *s, struct rv_err *err)
{
	long code = 0;
	struct rv_buf out;
	rv_buf_init(&out);
	int rc = call_sync(s, "GET", "/api/v1", NULL, NULL, &code, &out, err);
	if (rc == 0 && code != 200) {
		char m[256];
		rv_k8s_status_message(out.data, code, m, sizeof(m));
		rc = rv_err_set(err, rv_k8s_status_errno(code), "k8s",
				"the API server %s refused /api/v1: %s", s->conf.server, m);
	}
	cJSON *j = rc == 0 ? cJSON_Parse(out.data) : NULL;
	const cJSON *it;
	cJSON_ArrayForEach(it, cJSON_GetObjectItem(j, "resources"))
	{
		const char *n = cJSON_GetStringValue(cJSON_GetObjectItem(it, "name"));
		if (n && !strcmp(n, "pods/resize"))
			s->can_resize = true;
	}
	cJSON_Delete(j);
	rv_buf_release(&out);
	return rc;
}

static int first_list(struct sched_k8s *s, struct rv_err *err)
{
	char path[768];
	selector_path(s, path, sizeof(path), "");
	long code = 0;
	struct rv_buf out;
	rv_buf_init(&out);
	int rc = call_sync(s, "GET", path, NULL, NULL, &code, &out, err);
	RV_CLEANUP_CJSON cJSON *j = rc == 0 && code == 200 ? cJSON_Parse(out.data) : NULL;
	const char *rv = cJSON_GetStringValue(
		cJSON_GetObjectItem(cJSON_GetObjectItem(j, "metadata"), "resourceVersion"));
	if (rc == 0 && !rv) {
		char m[256];
		rv_k8s_status_message(out.data, code, m, sizeof(m));
		rc = rv_err_set(err, code ? rv_k8s_status_errno(code) : -EIO, "k8s",
				"could not list the pods of job %s in namespace %s: %s", s->job,
				s->ns, m);
	}
	rv_buf_release(&out);
	if (rc < 0)
		return rc;
	int n = cJSON_GetArraySize(cJSON_GetObjectItem(j, "items"));
	s->found = calloc((size_t)n + 1, sizeof(*s->found));
	if (!s->found)
		return rv_err_set(err, -ENOMEM, "", "out of memory");
	const cJSON *it;
	cJSON_ArrayForEach(it, cJSON_GetObjectItem(j, "items"))
	{
		if (k8s_pod_parse(it, &s->found[s->nfound]) == 0 && s->found[s->nfound].instance[0])
			s->nfound++;
	}
	snprintf(s->rv, sizeof(s->rv), "%s", rv);
	return 0;
}

static int k8s_open(struct sched_k8s *s, const struct sched_k8s_opts *o, struct rv_err *err)
{
	int rc = rv_k8s_conf_load(o->kubeconfig, &s->conf, err);
	if (rc < 0)
		return rc;
	const char *ns = o->namespace_ && o->namespace_[0] ? o->namespace_
			 : s->conf.namespace_[0]           ? s->conf.namespace_
							   : "default";
	snprintf(s->ns, sizeof(s->ns), "%s", ns);
	for (int i = 0; i < o->ntemplates && i < SCHED_K8S_MAX_TEMPLATES; i++) {
		if (!o->templates[i].template_json)
			continue;
		s->tmpl_role[s->ntmpl] = strdup(o->templates[i].role);
		s->tmpl_json[s->ntmpl] = strdup(o->templates[i].template_json);
		if (!s->tmpl_role[s->ntmpl++] || !s->tmpl_json[s->ntmpl - 1])
			return rv_err_set(err, -ENOMEM, "", "out of memory");
	}
	if ((rc = discover(s, err)) < 0 || (rc = first_list(s, err)) < 0)
		return rc;
	s->multi = curl_multi_init();
	if (!s->multi)
		return rv_err_set(err, -ENOMEM, "", "out of memory");
	s->token_at = rv_mono_ms();
	if (pthread_create(&s->thread, NULL, worker, s) != 0)
		return rv_err_set(err, -EAGAIN, "", "could not start the k8s thread");
	s->started = true;
	return 0;
}

struct sched *sched_k8s_new(const struct sched_k8s_opts *o, struct rv_err *err)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
	struct sched_k8s *s = calloc(1, sizeof(*s));
	if (!s) {
		rv_err_set(err, -ENOMEM, "", "out of memory");
		return NULL;
	}
	s->base.ops = &k8s_ops;
	pthread_mutex_init(&s->lock, NULL);
	s->cmds_tail = &s->cmds;
	s->adopting = true;
	s->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	s->wfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	snprintf(s->job, sizeof(s->job), "%s", o->job ? o->job : "job");
	snprintf(s->image, sizeof(s->image), "%s", o->image ? o->image : "");
	snprintf(s->sched_name, sizeof(s->sched_name), "%s",
		 o->scheduler_name ? o->scheduler_name : "");
	s->max_pending_ms = o->max_pending_ms;
	s->timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : 10000;
	int rc = s->efd < 0 || s->wfd < 0 ? rv_err_set(err, -errno, "", "could not make an eventfd")
					  : k8s_open(s, o, err);
	if (rc < 0) {
		k8s_free(&s->base);
		return NULL;
	}
	return &s->base;
}

const char *sched_k8s_server(struct sched *s)
{
	return k8s(s)->conf.server;
}

const char *sched_k8s_namespace(struct sched *s)
{
	return k8s(s)->ns;
}

bool sched_k8s_can_resize(struct sched *s)
{
	return k8s(s)->can_resize;
}
