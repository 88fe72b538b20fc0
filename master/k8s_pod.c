/*
 * k8s_pod.c: pods built from replica templates, read back from the API
 * server's JSON, and the sched.h events their changes mean (k8s_pod.h).
 * Pure: used by sched_k8s.c's worker thread and by tests.
 */
#include "k8s_pod.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "json.h"
#include "parse.h"

int k8s_pod_name(char *out, size_t size, const char *job, const char *instance)
{
	int n = snprintf(out, size, "%s-%s", job, instance);
	return n < 0 || (size_t)n >= size || n >= K8S_POD_NAME_MAX ? -ENAMETOOLONG : 0;
}

void k8s_pod_cpu_quantity(char *out, size_t size, double cores)
{
	long long m = llround(cores * 1000.0);
	if (m % 1000 == 0)
		snprintf(out, size, "%lld", m / 1000);
	else
		snprintf(out, size, "%lldm", m);
}

void k8s_pod_memory_quantity(char *out, size_t size, int64_t mb)
{
	snprintf(out, size, "%" PRId64 "Mi", mb);
}

/* o[key] as an object, made when missing; NULL when it is something else. */
static cJSON *object_at(cJSON *o, const char *key)
{
	cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
	if (!it)
		return cJSON_AddObjectToObject(o, key);
	return cJSON_IsObject(it) ? it : NULL;
}

static bool set_str(cJSON *o, const char *key, const char *v)
{
	cJSON *s = cJSON_CreateString(v);
	if (!s)
		return false;
	if (cJSON_GetObjectItemCaseSensitive(o, key))
		return cJSON_ReplaceItemInObjectCaseSensitive(o, key, s);
	return cJSON_AddItemToObject(o, key, s);
}

static bool pod_labels(cJSON *meta, const struct k8s_pod_args *a)
{
	const struct sched_node_spec *sp = a->spec;
	cJSON *labels = object_at(meta, "labels");
	char rank[16];
	snprintf(rank, sizeof(rank), "%d", sp->rank);
	return labels && set_str(labels, K8S_LABEL_JOB, a->job) &&
	       set_str(labels, K8S_LABEL_ROLE, sp->role) && set_str(labels, K8S_LABEL_RANK, rank) &&
	       set_str(labels, K8S_LABEL_INSTANCE, sp->name);
}

/* env: Rover's variables replace the template's of the same name. */
static bool container_env(cJSON *c, const char *const *env)
{
	cJSON *arr = cJSON_GetObjectItemCaseSensitive(c, "env");
	if (!arr)
		arr = cJSON_AddArrayToObject(c, "env");
	if (!cJSON_IsArray(arr))
		return false;
	for (int i = 0; env && env[i]; i++) {
		const char *eq = strchr(env[i], '=');
		if (!eq)
			continue;
		char name[128];
		snprintf(name, sizeof(name), "%.*s", (int)(eq - env[i]), env[i]);
		int idx = 0;
		for (cJSON *e = arr->child; e; e = e->next, idx++) {
			const char *n = cJSON_GetStringValue(cJSON_GetObjectItem(e, "name"));
			if (n && !strcmp(n, name)) {
				cJSON_DeleteItemFromArray(arr, idx);
				break;
			}
		}
		cJSON *v = cJSON_CreateObject();
		if (!v || !cJSON_AddItemToArray(arr, v)) {
			cJSON_Delete(v);
			return false;
		}
		if (!cJSON_AddStringToObject(v, "name", name) ||
		    !cJSON_AddStringToObject(v, "value", eq + 1))
			return false;
	}
	return true;
}

