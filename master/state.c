/*
 * state.c: the job state of rover-master: operations, the journal, replay,
 * snapshots and the timer thread.
 *
 * Every change is an operation (struct master_op) applied by state_apply
 * under the state lock: the rendezvous and the shard manager are pure, so
 * the same operations in the same order give the same state.  An operation
 * that changed something is appended to the journal before the lock is
 * dropped; its handler then waits in state_sync until it is durable, so no
 * reply tells a client what a restarted master would not know.  Startup
 * loads the snapshot and re-applies the records after it; a snapshot is
 * taken every cfg.snapshot_every records.  The timer thread applies TICK
 * operations when a deadline is due: a round's last call or gang wait, a
 * silent node (declared dead: its workers' shards go back to TODO at once)
 * and stalled shards.  Applying calls nothing above the job state: what an
 * operation did for the planner, the node manager and the API's long-polls
 * (struct master_effects) is handed to the entries they registered
 * (m->svc) once its record is appended (effects_deliver).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "cleanup.h"
#include "json.h"
#include "log.h"
#include "master.h"
#include "nodetable.h"
#include "parse.h"
#include "wire_codec.h"

#define SNAP_MAGIC    "rover-master-snapshot-1\n" /* sections by position */
#define SNAP_MAGIC2   "rover-master-snapshot-2\n" /* sections by name */
#define TICK_MAX_DEAD 64

/* ---- workers: open addressing by id ---- */

static uint64_t worker_hash(int64_t id)
{
	uint64_t x = (uint64_t)id;
	x ^= x >> 33;
	x *= UINT64_C(0xff51afd7ed558ccd);
	x ^= x >> 33;
	return x;
}

static struct master_worker *worker_find(const struct master *m, int64_t id)
{
	if (m->capworkers == 0)
		return NULL;
	uint64_t mask = (uint64_t)m->capworkers - 1;
	for (uint64_t i = worker_hash(id) & mask;; i = (i + 1) & mask) {
		struct master_worker *w = &m->workers[i];
		if (w->id == id)
			return w;
		if (w->id < 0)
			return NULL;
	}
}

static int worker_grow(struct master *m)
{
	int cap = m->capworkers ? m->capworkers * 2 : 64;
	struct master_worker *nw = calloc((size_t)cap, sizeof(*nw));
	if (!nw)
		return -ENOMEM;
	for (int i = 0; i < cap; i++)
		nw[i].id = -1;
	uint64_t mask = (uint64_t)cap - 1;
	for (int i = 0; i < m->capworkers; i++) {
		if (m->workers[i].id < 0)
			continue;
		uint64_t k = worker_hash(m->workers[i].id) & mask;
		while (nw[k].id >= 0)
			k = (k + 1) & mask;
		nw[k] = m->workers[i];
	}
	free(m->workers);
	m->workers = nw;
	m->capworkers = cap;
	return 0;
}

/* The worker's entry, added when new; NULL when out of memory. */
static struct master_worker *worker_get(struct master *m, int64_t id)
{
	struct master_worker *w = worker_find(m, id);
	if (w)
		return w;
	if ((m->nworkers + 1) * 2 > m->capworkers && worker_grow(m) < 0)
		return NULL;
	uint64_t mask = (uint64_t)m->capworkers - 1;
	uint64_t k = worker_hash(id) & mask;
	while (m->workers[k].id >= 0)
		k = (k + 1) & mask;
	w = &m->workers[k];
	memset(w, 0, sizeof(*w));
	w->id = id;
	m->nworkers++;
	return w;
}

/* A node is gone: every task its workers held goes back to TODO. */
static int node_dead(struct master *m, const char *node)
{
	int n = 0;
	for (int i = 0; i < m->capworkers; i++) {
		struct master_worker *w = &m->workers[i];
		if (w->id < 0 || strcmp(w->node, node) != 0)
			continue;
		if (m->shards)
			n += shard_worker_dead(m->shards, w->id);
		n += stream_worker_dead(m->streams, w->id);
		w->last_req = 0;
	}
	atomic_fetch_add(&m->tasks_requeued, (uint64_t)n);
	return n;
}

int state_dataset(const struct master *m, const char *name)
{
	if (!name || !name[0])
		return 0;
	for (int i = 0; i < m->spec.ndatasets; i++)
		if (strcmp(m->spec.datasets[i].name, name) == 0)
			return i;
	return -ENOENT;
}

/* The wall clock read once at open, advanced by the monotonic clock:
 * journaled times stay comparable across restarts, while a clock stepped
 * under a running master (NTP, an operator, a VM resumed) moves no
 * heartbeat or shard deadline. */
int64_t state_now(struct master *m)
{
	int64_t now = m->wall0_ms ? m->wall0_ms + (rv_mono_ms() - m->mono0_ms) : rv_now_ms();
	return now > m->last_now_ms ? now : m->last_now_ms;
}

/* ---- applying operations ---- */

static void stream_task_reply(struct master *m, int spec_ds, int rc, const struct stream_task *t,
			      struct rv_shard_task *out)
{
	memset(out, 0, sizeof(*out));
	out->status = rc == 1 ? RV_SHARD_TASK : RV_SHARD_WAIT; /* a stream never finishes */
	if (rc != 1)
		return;
	out->id = t->id;
	snprintf(out->dataset, sizeof(out->dataset), "%s", m->spec.datasets[spec_ds].name);
	snprintf(out->partition, sizeof(out->partition), "%s",
		 stream_part_name(m->streams, t->ds, t->part));
	out->start = t->start;
	out->end = t->end;
}

static void task_reply(struct master *m, int rc, const struct shard_task *t,
		       struct rv_shard_task *out)
{
	memset(out, 0, sizeof(*out));
	if (rc == 1) {
		out->status = RV_SHARD_TASK;
		out->id = t->id;
		for (int i = 0; i < m->spec.ndatasets; i++)
			if (!m->spec.datasets[i].streaming && m->ds_index[i] == t->ds)
				snprintf(out->dataset, sizeof(out->dataset), "%s",
					 m->spec.datasets[i].name);
		out->epoch = t->epoch;
		out->start = t->start;
		out->end = t->end;
		return;
	}
	struct shard_stats st;
	shard_stats(m->shards, -1, &st);
	out->status = st.finished ? RV_SHARD_FINISHED : RV_SHARD_WAIT;
}

struct tick_held {
	const struct master *m;
	int64_t now;
};

/*
 * A worker holds its shards while the agent of the node it took them from
 * is alive: the agent (rover-run) stops its workers before it reports a
 * failure or joins again (both free the tasks), and a hung worker is
 * restarted by its hang check.  So a task is taken back from a slow or
 * stopped worker only once its process is gone, never while it may still
 * train the samples another worker would get.  Workers of no known node
 * (clients outside an agent) still lose a task after the doing timeout.
 */
static bool worker_held(const void *arg, int64_t worker)
{
	const struct tick_held *h = arg;
	const struct master_worker *w = worker_find(h->m, worker);
	return w && rdzv_alive(h->m->rdzv, w->node, h->now);
}

/* ---- effects: what an operation did, for the services above ---- */

/* Note node as declared dead.  Out of memory: the planner is not told of
 * it (logged); the state itself is whole. */
static void effects_lost(struct master_effects *fx, const char *node)
{
	if (fx->nlost == fx->caplost) {
		int cap = fx->caplost ? fx->caplost * 2 : 8;
		char(*v)[RV_NAME_MAX] = realloc(fx->lost, (size_t)cap * sizeof(*v));
		if (!v) {
			rv_log_warn("could not note a dead node for the planner", "node=%s", node);
			return;
		}
		fx->lost = v;
		fx->caplost = cap;
	}
	snprintf(fx->lost[fx->nlost++], RV_NAME_MAX, "%.*s", RV_NAME_MAX - 1, node);
}

static void effects_release(struct master_effects *fx)
{
	free(fx->lost);
	*fx = (struct master_effects){ 0 };
}

/* How far an operation got when its effects are handed over: applied only
 * (its record could not be appended), heard (a heartbeat: journaled with
 * the next record of another kind), or journaled. */
enum effects_stage { EFFECTS_APPLIED, EFFECTS_HEARD, EFFECTS_JOURNALED };

static void effects_world_poll(struct master *m)
{
	if (m->svc.world_poll)
		m->svc.world_poll(m);
}

/*
 * Hand what an operation did to the services that registered (m->svc) and
 * release fx.  Called under the state lock, as state_apply's callers hold
 * it.  Told here, under the lock: the planner's reports and deaths
 * (after_op, node_lost: the planner reads the world, the step and the
 * node table the operation left, which the next operation may move, and
 * its events must reach the brain in the order the state moved: a node
 * declared dead before the job_failed of the same tick) and the parked
 * long-polls (world_poll: answered with the world the change made).  Left
 * for after the unlock (state_unlock, effects_after): the wake of the
 * threads that look at the state again themselves, under the lock (the
 * node manager's reconcile of the desired state; the world long-polls
 * waiting on m->changed), so they do not wake into a lock still held.
 * Deaths and a moved desired state are told even when the record could
 * not be appended (the state moved all the same); the planner's report
 * and the long-polls wait for the record.
 */
