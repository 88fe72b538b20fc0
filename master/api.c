/*
 * api.c: rover-master's control API: the route table, the handlers, and
 * /healthz, /metrics and /v1/openapi.json.  A write handler parses its body
 * through common/wire.c, builds an operation, applies it under the state
 * lock (state_apply journals it), unlocks, and replies only once it is
 * durable: deferred to the completer thread on a pooled server
 * (state_reply_durable), else waiting in state_sync.  The world long-poll
 * is parked until master_world_poll answers it (pooled server) or waits on
 * the state's condition variable; either is bounded by
 * cfg.world_wait_max_ms.  The OpenAPI document comes from this route table
 * and wire.c's master field tables (common/openapi.c).
 * Handlers run on libmicrohttpd's connection threads.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api.h"
#include "buf.h"
#include "cleanup.h"
#include "json.h"
#include "log.h"
#include "master.h"
#include "nodelink.h"
#include "nodemgr.h"
#include "openapi.h"
#include "parse.h"
#include "plans.h"
#include "rest_server.h"

/* Error reply: the shard module's codes get the statuses that fit them. */
static int api_fail(struct rv_http_resp *resp, int rc, const struct rv_err *err)
{
	const char *detail = err && err->msg[0] ? err->msg : strerror(-rc);
	const char *field = err ? err->field : "";
	switch (rc) {
	case -EPERM:
	case -EEXIST:
		rv_http_resp_error_text(resp, 409, "conflict", detail, field);
		return 0;
	case -ERANGE:
		rv_http_resp_error_text(resp, 422, "unprocessable", detail, field);
		return 0;
	case -ENOSPC:
		rv_http_resp_error_text(resp, 503, "unavailable", detail, field);
		return 0;
	case -ECANCELED:
		rv_http_resp_error_text(resp, 410, "rendezvous_failed", detail, field);
		return 0;
	case -ESTALE: /* a data checkpoint that can never be whole */
		rv_http_resp_error_text(resp, 410, "never_whole", detail, field);
		return 0;
	default:
		if (rv_errno_to_http(rc) >= 500) {
			char q[600];
			rv_log_error("request failed", "errno=%d reason=%s", -rc,
				     rv_log_q(q, sizeof(q), detail));
		}
		rv_http_resp_error(resp, rc, err);
		return 0;
	}
}

/* Apply one operation under the state lock; *seq its record (0: none). */
static int apply_op(struct master *m, int type, struct master_op *op, const void *doc, size_t len,
		    struct master_result *res, int64_t *seq)
{
	state_lock(m, state_op_name(type));
	op->now_ms = state_now(m);
	if (type == MASTER_OP_CKPT_REPORT) /* taken here, so that replay sees the same */
		op->world_size = rdzv_last_world_size(m->rdzv);
	int rc = state_apply(m, type, op, doc, len, res, seq);
	if (type == MASTER_OP_JOIN || type == MASTER_OP_LEAVE || type == MASTER_OP_NETCHECK)
		pthread_cond_signal(&m->timer_wake); /* deadlines moved */
	state_unlock(m);
	return rc;
}

/* Reply (resp filled from rc and res) once the operation is durable. */
static int reply_durable(struct master *m, struct rv_http_resp *resp, int rc, int64_t seq)
{
	/* Nothing journaled (a retried request, a repeated done): the answer may
	 * still rest on records another thread appended, so wait for those too. */
	if (rc < 0 && seq <= 0)
		return 0;
	return state_reply_durable(m, resp, seq, rc >= 0);
}

/* Apply one operation and reply {"accepted":1} once it is durable. */
static int accept_op(struct master *m, struct rv_http_resp *resp, int type, struct master_op *op)
{
	struct master_result res;
	int64_t seq = 0;
	int rc = apply_op(m, type, op, NULL, 0, &res, &seq);
	if (rc < 0)
		api_fail(resp, rc, &res.err);
	else if (rv_rest_reply(resp, 200, cJSON_Parse("{\"accepted\":1}")) < 0)
		rv_http_resp_error(resp, -ENOMEM, NULL);
	return reply_durable(m, resp, rc, seq);
}

/* Apply one operation and reply once it is durable; res for the reply. */
static int run_op(struct master *m, int type, struct master_op *op, const void *doc, size_t len,
		  struct master_result *res)
{
	int64_t seq = 0;
	int rc = apply_op(m, type, op, doc, len, res, &seq);
	/* Nothing journaled (a retried request, a repeated done): the answer may
	 * still rest on records another thread appended, so wait for those too. */
	int s = seq > 0   ? state_sync(m, seq)
		: rc >= 0 ? journal_sync(m->journal, 0, (int)m->cfg.sync_timeout_ms)
			  : 0;
	if (rc >= 0 && s < 0) {
		res->rc = state_sync_err(m, s, &res->err);
		return res->rc;
	}
	return rc;
}

static int api_join(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	struct master *m = ctx;
	RV_CLEANUP_CJSON cJSON *doc = rv_rest_parse_body(req, resp);
	if (!doc)
		return 0;
	struct rv_rdzv_join j;
	struct rv_err err = { 0 };
	int rc = rv_rdzv_join_from_json(doc, &j, &err);
	if (rc < 0)
		return api_fail(resp, rc, &err);
	struct master_op op;
	memset(&op, 0, sizeof(op));
	snprintf(op.node, sizeof(op.node), "%s", j.node);
	snprintf(op.addr, sizeof(op.addr), "%s", j.addr);
	op.local_world_size = j.local_world_size;
	struct master_result res;
	if ((rc = run_op(m, MASTER_OP_JOIN, &op, NULL, 0, &res)) < 0)
		return api_fail(resp, rc, &res.err);
	struct rv_rdzv_joined out = { .round = res.round };
	return rv_rest_reply(resp, 200, rv_rdzv_joined_to_json(&out));
}

static int query_i64(const struct rv_http_req *req, const char *key, int64_t min, int64_t max,
		     bool required, int64_t *out, struct rv_err *err)
{
	const char *v = rv_http_query(req, key);
	if (!v)
		return required ? rv_err_set(err, -EINVAL, key, "%s is required", key) : 0;
	if (rv_parse_i64(v, min, max, out) < 0)
		return rv_err_set(err, -EINVAL, key,
				  "%s must be an integer in %" PRId64 "..%" PRId64, key, min, max);
	return 1;
}

