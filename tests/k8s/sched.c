/*
 * sched.c: the stand-in's scheduler.  Each Pending pod without a node whose
 * schedulerName is ours goes to the Ready, schedulable node whose labels
 * match its nodeSelector and its required node affinity (matchExpressions
 * In, NotIn, Exists, DoesNotExist) and whose allocatable CPU and memory hold its
 * requests beside those of the pods already there, the one with most CPU
 * left (the default scheduler's spreading); when none fits it gets
 * PodScheduled=False reason Unschedulable and a FailedScheduling event
 * saying why, as "0/3 nodes are available: 3 Insufficient memory.".  Pods
 * for another scheduler are left Pending.  Called with s->mu held.
 */
#include <stdio.h>
#include <string.h>

#include "standin.h"

static const char *sched_str(const cJSON *j, const char *a, const char *b)
{
	const cJSON *x = cJSON_GetObjectItem(j, a);
	const char *v = cJSON_GetStringValue(b ? cJSON_GetObjectItem(x, b) : x);
	return v ? v : "";
}

static bool sched_active(const struct obj *o)
{
	const char *phase = sched_str(o->j, "status", "phase");
	return o->kind == KIND_POD && *sched_str(o->j, "spec", "nodeName") &&
	       strcmp(phase, "Succeeded") != 0 && strcmp(phase, "Failed") != 0;
}

void sched_node_load(struct standin *s, const char *node, struct node_load *out)
{
	memset(out, 0, sizeof(*out));
	for (struct obj *o = s->objs; o; o = o->next) {
		if (!sched_active(o) || strcmp(sched_str(o->j, "spec", "nodeName"), node) != 0)
			continue;
		int64_t cpu, mem;
		quantity_pod_requests(o->j, &cpu, &mem);
		out->cpu_m += cpu;
		out->mem_b += mem;
		out->pods++;
	}
}

static bool sched_node_ready(const struct obj *n)
{
	const cJSON *c;
	const cJSON *conds = cJSON_GetObjectItem(cJSON_GetObjectItem(n->j, "status"), "conditions");
	cJSON_ArrayForEach(c, conds)
	{
		if (strcmp(sched_str(c, "type", NULL), "Ready") == 0)
			return strcmp(sched_str(c, "status", NULL), "True") == 0;
	}
	return false;
}

static bool sched_selector_ok(const cJSON *pod, const struct obj *n)
{
	const cJSON *sel = cJSON_GetObjectItem(cJSON_GetObjectItem(pod, "spec"), "nodeSelector");
	const cJSON *labels = cJSON_GetObjectItem(cJSON_GetObjectItem(n->j, "metadata"), "labels");
	const cJSON *kv;
	cJSON_ArrayForEach(kv, sel)
	{
		const char *have = cJSON_GetStringValue(cJSON_GetObjectItem(labels, kv->string));
		const char *want = cJSON_GetStringValue(kv);
		if (!have || !want || strcmp(have, want) != 0)
			return false;
	}
	return true;
}

/* One matchExpression against the node's labels: In, NotIn, Exists,
 * DoesNotExist (Gt and Lt are not needed here: false). */
static bool sched_expr_ok(const cJSON *e, const cJSON *labels)
{
	const char *op = sched_str(e, "operator", NULL);
	const char *have =
		cJSON_GetStringValue(cJSON_GetObjectItem(labels, sched_str(e, "key", NULL)));
	bool in = false;
	const cJSON *v;
	cJSON_ArrayForEach(v, cJSON_GetObjectItem(e, "values"))
	{
		in = in || (have && cJSON_GetStringValue(v) && !strcmp(have, v->valuestring));
	}
	if (!strcmp(op, "In"))
		return in;
	if (!strcmp(op, "NotIn"))
		return !in;
	if (!strcmp(op, "Exists"))
		return have != NULL;
	return !strcmp(op, "DoesNotExist") && !have;
}

/* spec.affinity.nodeAffinity's required terms: any term whose expressions
 * all hold (no terms: any node). */
static bool sched_affinity_ok(const cJSON *pod, const struct obj *n)
{
	const cJSON *req = cJSON_GetObjectItem(
		cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(pod, "spec"),
							"affinity"),
				    "nodeAffinity"),
		"requiredDuringSchedulingIgnoredDuringExecution");
	const cJSON *terms = cJSON_GetObjectItem(req, "nodeSelectorTerms");
	const cJSON *labels = cJSON_GetObjectItem(cJSON_GetObjectItem(n->j, "metadata"), "labels");
	if (!cJSON_GetArraySize(terms))
		return true;
	const cJSON *t, *e;
	cJSON_ArrayForEach(t, terms)
	{
		bool all = true;
		cJSON_ArrayForEach(e, cJSON_GetObjectItem(t, "matchExpressions"))
		{
			all = all && sched_expr_ok(e, labels);
		}
		if (all)
			return true;
	}
	return false;
}