static void effects_deliver(struct master *m, int type, const struct master_op *op,
			    struct master_effects *fx, enum effects_stage stage)
{
	for (int i = 0; i < fx->nlost && m->svc.node_lost; i++)
		m->svc.node_lost(m, fx->lost[i]);
	if (fx->desired)
		m->fx_desired = true;
	if (stage == EFFECTS_JOURNALED && m->svc.after_op)
		m->svc.after_op(m, type, op);
	if (stage != EFFECTS_APPLIED && fx->changed) {
		m->fx_changed = true;
		effects_world_poll(m);
	}
	effects_release(fx);
}

/* What effects_deliver left for after the unlock, taken under the lock. */
struct effects_later {
	bool changed, desired;
	void (*desired_changed)(struct master *m);
};

static struct effects_later effects_take(struct master *m)
{
	struct effects_later l = { m->fx_changed, m->fx_desired, m->svc.desired_changed };
	m->fx_changed = m->fx_desired = false;
	if (l.changed || l.desired)
		atomic_fetch_add(&m->fx_out, 1); /* state_quiesce waits for it */
	return l;
}

/* Deliver l, with the lock held or not: a broadcast and an eventfd write,
 * neither of which waits. */
static void effects_after(struct master *m, const struct effects_later *l)
{
	if (!l->changed && !l->desired)
		return;
	if (l->changed)
		pthread_cond_broadcast(&m->changed);
	if (l->desired && l->desired_changed)
		l->desired_changed(m);
	atomic_fetch_sub(&m->fx_out, 1);
}

void state_quiesce(struct master *m)
{
	while (atomic_load(&m->fx_out) > 0)
		usleep(1000);
}

static int apply_tick(struct master *m, int64_t now, struct master_effects *fx)
{
	char dead[TICK_MAX_DEAD][64];
	int ndead;
	int changed = 0;
	do {
		ndead = 0;
		changed |= rdzv_tick(m->rdzv, now, dead, TICK_MAX_DEAD, &ndead) > 0;
		for (int i = 0; i < ndead; i++) {
			atomic_fetch_add(&m->nodes_dead, 1);
			int n = node_dead(m, dead[i]);
			rv_log_info("node declared dead", "node=%s tasks_requeued=%d", dead[i], n);
			effects_lost(fx, dead[i]);
		}
	} while (ndead == TICK_MAX_DEAD);
	if (netcheck_run_tick(&m->netcheck, now) > 0 && m->netcheck.state == NETCHECK_DONE)
		rv_log_info("network check done", "check=%" PRId64, m->netcheck.id);
	struct tick_held h = { m, now };
	int n = m->shards ? shard_expire(m->shards, now, worker_held, &h) : 0;
	n += stream_expire(m->streams, now, worker_held, &h);
	if (n > 0) {
		atomic_fetch_add(&m->tasks_requeued, (uint64_t)n);
		rv_log_info("stalled shards requeued", "tasks=%d", n);
	}
	return changed;
}

/* Records that are the operation's document, not the operation. */
static bool doc_record(int type)
{
	return type == MASTER_OP_CKPT_IMPORT || type == MASTER_OP_PLAN ||
	       type == MASTER_OP_NODE_LAUNCHED || type == MASTER_OP_NODE_ENDED;
}

/*
 * A data checkpoint: the shard module's document, with the streams'
 * committed offsets under "streams" when the job has streaming datasets
 * (state_ckpt_export).  Both parts are checked before either changes.
 */
static int ckpt_import(struct master *m, const char *doc, size_t len, struct rv_err *err)
{
	RV_CLEANUP_CJSON cJSON *root = rv_json_parse(doc, len, err);
	if (!root)
		return -EINVAL;
	RV_CLEANUP_CJSON cJSON *streams = cJSON_DetachItemFromObjectCaseSensitive(root, "streams");
	RV_CLEANUP_FREE char *rest = m->shards ? rv_json_print(root) : NULL;
	RV_CLEANUP_FREE char *st = streams ? rv_json_print(streams) : NULL;
	if ((m->shards && !rest) || (streams && !st))
		return rv_err_set(err, -ENOMEM, "", "out of memory");
	if (st) {
		/* a dry run on a copy first, so that a bad shard part changes nothing */
		struct rv_buf snap;
		rv_buf_init(&snap);
		int rc = stream_snapshot_save(m->streams, &snap);
		if (rc == 0)
			rc = stream_offsets_load(m->streams, st, strlen(st), err);
		if (rc == 0 && m->shards &&
		    (rc = shard_ckpt_import(m->shards, rest, strlen(rest), err)) < 0)
			stream_snapshot_load(m->streams, snap.data, snap.len, NULL);
		rv_buf_release(&snap);
		return rc;
	}
	return m->shards ? shard_ckpt_import(m->shards, rest, strlen(rest), err) : 0;
}

int state_ckpt_export(const struct master *m, int64_t step, struct rv_buf *out, struct rv_err *err)
{
	size_t at = out->len;
	int rc = m->shards ? shard_ckpt_export(m->shards, step, out, err) : 0;
	if (rc < 0)
		return rc;
	if (stream_nparts(m->streams, 0) == 0)
		return rv_buf_failed(out) ? -ENOMEM : 0;
	if (m->shards) {
		/* splice "streams" in before the document's closing brace */
		size_t end = out->len;
		while (end > at && out->data[end - 1] != '}')
			end--;
		rv_buf_truncate(out, end > at ? end - 1 : at);
		rv_buf_puts(out, ",\"streams\":");
	} else {
		rv_buf_printf(out, "{\"step\":%" PRId64 ",\"streams\":", step);
	}
	rc = stream_offsets_save(m->streams, out);
	rv_buf_puts(out, "}");
	return rc < 0 || rv_buf_failed(out) ? -ENOMEM : 0;
}

/*
 * A network check operation.  START: the first join of a world starts a
 * check of its members; a join of a world already checked (or being
 * checked) changes nothing.  REPORT: one member's result.
 */
static bool apply_netcheck(struct master *m, const struct master_op *op, struct master_result *res)
{
	struct netcheck_run *r = &m->netcheck;
	if (op->consumed == MASTER_NETCHECK_REPORT) {
		if (r->state == NETCHECK_NONE || op->req != r->id) {
			res->rc = rv_err_set(&res->err, -EEXIST, "check",
					     "check %" PRId64 " is not the current one (%" PRId64
					     ")",
					     op->req, r->id);
			return false;
		}
		int rc = netcheck_run_report(r, op->node, (int)op->step, op->id != 0, op->speed,
					     op->compute_time, op->now_ms);
		if (rc < 0)
			res->rc = rv_err_set(&res->err, rc == -EAGAIN ? -EEXIST : rc,
					     rc == -ENOENT ? "node" : "round",
					     rc == -ENOENT   ? "node \"%s\" is not in the check"
					     : rc == -EAGAIN ? "round 1 is not open yet"
					     : rc == -EEXIST ? "another result was reported"
							     : "bad report",
					     op->node);
		if (rc > 0 && r->state == NETCHECK_DONE)
			rv_log_info("network check done", "check=%" PRId64, r->id);
		return rc > 0;
	}
	RV_CLEANUP_FREE struct rdzv_world *w = malloc(sizeof(*w));
	if (!w) {
		res->rc = rv_err_set(&res->err, -ENOMEM, "", "out of memory");
		return false;
	}
	if (rdzv_current(m->rdzv, w) != RDZV_COMPLETE || w->nnodes < 2) {
		res->rc = rv_err_set(&res->err, -EEXIST, "",
				     "no world of two or more nodes to check yet");
		return false;
	}
	int i = 0;
	while (i < w->nnodes && strcmp(w->members[i].node.name, op->node) != 0)
		i++;
	if (i == w->nnodes) {
		res->rc = rv_err_set(&res->err, -EEXIST, "node", "node \"%s\" is not in the world",
				     op->node);
		return false;
	}
	if (r->state != NETCHECK_NONE && r->world == w->round)
		return netcheck_run_join(r, op->node, op->now_ms) > 0;
	RV_CLEANUP_FREE char(*names)[64] = malloc((size_t)w->nnodes * sizeof(*names));
	RV_CLEANUP_FREE char(*addrs)[64] = malloc((size_t)w->nnodes * sizeof(*addrs));
	if (!names || !addrs) {
		res->rc = rv_err_set(&res->err, -ENOMEM, "", "out of memory");
		return false;
	}
	for (int k = 0; k < w->nnodes; k++) {
		snprintf(names[k], sizeof(names[k]), "%s", w->members[k].node.name);
		snprintf(addrs[k], sizeof(addrs[k]), "%s", w->members[k].node.addr);
	}
	const struct netcheck_limits lim = { m->cfg.netcheck_timeout_ms,
					     m->cfg.netcheck_straggler_ratio,
					     m->cfg.netcheck_straggler_wait,
					     m->cfg.netcheck_straggler_wait_min_ms };
	int rc = netcheck_run_start(r, w->round, (const char(*)[64])names, (const char(*)[64])addrs,
				    w->nnodes, op->now_ms, &lim);
	if (rc == 0)
		netcheck_run_join(r, op->node, op->now_ms);
	if (rc < 0) {
		res->rc = rv_err_set(&res->err, rc, "", "could not start a network check");
		return false;
	}
	rv_log_info("network check started", "check=%" PRId64 " world=%" PRId64 " nodes=%d", r->id,
		    r->world, r->n);
	return true;
}