/* The world reply for rdzv_world's rc; under m->lock.  malloc'd JSON or NULL. */
static char *world_reply(struct master *m, int rc, int64_t round, const struct rdzv_world *w,
			 int grank)
{
	struct rv_rdzv_world_reply out = { .round = round, .group_rank = -1 };
	out.waiting = rdzv_waiting(m->rdzv);
	switch (rc) {
	case 1:
		out.status = RV_RDZV_COMPLETE;
		break;
	case 0:
		out.status = RV_RDZV_GATHERING;
		break;
	case -EAGAIN:
		out.status = RV_RDZV_SPARE;
		break;
	case -ECANCELED:
		out.status = RV_RDZV_FAILED;
		break;
	case -ENOENT:
		out.status = RV_RDZV_UNKNOWN;
		break;
	default: /* -ESTALE, or a round never opened */
		out.status = RV_RDZV_STALE;
		break;
	}
	if (rc == 1) {
		out.group_rank = grank;
		out.nnodes = w->nnodes;
		out.world_size = w->world_size;
		out.members = calloc((size_t)w->nnodes, sizeof(*out.members));
		if (!out.members)
			return NULL;
		for (int i = 0; i < w->nnodes; i++) {
			struct rv_rdzv_member *mb = &out.members[i];
			snprintf(mb->node, sizeof(mb->node), "%s", w->members[i].node.name);
			snprintf(mb->addr, sizeof(mb->addr), "%s", w->members[i].node.addr);
			mb->local_world_size = w->members[i].node.local_world_size;
			mb->group_rank = w->members[i].group_rank;
			mb->rank_offset = w->members[i].rank_offset;
		}
		out.nmembers = w->nnodes;
	}
	cJSON *doc = rv_rdzv_world_reply_to_json(&out);
	rv_rdzv_world_reply_release(&out);
	char *json = doc ? rv_json_print(doc) : NULL;
	cJSON_Delete(doc);
	return json;
}

/* A world long-poll parked on a pooled server (m->world_waits). */
struct world_wait {
	struct rv_http_defer *d;
	char node[RV_NAME_MAX];
	int64_t round;
	int64_t until; /* monotonic ms */
	bool watch;    /* answered when the round stops being complete */
	struct world_wait *next;
};

/* Whether a world long-poll keeps waiting on rdzv_world's rc: for the round
 * to complete (gathering, or a spare), or with watch for a complete round
 * to end (a node failed, left or joined: a new round opens). */
static bool world_parked(int rc, bool watch)
{
	return watch ? rc == 1 : rc == 0 || rc == -EAGAIN;
}

void master_world_poll(struct master *m)
{
	if (!m->world_waits)
		return;
	RV_CLEANUP_FREE struct rdzv_world *w = malloc(sizeof(*w));
	int64_t now = rv_mono_ms();
	for (struct world_wait **pp = &m->world_waits; *pp;) {
		struct world_wait *ww = *pp;
		int grank = -1;
		int rc = w ? rdzv_world(m->rdzv, ww->node, ww->round, w, &grank) : -ENOMEM;
		if (w && rc != -ENOMEM && world_parked(rc, ww->watch) && !m->stopping &&
		    now < ww->until) {
			pp = &ww->next;
			continue;
		}
		*pp = ww->next;
		rv_http_complete(ww->d, 200, w ? world_reply(m, rc, ww->round, w, grank) : NULL);
		free(ww);
	}
}

int master_world_lost(struct master *m, char (*lost)[RV_NAME_MAX], int max)
{
	int n = 0;
	int64_t now = state_now(m);
	for (struct world_wait **pp = &m->world_waits; *pp && n < max;) {
		struct world_wait *ww = *pp;
		/* a parked watch is a member of the complete world; a node that
		 * said it finished may go silent (rdzv_alive: not done) */
		if (!ww->watch || !rv_http_defer_gone(ww->d) ||
		    !rdzv_alive(m->rdzv, ww->node, now) ||
		    rdzv_world(m->rdzv, ww->node, ww->round, NULL, NULL) != 1) {
			pp = &ww->next;
			continue;
		}
		*pp = ww->next;
		snprintf(lost[n++], RV_NAME_MAX, "%s", ww->node);
		rv_http_complete(ww->d, 410, NULL); /* nobody reads it */
		free(ww);
	}
	return n;
}

int64_t master_world_deadline(const struct master *m)
{
	int64_t dl = INT64_MAX;
	for (const struct world_wait *ww = m->world_waits; ww; ww = ww->next) {
		if (ww->until < dl)
			dl = ww->until;
		/* a watch's closed connection is looked for this often */
		if (ww->watch && rv_mono_ms() + MASTER_WATCH_LOOK_MS < dl)
			dl = rv_mono_ms() + MASTER_WATCH_LOOK_MS;
	}
	return dl;
}

static int api_world(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	struct master *m = ctx;
	struct rv_err err = { 0 };
	const char *node;
	int64_t round = 0, wait = 0, watch = 0;
	int rc = rv_http_query_name(req, "node", RV_NAME_MAX - 1, true, &node, &err);
	if (rc < 0)
		return api_fail(resp, rc, &err);
	if ((rc = query_i64(req, "round", 0, INT64_MAX, true, &round, &err)) < 0 ||
	    (rc = query_i64(req, "wait_ms", 0, 3600000, false, &wait, &err)) < 0 ||
	    (rc = query_i64(req, "watch", 0, 1, false, &watch, &err)) < 0)
		return api_fail(resp, rc, &err);
	if (wait > m->cfg.world_wait_max_ms)
		wait = m->cfg.world_wait_max_ms;
	RV_CLEANUP_FREE struct rdzv_world *w = malloc(sizeof(*w));
	if (!w)
		return -ENOMEM;
	int64_t until = rv_mono_ms() + wait;
	struct timespec ts;
	rv_mono_timespec(&ts, until);
	int grank = -1;
	state_lock(m, "world");
	for (;;) {
		rc = rdzv_world(m->rdzv, node, round, w, &grank);
		if (!world_parked(rc, watch) || m->stopping || wait == 0)
			break;
		/* A pooled server: park the request instead of a thread; a state
		 * change or the timer answers it (master_world_poll). */
		struct world_wait *ww = m->completer_started ? calloc(1, sizeof(*ww)) : NULL;
		if (ww) {
			char *body = resp->body;
			resp->body = NULL;
			ww->d = rv_http_resp_defer(resp);
			if (ww->d) {
				snprintf(ww->node, sizeof(ww->node), "%s", node);
				ww->round = round;
				ww->until = until;
				ww->watch = watch;
				ww->next = m->world_waits;
				m->world_waits = ww;
				pthread_cond_signal(&m->timer_wake); /* an earlier deadline */
				state_unlock(m);
				return 0;
			}
			resp->body = body;
			free(ww);
		}
		if (state_wait(m, &m->changed, &ts) == ETIMEDOUT) {
			rc = rdzv_world(m->rdzv, node, round, w, &grank);
			break;
		}
	}
	char *json = world_reply(m, rc, round, w, grank);
	state_unlock(m);
	if (!json)
		return -ENOMEM;
	rv_http_resp_json(resp, 200, json);
	return 0;
}

static int api_heartbeat(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	struct master *m = ctx;
	RV_CLEANUP_CJSON cJSON *doc = rv_rest_parse_body(req, resp);
	if (!doc)
		return 0;
	struct rv_heartbeat hb;
	struct rv_err err = { 0 };
	int rc = rv_heartbeat_from_json(doc, &hb, &err);
	if (rc < 0)
		return api_fail(resp, rc, &err);
	struct master_op op;
	memset(&op, 0, sizeof(op));
	snprintf(op.node, sizeof(op.node), "%s", hb.node);
	struct master_result res;
	int64_t seq = 0;
	struct rv_heartbeat_reply out = { 0 };
	state_lock(m, "heartbeat");
	op.now_ms = state_now(m);
	rc = state_apply(m, hb.done ? MASTER_OP_NODE_FINISHED : MASTER_OP_HEARTBEAT, &op, NULL, 0,
			 &res, &seq);
	int st = rdzv_state(m->rdzv, &out.round, NULL);
	out.waiting = rdzv_waiting(m->rdzv);
	out.rejoin = rc == -ENOENT || st == RDZV_GATHERING;
	/* A plain heartbeat has no record to wait for: only what its reply
	 * says must be durable. */
	if (seq == 0)
		seq = state_heartbeat_seq(m);
	state_unlock(m);
	if (rc < 0 && rc != -ENOENT)
		return api_fail(resp, rc, &res.err);
	if (rv_rest_reply(resp, 200, rv_heartbeat_reply_to_json(&out)) < 0)
		rv_http_resp_error(resp, -ENOMEM, NULL);
	return seq > 0 ? state_reply_durable(m, resp, seq, true) : 0;
}

