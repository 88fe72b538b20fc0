/*
 * master_client.c: rover-master's control API as typed calls (see
 * master_client.h).  Every call goes through call(), that is rest_client.c's
 * rv_rest_call: the URL, the body, the retry policy and the mapping of an
 * error reply to errno + rv_err.  Bodies
 * go out through wire.c's *_to_json and replies come back through
 * *_from_json, the code the master validates with.  One client per thread;
 * never logs.
 */
#include "master_client.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "http.h"
#include "json.h"
#include "parse.h"
#include "rest_client.h"

struct rv_master_client {
	struct rv_rest rest;
};

struct rv_master_client *rv_master_client_new(const struct rv_master_opts *opts, struct rv_err *err)
{
	static const struct rv_rest_opts dflt = {
		.connect_timeout_ms = 2000,
		.timeout_ms = 10000,
		.max_attempts = 20,
		.backoff_ms = 20,
		.backoff_max_ms = 1000,
		.retry_budget_ms = 30000,
	};
	struct rv_master_client *c = calloc(1, sizeof(*c));
	if (!c) {
		rv_err_set(err, -ENOMEM, "", "could not allocate a master client");
		return NULL;
	}
	struct rv_rest_opts o = { 0 };
	if (opts)
		o = RV_REST_OPTS_OF(opts);
	if (rv_rest_init(&c->rest, "master", RV_REST_RETRY_BROKEN, &o, &dflt, err) < 0)
		return rv_master_client_free(c);
	return c;
}

struct rv_master_client *rv_master_client_free(struct rv_master_client *c)
{
	if (!c)
		return NULL;
	rv_rest_release(&c->rest);
	free(c);
	return NULL;
}

int rv_master_last_attempts(const struct rv_master_client *c)
{
	return c->rest.last_attempts;
}

/* ---- one call: rest_client.c retries and maps errors ---- */

enum {
	CALL_IDEMPOTENT = RV_REST_IDEMPOTENT,
	CALL_REFUSED_ONLY = RV_REST_REFUSED_ONLY,
};

/* Every call of the master's API answers a document: an empty 2xx is an
 * error.  *reply is the caller's. */
static int call(struct rv_master_client *c, const char *what, const char *method, const char *path,
		const char *body, int extra_ms, int flags, cJSON **reply, struct rv_err *err)
{
	int rc =
		rv_rest_call(&c->rest, what, method, path, body, extra_ms, flags, NULL, reply, err);
	if (rc == 0 && !*reply)
		rc = rv_err_set(err, -EPROTO, "", "could not %s: empty reply", what);
	return rc;
}

/* POST a cJSON document (consumed). */
static int post(struct rv_master_client *c, const char *what, const char *path, cJSON *doc,
		int flags, cJSON **reply, struct rv_err *err)
{
	int rc = rv_rest_post(&c->rest, what, path, doc, flags, NULL, reply, err);
	if (rc == 0 && !*reply)
		rc = rv_err_set(err, -EPROTO, "", "could not %s: empty reply", what);
	return rc;
}

/* A reply that does not parse as its message names the field. */
static int bad_reply(const char *what, int rc, struct rv_err *err)
{
	if (err)
		return rv_err_set(err, -EPROTO, err->field, "could not %s: bad reply: %s", what,
				  err->msg);
	return rc < 0 ? -EPROTO : rc;
}

int rv_master_join(struct rv_master_client *c, const struct rv_rdzv_join *j, int64_t *round,
		   struct rv_err *err)
{
	const char *what = "join the rendezvous";
	RV_CLEANUP_CJSON cJSON *reply = NULL;
	int rc = post(c, what, "/v1/rdzv/join", rv_rdzv_join_to_json(j), CALL_REFUSED_ONLY, &reply,
		      err);
	if (rc < 0)
		return rc;
	struct rv_rdzv_joined m;
	if ((rc = rv_rdzv_joined_from_json(reply, &m, err)) < 0)
		return bad_reply(what, rc, err);
	*round = m.round;
	return 0;
}

/* Node names go into a query string: only the characters wire.c allows. */
static int check_node(const char *node, struct rv_err *err)
{
	size_t n = node ? strlen(node) : 0;
	bool ok = n > 0 && n < RV_NAME_MAX;
	for (size_t i = 0; ok && i < n; i++)
		ok = (node[i] >= 'a' && node[i] <= 'z') || (node[i] >= 'A' && node[i] <= 'Z') ||
		     (node[i] >= '0' && node[i] <= '9') || node[i] == '-' || node[i] == '_' ||
		     node[i] == '.';
	return ok ? 0
		  : rv_err_set(err, -EINVAL, "node", "node \"%.64s\" is not a node name",
			       node ? node : "");
}