/* A node joins the rendezvous. */
static bool apply_join(struct master *m, const struct master_op *op, struct master_result *res)
{
	struct rdzv_node n = { .local_world_size = op->local_world_size };
	snprintf(n.name, sizeof(n.name), "%s", op->node);
	snprintf(n.addr, sizeof(n.addr), "%s", op->addr);
	int64_t r = rdzv_join(m->rdzv, &n, op->now_ms);
	if (r < 0) {
		res->rc = (int)r;
		rv_err_set(&res->err, (int)r, r == -ECANCELED ? "" : "node",
			   r == -ECANCELED ? "the rendezvous failed: %s"
					   : "could not join node \"%s\"",
			   r == -ECANCELED ? rdzv_reason(m->rdzv) : op->node);
		return false;
	}
	res->round = r;
	/* An agent joins with none of its workers running (rover-run
	 * stops them first): what they held is free again. */
	int freed = node_dead(m, op->node);
	if (freed > 0)
		rv_log_info("node joined again: its tasks requeued", "node=%s tasks=%d", op->node,
			    freed);
	return true;
}

/* A worker asks for its next task: the same answer to a retry. */
static bool apply_next(struct master *m, const struct master_op *op, struct master_result *res)
{
	struct master_worker *w = worker_find(m, op->worker);
	if (w && op->req > 0 && w->last_req == op->req) {
		res->task = w->last_task; /* a retry: the same answer */
		return false;
	}
	struct shard_task t;
	struct stream_task st;
	bool streaming = op->ds >= 0 && op->ds < m->spec.ndatasets &&
			 m->spec.datasets[op->ds].streaming;
	int ix = op->ds >= 0 && op->ds < m->spec.ndatasets ? m->ds_index[op->ds] : -1;
	int rc = streaming   ? stream_next(m->streams, ix, op->worker, op->now_ms, &st)
		 : m->shards ? shard_next(m->shards, ix, op->worker, op->now_ms, &t)
			     : -EINVAL;
	if (rc < 0) {
		res->rc = rc;
		rv_err_set(&res->err, rc, rc == -EINVAL ? "dataset" : "",
			   rc == -ENOSPC ? "too many shards in flight, ask again later"
					 : "could not hand out a shard");
		return false;
	}
	if (streaming)
		stream_task_reply(m, op->ds, rc, &st, &res->task);
	else
		task_reply(m, rc, &t, &res->task);
	if (rc == 0)
		return false;
	w = worker_get(m, op->worker);
	if (w) {
		snprintf(w->node, sizeof(w->node), "%s", op->node);
		w->last_req = op->req;
		w->last_task = res->task;
	}
	atomic_fetch_add(&m->shards_handed, 1);
	return true;
}

/* A worker says a task is done. */
static bool apply_done(struct master *m, const struct master_op *op, struct master_result *res)
{
	int rc = op->id >= STREAM_ID_BASE ? stream_done(m->streams, op->id, op->worker)
		 : m->shards              ? shard_done(m->shards, op->id, op->worker, op->now_ms)
					  : 0;
	if (rc < 0) {
		res->rc = rc;
		rv_err_set(&res->err, rc, "id", "task %" PRId64 " is another worker's", op->id);
		return false;
	}
	res->counted = rc == 1;
	if (rc == 1)
		atomic_fetch_add(&m->shards_counted, 1);
	return rc == 1;
}

/* A producer says how far a partition is known. */
static bool apply_offset_commit(struct master *m, const struct master_op *op,
				struct master_result *res)
{
	int ix = op->ds >= 0 && op->ds < m->spec.ndatasets && m->spec.datasets[op->ds].streaming
			 ? m->ds_index[op->ds]
			 : -1;
	int rc = stream_extend(m->streams, ix, op->node, op->id);
	if (rc < 0) {
		res->rc = rv_err_set(&res->err, rc, rc == -ENOENT ? "partition" : "dataset",
				     rc == -ENOENT ? "partition \"%s\" is not in the dataset"
						   : "not a streaming dataset of the job",
				     op->node);
		return false;
	}
	return rc == 1;
}

/* A document operation: MASTER_OP_NODE_* into the node table (nodetable.c,
 * the job state's own), MASTER_OP_PLAN by the entry the planner registered
 * (m->svc). */
static bool apply_service(struct master *m, int type, const void *doc, size_t doc_len,
			  struct master_result *res)
{
	if (type == MASTER_OP_PLAN && m->svc.apply_plan) {
		int rc = m->svc.apply_plan(m, doc, doc_len, &res->err);
		res->rc = rc < 0 ? rc : 0;
		return rc > 0;
	}
	if (type == MASTER_OP_PLAN) {
		res->rc = rv_err_set(&res->err, -ENOTSUP, "", "no service applies operation %d",
				     type);
		return false;
	}
	res->rc = nodetable_apply(m, type, doc, doc_len, &res->err);
	return res->rc == 0;
}

/*
 * The one place an operation changes the state.  Returns whether it changed
 * anything (and so must be journaled); res gets what the reply says, fx
 * (apply) what the services above are told.
 */
static bool apply_op(struct master *m, int type, const struct master_op *op, const void *doc,
		     size_t doc_len, struct master_result *res, struct master_effects *fx)
{
	/* Document operations (doc_record) come without an op. */
	static const struct master_op no_op;
	if (!op)
		op = &no_op;
	res->rc = 0;
	if (op->now_ms > m->last_now_ms)
		m->last_now_ms = op->now_ms;
	switch (type) {
	case MASTER_OP_JOIN:
		return apply_join(m, op, res);
	case MASTER_OP_LEAVE: {
		int rc = op->id == MASTER_LEAVE_LOST ? rdzv_lost(m->rdzv, op->node, op->now_ms)
						     : rdzv_leave(m->rdzv, op->node, op->now_ms);
		int n = node_dead(m, op->node);
		return rc >= 0 || n > 0;
	}
	case MASTER_OP_HEARTBEAT:
		res->rc = rdzv_heartbeat(m->rdzv, op->node, op->now_ms);
		return res->rc == 0;
	case MASTER_OP_NODE_FINISHED:
		res->rc = rdzv_heartbeat(m->rdzv, op->node, op->now_ms);
		if (res->rc == 0)
			res->rc = rdzv_done(m->rdzv, op->node);
		return res->rc == 0;
	case MASTER_OP_TICK:
		apply_tick(m, op->now_ms, fx);
		return true;
	case MASTER_OP_NEXT:
		return apply_next(m, op, res);
	case MASTER_OP_DONE:
		return apply_done(m, op, res);
	case MASTER_OP_CKPT_REPORT:
		if (!m->shards) /* streams resume from their committed offsets */
			return false;
		res->rc = shard_ckpt_report(m->shards, op->step, op->worker, op->id, op->consumed,
					    &res->err);
		if (res->rc == 0)
			shard_ckpt_expect(m->shards, op->step, op->world_size);
		return res->rc == 0;
	case MASTER_OP_CKPT_IMPORT:
		res->rc = ckpt_import(m, doc, doc_len, &res->err);
		if (res->rc < 0)
			return false;
		for (int i = 0; i < m->capworkers; i++)
			m->workers[i].last_req = 0;
		return true;
	case MASTER_OP_GRACE: {
		int moved = netcheck_run_grace(&m->netcheck, op->now_ms);
		return (rdzv_grace(m->rdzv, op->now_ms) > 0) | moved;
	}
	case MASTER_OP_OFFSET_COMMIT:
		return apply_offset_commit(m, op, res);
	case MASTER_OP_NETCHECK:
		return apply_netcheck(m, op, res);
	case MASTER_OP_NODE_LAUNCHED:
	case MASTER_OP_NODE_ENDED:
	case MASTER_OP_PLAN:
		return apply_service(m, type, doc, doc_len, res);
	case MASTER_OP_STEP:
		m->step = op->step;
		m->speed = op->speed;
		m->step_ts_ms = op->now_ms;
		return true;
	case MASTER_OP_BRAIN_UID:
		if (!strcmp(m->brain_uid, op->node))
			return false;
		snprintf(m->brain_uid, sizeof(m->brain_uid), "%s", op->node);
		return true;
	default:
		res->rc = rv_err_set(&res->err, -EINVAL, "", "unknown operation %d", type);
		return false;
	}
}

/* apply_op, and in fx whether it changed the state and moved the desired
 * state.  fx starts empty; the caller releases it (effects_deliver,
 * effects_release). */
static bool apply(struct master *m, int type, const struct master_op *op, const void *doc,
		  size_t doc_len, struct master_result *res, struct master_effects *fx)
{
	int64_t version = m->desired.version;
	*fx = (struct master_effects){ 0 };
	fx->changed = apply_op(m, type, op, doc, doc_len, res, fx);
	fx->desired = fx->changed && m->desired.version != version;
	return fx->changed;
}

/* Operations journaled as their document rather than a struct master_op. */

/* What a heartbeat's reply says: the round, its state, the nodes waiting
 * and known (a node not known is told to join again). */