/* requests = limits = res (the QoS class Guaranteed when both are given). */
static bool container_resources(cJSON *c, const struct sched_resources *res)
{
	cJSON *r = object_at(c, "resources");
	if (!r)
		return false;
	static const char *const parts[] = { "requests", "limits" };
	for (size_t i = 0; i < RV_ARRAY_SIZE(parts); i++) {
		cJSON *q = object_at(r, parts[i]);
		char v[32];
		if (!q)
			return false;
		if (res->cpu > 0) {
			k8s_pod_cpu_quantity(v, sizeof(v), res->cpu);
			if (!set_str(q, "cpu", v))
				return false;
		}
		if (res->memory_mb > 0) {
			k8s_pod_memory_quantity(v, sizeof(v), res->memory_mb);
			if (!set_str(q, "memory", v))
				return false;
		}
		if (res->gpu > 0) {
			snprintf(v, sizeof(v), "%d", res->gpu);
			if (!set_str(q, "nvidia.com/gpu", v))
				return false;
		}
	}
	return true;
}

static bool container_command(cJSON *c, const char *const *argv)
{
	if (cJSON_GetObjectItemCaseSensitive(c, "command") || !argv || !argv[0])
		return true;
	cJSON *arr = cJSON_AddArrayToObject(c, "command");
	for (int i = 0; arr && argv[i]; i++) {
		cJSON *s = cJSON_CreateString(argv[i]);
		if (!s || !cJSON_AddItemToArray(arr, s)) {
			cJSON_Delete(s);
			return false;
		}
	}
	return arr != NULL;
}

/* The avoid list as a required node affinity "kubernetes.io/hostname NotIn
 * [...]", added to each of the template's own node selector terms (terms
 * are ORed, a term's expressions ANDed), or as the one term when it has
 * none.  true when done (or nothing to do). */
static bool pod_avoid(cJSON *spec, const char *const *avoid)
{
	if (!avoid || !avoid[0])
		return true;
	cJSON *req = object_at(object_at(object_at(spec, "affinity"), "nodeAffinity"),
			       "requiredDuringSchedulingIgnoredDuringExecution");
	if (!req)
		return false;
	cJSON *terms = cJSON_GetObjectItemCaseSensitive(req, "nodeSelectorTerms");
	if (!terms)
		terms = cJSON_AddArrayToObject(req, "nodeSelectorTerms");
	if (!cJSON_IsArray(terms))
		return false;
	if (!terms->child && !cJSON_AddItemToArray(terms, cJSON_CreateObject()))
		return false;
	cJSON *term;
	cJSON_ArrayForEach(term, terms)
	{
		cJSON *exprs = cJSON_GetObjectItemCaseSensitive(term, "matchExpressions");
		if (!exprs)
			exprs = cJSON_AddArrayToObject(term, "matchExpressions");
		cJSON *e = cJSON_CreateObject(), *vals = cJSON_AddArrayToObject(e, "values");
		if (!cJSON_IsArray(exprs) || !vals || !cJSON_AddItemToArray(exprs, e)) {
			cJSON_Delete(e);
			return false;
		}
		if (!cJSON_AddStringToObject(e, "key", "kubernetes.io/hostname") ||
		    !cJSON_AddStringToObject(e, "operator", "NotIn"))
			return false;
		for (int i = 0; avoid[i]; i++)
			if (!cJSON_AddItemToArray(vals, cJSON_CreateString(avoid[i])))
				return false;
	}
	return true;
}

/* The first container: made when the template has none. */
static cJSON *main_container(cJSON *spec)
{
	cJSON *cs = cJSON_GetObjectItemCaseSensitive(spec, "containers");
	if (!cs)
		cs = cJSON_AddArrayToObject(spec, "containers");
	if (!cJSON_IsArray(cs))
		return NULL;
	if (cs->child)
		return cJSON_IsObject(cs->child) ? cs->child : NULL;
	cJSON *c = cJSON_CreateObject();
	if (!c || !cJSON_AddItemToArray(cs, c)) {
		cJSON_Delete(c);
		return NULL;
	}
	return cJSON_AddStringToObject(c, "name", "main") ? c : NULL;
}

