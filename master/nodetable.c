/*
 * nodetable.c: the node table's journaled half (see nodetable.h): the
 * MASTER_OP_NODE_LAUNCHED / ENDED documents applied to m->nodes, the job's
 * end, the charged hosts, and their part of the snapshot.  Part of the job
 * state: state.c applies and replays them itself, so a state opens without
 * the node manager.  Under m->lock; pure but for the allocation of the table.
 */
#include "nodetable.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "json.h"
#include "wire_codec.h"

static const char *const job_state_names[] = { "running", "succeeded", "failed" };
static const char *const node_state_names[] = { "launched", "running", "exited", "succeeded",
						"failed" };

const char *nodetable_job_state_name(enum master_job_state s)
{
	return (unsigned)s < RV_ARRAY_SIZE(job_state_names) ? job_state_names[s] : "?";
}

const char *nodetable_node_state_name(enum master_node_state s)
{
	return (unsigned)s < RV_ARRAY_SIZE(node_state_names) ? node_state_names[s] : "?";
}

struct master_node *nodetable_find(struct master *m, const char *name)
{
	for (int i = 0; name && i < m->nnodes; i++)
		if (!strcmp(m->nodes[i].name, name))
			return &m->nodes[i];
	return NULL;
}

static struct master_node *table_get(struct master *m, const char *name)
{
	struct master_node *n = nodetable_find(m, name);
	if (n)
		return n;
	if (m->nnodes == m->capnodes) {
		int cap = m->capnodes ? m->capnodes * 2 : 16;
		struct master_node *v = realloc(m->nodes, (size_t)cap * sizeof(*v));
		if (!v)
			return NULL;
		m->nodes = v;
		m->capnodes = cap;
	}
	n = &m->nodes[m->nnodes++];
	memset(n, 0, sizeof(*n));
	snprintf(n->name, sizeof(n->name), "%s", name);
	return n;
}

cJSON *nodetable_node_to_json(const struct master_node *n)
{
	cJSON *o = cJSON_CreateObject();
	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "name", n->name);
	cJSON_AddStringToObject(o, "instance", n->instance);
	cJSON_AddStringToObject(o, "role", n->role);
	cJSON_AddStringToObject(o, "host", n->host);
	if (n->left[0])
		cJSON_AddStringToObject(o, "left", n->left);
	cJSON_AddNumberToObject(o, "rank", n->rank);
	cJSON_AddNumberToObject(o, "attempt", n->attempt);
	cJSON_AddNumberToObject(o, "restarts", n->restarts);
	cJSON_AddNumberToObject(o, "ooms", n->ooms);
	cJSON_AddStringToObject(o, "state", nodetable_node_state_name(n->state));
	cJSON_AddNumberToObject(o, "cpu", n->res.cpu);
	cJSON_AddNumberToObject(o, "memory_mb", (double)n->res.memory_mb);
	cJSON_AddNumberToObject(o, "gpu", n->res.gpu);
	cJSON_AddNumberToObject(o, "exit_code", n->exit_code);
	cJSON_AddNumberToObject(o, "signal", n->signal);
	if (n->plan > 0)
		cJSON_AddNumberToObject(o, "plan", (double)n->plan);
	if (n->pid > 0) {
		cJSON_AddNumberToObject(o, "pid", n->pid);
		cJSON_AddNumberToObject(o, "start", (double)n->start_ticks);
	}
	return o;
}

