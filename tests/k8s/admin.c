/*
 * admin.c: fault injection and node failures for tests of clients, under
 * /standin/ (a path no real API server serves):
 *   POST /standin/watches/cut[?mid=true]   end every open watch now; with
 *        mid=true each sends half of its next event and drops the connection
 *   POST /standin/watches/expire[?count=N] the next N watches get 410 Expired
 *   POST /standin/history/compact          forget the change history: a watch
 *        from any version before now gets 410 Expired
 *   POST /standin/delay?ms=N               every reply waits N ms (0: off)
 *   POST /standin/nodes/NAME/notready      the node goes NotReady and its pods
 *        Failed (their processes killed); /ready brings it back
 *   POST /standin/pods/NS/NAME/evict       the pod evicted as a kubelet under
 *        memory pressure evicts it (Failed, reason Evicted, DisruptionTarget)
 *   GET  /standin/state                    resource version, history, counts
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "standin.h"

static void admin_node(struct standin *s, const char *name, bool ready, struct reply *r)
{
	struct obj *n = store_find(s, KIND_NODE, "", name);
	if (!n) {
		api_status(r, 404, "NotFound", NULL, "nodes \"%s\" not found", name);
		return;
	}
	if (ready)
		kubelet_condition(n, "Ready", "True", "KubeletReady",
				  "kubelet is posting ready status");
	else
		kubelet_condition(n, "Ready", "Unknown", "NodeStatusUnknown",
				  "Kubelet stopped posting node status.");
	store_touch(s, n, "MODIFIED");
	if (!ready)
		kubelet_node_down(s, name);
	api_json(r, 200, store_served(n));
}

static void admin_evict(struct standin *s, const char *ns, const char *name, struct reply *r)
{
	struct obj *p = store_find(s, KIND_POD, ns, name);
	if (!p) {
		api_status(r, 404, "NotFound", NULL, "pods \"%s\" not found", name);
		return;
	}
	kubelet_evict(s, p,
		      "The node was low on resource: memory. Threshold quantity: 100Mi, available: "
		      "42Mi.");
	api_json(r, 200, store_served(p));
}

static cJSON *admin_state(struct standin *s)
{
	int pods = 0, running = 0;
	for (struct obj *o = s->objs; o; o = o->next) {
		pods += o->kind == KIND_POD;
		running += o->running;
	}
	cJSON *j = cJSON_CreateObject();
	cJSON_AddNumberToObject(j, "resourceVersion", (double)s->rv);
	cJSON_AddNumberToObject(j, "podHistoryFloor", (double)s->hist_floor[KIND_POD]);
	cJSON_AddNumberToObject(j, "podHistory", s->hist_n[KIND_POD]);
	cJSON_AddNumberToObject(j, "pods", pods);
	cJSON_AddNumberToObject(j, "processes", running);
	cJSON_AddNumberToObject(j, "expireNext", s->fault_expire);
	cJSON_AddNumberToObject(j, "delayMs", s->fault_delay_ms);
	return j;
}

/* A query number in [0, max], 0 when absent or bad. */
static int admin_num(const struct call *c, const char *key, int dflt, int max)
{
	const char *q = api_query(c, key);
	char *end;
	long v = q ? strtol(q, &end, 10) : dflt;
	return q && (end == q || *end || v < 0 || v > max) ? 0 : (int)v;
}

static void admin_locked(struct standin *s, const struct call *c, char **seg, int n,
			 struct reply *r)
{
	const char *q;
	bool post = strcmp(c->method, "POST") == 0;
	if (n == 2 && strcmp(seg[1], "state") == 0) {
		api_json(r, 200, admin_state(s));
	} else if (post && n == 3 && strcmp(seg[1], "watches") == 0 && strcmp(seg[2], "cut") == 0) {
		q = api_query(c, "mid");
		s->fault_cut_mid = q && strcmp(q, "true") == 0;
		s->fault_cut++;
		pthread_cond_broadcast(&s->changed);
		api_json(r, 200, admin_state(s));
	} else if (post && n == 3 && strcmp(seg[1], "watches") == 0 &&
		   strcmp(seg[2], "expire") == 0) {
		s->fault_expire += admin_num(c, "count", 1, 1000000);
		api_json(r, 200, admin_state(s));
	} else if (post && n == 3 && strcmp(seg[1], "history") == 0 &&
		   strcmp(seg[2], "compact") == 0) {
		store_compact(s);
		api_json(r, 200, admin_state(s));
	} else if (post && n == 2 && strcmp(seg[1], "delay") == 0) {
		s->fault_delay_ms = admin_num(c, "ms", 0, 600000);
		api_json(r, 200, admin_state(s));
	} else if (post && n == 4 && strcmp(seg[1], "nodes") == 0 &&
		   (strcmp(seg[3], "notready") == 0 || strcmp(seg[3], "ready") == 0)) {
		admin_node(s, seg[2], strcmp(seg[3], "ready") == 0, r);
	} else if (post && n == 5 && strcmp(seg[1], "pods") == 0 && strcmp(seg[4], "evict") == 0) {
		admin_evict(s, seg[2], seg[3], r);
	} else {
		api_status(r, 404, "NotFound", NULL,
			   "the server could not find the requested resource");
	}
}

void admin_handle(struct standin *s, const struct call *c, char **seg, int n, struct reply *r)
{
	pthread_mutex_lock(&s->mu);
	admin_locked(s, c, seg, n, r);
	pthread_mutex_unlock(&s->mu);
}