cJSON *k8s_pod_build(const struct k8s_pod_args *a, struct rv_err *err)
{
	char name[K8S_POD_NAME_MAX + 8];
	if (k8s_pod_name(name, sizeof(name), a->job, a->spec->name) < 0) {
		rv_err_set(err, -EINVAL, "metadata.name", "pod name \"%.64s-%.64s\" is too long",
			   a->job, a->spec->name);
		return NULL;
	}
	RV_CLEANUP_CJSON cJSON *pod = a->template_json ? cJSON_Parse(a->template_json)
						       : cJSON_CreateObject();
	if (!cJSON_IsObject(pod)) {
		rv_err_set(err, -EINVAL, "template", "the pod template is not a JSON object");
		return NULL;
	}
	cJSON *meta = object_at(pod, "metadata"), *spec = object_at(pod, "spec");
	if (!meta || !spec) {
		rv_err_set(err, -EINVAL, "template",
			   "the template's metadata and spec must be objects");
		return NULL;
	}
	static const char *const drop[] = { "generateName", "resourceVersion", "uid",
					    "creationTimestamp", "ownerReferences" };
	for (size_t i = 0; i < RV_ARRAY_SIZE(drop); i++)
		cJSON_DeleteItemFromObjectCaseSensitive(meta, drop[i]);
	cJSON *c = main_container(spec);
	if (!c) {
		rv_err_set(err, -EINVAL, "template.spec.containers",
			   "the template's containers must be an array of objects");
		return NULL;
	}
	bool ok = set_str(pod, "apiVersion", "v1") && set_str(pod, "kind", "Pod") &&
		  set_str(meta, "name", name) && set_str(meta, "namespace", a->namespace_) &&
		  pod_labels(meta, a) && set_str(spec, "restartPolicy", "Never");
	if (ok && a->scheduler_name && a->scheduler_name[0] &&
	    !cJSON_GetObjectItemCaseSensitive(spec, "schedulerName"))
		ok = set_str(spec, "schedulerName", a->scheduler_name);
	if (ok && !cJSON_GetObjectItemCaseSensitive(c, "image"))
		ok = set_str(c, "image", a->image && a->image[0] ? a->image : "rover-worker");
	ok = ok && container_command(c, a->spec->argv) && container_env(c, a->spec->env) &&
	     container_resources(c, &a->spec->res) && pod_avoid(spec, a->spec->avoid);
	if (!ok) {
		rv_err_set(err, -EINVAL, "template", "could not build the pod from the template");
		return NULL;
	}
	return RV_TAKE_PTR(pod);
}

/* ---- reading pods ---- */

static const cJSON *at(const cJSON *o, const char *k)
{
	return cJSON_GetObjectItemCaseSensitive(o, k);
}

static void copy_str(char *out, size_t size, const cJSON *v)
{
	const char *s = cJSON_GetStringValue(v);
	snprintf(out, size, "%s", s ? s : "");
}

/* The status of the container named name (else the first one). */
static const cJSON *main_status(const cJSON *status, const char *name)
{
	const cJSON *cs = at(status, "containerStatuses"), *it;
	cJSON_ArrayForEach(it, cs)
	{
		const char *n = cJSON_GetStringValue(at(it, "name"));
		if (n && !strcmp(n, name))
			return it;
	}
	return cJSON_IsArray(cs) ? cs->child : NULL;
}

static void parse_container(const cJSON *status, struct k8s_pod_state *st)
{
	const cJSON *c = main_status(status, st->container);
	const cJSON *state = at(c, "state"), *term = at(state, "terminated");
	if (at(state, "running"))
		st->ran = true;
	if (term) {
		st->ended = st->ran = true;
		st->exit_code =
			cJSON_IsNumber(at(term, "exitCode")) ? at(term, "exitCode")->valueint : -1;
		copy_str(st->reason, sizeof(st->reason), at(term, "reason"));
		if (cJSON_GetStringValue(at(term, "message")))
			copy_str(st->message, sizeof(st->message), at(term, "message"));
	} else if (cJSON_GetStringValue(at(at(state, "waiting"), "message"))) {
		copy_str(st->message, sizeof(st->message), at(at(state, "waiting"), "message"));
	}
	if (at(at(c, "lastState"), "terminated"))
		st->ran = true;
}