static int api_failure(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	struct master *m = ctx;
	RV_CLEANUP_CJSON cJSON *doc = rv_rest_parse_body(req, resp);
	if (!doc)
		return 0;
	struct rv_failure_report f;
	struct rv_err err = { 0 };
	int rc = rv_failure_report_from_json(doc, &f, &err);
	if (rc < 0)
		return api_fail(resp, rc, &err);
	struct master_op op;
	memset(&op, 0, sizeof(op));
	snprintf(op.node, sizeof(op.node), "%s", f.node);
	char q[300];
	rv_log_info("node failure reported", "node=%s exit=%d reason=%s", f.node, f.exit_code,
		    rv_log_q(q, sizeof(q), f.reason));
	return accept_op(m, resp, MASTER_OP_LEAVE, &op);
}

static int api_shard_next(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	struct master *m = ctx;
	RV_CLEANUP_CJSON cJSON *doc = rv_rest_parse_body(req, resp);
	if (!doc)
		return 0;
	struct rv_shard_next n;
	struct rv_err err = { 0 };
	int rc = rv_shard_next_from_json(doc, &n, &err);
	if (rc < 0)
		return api_fail(resp, rc, &err);
	int ds = state_dataset(m, n.dataset);
	if (ds < 0)
		return api_fail(resp,
				rv_err_set(&err, -EINVAL, "dataset",
					   "dataset \"%s\" is not in the job spec", n.dataset),
				&err);
	struct master_op op;
	memset(&op, 0, sizeof(op));
	snprintf(op.node, sizeof(op.node), "%s", n.node);
	op.worker = n.worker;
	op.req = n.req;
	op.ds = ds;
	struct master_result res;
	int64_t seq = 0;
	if ((rc = apply_op(m, MASTER_OP_NEXT, &op, NULL, 0, &res, &seq)) < 0)
		api_fail(resp, rc, &res.err);
	else if (rv_rest_reply(resp, 200, rv_shard_task_to_json(&res.task)) < 0)
		rv_http_resp_error(resp, -ENOMEM, NULL);
	return reply_durable(m, resp, rc, seq);
}

static int api_shard_done(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	struct master *m = ctx;
	RV_CLEANUP_CJSON cJSON *doc = rv_rest_parse_body(req, resp);
	if (!doc)
		return 0;
	struct rv_shard_done d;
	struct rv_err err = { 0 };
	int rc = rv_shard_done_from_json(doc, &d, &err);
	if (rc < 0)
		return api_fail(resp, rc, &err);
	struct master_op op;
	memset(&op, 0, sizeof(op));
	snprintf(op.node, sizeof(op.node), "%s", d.node);
	op.worker = d.worker;
	op.id = d.id;
	struct master_result res;
	int64_t seq = 0;
	if ((rc = apply_op(m, MASTER_OP_DONE, &op, NULL, 0, &res, &seq)) < 0) {
		api_fail(resp, rc, &res.err);
	} else {
		struct rv_shard_done_reply out = { .counted = res.counted };
		if (rv_rest_reply(resp, 200, rv_shard_done_reply_to_json(&out)) < 0)
			rv_http_resp_error(resp, -ENOMEM, NULL);
	}
	return reply_durable(m, resp, rc, seq);
}

static int api_ckpt_report(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	struct master *m = ctx;
	RV_CLEANUP_CJSON cJSON *doc = rv_rest_parse_body(req, resp);
	if (!doc)
		return 0;
	struct rv_ckpt_report r;
	struct rv_err err = { 0 };
	int rc = rv_ckpt_report_from_json(doc, &r, &err);
	if (rc < 0)
		return api_fail(resp, rc, &err);
	struct master_op op;
	memset(&op, 0, sizeof(op));
	op.step = r.step;
	op.worker = r.worker;
	op.id = r.task_id;
	op.consumed = r.consumed;
	return accept_op(m, resp, MASTER_OP_CKPT_REPORT, &op);
}

static int api_ckpt_export(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	struct master *m = ctx;
	struct rv_err err = { 0 };
	int64_t step = 0;
	int rc = query_i64(req, "step", 0, INT64_MAX, true, &step, &err);
	if (rc < 0)
		return api_fail(resp, rc, &err);
	struct rv_buf b;
	rv_buf_init(&b);
	state_lock(m, "ckpt_export");
	rc = state_ckpt_export(m, step, &b, &err);
	state_unlock(m);
	if (rc == 0 && rv_buf_failed(&b))
		rc = -ENOMEM;
	if (rc < 0) {
		rv_buf_release(&b);
		if (rc == -ENOENT && !err.msg[0])
			rv_err_set(&err, -ENOENT, "step", "no report of step %" PRId64, step);
		return api_fail(resp, rc, &err);
	}
	struct rv_data_ckpt ck = { .step = step, .checkpoint = b.data, .len = b.len };
	cJSON *doc = rv_data_ckpt_to_json(&ck);
	rv_buf_release(&b);
	return rv_rest_reply(resp, 200, doc);
}

static int api_ckpt_import(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	struct master *m = ctx;
	RV_CLEANUP_CJSON cJSON *doc = rv_rest_parse_body(req, resp);
	if (!doc)
		return 0;
	struct rv_data_ckpt ck;
	struct rv_err err = { 0 };
	int rc = rv_data_ckpt_from_json(doc, &ck, &err);
	if (rc < 0)
		return api_fail(resp, rc, &err);
	struct master_op op;
	memset(&op, 0, sizeof(op));
	struct master_result res;
	rc = run_op(m, MASTER_OP_CKPT_IMPORT, &op, ck.checkpoint, ck.len, &res);
	rv_data_ckpt_release(&ck);
	if (rc < 0)
		return api_fail(resp, rc, &res.err);
	rv_log_info("data checkpoint imported", "step=%" PRId64, ck.step);
	return rv_rest_reply(resp, 200, cJSON_Parse("{\"accepted\":1}"));
}

static int api_steps(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	struct master *m = ctx;
	RV_CLEANUP_CJSON cJSON *doc = rv_rest_parse_body(req, resp);
	if (!doc)
		return 0;
	struct rv_step_report s;
	struct rv_err err = { 0 };
	int rc = rv_step_report_from_json(doc, &s, &err);
	if (rc < 0)
		return api_fail(resp, rc, &err);
	struct master_op op;
	memset(&op, 0, sizeof(op));
	snprintf(op.node, sizeof(op.node), "%s", s.node);
	op.step = s.step;
	op.speed = s.speed;
	op.compute_time = s.compute_time;
	return accept_op(m, resp, MASTER_OP_STEP, &op);
}