static uint64_t rdzv_print(const struct master *m)
{
	int64_t round = 0;
	int st = rdzv_state(m->rdzv, &round, NULL);
	return (uint64_t)round * 1000003u ^ (uint64_t)st * 7919u ^
	       (uint64_t)rdzv_waiting(m->rdzv) * 104729u ^ (uint64_t)rdzv_nknown(m->rdzv);
}

/* Remember a heartbeat applied without a record (the node's latest). */
static int heard_add(struct master *m, const struct master_op *op)
{
	for (int i = 0; i < m->nheard; i++)
		if (strcmp(m->heard[i].node, op->node) == 0) {
			if (op->now_ms > m->heard[i].now_ms)
				m->heard[i].now_ms = op->now_ms;
			return 0;
		}
	if (m->nheard == m->capheard) {
		int cap = m->capheard ? m->capheard * 2 : 16;
		struct master_heard *h = realloc(m->heard, (size_t)cap * sizeof(*h));
		if (!h)
			return -ENOMEM;
		m->heard = h;
		m->capheard = cap;
	}
	struct master_heard *h = &m->heard[m->nheard++];
	memcpy(h->node, op->node, sizeof(h->node));
	h->now_ms = op->now_ms;
	return 0;
}

/* Journal the heartbeats applied since the last record, before a record
 * of another kind: a replay applies them where they could first matter
 * (a heartbeat only moves its node's last heartbeat forward, and only
 * other heartbeats came between).  0 or journal_append's error. */
static int64_t heard_flush(struct master *m)
{
	for (int i = 0; i < m->nheard; i++) {
		struct master_op op = { .now_ms = m->heard[i].now_ms };
		memcpy(op.node, m->heard[i].node, sizeof(op.node));
		int64_t s = journal_append(m->journal, MASTER_OP_HEARTBEAT, &op, sizeof(op));
		if (s < 0)
			return s;
		m->since_snapshot++;
	}
	m->nheard = 0;
	return 0;
}

/* A heartbeat: applied now, journaled with the next record of another kind
 * (heard_flush); its reply waits only for what it says (state_heartbeat_seq),
 * not for a sync of its own.  A master killed before that record was
 * durable lost nothing: a restart counts every node as heard from. */
static int apply_heartbeat(struct master *m, const struct master_op *op, struct master_result *res)
{
	struct master_effects fx;
	bool changed = apply(m, MASTER_OP_HEARTBEAT, op, NULL, 0, res, &fx);
	if (!changed) {
		effects_release(&fx);
		return res->rc;
	}
	atomic_fetch_add(&m->ops_applied, 1);
	if (heard_add(m, op) < 0) {
		effects_release(&fx);
		res->rc = rv_err_set(&res->err, -ENOMEM, "", "could not note a heartbeat");
		return res->rc;
	}
	effects_deliver(m, MASTER_OP_HEARTBEAT, op, &fx, EFFECTS_HEARD);
	return res->rc;
}

int state_apply(struct master *m, int type, const struct master_op *op, const void *doc,
		size_t doc_len, struct master_result *res, int64_t *seq)
{
	if (seq)
		*seq = 0;
	memset(res, 0, sizeof(*res));
	if (type == MASTER_OP_HEARTBEAT)
		return apply_heartbeat(m, op, res);
	int64_t s = heard_flush(m);
	uint64_t print = rdzv_print(m);
	if (s < 0) /* the journal failed: so would this record */
		return res->rc = rv_err_set(&res->err, -EIO, "", "could not journal the operation");
	struct master_effects fx;
	if (!apply(m, type, op, doc, doc_len, res, &fx)) {
		effects_release(&fx);
		return res->rc;
	}
	atomic_fetch_add(&m->ops_applied, 1);
	s = doc_record(type) ? journal_append(m->journal, type, doc, doc_len)
			     : journal_append(m->journal, type, op, sizeof(*op));
	if (s < 0) {
		/* Applied but not journaled: the state is ahead of the journal.  A
		 * restart replays what is journaled; refuse to answer as if durable. */
		atomic_fetch_add(&m->sync_errors, 1);
		rv_log_error("could not journal an operation", "type=%d errno=%d", type, (int)-s);
		res->rc = rv_err_set(&res->err, -EIO, "", "could not journal the operation");
		effects_deliver(m, type, op, &fx, EFFECTS_APPLIED);
		return res->rc;
	}
	m->since_snapshot++;
	if (rdzv_print(m) != print)
		m->rdzv_seq = s;
	if (seq)
		*seq = s;
	effects_deliver(m, type, op, &fx, EFFECTS_JOURNALED);
	return res->rc;
}

int64_t state_heartbeat_seq(struct master *m)
{
	return m->rdzv_seq > journal_durable_seq(m->journal) ? m->rdzv_seq : 0;
}

void state_histo_add(struct master_histo *h, int64_t us)
{
	int b = 0;
	while (b < JOURNAL_SYNC_BUCKETS && (double)us > journal_sync_le_ms[b] * 1000.0)
		b++;
	atomic_fetch_add(&h->bucket[b], 1);
	atomic_fetch_add(&h->sum_us, (uint64_t)us);
	uint64_t max = atomic_load(&h->max_us);
	while ((uint64_t)us > max && !atomic_compare_exchange_weak(&h->max_us, &max, (uint64_t)us))
		;
}

/* ---- the state lock: its holder named, each hold counted ---- */

const char *state_op_name(int type)
{
	static const char *const names[] = {
		[MASTER_OP_JOIN] = "join",
		[MASTER_OP_LEAVE] = "leave",
		[MASTER_OP_HEARTBEAT] = "heartbeat",
		[MASTER_OP_TICK] = "tick",
		[MASTER_OP_NEXT] = "shard_next",
		[MASTER_OP_DONE] = "shard_done",
		[MASTER_OP_CKPT_REPORT] = "ckpt_report",
		[MASTER_OP_CKPT_IMPORT] = "ckpt_import",
		[MASTER_OP_STEP] = "step",
		[MASTER_OP_GRACE] = "grace",
		[MASTER_OP_NODE_LAUNCHED] = "node_launched",
		[MASTER_OP_NODE_ENDED] = "node_ended",
		[MASTER_OP_BRAIN_UID] = "brain_uid",
		[MASTER_OP_PLAN] = "plan",
		[MASTER_OP_OFFSET_COMMIT] = "offset_commit",
		[MASTER_OP_NETCHECK] = "netcheck",
		[MASTER_OP_NODE_FINISHED] = "node_finished",
	};
	if (type <= 0 || (size_t)type >= RV_ARRAY_SIZE(names) || !names[type])
		return "op";
	return names[type];
}

static int64_t lock_now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* The lock was just taken by who. */
static void hold_begin(struct master *m, const char *who)
{
	m->lock_t0_us = lock_now_us();
	atomic_store(&m->lock_who, who);
}

/* who's slot in m->holders (the last one when they are all taken). */
static struct master_holder *holder_get(struct master *m, const char *who)
{
	for (int i = 0; i < MASTER_HOLDERS - 1; i++) {
		struct master_holder *h = &m->holders[i];
		if (!h->who)
			h->who = who;
		if (h->who == who || !strcmp(h->who, who))
			return h;
	}
	struct master_holder *h = &m->holders[MASTER_HOLDERS - 1];
	if (!h->who)
		h->who = "other";
	return h;
}

/* The lock is about to be released (an unlock or a wait): count the hold. */
static void hold_end(struct master *m)
{
	const char *who = atomic_load(&m->lock_who);
	if (!who)
		who = "unnamed";
	int64_t us = lock_now_us() - m->lock_t0_us;
	if (us < 0)
		us = 0;
	state_histo_add(&m->lock_hold, us);
	struct master_holder *h = holder_get(m, who);
	h->n++;
	h->sum_us += (uint64_t)us;
	if ((uint64_t)us > h->max_us)
		h->max_us = (uint64_t)us;
	atomic_store(&m->lock_who, NULL);
	if (us >= STATE_LOCK_SLOW_MS * 1000) {
		atomic_fetch_add(&m->lock_holds_long, 1);
		rv_log_warn("the state lock was held long", "ms=%" PRId64 " who=%s", us / 1000,
			    who);
	}
}

void state_lock(struct master *m, const char *who)
{
	int64_t t0 = rv_mono_ms();
	const char *held = atomic_load(&m->lock_who); /* the holder we queue behind */
	pthread_mutex_lock(&m->lock);
	int64_t ms = rv_mono_ms() - t0;
	state_histo_add(&m->lock_wait, ms * 1000);
	hold_begin(m, who);
	if (ms >= JOURNAL_SLOW_MS)
		rv_log_warn("the state lock was waited for long",
			    "ms=%" PRId64 " who=%s held_by=%s", ms, who, held ? held : "none");
}

void state_unlock(struct master *m)
{
	struct effects_later l = effects_take(m);
	hold_end(m);
	pthread_mutex_unlock(&m->lock);
	effects_after(m, &l);
}

int state_wait(struct master *m, pthread_cond_t *cond, const struct timespec *abstime)
{
	/* The lock is released inside the wait, not before: what is left for
	 * after the unlock goes now (it does not wait either). */
	struct effects_later l = effects_take(m);
	effects_after(m, &l);
	const char *who = atomic_load(&m->lock_who);
	hold_end(m);
	int rc = abstime ? pthread_cond_timedwait(cond, &m->lock, abstime)
			 : pthread_cond_wait(cond, &m->lock);
	hold_begin(m, who);
	return rc;
}