int k8s_pod_parse(const cJSON *pod, struct k8s_pod_state *st)
{
	memset(st, 0, sizeof(*st));
	st->exit_code = -1;
	st->rank = -1;
	const cJSON *meta = at(pod, "metadata"), *spec = at(pod, "spec"),
		    *status = at(pod, "status");
	if (!cJSON_GetStringValue(at(meta, "name")))
		return -EINVAL;
	copy_str(st->name, sizeof(st->name), at(meta, "name"));
	const cJSON *labels = at(meta, "labels");
	copy_str(st->instance, sizeof(st->instance), at(labels, K8S_LABEL_INSTANCE));
	copy_str(st->role, sizeof(st->role), at(labels, K8S_LABEL_ROLE));
	int64_t rank;
	const char *r = cJSON_GetStringValue(at(labels, K8S_LABEL_RANK));
	if (r && rv_parse_i64(r, 0, 1 << 20, &rank) == 0)
		st->rank = (int)rank;
	st->deleting = cJSON_GetStringValue(at(meta, "deletionTimestamp")) != NULL;
	copy_str(st->node_name, sizeof(st->node_name), at(spec, "nodeName"));
	const cJSON *c0 = cJSON_GetArrayItem(at(spec, "containers"), 0);
	copy_str(st->container, sizeof(st->container), at(c0, "name"));
	const char *mem = cJSON_GetStringValue(at(at(at(c0, "resources"), "limits"), "memory"));
	if (mem && rv_parse_memory_mb(mem, &st->memory_limit_mb) < 0)
		st->memory_limit_mb = 0;

	const char *phase = cJSON_GetStringValue(at(status, "phase"));
	phase = phase ? phase : "Pending";
	parse_container(status, st);
	if (!strcmp(phase, "Succeeded") || !strcmp(phase, "Failed")) {
		st->ended = true;
		if (!st->reason[0])
			copy_str(st->reason, sizeof(st->reason), at(status, "reason"));
		if (!st->message[0])
			copy_str(st->message, sizeof(st->message), at(status, "message"));
		if (st->exit_code < 0 && !strcmp(phase, "Succeeded"))
			st->exit_code = 0;
	}
	st->running = !st->ended && !strcmp(phase, "Running") && st->ran;
	const cJSON *it;
	cJSON_ArrayForEach(it, at(status, "conditions"))
	{
		const char *type = cJSON_GetStringValue(at(it, "type"));
		const char *s = cJSON_GetStringValue(at(it, "status"));
		const char *reason = cJSON_GetStringValue(at(it, "reason"));
		if (type && s && reason && !strcmp(type, "PodScheduled") && !strcmp(s, "False") &&
		    !strcmp(reason, "Unschedulable")) {
			st->unschedulable = true;
			copy_str(st->message, sizeof(st->message), at(it, "message"));
		}
		/* set by the Eviction API, the kubelet under pressure, the
		 * scheduler's preemption, the taint manager (1.26+) */
		if (type && s && !strcmp(type, "DisruptionTarget") && !strcmp(s, "True"))
			st->evicted = true;
	}
	const char *preason = cJSON_GetStringValue(at(status, "reason"));
	if (preason && (!strcmp(preason, "Evicted") || !strcmp(preason, "Preempting") ||
			!strcmp(preason, "NodeLost")))
		st->evicted = true;
	if (st->evicted && st->ended) {
		copy_str(st->reason, sizeof(st->reason), at(status, "reason"));
		if (!st->reason[0])
			snprintf(st->reason, sizeof(st->reason), "Evicted");
		if (cJSON_GetStringValue(at(status, "message")))
			copy_str(st->message, sizeof(st->message), at(status, "message"));
	}
	return 0;
}

/* ---- what a change means ---- */

static struct sched_event *event_new(struct sched_event *out, int *n, enum sched_event_type type,
				     const char *instance, const struct k8s_pod_state *st)
{
	struct sched_event *ev = &out[(*n)++];
	memset(ev, 0, sizeof(*ev));
	ev->type = type;
	snprintf(ev->name, sizeof(ev->name), "%s", instance);
	ev->rank = -1;
	if (st) {
		snprintf(ev->role, sizeof(ev->role), "%s", st->role);
		snprintf(ev->host, sizeof(ev->host), "%s", st->node_name);
		ev->rank = st->rank;
		ev->memory_limit_mb = st->memory_limit_mb;
	}
	return ev;
}