static int api_usage(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	struct master *m = ctx;
	RV_CLEANUP_CJSON cJSON *doc = rv_rest_parse_body(req, resp);
	if (!doc)
		return 0;
	struct rv_node_usage u;
	struct rv_err err = { 0 };
	int rc = rv_node_usage_from_json(doc, &u, &err);
	if (rc < 0)
		return api_fail(resp, rc, &err);
	rc = nodelink_agent_usage(m, &u);
	if (rc == -ENOSPC)
		rv_err_set(&err, rc, "node", "usage of more than %d nodes", MASTER_USAGE_MAX);
	if (rc < 0)
		return api_fail(resp, rc, &err);
	if (rv_rest_reply(resp, 200, cJSON_CreateObject()) < 0)
		rv_http_resp_error(resp, -ENOMEM, NULL);
	return 0;
}

static int api_usage_list(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	(void)req;
	struct master *m = ctx;
	RV_CLEANUP_CJSON cJSON *o = cJSON_CreateObject();
	cJSON *arr = o ? cJSON_AddArrayToObject(o, "nodes") : NULL;
	bool ok = arr != NULL;
	state_lock(m, "usage_list");
	for (int i = 0; ok && i < m->nagent_usage; i++) {
		cJSON *it = rv_node_usage_to_json(&m->agent_usage[i]);
		ok = it && cJSON_AddItemToArray(arr, it);
	}
	state_unlock(m);
	if (!ok || rv_rest_reply(resp, 200, RV_TAKE_PTR(o)) < 0)
		rv_http_resp_error(resp, -ENOMEM, NULL);
	return 0;
}

/* ---- network check ---- */

static int api_netcheck_join(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	struct master *m = ctx;
	RV_CLEANUP_CJSON cJSON *doc = rv_rest_parse_body(req, resp);
	if (!doc)
		return 0;
	struct rv_netcheck_join j;
	struct rv_err err = { 0 };
	int rc = rv_netcheck_join_from_json(doc, &j, &err);
	if (rc < 0)
		return api_fail(resp, rc, &err);
	struct master_op op;
	memset(&op, 0, sizeof(op));
	op.consumed = MASTER_NETCHECK_START;
	snprintf(op.node, sizeof(op.node), "%s", j.node);
	struct master_result res;
	int64_t seq = 0;
	state_lock(m, "netcheck_join");
	op.now_ms = state_now(m);
	rc = state_apply(m, MASTER_OP_NETCHECK, &op, NULL, 0, &res, &seq);
	struct rv_netcheck_joined out = { .check = m->netcheck.id,
					  .world = m->netcheck.world,
					  .nodes = m->netcheck.n };
	if (seq > 0)
		pthread_cond_signal(&m->timer_wake); /* a new deadline */
	state_unlock(m);
	if (rc < 0)
		api_fail(resp, rc, &res.err);
	else if (rv_rest_reply(resp, 200, rv_netcheck_joined_to_json(&out)) < 0)
		rv_http_resp_error(resp, -ENOMEM, NULL);
	return reply_durable(m, resp, rc, seq);
}

static int api_netcheck_group(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	struct master *m = ctx;
	struct rv_err err = { 0 };
	const char *node;
	int64_t round = 0;
	int rc = rv_http_query_name(req, "node", RV_NAME_MAX - 1, true, &node, &err);
	if (rc < 0)
		return api_fail(resp, rc, &err);
	rc = query_i64(req, "round", 0, 1, true, &round, &err);
	if (rc < 0)
		return api_fail(resp, rc, &err);
	struct rv_netcheck_group_reply out = { .round = (int)round, .status = RV_NETCHECK_WAIT };
	struct netcheck_group g;
	state_lock(m, "netcheck_group");
	const struct netcheck_run *r = &m->netcheck;
	out.check = r->id;
	rc = netcheck_run_group(r, node, (int)round, &g);
	for (int i = 0; rc == 1 && i < g.n; i++) {
		snprintf(out.peers[i].node, sizeof(out.peers[i].node), "%s", r->m[g.nodes[i]].node);
		snprintf(out.peers[i].addr, sizeof(out.peers[i].addr), "%s", r->m[g.nodes[i]].addr);
		out.npeers++;
		out.status = RV_NETCHECK_READY;
	}
	state_unlock(m);
	if (rc < 0)
		return api_fail(resp,
				rv_err_set(&err, -ENOENT, "node",
					   "node \"%s\" is not in a network check", node),
				&err);
	return rv_rest_reply(resp, 200, rv_netcheck_group_reply_to_json(&out));
}

static int api_netcheck_report(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	struct master *m = ctx;
	RV_CLEANUP_CJSON cJSON *doc = rv_rest_parse_body(req, resp);
	if (!doc)
		return 0;
	struct rv_netcheck_report r;
	struct rv_err err = { 0 };
	int rc = rv_netcheck_report_from_json(doc, &r, &err);
	if (rc < 0)
		return api_fail(resp, rc, &err);
	struct master_op op;
	memset(&op, 0, sizeof(op));
	op.consumed = MASTER_NETCHECK_REPORT;
	snprintf(op.node, sizeof(op.node), "%s", r.node);
	op.req = r.check;
	op.step = r.round;
	op.id = r.ok;
	op.speed = r.ok ? r.time_s : 0;
	op.compute_time = r.ok ? r.compute_s : 0;
	return accept_op(m, resp, MASTER_OP_NETCHECK, &op);
}

static const enum rv_netcheck_state nc_state[] = {
	[NETCHECK_NONE] = RV_NETCHECK_NONE,
	[NETCHECK_RUNNING] = RV_NETCHECK_RUNNING,
	[NETCHECK_DONE] = RV_NETCHECK_DONE,
};

static int api_netcheck(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	(void)req;
	struct master *m = ctx;
	struct rv_netcheck_status st = { 0 };
	state_lock(m, "netcheck");
	const struct netcheck_run *r = &m->netcheck;
	st.check = r->id;
	st.world = r->world;
	st.state = nc_state[r->state];
	st.round = r->round;
	st.nodes = r->n ? calloc((size_t)r->n, sizeof(*st.nodes)) : NULL;
	for (int i = 0; st.nodes && i < r->n; i++) {
		const struct netcheck_member *mb = &r->m[i];
		struct rv_netcheck_result *o = &st.nodes[st.nnodes++];
		snprintf(o->node, sizeof(o->node), "%s", mb->node);
		o->verdict = r->state != NETCHECK_DONE           ? RV_VERDICT_PENDING
			     : mb->verdict == NETCHECK_FAULTY    ? RV_VERDICT_FAULTY
			     : mb->verdict == NETCHECK_STRAGGLER ? RV_VERDICT_STRAGGLER
								 : RV_VERDICT_OK;
		o->silent = mb->silent;
		o->ok0 = mb->res.ok[0];
		o->ok1 = mb->res.ok[1];
		o->time0_s = mb->res.ok[0] ? mb->res.time_s[0] : 0;
		o->time1_s = mb->res.ok[1] ? mb->res.time_s[1] : 0;
	}
	bool oom = r->n && !st.nodes;
	state_unlock(m);
	if (oom)
		return -ENOMEM;
	cJSON *doc = rv_netcheck_status_to_json(&st);
	rv_netcheck_status_release(&st);
	return rv_rest_reply(resp, 200, doc);
}