int state_holders(struct master *m, struct master_holder *out, int max)
{
	int n = 0;
	state_lock(m, "metrics");
	for (int i = 0; i < MASTER_HOLDERS && n < max; i++)
		if (m->holders[i].who)
			out[n++] = m->holders[i];
	state_unlock(m);
	return n;
}

/* ---- snapshots ---- */

/* A worker's entry in the snapshot, by name: {"id","node","last_req",
 * "task"}; snapshots before it held [id, node, last_req, status, id,
 * dataset, epoch, start, end(, partition)] (snap_worker_positional). */
#define T struct master_worker
static const struct rv_wire_field snap_worker_fields[] = {
	WINT("id", id, RV_WIRE_REQ, 0, RV_WIRE_MAX_WORKER_ID, "worker id"),
	WSTR("node", node, 0, "the node it last asked from"),
	WINT("last_req", last_req, 0, 0, RV_WIRE_MAX_WORKER_ID, "its last request id, 0: none"),
	WOBJ0("task", last_task, RV_WIRE_REQ, &rv_wire_shard_task_msg, "ShardTask",
	      "the answer to it, repeated to a retry"),
};
static const struct rv_wire_message snap_worker_msg =
	RV_WIRE_MSG("SnapshotWorker", "a worker's last shard request and answer",
		    snap_worker_fields, "worker entry", NULL);
#undef T

/* The workers' entries (n, copied out of the table), as "workers":[...];
 * -ENOMEM when out of memory.  Without the state lock: a copy. */
static int snap_workers_save(const struct master_worker *ws, int n, struct rv_buf *part)
{
	rv_buf_puts(part, "\"workers\":[");
	for (int i = 0; i < n; i++) {
		RV_CLEANUP_CJSON cJSON *o = rv_wire_encode(&snap_worker_msg, &ws[i]);
		RV_CLEANUP_FREE char *text = o ? rv_json_print(o) : NULL;
		if (!text)
			return -ENOMEM;
		rv_buf_printf(part, "%s%s", i ? "," : "", text);
	}
	rv_buf_puts(part, "]");
	return 0;
}

/* Section name of part: "<name> <bytes>\n" then the bytes. */
static void snap_put(struct rv_buf *out, const char *name, struct rv_buf *part)
{
	rv_buf_printf(out, "%s %zu\n", name, part->len);
	rv_buf_append(out, part->data ? part->data : "", part->len);
	rv_buf_truncate(part, 0);
}

/* A snapshot as taken under the state lock: its text but for the workers'
 * entries, copied, which are encoded after (most of the encoding's time
 * with thousands of workers). */
struct snap_taken {
	struct rv_buf pre;  /* the sections before master's */
	struct rv_buf head; /* master's section up to its workers */
	struct master_worker *workers;
	int nworkers;
	struct rv_buf tail; /* master's section after its workers */
	struct rv_buf post; /* the sections after master's */
};

static void snap_taken_release(struct snap_taken *t)
{
	rv_buf_release(&t->pre);
	rv_buf_release(&t->head);
	rv_buf_release(&t->tail);
	rv_buf_release(&t->post);
	free(t->workers);
	t->workers = NULL;
}

/* The master's own section: step, speed, workers (copied), plans, nodes. */
static int snap_master_save(struct master *m, struct snap_taken *t)
{
	rv_buf_printf(&t->head,
		      "{\"step\":%" PRId64 ",\"step_ts\":%" PRId64 ",\"speed\":%.17g,"
		      "\"last_now\":%" PRId64 ",",
		      m->step, m->step_ts_ms, m->speed, m->last_now_ms);
	t->workers = malloc(((size_t)m->nworkers + 1) * sizeof(*t->workers));
	if (!t->workers)
		return -ENOMEM;
	for (int i = 0; i < m->capworkers; i++)
		if (m->workers[i].id >= 0)
			t->workers[t->nworkers++] = m->workers[i];
	int rc = 0;
	for (int i = 0; i < MASTER_NPARTS; i++) {
		const struct master_part *p = &m->svc.parts[i];
		int prc = p->save ? p->save(m, &t->tail) : 0;
		if (prc < 0 && rc == 0)
			rc = prc;
	}
	rv_buf_puts(&t->tail, "}");
	return rc;
}

/* Under the state lock: SNAP_MAGIC2 then named sections, each a module's
 * JSON (shards: empty when the job has no sharded dataset), but for the
 * workers' entries (snapshot_finish). */
static int snapshot_build(struct master *m, struct snap_taken *t)
{
	struct rv_buf part;
	rv_buf_init(&part);
	rv_buf_puts(&t->pre, SNAP_MAGIC2);
	int rc = rdzv_snapshot_save(m->rdzv, &part);
	if (rc == 0) {
		snap_put(&t->pre, "rdzv", &part);
		rc = m->shards ? shard_snapshot_save(m->shards, &part) : 0;
	}
	if (rc == 0) {
		snap_put(&t->pre, "shards", &part);
		rc = snap_master_save(m, t);
	}
	if (rc == 0)
		rc = stream_snapshot_save(m->streams, &part);
	if (rc == 0) {
		snap_put(&t->post, "streams", &part);
		rc = netcheck_run_save(&m->netcheck, &part);
	}
	if (rc == 0)
		snap_put(&t->post, "netcheck", &part);
	rv_buf_release(&part);
	return rc;
}

/* Without the lock: the snapshot's text in out, the workers encoded. */
static int snapshot_finish(struct snap_taken *t, struct rv_buf *out)
{
	struct rv_buf part;
	rv_buf_init(&part);
	rv_buf_append(&part, t->head.data ? t->head.data : "", t->head.len);
	int rc = snap_workers_save(t->workers, t->nworkers, &part);
	rv_buf_append(&part, t->tail.data ? t->tail.data : "", t->tail.len);
	rv_buf_append(out, t->pre.data ? t->pre.data : "", t->pre.len);
	snap_put(out, "master", &part);
	rv_buf_append(out, t->post.data ? t->post.data : "", t->post.len);
	rv_buf_release(&part);
	bool failed = rv_buf_failed(out) || rv_buf_failed(&t->pre) || rv_buf_failed(&t->head) ||
		      rv_buf_failed(&t->tail) || rv_buf_failed(&t->post);
	return rc == 0 && failed ? -ENOMEM : rc;
}

/* Next length-prefixed section of a snapshot. */
static const char *snap_section(const char **p, const char *end, size_t *len)
{
	const char *nl = memchr(*p, '\n', (size_t)(end - *p));
	if (!nl)
		return NULL;
	char num[24];
	size_t k = (size_t)(nl - *p);
	if (k == 0 || k >= sizeof(num))
		return NULL;
	memcpy(num, *p, k);
	num[k] = 0;
	int64_t n;
	if (rv_parse_i64(num, 0, end - nl - 1, &n) < 0)
		return NULL;
	const char *s = nl + 1;
	*len = (size_t)n;
	*p = s + n;
	return s;
}

/* A worker's entry as snapshots before the named form held it. */
static int snap_worker_positional(const cJSON *it, struct master_worker *w)
{
	int nf = cJSON_GetArraySize(it);
	if (nf != 9 && nf != 10)
		return -EUCLEAN;
	memset(w, 0, sizeof(*w));
	w->id = (int64_t)cJSON_GetNumberValue(cJSON_GetArrayItem(it, 0));
	const char *node = cJSON_GetStringValue(cJSON_GetArrayItem(it, 1));
	const char *ds = cJSON_GetStringValue(cJSON_GetArrayItem(it, 5));
	snprintf(w->node, sizeof(w->node), "%s", node ? node : "");
	w->last_req = (int64_t)cJSON_GetNumberValue(cJSON_GetArrayItem(it, 2));
	w->last_task.status =
		(enum rv_shard_status)(int)cJSON_GetNumberValue(cJSON_GetArrayItem(it, 3));
	w->last_task.id = (int64_t)cJSON_GetNumberValue(cJSON_GetArrayItem(it, 4));
	snprintf(w->last_task.dataset, sizeof(w->last_task.dataset), "%s", ds ? ds : "");
	w->last_task.epoch = (int)cJSON_GetNumberValue(cJSON_GetArrayItem(it, 6));
	w->last_task.start = (int64_t)cJSON_GetNumberValue(cJSON_GetArrayItem(it, 7));
	w->last_task.end = (int64_t)cJSON_GetNumberValue(cJSON_GetArrayItem(it, 8));
	/* a tenth entry: the partition of a streaming task */
	const char *part = nf == 10 ? cJSON_GetStringValue(cJSON_GetArrayItem(it, 9)) : NULL;
	snprintf(w->last_task.partition, sizeof(w->last_task.partition), "%s", part ? part : "");
	return 0;
}