static int world_get(struct rv_master_client *c, const char *node, int64_t round, int wait_ms,
		     bool watch, struct rv_rdzv_world_reply *out, struct rv_err *err)
{
	const char *what = "get the rendezvous world";
	memset(out, 0, sizeof(*out));
	int rc = check_node(node, err);
	if (rc < 0)
		return rc;
	char path[256];
	snprintf(path, sizeof(path), "/v1/rdzv/world?node=%s&round=%" PRId64 "&wait_ms=%d%s", node,
		 round, wait_ms > 0 ? wait_ms : 0, watch ? "&watch=1" : "");
	RV_CLEANUP_CJSON cJSON *reply = NULL;
	rc = call(c, what, "GET", path, NULL, wait_ms > 0 ? wait_ms : 0, CALL_IDEMPOTENT, &reply,
		  err);
	if (rc < 0)
		return rc;
	if ((rc = rv_rdzv_world_reply_from_json(reply, out, err)) < 0)
		return bad_reply(what, rc, err);
	return 0;
}

int rv_master_world(struct rv_master_client *c, const char *node, int64_t round, int wait_ms,
		    struct rv_rdzv_world_reply *out, struct rv_err *err)
{
	return world_get(c, node, round, wait_ms, false, out, err);
}

int rv_master_world_watch(struct rv_master_client *c, const char *node, int64_t round, int wait_ms,
			  struct rv_rdzv_world_reply *out, struct rv_err *err)
{
	return world_get(c, node, round, wait_ms, true, out, err);
}

int rv_master_rendezvous(struct rv_master_client *c, const struct rv_rdzv_join *j, int timeout_ms,
			 struct rv_rdzv_world_reply *out, struct rv_err *err)
{
	int64_t until = rv_mono_ms() + timeout_ms;
	int64_t round = 0;
	int rc;
	memset(out, 0, sizeof(*out));
	bool join = true;
	for (;;) {
		if (join && (rc = rv_master_join(c, j, &round, err)) < 0)
			return rc;
		join = false;
		int64_t left = until - rv_mono_ms();
		if (left <= 0)
			return rv_err_set(err, -ETIMEDOUT, "", "could not rendezvous within %d ms",
					  timeout_ms);
		rv_rdzv_world_reply_release(out);
		rc = rv_master_world(c, j->node, round, (int)(left < 5000 ? left : 5000), out, err);
		if (rc < 0)
			return rc;
		switch (out->status) {
		case RV_RDZV_COMPLETE:
			return 0;
		case RV_RDZV_FAILED:
			return rv_err_set(err, -ECANCELED, "",
					  "the rendezvous failed: min nodes not reached in time");
		case RV_RDZV_STALE:
		case RV_RDZV_UNKNOWN:
			join = true;
			break;
		case RV_RDZV_SPARE: /* waits until a round opens: then stale */
		case RV_RDZV_GATHERING:
			break;
		}
	}
}

static int heartbeat(struct rv_master_client *c, const char *node, bool done,
		     struct rv_heartbeat_reply *out, struct rv_err *err)
{
	const char *what = done ? "say the node finished" : "send a heartbeat";
	struct rv_heartbeat hb = { .done = done };
	int rc = check_node(node, err);
	if (rc < 0)
		return rc;
	snprintf(hb.node, sizeof(hb.node), "%s", node);
	RV_CLEANUP_CJSON cJSON *reply = NULL;
	if ((rc = post(c, what, "/v1/heartbeat", rv_heartbeat_to_json(&hb), CALL_IDEMPOTENT, &reply,
		       err)) < 0)
		return rc;
	struct rv_heartbeat_reply m;
	if ((rc = rv_heartbeat_reply_from_json(reply, &m, err)) < 0)
		return bad_reply(what, rc, err);
	if (out)
		*out = m;
	return 0;
}

int rv_master_heartbeat(struct rv_master_client *c, const char *node,
			struct rv_heartbeat_reply *out, struct rv_err *err)
{
	return heartbeat(c, node, false, out, err);
}

int rv_master_finished(struct rv_master_client *c, const char *node, struct rv_err *err)
{
	return heartbeat(c, node, true, NULL, err);
}

int rv_master_failure(struct rv_master_client *c, const struct rv_failure_report *f,
		      struct rv_err *err)
{
	RV_CLEANUP_CJSON cJSON *reply = NULL;
	return post(c, "report a failure", "/v1/failure", rv_failure_report_to_json(f),
		    CALL_IDEMPOTENT, &reply, err);
}