/* The streaming dataset a path names: its spec index, or -ENOENT with err. */
static int stream_of_path(const struct master *m, const struct rv_http_req *req, struct rv_err *err)
{
	const char *name = req->params[0];
	int ds = state_dataset(m, name);
	if (ds < 0 || !m->spec.datasets[ds].streaming)
		return rv_err_set(err, -ENOENT, "dataset",
				  "\"%s\" is not a streaming dataset of the job", name);
	return ds;
}

static int api_stream_end(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	struct master *m = ctx;
	struct rv_err err = { 0 };
	int ds = stream_of_path(m, req, &err);
	if (ds < 0)
		return api_fail(resp, ds, &err);
	RV_CLEANUP_CJSON cJSON *doc = rv_rest_parse_body(req, resp);
	if (!doc)
		return 0;
	struct rv_stream_end e;
	int rc = rv_stream_end_from_json(doc, &e, &err);
	if (rc < 0)
		return api_fail(resp, rc, &err);
	struct master_op op;
	memset(&op, 0, sizeof(op));
	op.ds = ds;
	snprintf(op.node, sizeof(op.node), "%s", e.partition);
	op.id = e.end_offset;
	return accept_op(m, resp, MASTER_OP_OFFSET_COMMIT, &op);
}

static int api_stream(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	struct master *m = ctx;
	struct rv_err err = { 0 };
	int ds = stream_of_path(m, req, &err);
	if (ds < 0)
		return api_fail(resp, ds, &err);
	RV_CLEANUP_FREE struct rv_stream_status *st = calloc(1, sizeof(*st));
	if (!st)
		return -ENOMEM;
	snprintf(st->dataset, sizeof(st->dataset), "%s", m->spec.datasets[ds].name);
	state_lock(m, "stream");
	int ix = m->ds_index[ds];
	for (int p = 0; p < stream_nparts(m->streams, ix) && p < RV_MAX_PARTITIONS; p++) {
		struct stream_part_stats ps;
		stream_part_stats(m->streams, ix, p, &ps);
		struct rv_stream_partition_status *o = &st->partitions[st->npartitions++];
		snprintf(o->name, sizeof(o->name), "%s", ps.name);
		o->start_offset = ps.start;
		o->committed_offset = ps.committed;
		o->end_offset = ps.end;
		o->doing = ps.doing;
	}
	state_unlock(m);
	if (rv_rest_reply(resp, 200, rv_stream_status_to_json(st)) < 0)
		rv_http_resp_error(resp, -ENOMEM, NULL);
	/* A producer may drop what is below a committed offset: say only what a
	 * restarted master would say too. */
	return state_reply_durable(m, resp, 0, true);
}

/* The node manager's part of the status, under m->lock. */
static void node_status(struct master *m, struct rv_job_status *out)
{
	if (!m->nodemgr && m->nnodes == 0)
		return; /* agents are started by someone else */
	snprintf(out->job_state, sizeof(out->job_state), "%s",
		 nodetable_job_state_name(m->job_state));
	snprintf(out->job_reason, sizeof(out->job_reason), "%s", m->job_reason);
	for (int i = 0; i < m->nnodes && out->nnode_list < RV_MAX_STATUS_NODES; i++) {
		const struct master_node *n = &m->nodes[i];
		struct rv_node_status *o = &out->node_list[out->nnode_list++];
		snprintf(o->name, sizeof(o->name), "%s", n->name);
		snprintf(o->instance, sizeof(o->instance), "%s", n->instance);
		snprintf(o->role, sizeof(o->role), "%s", n->role);
		snprintf(o->host, sizeof(o->host), "%s", n->host);
		snprintf(o->state, sizeof(o->state), "%s", nodetable_node_state_name(n->state));
		o->rank = n->rank;
		o->pid = n->pid;
		o->restarts = n->restarts;
		o->oom_relaunches = n->ooms;
		o->memory_limit_mb = n->res.memory_mb;
		o->cpu_seconds = n->has_usage ? n->usage.cpu_seconds : -1;
		o->memory_mb = n->has_usage && n->usage.memory_bytes >= 0
				       ? n->usage.memory_bytes / (1024 * 1024)
				       : -1;
		o->throttled_usec = n->has_usage ? n->usage.throttled_usec : -1;
	}
}

static void job_status(struct master *m, struct rv_job_status *out)
{
	memset(out, 0, sizeof(*out));
	snprintf(out->job, sizeof(out->job), "%s", m->spec.name);
	int nn = 0;
	int st = rdzv_state(m->rdzv, &out->round, &nn);
	out->state = st == RDZV_COMPLETE ? RV_RDZV_COMPLETE
		     : st == RDZV_FAILED ? RV_RDZV_FAILED
					 : RV_RDZV_GATHERING;
	out->waiting = rdzv_waiting(m->rdzv);
	if (st == RDZV_COMPLETE) {
		struct rdzv_stats rs;
		rdzv_stats(m->rdzv, &rs);
		out->nnodes = nn;
	}
	out->step = m->step;
	out->speed = m->speed;
	bool all = true;
	for (int i = 0; i < m->spec.ndatasets; i++) {
		struct shard_stats ss = { 0 };
		struct rv_dataset_status *d = &out->datasets[i];
		if (m->spec.datasets[i].streaming) {
			/* offsets seen so far; a stream is never finished */
			for (int p = 0; p < stream_nparts(m->streams, m->ds_index[i]); p++) {
				struct stream_part_stats ps;
				stream_part_stats(m->streams, m->ds_index[i], p, &ps);
				ss.samples_total += (ps.end >= 0 ? ps.end : ps.handed) - ps.start;
				ss.samples_done += ps.done;
			}
		} else {
			shard_stats(m->shards, m->ds_index[i], &ss);
		}
		snprintf(d->name, sizeof(d->name), "%s", m->spec.datasets[i].name);
		d->samples_total = ss.samples_total;
		d->samples_done = ss.samples_done;
		d->epoch = ss.epoch;
		d->finished = ss.finished;
		all = all && ss.finished;
	}
	out->ndatasets = m->spec.ndatasets;
	out->finished = all;
	plans_status(m, out);
	const struct netcheck_run *r = &m->netcheck;
	out->netcheck = nc_state[r->state];
	for (int i = 0; r->state == NETCHECK_DONE && i < r->n; i++) {
		if (r->m[i].verdict == NETCHECK_FAULTY && out->nfaulty < RV_MAX_VERDICT_NAMES)
			snprintf(out->faulty[out->nfaulty++], RV_NAME_MAX, "%s", r->m[i].node);
		if (r->m[i].verdict == NETCHECK_STRAGGLER &&
		    out->nstragglers < RV_MAX_VERDICT_NAMES)
			snprintf(out->stragglers[out->nstragglers++], RV_NAME_MAX, "%s",
				 r->m[i].node);
	}
	node_status(m, out);
}

static int api_job(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	(void)req;
	struct master *m = ctx;
	struct rv_job_status js;
	RV_CLEANUP_FREE struct rdzv_world *w = malloc(sizeof(*w));
	if (!w)
		return -ENOMEM;
	state_lock(m, "status");
	job_status(m, &js);
	if (rdzv_current(m->rdzv, w) == RDZV_COMPLETE)
		js.world_size = w->world_size;
	state_unlock(m);
	return rv_rest_reply(resp, 200, rv_job_status_to_json(&js));
}