static int load_extra(struct master *m, const char *s, size_t len, struct rv_err *err)
{
	RV_CLEANUP_CJSON cJSON *doc = rv_json_parse(s, len, err);
	if (!doc)
		return -EUCLEAN;
	m->step = (int64_t)cJSON_GetNumberValue(cJSON_GetObjectItem(doc, "step"));
	m->step_ts_ms = (int64_t)cJSON_GetNumberValue(cJSON_GetObjectItem(doc, "step_ts"));
	m->speed = cJSON_GetNumberValue(cJSON_GetObjectItem(doc, "speed"));
	m->last_now_ms = (int64_t)cJSON_GetNumberValue(cJSON_GetObjectItem(doc, "last_now"));
	const cJSON *it;
	cJSON_ArrayForEach(it, cJSON_GetObjectItem(doc, "workers"))
	{
		struct master_worker e;
		int rc = cJSON_IsArray(it) ? snap_worker_positional(it, &e)
					   : rv_wire_decode(&snap_worker_msg, it, &e, NULL);
		if (rc < 0)
			return rv_err_set(err, -EUCLEAN, "workers",
					  "bad worker entry in the snapshot");
		struct master_worker *w = worker_get(m, e.id);
		if (!w)
			return -ENOMEM;
		*w = e;
	}
	for (int i = 0; i < MASTER_NPARTS; i++) {
		const struct master_part *p = &m->svc.parts[i];
		int rc = p->load ? p->load(m, doc, err) : 0;
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* The sections of a snapshot, by name; NULL: not in it. */
struct snap_parts {
	const char *rdzv, *shards, *master, *streams, *netcheck;
	size_t rdzv_len, shards_len, master_len, streams_len, netcheck_len;
};

/* Version 1: rdzv, shards, master, then streams (a fourth section, absent
 * before streams) and the network check (a fifth), by position. */
static int snap_parts_v1(const char *p, const char *end, struct snap_parts *sp)
{
	sp->rdzv = snap_section(&p, end, &sp->rdzv_len);
	sp->shards = sp->rdzv ? snap_section(&p, end, &sp->shards_len) : NULL;
	sp->master = sp->shards ? snap_section(&p, end, &sp->master_len) : NULL;
	if (!sp->master)
		return -EUCLEAN;
	sp->streams = p < end ? snap_section(&p, end, &sp->streams_len) : NULL;
	sp->netcheck = sp->streams && p < end ? snap_section(&p, end, &sp->netcheck_len) : NULL;
	return 0;
}

/* Version 2: "<name> <bytes>\n<bytes>" each; a name not known here (a
 * newer master's) is skipped. */
static int snap_parts_v2(const char *p, const char *end, struct snap_parts *sp)
{
	while (p < end) {
		const char *sp_at = memchr(p, ' ', (size_t)(end - p));
		if (!sp_at)
			return -EUCLEAN;
		size_t nl = (size_t)(sp_at - p), len;
		const char *name = p;
		p = sp_at + 1;
		const char *body = snap_section(&p, end, &len);
		if (!body)
			return -EUCLEAN;
#define SNAP_PART(key)                                                                             \
	if (nl == strlen(#key) && memcmp(name, #key, nl) == 0) {                                   \
		sp->key = body;                                                                    \
		sp->key##_len = len;                                                               \
	}
		SNAP_PART(rdzv)
		SNAP_PART(shards)
		SNAP_PART(master)
		SNAP_PART(streams)
		SNAP_PART(netcheck)
#undef SNAP_PART
	}
	return sp->rdzv && sp->shards && sp->master ? 0 : -EUCLEAN;
}

static int on_snapshot(void *ctx, int type, const void *data, size_t len, struct rv_err *err)
{
	struct master *m = ctx;
	(void)type;
	const char *p = data, *end = p + len;
	size_t ml = strlen(SNAP_MAGIC);
	struct snap_parts sp = { 0 };
	int rc;
	if (len >= ml && memcmp(p, SNAP_MAGIC, ml) == 0)
		rc = snap_parts_v1(p + ml, end, &sp);
	else if (len >= ml && memcmp(p, SNAP_MAGIC2, ml) == 0)
		rc = snap_parts_v2(p + ml, end, &sp);
	else
		return rv_err_set(err, -EUCLEAN, "", "the snapshot is not a rover-master snapshot");
	if (rc < 0)
		return rv_err_set(err, -EUCLEAN, "", "the snapshot is cut short");
	rc = rdzv_snapshot_load(m->rdzv, sp.rdzv, sp.rdzv_len, err);
	if (rc == 0 && m->shards)
		rc = shard_snapshot_load(m->shards, sp.shards, sp.shards_len, err);
	if (rc == 0)
		rc = load_extra(m, sp.master, sp.master_len, err);
	if (rc == 0 && sp.streams)
		rc = stream_snapshot_load(m->streams, sp.streams, sp.streams_len, err);
	if (rc == 0 && sp.netcheck)
		rc = netcheck_run_load(&m->netcheck, sp.netcheck, sp.netcheck_len, err);
	return rc < 0 ? rc : 0;
}

static int on_record(void *ctx, int type, const void *data, size_t len, struct rv_err *err)
{
	struct master *m = ctx;
	struct master_result res;
	struct master_op op;
	const struct master_op *opp = NULL;
	if (!doc_record(type)) {
		if (len != sizeof(op))
			return rv_err_set(err, -EUCLEAN, "",
					  "journal record of type %d has %zu bytes, not %zu", type,
					  len, sizeof(op));
		memcpy(&op, data, sizeof(op));
		opp = &op;
	}
	memset(&res, 0, sizeof(res));
	/* Replay tells the services nothing: they start after it, from the
	 * state it left. */
	struct master_effects fx;
	apply(m, type, opp, data, len, &res, &fx);
	effects_release(&fx);
	m->since_snapshot++;
	atomic_fetch_add(&m->ops_replayed, 1);
	return 0;
}

/*
 * Take a snapshot when one is due.  Under the state lock only what must be
 * (the state serialised, and the journal told which records it covers);
 * the write, its fsync, the rename and the fresh journal run without it, so
 * requests are applied and answered meanwhile (their records go to the old
 * journal, and from it to the fresh one).  One at a time (snap_busy).
 */
static int take_snapshot(struct master *m)
{
	state_lock(m, "take_snapshot");
	if (m->snap_busy || m->since_snapshot < m->cfg.snapshot_every) {
		state_unlock(m);
		return 0;
	}
	struct snap_taken t = { 0 };
	struct rv_buf b;
	rv_buf_init(&b);
	struct rv_err err = { 0 };
	int64_t t0 = rv_mono_ms();
	int64_t covered = m->since_snapshot;
	int64_t rc = snapshot_build(m, &t);
	if (rc == 0)
		rc = journal_snapshot_begin(m->journal);
	bool begun = rc >= 0;
	m->snap_busy = begun;
	state_unlock(m);
	int64_t t1 = rv_mono_ms();
	if (rc >= 0)
		rc = snapshot_finish(&t, &b);
	snap_taken_release(&t);
	if (rc >= 0)
		rc = journal_snapshot_write(m->journal, b.data, b.len, &err);
	else if (begun)
		journal_snapshot_abort(m->journal);
	state_lock(m, "take_snapshot");
	m->snap_busy = false;
	if (rc == 0)
		m->since_snapshot -= covered; /* those after it count to the next */
	state_unlock(m);
	if (rc == 0) {
		atomic_fetch_add(&m->snapshots, 1);
		state_histo_add(&m->snapshot_hold, (t1 - t0) * 1000);
		rv_log_info("snapshot taken", "bytes=%zu ms=%" PRId64 " locked_ms=%" PRId64, b.len,
			    rv_mono_ms() - t0, t1 - t0);
	} else {
		char q[600];
		rv_log_error("could not take a snapshot", "errno=%d reason=%s", (int)-rc,
			     rv_log_q(q, sizeof(q), err.msg));
	}
	rv_buf_release(&b);
	return (int)rc;
}

/* A journal sync failed: counted and logged, with its cause and folder. */
static void sync_failed(struct master *m, int64_t seq, int rc)
{
	char q[600];
	atomic_fetch_add(&m->sync_errors, 1);
	rv_log_error("could not make an operation durable",
		     "seq=%" PRId64 " errno=%d reason=%s dir=%s", seq, -rc,
		     rv_log_q(q, sizeof(q), strerror(-rc)), m->cfg.state_dir);
}

int state_sync_err(const struct master *m, int rc, struct rv_err *err)
{
	if (rc == -ENOSPC || rc == -EDQUOT)
		return rv_err_set(err, -ENOSPC, "", "could not write the journal in %s: %s",
				  m->cfg.state_dir, strerror(-rc));
	return rv_err_set(err, -EIO, "", "could not make the operation durable: %s", strerror(-rc));
}

/* The reply to a write whose record could not be made durable. */
static void durable_fail(const struct master *m, struct rv_http_resp *resp, int rc)
{
	struct rv_err err = { 0 };
	if (state_sync_err(m, rc, &err) == -ENOSPC)
		rv_http_resp_error_text(resp, 503, "unavailable", err.msg, "");
	else
		rv_http_resp_error(resp, -EIO, &err);
}

int state_sync(struct master *m, int64_t seq)
{
	if (seq <= 0)
		return 0;
	int rc = journal_sync(m->journal, seq, (int)m->cfg.sync_timeout_ms);
	if (rc < 0) {
		sync_failed(m, seq, rc);
		return rc;
	}
	if (m->since_snapshot >= m->cfg.snapshot_every)
		take_snapshot(m); /* looked at again under the lock */
	return 0;
}

/* ---- durable replies ---- */

/* One deferred reply waiting for the journal. */
struct durable_wait {
	struct rv_http_defer *d; /* NULL: a sync nobody waits for (the timer's) */
	int64_t seq; /* 0: whatever was appended before it */
	bool must_sync;
	int status;
	char *body;
	struct durable_wait *next;
};

/* Sync once for every queued reply, then answer them all: a group commit
 * without a thread parked per request. */
static void *completer_main(void *arg)
{
	struct master *m = arg;
	pthread_mutex_lock(&m->durable_mu);
	for (;;) {
		while (!m->durable_head && !m->durable_stop)
			pthread_cond_wait(&m->durable_wake, &m->durable_mu);
		struct durable_wait *list = m->durable_head;
		if (!list)
			break;
		m->durable_head = NULL;
		m->durable_tail = &m->durable_head;
		pthread_mutex_unlock(&m->durable_mu);

		int64_t top = 0;
		bool any = false;
		for (struct durable_wait *w = list; w; w = w->next) {
			if (w->seq > top)
				top = w->seq;
			any |= w->seq <= 0;
		}
		int rc = any ? journal_sync(m->journal, 0, (int)m->cfg.sync_timeout_ms) : 0;
		if (rc < 0)
			sync_failed(m, 0, rc);
		if (rc >= 0 && top > 0)
			rc = state_sync(m, top);
		while (list) {
			struct durable_wait *w = list;
			list = w->next;
			if (rc < 0 && w->must_sync) {
				struct rv_http_resp r = { 0 };
				free(w->body);
				durable_fail(m, &r, rc);
				w->status = r.status;
				w->body = r.body;
			}
			if (w->d)
				rv_http_complete(w->d, w->status, w->body);
			else
				free(w->body); /* the timer's: nobody to answer */
			free(w);
		}
		pthread_mutex_lock(&m->durable_mu);
	}
	pthread_mutex_unlock(&m->durable_mu);
	return NULL;
}

/* Queue w for the completer; false once it stopped. */
static bool durable_queue(struct master *m, struct durable_wait *w)
{
	pthread_mutex_lock(&m->durable_mu);
	bool ok = !m->durable_stop;
	if (ok) {
		*m->durable_tail = w;
		m->durable_tail = &w->next;
		pthread_cond_signal(&m->durable_wake);
	}
	pthread_mutex_unlock(&m->durable_mu);
	return ok;
}

int state_reply_durable(struct master *m, struct rv_http_resp *resp, int64_t seq, bool must_sync)
{
	if (seq > 0 && journal_durable_seq(m->journal) >= seq)
		return 0; /* durable already (a heartbeat's reply, mostly) */
	struct durable_wait *w = m->completer_started ? malloc(sizeof(*w)) : NULL;
	if (w) {
		*w = (struct durable_wait){ .seq = seq,
					    .must_sync = must_sync,
					    .status = resp->status,
					    .body = resp->body };
		resp->body = NULL;
		w->d = rv_http_resp_defer(resp);
		if (w->d) {
			/* The server stops before the completer: it still runs. */
			if (!durable_queue(m, w)) {
				rv_http_complete(w->d, 503, w->body);
				free(w);
			}
			return 0;
		}
		resp->body = w->body; /* not a pooled server: wait here */
		free(w);
	}
	int s = seq > 0 ? state_sync(m, seq)
			: journal_sync(m->journal, 0, (int)m->cfg.sync_timeout_ms);
	if (must_sync && s < 0)
		durable_fail(m, resp, s);
	return 0;
}

/* Under the lock, from the timer: make seq durable without waiting for
 * it (the completer syncs it, or this thread once the completer is gone),
 * so that the timer's turns never stand behind the disk.  Nobody is
 * answered from the timer's records (a parked world long-poll reads the
 * state, as any read does). */
static void sync_later(struct master *m, int64_t seq)
{
	if (seq <= 0)
		return;
	struct durable_wait *w = m->completer_started ? calloc(1, sizeof(*w)) : NULL;
	if (w) {
		w->seq = seq;
		if (durable_queue(m, w))
			return;
		free(w);
	}
	state_unlock(m);
	state_sync(m, seq);
	state_lock(m, "timer");
}

/* ---- timer ---- */

static int64_t next_deadline(struct master *m)
{
	int64_t a = rdzv_next_deadline(m->rdzv),
		b = m->shards ? shard_next_deadline(m->shards) : INT64_MAX,
		c = stream_next_deadline(m->streams), d = netcheck_run_deadline(&m->netcheck);
	int64_t ab = a < b ? a : b, cd = c < d ? c : d;
	return ab < cd ? ab : cd;
}

/* A rover-run gone while its world trained (master_world_lost): it leaves
 * now, as a reported failure would, so the others re-form (a spare takes its
 * place) without the heartbeat timeout.  Under m->lock.  Returns whether
 * one left. */
static bool watch_lost(struct master *m)
{
	char lost[8][RV_NAME_MAX];
	int n = m->svc.world_lost ? m->svc.world_lost(m, lost, 8) : 0;
	for (int i = 0; i < n; i++) {
		struct master_op op = { .now_ms = state_now(m), .id = MASTER_LEAVE_LOST };
		struct master_result res;
		int64_t seq = 0;
		memcpy(op.node, lost[i], sizeof(op.node));
		op.node[sizeof(op.node) - 1] = 0;
		rv_log_warn("node lost: its world watch closed", "node=%s", lost[i]);
		state_apply(m, MASTER_OP_LEAVE, &op, NULL, 0, &res, &seq);
		sync_later(m, seq);
	}
	return n > 0;
}

/* Under the lock, from the timer: when the timer's last turn was more than
 * half a heartbeat timeout ago (every turn waits at most tick_ms), the
 * master itself stood still (SIGSTOP, a paused VM, a starved machine) and
 * no node could be heard meanwhile: as after a restart, every node counts
 * as heard from now, so its own pause is not taken for their silence. */
static void stall_grace(struct master *m, int64_t since_ms)
{
	if (since_ms <= m->cfg.heartbeat_timeout_ms / 2)
		return;
	rv_log_warn("the master stood still: every node counts as heard from now",
		    "still_ms=%" PRId64, since_ms);
	atomic_fetch_add(&m->stalls, 1);
	uint64_t max = atomic_load(&m->stall_ms_max);
	if ((uint64_t)since_ms > max)
		atomic_store(&m->stall_ms_max, (uint64_t)since_ms);
	struct master_op op = { .now_ms = state_now(m) };
	struct master_result res;
	int64_t seq = 0;
	state_apply(m, MASTER_OP_GRACE, &op, NULL, 0, &res, &seq);
	sync_later(m, seq);
}

/* A timed wait's return this late (ms): a wait for the state lock, or the
 * master not running (stall_grace logs a long one). */
static void timer_late(struct master *m, int64_t ms)
{
	state_histo_add(&m->timer_late, (ms < 0 ? 0 : ms) * 1000);
}

static void *timer_main(void *arg)
{
	struct master *m = arg;
	int64_t last_tick = INT64_MIN, last_turn = rv_mono_ms();
	state_lock(m, "timer");
	while (!m->stopping) {
		int64_t turn = rv_mono_ms();
		stall_grace(m, turn - last_turn);
		last_turn = turn;
		effects_world_poll(m); /* long-polls whose wait is over */
		if (watch_lost(m))
			continue;
		int64_t now = state_now(m);
		int64_t dl = next_deadline(m);
		/* A deadline that a tick at or after it did not move would make a
		 * busy loop of journaled ticks: then tick at most once per tick_ms. */
		if (now >= dl && (dl > last_tick || now - last_tick >= m->cfg.tick_ms)) {
			last_tick = now;
			struct master_op op = { .now_ms = now };
			struct master_result res;
			int64_t seq = 0;
			state_apply(m, MASTER_OP_TICK, &op, NULL, 0, &res, &seq);
			sync_later(m, seq);
			continue;
		}
		int64_t wait = dl > now ? dl - now : m->cfg.tick_ms;
		if (wait > m->cfg.tick_ms)
			wait = m->cfg.tick_ms;
		int64_t wdl = m->svc.world_deadline ? m->svc.world_deadline(m) : INT64_MAX;
		int64_t mono = rv_mono_ms();
		if (wdl != INT64_MAX && wdl - mono < wait)
			wait = wdl > mono ? wdl - mono : 0;
		struct timespec ts;
		int64_t wake = rv_mono_ms() + wait;
		rv_mono_timespec(&ts, wake);
		/* Woken at its time, the turn waits for the lock: how long
		 * whoever held it kept it (or the master did not run). */
		if (state_wait(m, &m->timer_wake, &ts) == ETIMEDOUT)
			timer_late(m, rv_mono_ms() - wake);
	}
	state_unlock(m);
	return NULL;
}

/* ---- open / close ---- */

static int build_modules(struct master *m, struct rv_err *err)
{
	struct rdzv_conf rc = {
		.min_nodes = m->min_nodes,
		.max_nodes = m->max_nodes,
		.node_unit = (int)m->cfg.node_unit,
		.last_call_ms = m->cfg.last_call_ms,
		.max_wait_ms = m->cfg.max_wait_s * 1000,
		.heartbeat_timeout_ms = m->cfg.heartbeat_timeout_ms,
	};
	m->rdzv = rdzv_new(&rc, err);
	if (!m->rdzv)
		return err->code ? err->code : -ENOMEM;
	struct shard_dataset ds[RV_MAX_DATASETS];
	struct stream_dataset sd[RV_MAX_DATASETS];
	struct stream_partition sp[RV_MAX_DATASETS][RV_MAX_PARTITIONS];
	int n = 0, ns = 0;
	for (int i = 0; i < m->spec.ndatasets; i++) {
		const struct rv_dataset *d = &m->spec.datasets[i];
		if (d->streaming) {
			memset(&sd[ns], 0, sizeof(sd[ns]));
			snprintf(sd[ns].name, sizeof(sd[ns].name), "%s", d->name);
			sd[ns].shard_size = d->shard_size;
			sd[ns].nparts = d->npartitions;
			sd[ns].parts = sp[ns];
			for (int p = 0; p < d->npartitions; p++) {
				snprintf(sp[ns][p].name, sizeof(sp[ns][p].name), "%s",
					 d->partitions[p].name);
				sp[ns][p].start = d->partitions[p].start_offset;
				sp[ns][p].end = d->partitions[p].end_offset;
			}
			m->ds_index[i] = ns++;
			continue;
		}
		memset(&ds[n], 0, sizeof(ds[n]));
		snprintf(ds[n].name, sizeof(ds[n].name), "%s", d->name);
		ds[n].size = d->size;
		ds[n].shard_size = d->shard_size < d->size ? d->shard_size : d->size;
		ds[n].epochs = d->epochs > 0 ? d->epochs : 1;
		ds[n].shuffle = d->shuffle;
		ds[n].seed = (uint64_t)m->cfg.shard_seed;
		m->ds_index[i] = n++;
	}
	struct stream_conf stc = {
		.doing_timeout_ms = m->cfg.doing_timeout_ms,
		.max_tasks_in_flight = (int)m->cfg.max_in_flight,
	};
	m->streams = stream_new(sd, ns, &stc, err);
	if (!m->streams)
		return err->code ? err->code : -ENOMEM;
	if (n == 0)
		return 0;
	struct shard_conf sc = {
		.doing_timeout_ms = m->cfg.doing_timeout_ms,
		.max_todo_ranges = (int)m->cfg.max_todo_ranges,
		.max_tasks_in_flight = (int)m->cfg.max_in_flight,
	};
	m->shards = shard_new(ds, n, &sc, err);
	if (!m->shards)
		return err->code ? err->code : -ENOMEM;
	return 0;
}

/* After a replay: every known node counts as heard from now, so the
 * master's own downtime is not taken for silence. */
static void grace(struct master *m)
{
	state_lock(m, "grace");
	struct master_op op = { .now_ms = state_now(m) };
	struct master_result res;
	int64_t seq = 0;
	state_apply(m, MASTER_OP_GRACE, &op, NULL, 0, &res, &seq);
	state_unlock(m);
	state_sync(m, seq);
}

#define STATE_UID_FILE "job-uid"

/* The job uid kept in the state folder into out ("" none kept). */
static void state_read_uid(const struct master *m, char *out, size_t size)
{
	char path[PATH_MAX + 16];
	snprintf(path, sizeof(path), "%s/" STATE_UID_FILE, m->cfg.state_dir);
	out[0] = 0;
	FILE *f = fopen(path, "re");
	if (!f)
		return;
	if (fgets(out, (int)size, f))
		out[strcspn(out, "\r\n")] = 0;
	fclose(f);
}

/* Before the journal is opened: a folder kept for another job uid is
 * refused (its journal is another job's: nothing is replayed or changed). */
static int state_check_uid(const struct master *m, struct rv_err *err)
{
	char kept[160];
	if (!m->cfg.job_uid[0])
		return 0;
	state_read_uid(m, kept, sizeof(kept));
	if (kept[0] && strcmp(kept, m->cfg.job_uid) != 0)
		return rv_err_set(
			err, -EEXIST, "job.uid",
			"the state folder %s holds the journal of job uid %s, not of this "
			"job (uid %s): not replayed; give this job a folder of its own",
			m->cfg.state_dir, kept, m->cfg.job_uid);
	return 0;
}

/* After the journal is opened (the folder exists): the job's uid kept
 * there, written once (a temporary file renamed over it). */
static int state_keep_uid(const struct master *m, struct rv_err *err)
{
	char kept[160], path[PATH_MAX + 16], tmp[PATH_MAX + 32];
	state_read_uid(m, kept, sizeof(kept));
	if (!m->cfg.job_uid[0] || kept[0])
		return 0;
	snprintf(path, sizeof(path), "%s/" STATE_UID_FILE, m->cfg.state_dir);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	FILE *f = fopen(tmp, "we");
	bool ok = f && fprintf(f, "%s\n", m->cfg.job_uid) > 0 && fflush(f) == 0 &&
		  fsync(fileno(f)) == 0;
	if (f && fclose(f) != 0)
		ok = false;
	if (!ok || rename(tmp, path) != 0)
		return rv_err_set(err, -errno ? -errno : -EIO, "job.uid",
				  "could not keep the job's uid in %s: %s", path, strerror(errno));
	return 0;
}

int state_open(struct master *m, struct rv_err *err)
{
	pthread_mutex_init(&m->lock, NULL);
	rv_cond_init_mono(&m->changed);
	rv_cond_init_mono(&m->timer_wake);
	pthread_mutex_init(&m->durable_mu, NULL);
	pthread_cond_init(&m->durable_wake, NULL);
	m->durable_head = NULL;
	m->durable_tail = &m->durable_head;
	/* the node table is the state's own: replayed with or without a node
	 * manager */
	m->svc.parts[MASTER_PART_NODES] = nodetable_part;
	int rc = build_modules(m, err);
	if (rc == 0)
		rc = state_check_uid(m, err);
	if (rc < 0)
		return rc;
	struct journal_opts jo = {
		.dir = m->cfg.state_dir,
		/* an imported data checkpoint is one record */
		.max_record = (size_t)RV_MAX_CKPT_DOC + 4096,
		.commit_delay_us = (int)m->cfg.commit_delay_us,
		.nosync = m->cfg.nosync != 0,
		.prewrite = (size_t)m->cfg.prewrite_kb * 1024,
		.snapshot_step = m->snapshot_step,
		.snapshot_step_ctx = m->snapshot_step_ctx,
	};
	m->wall0_ms = rv_now_ms();
	m->mono0_ms = rv_mono_ms();
	int64_t t0 = rv_mono_ms();
	m->journal = journal_open(&jo, on_snapshot, on_record, m, err);
	if (!m->journal)
		return err->code ? err->code : -EIO;
	rc = state_keep_uid(m, err);
	if (rc < 0)
		return rc;
	struct journal_stats js;
	journal_stats(m->journal, &js);
	rv_log_info("state restored",
		    "dir=%s replayed=%" PRId64 " torn_bytes=%" PRId64 " ms=%" PRId64,
		    m->cfg.state_dir, js.replayed, js.torn_bytes_truncated, rv_mono_ms() - t0);
	grace(m);
	if (pthread_create(&m->timer, NULL, timer_main, m) != 0)
		return rv_err_set(err, -EAGAIN, "", "could not start the timer thread");
	m->timer_started = true;
	if (m->cfg.threads > 0) {
		if (pthread_create(&m->completer, NULL, completer_main, m) != 0)
			return rv_err_set(err, -EAGAIN, "", "could not start the completer thread");
		m->completer_started = true;
	}
	return 0;
}

void state_close(struct master *m)
{
	/* After the server stopped: nothing is queued any more. */
	if (m->completer_started) {
		pthread_mutex_lock(&m->durable_mu);
		m->durable_stop = true;
		pthread_cond_signal(&m->durable_wake);
		pthread_mutex_unlock(&m->durable_mu);
		pthread_join(m->completer, NULL);
		m->completer_started = false;
	}
	if (m->timer_started) {
		state_lock(m, "state_close");
		m->stopping = true;
		pthread_cond_broadcast(&m->timer_wake);
		pthread_cond_broadcast(&m->changed);
		state_unlock(m);
		pthread_join(m->timer, NULL);
		m->timer_started = false;
	}
	journal_close(m->journal);
	m->journal = NULL;
	rdzv_free(m->rdzv);
	m->rdzv = NULL;
	shard_free(m->shards);
	m->shards = NULL;
	stream_free(m->streams);
	m->streams = NULL;
	netcheck_run_release(&m->netcheck);
	free(m->agent_usage);
	m->agent_usage = NULL;
	m->nagent_usage = 0;
	free(m->workers);
	m->workers = NULL;
	free(m->heard);
	m->heard = NULL;
	m->nheard = m->capheard = 0;
	for (int i = 0; i < MASTER_NPARTS; i++)
		if (m->svc.parts[i].release)
			m->svc.parts[i].release(m);
	m->capworkers = m->nworkers = 0;
}