/* The container's end: an exit code, a signal (kubelet reports 128+N for a
 * process a signal ended), or OOMKilled. */
static void ended(struct k8s_pod_track *t, const struct k8s_pod_state *st, const char *instance,
		  struct sched_event *out, int *n)
{
	bool oom = st && !strcmp(st->reason, "OOMKilled");
	struct sched_event *ev =
		event_new(out, n, oom ? SCHED_EV_OOM : SCHED_EV_EXITED, instance, st);
	int code = st ? st->exit_code : -1;
	if (code > 128 && code <= 128 + 64) {
		ev->exit_code = -1;
		ev->signal = code - 128;
	} else if (code < 0) {
		/* gone without a status: deleted under us, or evicted */
		ev->exit_code = -1;
		ev->signal = SIGKILL;
	} else {
		ev->exit_code = code;
	}
	if (oom && !ev->signal)
		ev->signal = SIGKILL;
	ev->removed = t->removing;
	if (!ev->host[0])
		snprintf(ev->host, sizeof(ev->host), "%s", t->node_name);
	/* deleted or evicted, not by us: the node's program did not fail (a
	 * lost node); an eviction names its cause */
	bool evicted = st && st->evicted && !t->removing;
	bool deleted = !t->removing && (!st || t->deleting) && !oom && !evicted;
	ev->lost = deleted || evicted;
	const char *what = evicted   ? "pod evicted"
			   : deleted ? "pod deleted by someone else"
			   : !st     ? "pod deleted"
				     : (st->reason[0] ? st->reason : "ended");
	const char *msg = !deleted && st ? st->message : "";
	snprintf(ev->detail, sizeof(ev->detail), "%.60s%s%.180s", what, msg[0] ? ": " : "", msg);
	t->ended = true;
}

int k8s_pod_events(struct k8s_pod_track *t, const struct k8s_pod_state *st, const char *instance,
		   int64_t now_ms, int64_t max_pending_ms, struct sched_event *out)
{
	int n = 0;
	if (t->ended)
		return 0;
	if (st && st->node_name[0])
		snprintf(t->node_name, sizeof(t->node_name), "%s", st->node_name);
	if (st && st->deleting)
		t->deleting = true;
	if (!st || st->ended) {
		if (st && !st->ran && !t->started && !t->removing && !st->evicted) {
			struct sched_event *ev = event_new(out, &n, SCHED_EV_FAILED, instance, st);
			ev->err = -EIO;
			snprintf(ev->detail, sizeof(ev->detail), "pod %.80s: %.60s%s%.100s",
				 st->name, st->reason[0] ? st->reason : "failed",
				 st->message[0] ? ": " : "", st->message);
			t->ended = true;
			return n;
		}
		if (st && st->ran && !t->started) {
			event_new(out, &n, SCHED_EV_STARTED, instance, st);
			t->started = true;
		}
		ended(t, st, instance, out, &n);
		return n;
	}
	if (st->running && !t->started) {
		event_new(out, &n, SCHED_EV_STARTED, instance, st);
		t->started = true;
	}
	if (!st->unschedulable || t->removing) {
		t->unsched_since_ms = 0;
		return n;
	}
	if (!t->unsched_since_ms)
		t->unsched_since_ms = now_ms;
	if (max_pending_ms > 0 && now_ms - t->unsched_since_ms >= max_pending_ms) {
		struct sched_event *ev = event_new(out, &n, SCHED_EV_FAILED, instance, st);
		ev->err = -ENOSPC;
		snprintf(ev->detail, sizeof(ev->detail), "Unschedulable for %" PRId64 " s: %.200s",
			 (now_ms - t->unsched_since_ms) / 1000, st->message);
		t->ended = true;
	}
	return n;
}