static int api_healthz(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	(void)req;
	struct master *m = ctx;
	struct journal_stats js;
	journal_stats(m->journal, &js);
	cJSON *doc = cJSON_CreateObject();
	bool ok = js.durable_seq >= 0;
	cJSON_AddStringToObject(doc, "status", ok ? "ok" : "degraded");
	cJSON_AddStringToObject(doc, "job", m->spec.name);
	cJSON_AddNumberToObject(doc, "journal_seq", (double)js.seq);
	cJSON_AddNumberToObject(doc, "durable_seq", (double)js.durable_seq);
	return rv_rest_reply(resp, ok ? 200 : 503, doc);
}

/* Per partition of each streaming dataset: the committed offset and the
 * consumer lag, the records known available and not yet committed (end -
 * committed; none for an unbounded partition, whose end is not known). */
static void stream_metrics(struct master *m, struct rv_buf *out)
{
	static const char *const help[2] = {
		"# HELP rover_master_stream_committed_offset Lowest offset not yet done\n"
		"# TYPE rover_master_stream_committed_offset gauge\n",
		"# HELP rover_master_stream_lag Records known available and not yet committed "
		"(end_offset - committed_offset)\n"
		"# TYPE rover_master_stream_lag gauge\n"
	};
	static const char *const name[2] = { "committed_offset", "lag" };
	state_lock(m, "stream_metrics");
	for (int k = 0; k < 2; k++) {
		rv_buf_puts(out, help[k]);
		for (int i = 0; i < m->spec.ndatasets; i++) {
			int ix = m->spec.datasets[i].streaming ? m->ds_index[i] : -1;
			for (int p = 0; p < stream_nparts(m->streams, ix); p++) {
				struct stream_part_stats ps;
				stream_part_stats(m->streams, ix, p, &ps);
				if (k == 1 && ps.end < 0)
					continue;
				long long v = k ? ps.end - ps.committed : ps.committed;
				rv_buf_printf(out, "rover_master_stream_%s{dataset=\"%s\",",
					      name[k], m->spec.datasets[i].name);
				rv_buf_printf(out, "partition=\"%s\"} %lld\n", ps.name, v);
			}
		}
	}
	state_unlock(m);
}

/* One histogram in seconds, name (..._seconds): n+1 bucket counts
 * (journal_sync_le_ms's bounds, the last unbounded), their sum (us), and
 * the longest as the gauge max_name. */