int rv_master_shard_next(struct rv_master_client *c, const struct rv_shard_next *req,
			 struct rv_shard_task *out, struct rv_err *err)
{
	const char *what = "get the next shard";
	struct rv_shard_next m = *req;
	if (m.req <= 0)
		m.req = (int64_t)(rv_rest_rand(&c->rest) & ((UINT64_C(1) << 52) - 1)) + 1;
	RV_CLEANUP_CJSON cJSON *reply = NULL;
	int rc = post(c, what, "/v1/shards/next", rv_shard_next_to_json(&m), CALL_IDEMPOTENT,
		      &reply, err);
	if (rc < 0)
		return rc;
	if ((rc = rv_shard_task_from_json(reply, out, err)) < 0)
		return bad_reply(what, rc, err);
	return 0;
}

int rv_master_shard_done(struct rv_master_client *c, const struct rv_shard_done *d, bool *counted,
			 struct rv_err *err)
{
	const char *what = "report a shard done";
	RV_CLEANUP_CJSON cJSON *reply = NULL;
	int rc = post(c, what, "/v1/shards/done", rv_shard_done_to_json(d), CALL_IDEMPOTENT, &reply,
		      err);
	if (rc < 0)
		return rc;
	struct rv_shard_done_reply m;
	if ((rc = rv_shard_done_reply_from_json(reply, &m, err)) < 0)
		return bad_reply(what, rc, err);
	if (counted)
		*counted = m.counted;
	return 0;
}

int rv_master_ckpt_report(struct rv_master_client *c, const struct rv_ckpt_report *r,
			  struct rv_err *err)
{
	RV_CLEANUP_CJSON cJSON *reply = NULL;
	return post(c, "report a data checkpoint", "/v1/shards/ckpt/report",
		    rv_ckpt_report_to_json(r), CALL_IDEMPOTENT, &reply, err);
}

int rv_master_ckpt_export(struct rv_master_client *c, int64_t step, struct rv_data_ckpt *out,
			  struct rv_err *err)
{
	const char *what = "export a data checkpoint";
	memset(out, 0, sizeof(*out));
	char path[96];
	snprintf(path, sizeof(path), "/v1/shards/ckpt?step=%" PRId64, step);
	RV_CLEANUP_CJSON cJSON *reply = NULL;
	int rc = call(c, what, "GET", path, NULL, 0, CALL_IDEMPOTENT, &reply, err);
	if (rc < 0)
		return rc;
	if ((rc = rv_data_ckpt_from_json(reply, out, err)) < 0)
		return bad_reply(what, rc, err);
	return 0;
}

int rv_master_ckpt_import(struct rv_master_client *c, const struct rv_data_ckpt *ck,
			  struct rv_err *err)
{
	RV_CLEANUP_CJSON cJSON *reply = NULL;
	cJSON *doc = rv_data_ckpt_to_json(ck);
	if (!doc)
		return rv_err_set(err, -EINVAL, "checkpoint",
				  "could not import a data checkpoint: it is not json");
	return post(c, "import a data checkpoint", "/v1/shards/ckpt/import", doc, CALL_REFUSED_ONLY,
		    &reply, err);
}

int rv_master_step(struct rv_master_client *c, const struct rv_step_report *s, struct rv_err *err)
{
	RV_CLEANUP_CJSON cJSON *reply = NULL;
	return post(c, "report a step", "/v1/steps", rv_step_report_to_json(s), CALL_IDEMPOTENT,
		    &reply, err);
}

int rv_master_job(struct rv_master_client *c, struct rv_job_status *out, struct rv_err *err)
{
	const char *what = "get the job status";
	RV_CLEANUP_CJSON cJSON *reply = NULL;
	int rc = call(c, what, "GET", "/v1/job", NULL, 0, CALL_IDEMPOTENT, &reply, err);
	if (rc < 0)
		return rc;
	if ((rc = rv_job_status_from_json(reply, out, err)) < 0)
		return bad_reply(what, rc, err);
	return 0;
}

int rv_master_stream_end(struct rv_master_client *c, const char *dataset,
			 const struct rv_stream_end *e, struct rv_err *err)
{
	int rc = check_node(dataset, err);
	if (rc < 0)
		return rc;
	char path[128];
	snprintf(path, sizeof(path), "/v1/streams/%s/partitions", dataset);
	RV_CLEANUP_CJSON cJSON *reply = NULL;
	return post(c, "tell a partition's end", path, rv_stream_end_to_json(e), CALL_IDEMPOTENT,
		    &reply, err);
}