static int node_from_json(const cJSON *o, struct master_node *n, struct rv_err *err)
{
	char state[16] = "";
	int64_t rank, attempt, restarts, ooms, mem = 0, gpu = 0, code = 0, sig = 0;
	int64_t pid = 0, start = 0, plan = 0;
	double cpu = 0;
	int rc;
	memset(n, 0, sizeof(*n));
	if ((rc = rv_json_get_string(o, "name", "node", true, n->name, sizeof(n->name), err)) < 0 ||
	    (rc = rv_json_get_string(o, "instance", "node", true, n->instance, sizeof(n->instance),
				     err)) < 0 ||
	    (rc = rv_json_get_string(o, "role", "node", true, n->role, sizeof(n->role), err)) < 0 ||
	    (rc = rv_json_get_string(o, "host", "node", false, n->host, sizeof(n->host), err)) <
		    0 ||
	    (rc = rv_json_get_string(o, "left", "node", false, n->left, sizeof(n->left), err)) <
		    0 ||
	    (rc = rv_json_get_int(o, "rank", "node", true, 0, INT_MAX, &rank, err)) < 0 ||
	    (rc = rv_json_get_int(o, "attempt", "node", true, 0, INT_MAX, &attempt, err)) < 0 ||
	    (rc = rv_json_get_int(o, "restarts", "node", true, 0, INT_MAX, &restarts, err)) < 0 ||
	    (rc = rv_json_get_int(o, "ooms", "node", true, 0, INT_MAX, &ooms, err)) < 0 ||
	    (rc = rv_json_get_string(o, "state", "node", true, state, sizeof(state), err)) < 0 ||
	    (rc = rv_json_get_double(o, "cpu", "node", false, 0, 1e6, &cpu, err)) < 0 ||
	    (rc = rv_json_get_int(o, "memory_mb", "node", false, 0, INT64_MAX, &mem, err)) < 0 ||
	    (rc = rv_json_get_int(o, "gpu", "node", false, 0, INT_MAX, &gpu, err)) < 0 ||
	    (rc = rv_json_get_int(o, "exit_code", "node", false, INT_MIN, INT_MAX, &code, err)) <
		    0 ||
	    (rc = rv_json_get_int(o, "signal", "node", false, 0, INT_MAX, &sig, err)) < 0 ||
	    (rc = rv_json_get_int(o, "pid", "node", false, 0, INT_MAX, &pid, err)) < 0 ||
	    (rc = rv_json_get_int(o, "start", "node", false, 0, INT64_MAX, &start, err)) < 0 ||
	    (rc = rv_json_get_int(o, "plan", "node", false, 0, INT64_MAX, &plan, err)) < 0)
		return rc;
	int st = rv_wire_parse_of(node_state_names, RV_ARRAY_SIZE(node_state_names), state);
	if (st < 0)
		return rv_err_set(err, -EINVAL, "node.state", "unknown node state \"%s\"", state);
	n->rank = (int)rank;
	n->attempt = (int)attempt;
	n->restarts = (int)restarts;
	n->ooms = (int)ooms;
	n->state = (enum master_node_state)st;
	n->res = (struct sched_resources){ .cpu = cpu, .memory_mb = mem, .gpu = (int)gpu };
	n->exit_code = (int)code;
	n->signal = (int)sig;
	n->pid = (int)pid;
	n->start_ticks = start;
	n->plan = plan;
	return 0;
}

/* The charged hosts as a "hosts" member of doc: [{name, crashes, bad}]. */
void nodetable_hosts_to_json(const struct nodes_host *h, int n, cJSON *doc)
{
	cJSON *arr = doc ? cJSON_AddArrayToObject(doc, "hosts") : NULL;
	for (int i = 0; arr && i < n; i++) {
		cJSON *o = cJSON_CreateObject();
		if (!o)
			return;
		cJSON_AddStringToObject(o, "name", h[i].name);
		cJSON_AddNumberToObject(o, "crashes", h[i].crashes);
		cJSON_AddBoolToObject(o, "bad", h[i].bad);
		cJSON_AddItemToArray(arr, o);
	}
}

/* The nodes charged for network check m->nc_check as a "netcheck_charged"
 * member of doc: {check, nodes: [names]} (none charged: no member). */
void nodetable_charged_to_json(const struct master *m, cJSON *doc)
{
	cJSON *o = doc && m->nc_nnamed > 0 ? cJSON_AddObjectToObject(doc, "netcheck_charged")
					   : NULL;
	cJSON *arr = o ? cJSON_AddArrayToObject(o, "nodes") : NULL;
	if (!arr)
		return;
	cJSON_AddNumberToObject(o, "check", (double)m->nc_check);
	for (int i = 0; i < m->nc_nnamed; i++)
		cJSON_AddItemToArray(arr, cJSON_CreateString(m->nc_named[i]));
}