static void histo_metrics(struct rv_buf *out, const char *name, const char *max_name,
			  const char *help, const uint64_t *b, uint64_t sum_us, uint64_t max_us)
{
	rv_buf_printf(out, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
	uint64_t cum = 0;
	for (int i = 0; i < JOURNAL_SYNC_BUCKETS; i++) {
		cum += b[i];
		rv_buf_printf(out, "%s_bucket{le=\"%g\"} %llu\n", name,
			      journal_sync_le_ms[i] / 1000.0, (unsigned long long)cum);
	}
	cum += b[JOURNAL_SYNC_BUCKETS];
	rv_buf_printf(out,
		      "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.6f\n%s_count %llu\n"
		      "# HELP %s The longest of them\n# TYPE %s gauge\n%s %.6f\n",
		      name, (unsigned long long)cum, name, (double)sum_us / 1e6, name,
		      (unsigned long long)cum, max_name, max_name, max_name, (double)max_us / 1e6);
}

/* The state lock's holds by holder (state_lock's who): how many, their
 * time and the longest, and the holds of STATE_LOCK_SLOW_MS or more. */
static void holder_metrics(struct master *m, struct rv_buf *out)
{
	struct master_holder h[MASTER_HOLDERS];
	int n = state_holders(m, h, MASTER_HOLDERS);
	rv_buf_printf(out, "# HELP rover_master_state_lock_holder_holds_total Holds of the "
			   "state lock by holder\n"
			   "# TYPE rover_master_state_lock_holder_holds_total counter\n");
	for (int i = 0; i < n; i++)
		rv_buf_printf(out, "rover_master_state_lock_holder_holds_total{who=\"%s\"} %llu\n",
			      h[i].who, (unsigned long long)h[i].n);
	rv_buf_printf(out, "# HELP rover_master_state_lock_holder_seconds_total Time the "
			   "state lock was held, by holder\n"
			   "# TYPE rover_master_state_lock_holder_seconds_total counter\n");
	for (int i = 0; i < n; i++)
		rv_buf_printf(out,
			      "rover_master_state_lock_holder_seconds_total{who=\"%s\"} %.6f\n",
			      h[i].who, (double)h[i].sum_us / 1e6);
	rv_buf_printf(out, "# HELP rover_master_state_lock_holder_max_seconds The longest "
			   "hold of the state lock, by holder\n"
			   "# TYPE rover_master_state_lock_holder_max_seconds gauge\n");
	for (int i = 0; i < n; i++)
		rv_buf_printf(out, "rover_master_state_lock_holder_max_seconds{who=\"%s\"} %.6f\n",
			      h[i].who, (double)h[i].max_us / 1e6);
	rv_buf_printf(out,
		      "# HELP rover_master_state_lock_held_long_total Holds of the state lock "
		      "of %d ms or more (each logged with its holder)\n"
		      "# TYPE rover_master_state_lock_held_long_total counter\n"
		      "rover_master_state_lock_held_long_total %llu\n",
		      STATE_LOCK_SLOW_MS, (unsigned long long)atomic_load(&m->lock_holds_long));
}

/* The disk's and the state lock's share of a reply's time, and the
 * master's own stalls. */
static void wait_metrics(struct master *m, const struct journal_stats *js, struct rv_buf *out)
{
	uint64_t b[JOURNAL_SYNC_BUCKETS + 1];
	for (int i = 0; i <= JOURNAL_SYNC_BUCKETS; i++)
		b[i] = (uint64_t)js->sync_hist[i];
	histo_metrics(out, "rover_master_journal_sync_seconds",
		      "rover_master_journal_sync_max_seconds",
		      "Journal commits: write and fdatasync, what every durable reply waits for", b,
		      (uint64_t)js->sync_us_sum, (uint64_t)js->sync_us_max);
	for (int i = 0; i <= JOURNAL_SYNC_BUCKETS; i++)
		b[i] = atomic_load(&m->lock_wait.bucket[i]);
	histo_metrics(out, "rover_master_state_lock_wait_seconds",
		      "rover_master_state_lock_wait_max_seconds",
		      "Waits for the state lock (heartbeats, GET /v1/job)", b,
		      atomic_load(&m->lock_wait.sum_us), atomic_load(&m->lock_wait.max_us));
	for (int i = 0; i <= JOURNAL_SYNC_BUCKETS; i++)
		b[i] = atomic_load(&m->lock_hold.bucket[i]);
	histo_metrics(out, "rover_master_state_lock_hold_seconds",
		      "rover_master_state_lock_hold_max_seconds",
		      "Holds of the state lock, by anyone (by holder: "
		      "rover_master_state_lock_holder_*)",
		      b, atomic_load(&m->lock_hold.sum_us), atomic_load(&m->lock_hold.max_us));
	holder_metrics(m, out);
	for (int i = 0; i <= JOURNAL_SYNC_BUCKETS; i++)
		b[i] = atomic_load(&m->timer_late.bucket[i]);
	histo_metrics(out, "rover_master_timer_late_seconds", "rover_master_timer_late_max_seconds",
		      "The timer's turns late: the state lock held, or the master not running", b,
		      atomic_load(&m->timer_late.sum_us), atomic_load(&m->timer_late.max_us));
	for (int i = 0; i <= JOURNAL_SYNC_BUCKETS; i++)
		b[i] = atomic_load(&m->snapshot_hold.bucket[i]);
	histo_metrics(
		out, "rover_master_snapshot_lock_seconds", "rover_master_snapshot_lock_max_seconds",
		"Each snapshot's hold of the state lock (the state serialised; written after)", b,
		atomic_load(&m->snapshot_hold.sum_us), atomic_load(&m->snapshot_hold.max_us));
	rv_buf_printf(
		out,
		"# HELP rover_master_journal_prewrite_max_seconds The longest prewrite of "
		"the journal's zeros\n# TYPE rover_master_journal_prewrite_max_seconds gauge\n"
		"rover_master_journal_prewrite_max_seconds %.6f\n"
		"# HELP rover_master_stalls_total Times the master stood still (its timer "
		"late by half a heartbeat timeout)\n# TYPE rover_master_stalls_total counter\n"
		"rover_master_stalls_total %llu\n"
		"# HELP rover_master_stall_max_seconds The longest of them\n"
		"# TYPE rover_master_stall_max_seconds gauge\n"
		"rover_master_stall_max_seconds %.3f\n",
		(double)js->extend_us_max / 1e6, (unsigned long long)atomic_load(&m->stalls),
		(double)atomic_load(&m->stall_ms_max) / 1e3);
}

static const struct rv_rest_counter api_counters[] = {
	{ "rover_master_ops_applied_total", "Operations applied and journaled",
	  offsetof(struct master, ops_applied) },
	{ "rover_master_ops_replayed_total", "Journal records replayed at start",
	  offsetof(struct master, ops_replayed) },
	{ "rover_master_shards_handed_total", "Shard tasks handed out",
	  offsetof(struct master, shards_handed) },
	{ "rover_master_shards_counted_total", "Shard tasks counted done",
	  offsetof(struct master, shards_counted) },
	{ "rover_master_nodes_dead_total", "Nodes declared dead for silence",
	  offsetof(struct master, nodes_dead) },
	{ "rover_master_tasks_requeued_total", "Tasks taken back from dead or stalled workers",
	  offsetof(struct master, tasks_requeued) },
	{ "rover_master_snapshots_total", "Snapshots taken", offsetof(struct master, snapshots) },
	{ "rover_master_journal_errors_total", "Operations that could not be made durable",
	  offsetof(struct master, sync_errors) },
};

/* The journal, the waits, the world, the data, the plans and the streams,
 * after the counters. */
static void api_metrics_more(struct rv_buf *out, void *base)
{
	struct master *m = base;
	struct journal_stats js;
	journal_stats(m->journal, &js);
	rv_buf_printf(out,
		      "# HELP rover_master_journal_fsyncs_total Journal fdatasyncs\n"
		      "# TYPE rover_master_journal_fsyncs_total counter\n"
		      "rover_master_journal_fsyncs_total %lld\n"
		      "# HELP rover_master_journal_records_total Journal records appended\n"
		      "# TYPE rover_master_journal_records_total counter\n"
		      "rover_master_journal_records_total %lld\n",
		      (long long)js.fsyncs, (long long)js.records);
	wait_metrics(m, &js, out);
	struct rv_job_status st;
	state_lock(m, "metrics");
	job_status(m, &st);
	state_unlock(m);
	rv_buf_printf(out,
		      "# HELP rover_master_round Current rendezvous round\n"
		      "# TYPE rover_master_round gauge\nrover_master_round %lld\n"
		      "# HELP rover_master_nodes Nodes in the world\n"
		      "# TYPE rover_master_nodes gauge\nrover_master_nodes %d\n"
		      "# HELP rover_master_samples_done Samples counted done\n"
		      "# TYPE rover_master_samples_done gauge\n",
		      (long long)st.round, st.nnodes);
	for (int i = 0; i < st.ndatasets; i++)
		rv_buf_printf(out, "rover_master_samples_done{dataset=\"%s\"} %lld\n",
			      st.datasets[i].name, (long long)st.datasets[i].samples_done);
	plans_metrics(m, out);
	stream_metrics(m, out);
}

static const struct rv_rest_metrics_page api_metrics_page = {
	.counters = api_counters,
	.ncounters = RV_ARRAY_SIZE(api_counters),
	.more = api_metrics_more,
};

static int api_metrics(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	(void)req;
	struct master *m = ctx;
	return rv_rest_metrics_reply(resp, m->http, m, &api_metrics_page);
}

static int api_openapi(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx);

static const struct rv_http_route routes[] = {
	{ "POST", "/v1/rdzv/join", api_join, RV_HTTP_WRITE,
	  "A node joins the rendezvous; returns the round it waits for" },
	{ "GET", "/v1/rdzv/world", api_world, 0,
	  "Where a node stands in a round; long-polls with wait_ms until it completes (with "
	  "watch, until it ends)" },
	{ "POST", "/v1/heartbeat", api_heartbeat, RV_HTTP_WRITE,
	  "A node is alive (done: its workers all finished); says whether it should rendezvous "
	  "again" },
	{ "POST", "/v1/failure", api_failure, RV_HTTP_WRITE,
	  "A node failed or left: it leaves the world, its shards go back to the queue" },
	{ "POST", "/v1/shards/next", api_shard_next, RV_HTTP_WRITE,
	  "A worker takes its next shard (or hears wait / finished)" },
	{ "POST", "/v1/shards/done", api_shard_done, RV_HTTP_WRITE,
	  "A worker finished a shard; counted once" },
	{ "POST", "/v1/shards/ckpt/report", api_ckpt_report, RV_HTTP_WRITE,
	  "Where a worker was in its data at a model checkpoint step" },
	{ "GET", "/v1/shards/ckpt", api_ckpt_export, 0,
	  "The data position at a model step, composed from the workers' reports" },
	{ "POST", "/v1/shards/ckpt/import", api_ckpt_import, RV_HTTP_WRITE,
	  "Resume the data at a checkpoint (any world size)" },
	{ "POST", "/v1/steps", api_steps, RV_HTTP_WRITE, "Training step and speed" },
	{ "POST", "/v1/streams/{dataset}/partitions", api_stream_end, RV_HTTP_WRITE,
	  "A producer says how far a partition's data is available" },
	{ "GET", "/v1/streams/{dataset}", api_stream, 0,
	  "Committed and end offsets of a streaming dataset's partitions" },
	{ "POST", "/v1/usage", api_usage, RV_HTTP_WRITE,
	  "A node's resource usage (its rover-run's report), forwarded to the planner" },
	{ "GET", "/v1/usage", api_usage_list, 0, "Each node's last usage report" },
	{ "POST", "/v1/netcheck/join", api_netcheck_join, RV_HTTP_WRITE,
	  "A node is ready for the network check: the first of a world starts one" },
	{ "GET", "/v1/netcheck/group", api_netcheck_group, 0,
	  "A node's group (peers' addresses) in check round 0 or 1" },
	{ "POST", "/v1/netcheck/report", api_netcheck_report, RV_HTTP_WRITE,
	  "A node's result of a check round" },
	{ "GET", "/v1/netcheck", api_netcheck, 0, "The last network check: results and verdicts" },
	{ "GET", "/v1/job", api_job, 0,
	  "Rendezvous state, world, shard progress, the brain link, the newest plan and the "
	  "desired state" },
	{ "GET", "/healthz", api_healthz, 0, "Liveness and journal position" },
	{ "GET", "/metrics", api_metrics, 0, "Prometheus metrics" },
	{ "GET", "/v1/openapi.json", api_openapi, 0, "This API as an OpenAPI 3 document" },
};

/* What the route table does not say, for /v1/openapi.json (in step with it). */
static const struct rv_openapi_route docs[] = {
	{ .id = "joinRendezvous",
	  .body = "RdzvJoin",
	  .ok = "RdzvJoined",
	  .errors = "410:the rendezvous failed (min nodes not reached within the max wait)" },
	{ .id = "getWorld",
	  .ok = "RdzvWorld",
	  .query = "node:string:the node asking (required);"
		   "round:integer:the round from join (required);"
		   "wait_ms:integer:wait this long for the round to complete (bounded by "
		   "rdzv.world_wait_max_ms);"
		   "watch:integer:1: wait instead while the round is complete with this node "
		   "in it, answering once it is not (a new round opened)" },
	{ .id = "postHeartbeat", .body = "Heartbeat", .ok = "HeartbeatReply" },
	{ .id = "postFailure", .body = "FailureReport", .ok = "Accepted" },
	{ .id = "nextShard",
	  .body = "ShardNext",
	  .ok = "ShardTask",
	  .errors = "503:too many shards in flight: ask again later" },
	{ .id = "shardDone",
	  .body = "ShardDone",
	  .ok = "ShardDoneReply",
	  .errors = "409:the task is another worker's" },
	{ .id = "reportCheckpoint",
	  .body = "CkptReport",
	  .ok = "Accepted",
	  .errors = "409:the worker reported another position for the step;"
		    "422:the report cannot be reconciled (the checkpoint stays exact)" },
	{ .id = "getDataCheckpoint",
	  .ok = "DataCheckpoint",
	  .query = "step:integer:the model step (required)",
	  .errors = "404:no report of that step is kept;"
		    "409:not every rank of the world that trained the step reported it yet;"
		    "410:not every rank reported the step and the others never will (they "
		    "died since, or reported a later step)" },
	{ .id = "importDataCheckpoint", .body = "DataCheckpoint", .ok = "Accepted" },
	{ .id = "postSteps", .body = "StepReport", .ok = "Accepted" },
	{ .id = "postStreamEnd",
	  .body = "StreamEnd",
	  .ok = "Accepted",
	  .errors = "404:not a streaming dataset of the job, or no such partition" },
	{ .id = "getStream",
	  .ok = "StreamStatus",
	  .errors = "404:not a streaming dataset of the job" },
	{ .id = "postNodeUsage",
	  .body = "NodeUsage",
	  .ok = "Accepted",
	  .errors = "503:usage of more than 1024 nodes is kept" },
	{ .id = "listNodeUsage", .ok = "NodeUsageList" },
	{ .id = "joinNetcheck",
	  .body = "NetcheckJoin",
	  .ok = "NetcheckJoined",
	  .errors = "409:no world of two or more nodes yet, or the node is not in it" },
	{ .id = "getNetcheckGroup",
	  .ok = "NetcheckGroup",
	  .query = "node:string:the node asking (required);round:integer:0 or 1 (required)",
	  .errors = "404:the node is not in the check" },
	{ .id = "reportNetcheck",
	  .body = "NetcheckReport",
	  .ok = "Accepted",
	  .errors = "404:the node is not in the check;"
		    "409:not the current check, round 1 not open yet, or another result" },
	{ .id = "getNetcheck", .ok = "NetcheckStatus" },
	{ .id = "getJob", .ok = "JobStatus" },
	{ .id = "getHealth", .ok = "Health" },
	{ .id = "getMetrics" },
	{ .id = "getOpenapi" },
};

static const char reply_schemas[] =
	"{\"Error\":{\"type\":\"object\",\"required\":[\"error\",\"detail\"],\"properties\":{"
	"\"error\":{\"type\":\"string\"},\"detail\":{\"type\":\"string\"},\"field\":{\"type\":"
	"\"string\"}}},"
	"\"Accepted\":{\"type\":\"object\",\"properties\":{\"accepted\":{\"type\":\"integer\"}}},"
	"\"NodeUsageList\":{\"type\":\"object\",\"required\":[\"nodes\"],\"properties\":{"
	"\"nodes\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/components/schemas/NodeUsage\"}}}},"
	"\"Health\":{\"type\":\"object\",\"properties\":{\"status\":{\"type\":\"string\"},"
	"\"job\":{\"type\":\"string\"},\"journal_seq\":{\"type\":\"integer\"},"
	"\"durable_seq\":{\"type\":\"integer\"}}}}";

static int api_openapi(struct rv_http_req *req, struct rv_http_resp *resp, void *ctx)
{
	(void)ctx;
	char url[300];
	int n;
	const struct rv_wire_message *msgs = rv_wire_master_messages(&n);
	const struct rv_openapi spec = {
		.title = "rover-master",
		.description = "Rover's job master: rendezvous, data shards, heartbeats, status.",
		.routes = routes,
		.docs = docs,
		.nroutes = (int)RV_ARRAY_SIZE(routes),
		.messages = msgs,
		.nmessages = n,
		.reply_schemas = reply_schemas,
		.server_url = rv_openapi_server_url(rv_http_header(req, "Host"), url, sizeof(url)),
	};
	return rv_rest_reply(resp, 200, rv_openapi_doc(&spec));
}

int master_api_start(struct master *m, struct rv_err *err)
{
	_Static_assert(RV_ARRAY_SIZE(routes) == RV_ARRAY_SIZE(docs), "route docs out of step");
	struct rv_http_server_opts o = {
		.token = m->cfg.token,
		.max_body = (size_t)m->cfg.max_body_kb * 1024,
		.conn_timeout_s = (int)m->cfg.conn_timeout_s,
		.max_conns = (int)m->cfg.max_conns,
		.threads = (int)m->cfg.threads,
		.routes = routes,
		.nroutes = (int)RV_ARRAY_SIZE(routes),
		.ctx = m,
	};
	/* Before the first long-poll can park: the state and its timer reach
	 * the parked ones only through these. */
	state_lock(m, "master_api_start");
	m->svc.world_poll = master_world_poll;
	m->svc.world_deadline = master_world_deadline;
	m->svc.world_lost = master_world_lost;
	state_unlock(m);
	m->http = rv_rest_server_start(m->cfg.listen, &o, err);
	return m->http ? 0 : (err && err->code ? err->code : -EIO);
}

void master_api_stop(struct master *m)
{
	rv_http_server_stop(m->http);
	m->http = NULL;
}