int rv_master_stream(struct rv_master_client *c, const char *dataset, struct rv_stream_status *out,
		     struct rv_err *err)
{
	const char *what = "get a stream's offsets";
	int rc = check_node(dataset, err);
	if (rc < 0)
		return rc;
	char path[128];
	snprintf(path, sizeof(path), "/v1/streams/%s", dataset);
	RV_CLEANUP_CJSON cJSON *reply = NULL;
	if ((rc = call(c, what, "GET", path, NULL, 0, CALL_IDEMPOTENT, &reply, err)) < 0)
		return rc;
	if ((rc = rv_stream_status_from_json(reply, out, err)) < 0)
		return bad_reply(what, rc, err);
	return 0;
}

int rv_master_netcheck_join(struct rv_master_client *c, const char *node,
			    struct rv_netcheck_joined *out, struct rv_err *err)
{
	const char *what = "join the network check";
	struct rv_netcheck_join j = { 0 };
	int rc = check_node(node, err);
	if (rc < 0)
		return rc;
	snprintf(j.node, sizeof(j.node), "%s", node);
	RV_CLEANUP_CJSON cJSON *reply = NULL;
	/* a repeated join of a world already checked changes nothing */
	if ((rc = post(c, what, "/v1/netcheck/join", rv_netcheck_join_to_json(&j), CALL_IDEMPOTENT,
		       &reply, err)) < 0)
		return rc;
	if ((rc = rv_netcheck_joined_from_json(reply, out, err)) < 0)
		return bad_reply(what, rc, err);
	return 0;
}

int rv_master_netcheck_group(struct rv_master_client *c, const char *node, int round,
			     struct rv_netcheck_group_reply *out, struct rv_err *err)
{
	const char *what = "get a network check group";
	int rc = check_node(node, err);
	if (rc < 0)
		return rc;
	char path[160];
	snprintf(path, sizeof(path), "/v1/netcheck/group?node=%s&round=%d", node, round);
	RV_CLEANUP_CJSON cJSON *reply = NULL;
	if ((rc = call(c, what, "GET", path, NULL, 0, CALL_IDEMPOTENT, &reply, err)) < 0)
		return rc;
	if ((rc = rv_netcheck_group_reply_from_json(reply, out, err)) < 0)
		return bad_reply(what, rc, err);
	return 0;
}

int rv_master_netcheck_report(struct rv_master_client *c, const struct rv_netcheck_report *r,
			      struct rv_err *err)
{
	RV_CLEANUP_CJSON cJSON *reply = NULL;
	return post(c, "report a network check round", "/v1/netcheck/report",
		    rv_netcheck_report_to_json(r), CALL_IDEMPOTENT, &reply, err);
}

int rv_master_netcheck(struct rv_master_client *c, struct rv_netcheck_status *out,
		       struct rv_err *err)
{
	const char *what = "get the network check";
	memset(out, 0, sizeof(*out));
	RV_CLEANUP_CJSON cJSON *reply = NULL;
	int rc = call(c, what, "GET", "/v1/netcheck", NULL, 0, CALL_IDEMPOTENT, &reply, err);
	if (rc < 0)
		return rc;
	if ((rc = rv_netcheck_status_from_json(reply, out, err)) < 0)
		return bad_reply(what, rc, err);
	return 0;
}

int rv_master_usage(struct rv_master_client *c, const struct rv_node_usage *u, struct rv_err *err)
{
	RV_CLEANUP_CJSON cJSON *reply = NULL;
	return post(c, "report the node's usage", "/v1/usage", rv_node_usage_to_json(u),
		    CALL_IDEMPOTENT, &reply, err);
}

int rv_master_usage_list(struct rv_master_client *c, struct rv_node_usage *out, int max, int *n,
			 struct rv_err *err)
{
	const char *what = "list the nodes' usage";
	RV_CLEANUP_CJSON cJSON *reply = NULL;
	*n = 0;
	int rc = call(c, what, "GET", "/v1/usage", NULL, 0, CALL_IDEMPOTENT, &reply, err);
	if (rc < 0)
		return rc;
	const cJSON *nodes = cJSON_GetObjectItemCaseSensitive(reply, "nodes");
	if (!cJSON_IsArray(nodes))
		return bad_reply(what, rv_err_set(err, -EPROTO, "nodes", "no nodes array"), err);
	const cJSON *it;
	cJSON_ArrayForEach(it, nodes)
	{
		if (*n >= max)
			break;
		if ((rc = rv_node_usage_from_json(it, &out[*n], err)) < 0)
			return bad_reply(what, rc, err);
		(*n)++;
	}
	return 0;
}