/* doc's "netcheck_charged" member, when there is one, replaces m's. */
static int charged_from_json(struct master *m, const cJSON *doc, struct rv_err *err)
{
	const cJSON *o = cJSON_GetObjectItem(doc, "netcheck_charged");
	if (!o)
		return 0;
	int64_t check;
	int rc = rv_json_get_int(o, "check", "netcheck_charged", true, 0, INT64_MAX, &check, err);
	const cJSON *arr = rc < 0 ? NULL : cJSON_GetObjectItem(o, "nodes");
	if (rc < 0)
		return rc;
	if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) > (int)RV_ARRAY_SIZE(m->nc_named))
		return rv_err_set(err, -EINVAL, "netcheck_charged.nodes",
				  "netcheck_charged.nodes must be an array of at most %d names",
				  (int)RV_ARRAY_SIZE(m->nc_named));
	char v[RV_ARRAY_SIZE(m->nc_named)][SCHED_NAME_MAX];
	int n = 0;
	const cJSON *it;
	cJSON_ArrayForEach(it, arr)
	{
		if (!cJSON_IsString(it) || strlen(it->valuestring) >= SCHED_NAME_MAX)
			return rv_err_set(err, -EINVAL, "netcheck_charged.nodes",
					  "netcheck_charged.nodes must hold node names");
		snprintf(v[n++], SCHED_NAME_MAX, "%s", it->valuestring);
	}
	memcpy(m->nc_named, v, sizeof(v[0]) * (size_t)n);
	m->nc_nnamed = n;
	m->nc_check = check;
	return 0;
}

/* doc's "hosts" member, when there is one, replaces m->hosts (and its
 * "netcheck_charged", m's nodes charged for a check). */
static int hosts_from_json(struct master *m, const cJSON *doc, struct rv_err *err)
{
	int crc = charged_from_json(m, doc, err);
	if (crc < 0)
		return crc;
	const cJSON *arr = cJSON_GetObjectItem(doc, "hosts");
	if (!arr)
		return 0;
	if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) > NODES_MAX_HOSTS)
		return rv_err_set(err, -EINVAL, "hosts", "hosts must be an array of at most %d",
				  NODES_MAX_HOSTS);
	struct nodes_host v[NODES_MAX_HOSTS];
	int n = 0, rc;
	const cJSON *it;
	cJSON_ArrayForEach(it, arr)
	{
		int64_t crashes;
		struct nodes_host *h = &v[n++];
		memset(h, 0, sizeof(*h));
		if ((rc = rv_json_get_string(it, "name", "hosts", true, h->name, sizeof(h->name),
					     err)) < 0 ||
		    (rc = rv_json_get_int(it, "crashes", "hosts", true, 0, INT_MAX, &crashes,
					  err)) < 0 ||
		    (rc = rv_json_get_bool(it, "bad", "hosts", false, &h->bad, err)) < 0)
			return rc;
		h->crashes = (int)crashes;
	}
	memcpy(m->hosts, v, sizeof(v[0]) * (size_t)n);
	m->nhosts = n;
	return 0;
}

static int apply_job(struct master *m, const cJSON *doc, struct rv_err *err)
{
	char job[16] = "";
	int rc = rv_json_get_string(doc, "job", "", false, job, sizeof(job), err);
	if (rc < 0 || !job[0])
		return rc;
	int st = rv_wire_parse_of(job_state_names, RV_ARRAY_SIZE(job_state_names), job);
	if (st < 0)
		return rv_err_set(err, -EINVAL, "job", "unknown job state \"%s\"", job);
	m->job_state = (enum master_job_state)st;
	return rv_json_get_string(doc, "reason", "", false, m->job_reason, sizeof(m->job_reason),
				  err);
}