struct sched_why {
	int nodes, not_ready, unsched, selector, cpu, mem, pods;
};

/* Free CPU (millicores) left on n for pod, or -1 with why counted. */
static int64_t sched_fit(struct standin *s, const cJSON *pod, const struct obj *n,
			 struct sched_why *w)
{
	int64_t cpu, mem, acpu = 0, amem = 0, apods = 110;
	const cJSON *alloc =
		cJSON_GetObjectItem(cJSON_GetObjectItem(n->j, "status"), "allocatable");
	struct node_load l;
	w->nodes++;
	if (!sched_node_ready(n))
		return w->not_ready++, -1;
	if (cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(n->j, "spec"), "unschedulable")))
		return w->unsched++, -1;
	if (!sched_selector_ok(pod, n) || !sched_affinity_ok(pod, n))
		return w->selector++, -1;
	quantity_parse(sched_str(alloc, "cpu", NULL), true, &acpu);
	quantity_parse(sched_str(alloc, "memory", NULL), false, &amem);
	quantity_parse(sched_str(alloc, "pods", NULL), false, &apods);
	quantity_pod_requests(pod, &cpu, &mem);
	sched_node_load(s, n->name, &l);
	bool bad = false;
	if (l.cpu_m + cpu > acpu)
		bad = true, w->cpu++;
	if (l.mem_b + mem > amem)
		bad = true, w->mem++;
	if (l.pods + 1 > apods)
		bad = true, w->pods++;
	return bad ? -1 : acpu - l.cpu_m - cpu;
}

static void sched_why_text(const struct sched_why *w, char *out, size_t size)
{
	size_t o = (size_t)snprintf(out, size, "0/%d nodes are available:", w->nodes);
	const struct {
		int n;
		const char *what;
	} parts[] = {
		{ w->cpu, "Insufficient cpu" },
		{ w->mem, "Insufficient memory" },
		{ w->pods, "Too many pods" },
		{ w->selector, "node(s) didn't match Pod's node affinity/selector" },
		{ w->not_ready, "node(s) had untolerated taint {node.kubernetes.io/not-ready: }" },
		{ w->unsched, "node(s) were unschedulable" },
	};
	bool first = true;
	for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]) && o < size; i++) {
		if (!parts[i].n)
			continue;
		o += (size_t)snprintf(out + o, size - o, "%s %d %s", first ? "" : ",", parts[i].n,
				      parts[i].what);
		first = false;
	}
	if (o < size)
		snprintf(out + o, size - o, ".");
}

static void sched_bind(struct standin *s, struct obj *pod, struct obj *node)
{
	cJSON *spec = cJSON_GetObjectItem(pod->j, "spec");
	cJSON_DeleteItemFromObject(spec, "nodeName");
	cJSON_AddStringToObject(spec, "nodeName", node->name);
	kubelet_condition(pod, "PodScheduled", "True", NULL, NULL);
	pod->sched_msg[0] = 0;
	store_touch(s, pod, "MODIFIED");
	store_event(s, pod, "Normal", "Scheduled", "default-scheduler",
		    "Successfully assigned %s/%s to %s", pod->ns, pod->name, node->name);
}

static void sched_one(struct standin *s, struct obj *pod)
{
	struct sched_why w = { 0 };
	struct obj *best = NULL;
	int64_t best_free = -1;
	char msg[256];
	if (volume_missing_claim(s, pod, msg, sizeof(msg)) < 0)
		goto unschedulable; /* as the volume binding plugin says it */
	for (struct obj *n = s->objs; n; n = n->next) {
		if (n->kind != KIND_NODE)
			continue;
		int64_t f = sched_fit(s, pod->j, n, &w);
		if (f > best_free ||
		    (f == best_free && f >= 0 && strcmp(n->name, best->name) < 0)) {
			best = n;
			best_free = f;
		}
	}
	if (best && best_free >= 0) {
		sched_bind(s, pod, best);
		return;
	}
	sched_why_text(&w, msg, sizeof(msg));
unschedulable:
	if (strcmp(msg, pod->sched_msg) == 0)
		return;
	snprintf(pod->sched_msg, sizeof(pod->sched_msg), "%s", msg);
	kubelet_condition(pod, "PodScheduled", "False", "Unschedulable", msg);
	store_touch(s, pod, "MODIFIED");
	store_event(s, pod, "Warning", "FailedScheduling", "default-scheduler", "%s", msg);
}

void sched_run(struct standin *s)
{
	for (struct obj *o = s->objs; o; o = o->next) {
		if (o->kind != KIND_POD || *sched_str(o->j, "spec", "nodeName") ||
		    strcmp(sched_str(o->j, "status", "phase"), "Pending") != 0 ||
		    cJSON_GetObjectItem(cJSON_GetObjectItem(o->j, "metadata"),
					"deletionTimestamp") ||
		    strcmp(sched_str(o->j, "spec", "schedulerName"), s->o.scheduler) != 0)
			continue;
		sched_one(s, o);
	}
}