int nodetable_apply(struct master *m, int type, const void *data, size_t len, struct rv_err *err)
{
	RV_CLEANUP_CJSON cJSON *doc = rv_json_parse(data, len, err);
	if (!doc)
		return -EINVAL;
	if (type == MASTER_OP_NODE_LAUNCHED) {
		struct master_node v;
		int rc = node_from_json(doc, &v, err);
		if (rc < 0)
			return rc;
		if ((rc = hosts_from_json(m, doc, err)) < 0)
			return rc;
		struct master_node *n = table_get(m, v.name);
		if (!n)
			return rv_err_set(err, -ENOMEM, "", "out of memory");
		*n = v;
		return 0;
	}
	char name[SCHED_NAME_MAX] = "", inst[SCHED_NAME_MAX] = "", state[16] = "";
	int64_t code = 0, sig = 0;
	bool removed = false;
	int rc;
	if ((rc = rv_json_get_string(doc, "name", "", false, name, sizeof(name), err)) < 0 ||
	    (rc = rv_json_get_string(doc, "instance", "", false, inst, sizeof(inst), err)) < 0 ||
	    (rc = rv_json_get_string(doc, "state", "", false, state, sizeof(state), err)) < 0 ||
	    (rc = rv_json_get_bool(doc, "removed", "", false, &removed, err)) < 0 ||
	    (rc = rv_json_get_int(doc, "exit_code", "", false, INT_MIN, INT_MAX, &code, err)) < 0 ||
	    (rc = rv_json_get_int(doc, "signal", "", false, 0, INT_MAX, &sig, err)) < 0 ||
	    (rc = hosts_from_json(m, doc, err)) < 0)
		return rc;
	struct master_node *n = nodetable_find(m, name);
	if (n && !strcmp(n->instance, inst)) {
		if (removed) {
			*n = m->nodes[--m->nnodes];
		} else {
			int st = rv_wire_parse_of(node_state_names, RV_ARRAY_SIZE(node_state_names),
						  state);
			if (st < 0)
				return rv_err_set(err, -EINVAL, "state",
						  "unknown node state \"%s\"", state);
			n->state = (enum master_node_state)st;
			n->exit_code = (int)code;
			n->signal = (int)sig;
			n->pid = 0;
			/* its heartbeats end with it; its peers finish too */
			if (n->state == MASTER_NODE_SUCCEEDED)
				rdzv_done(m->rdzv, name);
		}
	}
	return apply_job(m, doc, err);
}

void nodetable_snapshot_save(const struct master *m, struct rv_buf *out)
{
	RV_CLEANUP_CJSON cJSON *o = cJSON_CreateObject();
	if (!o) {
		rv_buf_puts(out, ",\"nodemgr\":null");
		return;
	}
	cJSON *nodes = cJSON_AddArrayToObject(o, "nodes");
	for (int i = 0; i < m->nnodes; i++)
		cJSON_AddItemToArray(nodes, nodetable_node_to_json(&m->nodes[i]));
	nodetable_hosts_to_json(m->hosts, m->nhosts, o);
	nodetable_charged_to_json(m, o);
	cJSON_AddStringToObject(o, "job", nodetable_job_state_name(m->job_state));
	cJSON_AddStringToObject(o, "reason", m->job_reason);
	RV_CLEANUP_FREE char *s = rv_json_print(o);
	rv_buf_printf(out, ",\"nodemgr\":%s", s ? s : "null");
}

int nodetable_snapshot_load(struct master *m, const cJSON *o, struct rv_err *err)
{
	if (!o || !cJSON_IsObject(o))
		return 0;
	m->nnodes = 0;
	const cJSON *it;
	cJSON_ArrayForEach(it, cJSON_GetObjectItem(o, "nodes"))
	{
		struct master_node v;
		int rc = node_from_json(it, &v, err);
		if (rc < 0)
			return -EUCLEAN;
		struct master_node *n = table_get(m, v.name);
		if (!n)
			return rv_err_set(err, -ENOMEM, "", "out of memory");
		*n = v;
	}
	m->nhosts = 0;
	m->nc_check = 0;
	m->nc_nnamed = 0;
	if (hosts_from_json(m, o, err) < 0)
		return -EUCLEAN;
	return apply_job(m, o, err) < 0 ? -EUCLEAN : 0;
}

void nodetable_release(struct master *m)
{
	free(m->nodes);
	m->nodes = NULL;
	m->nnodes = m->capnodes = 0;
}

static int part_save(const struct master *m, struct rv_buf *out)
{
	nodetable_snapshot_save(m, out);
	return 0;
}

static int part_load(struct master *m, const cJSON *extra, struct rv_err *err)
{
	return nodetable_snapshot_load(m, cJSON_GetObjectItem(extra, "nodemgr"), err);
}

const struct master_part nodetable_part = {
	.save = part_save,
	.load = part_load,
	.release = nodetable_release,
};
