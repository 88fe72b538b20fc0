/*
 * rdzv.c: the rendezvous state machine (see rdzv.h for the rules).
 *
 * Called by the master daemon under its state lock and by the journal replay;
 * pure and deterministic: every order it depends on is a total order over
 * the state (join sequence, previous rank, last heartbeat, name), never the
 * order of the node table, so a state loaded from a snapshot behaves as the
 * one that was saved.  Cost: join, leave and heartbeat are O(1) but for the
 * round they complete (O(n log n)) or open (O(n)); world copies and ticks O(n).
 */
#include "rdzv.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "json.h"

enum { NODE_IDLE, NODE_WAITING, NODE_MEMBER };
static const char *const status_names[] = { "idle", "waiting", "member" };
static const char *const state_names[] = { "gathering", "complete", "failed" };

/* Open addressing over the node table; twice its size keeps probes short. */
enum { HASH_SIZE = 2 * RDZV_MAX_NODES, HASH_MASK = HASH_SIZE - 1 };

struct rnode {
	struct rdzv_node node;
	uint32_t hash;
	int status;        /* NODE_* */
	int rank;          /* group rank while NODE_MEMBER, else -1 */
	int prev_rank;     /* group rank in the previous world, -1 none */
	int64_t seq;       /* join order within the rounds it waited for */
	int64_t last_seen; /* last join or heartbeat */
	bool done;         /* finished its work: its silence is not a death */
};

struct rdzv {
	struct rdzv_conf c;
	int eff_min, eff_max; /* min/max rounded to node_unit */
	int state;            /* RDZV_* */
	int64_t round;        /* 0: none opened yet */
	int64_t open_ms;      /* when the current round opened */
	int64_t min_at_ms;    /* when eff_min nodes first waited in it; -1 not yet */
	int64_t seq;          /* last join sequence handed out */
	int64_t rounds_completed;
	int nworld, world_size; /* the complete world */
	int last_world_size;    /* of the last world completed (kept while gathering) */
	int nwaiting;
	/* the current round was opened by a member lost (its agent gone, not
	 * one that reported its workers' failure and joins again in ms): it
	 * completes once every other member is back, without the last call,
	 * so the world shrinks at once and grows back when the node returns */
	bool lost_round;
	char reason[200];
	int n; /* nodes[0..n-1] known */
	struct rnode nodes[RDZV_MAX_NODES];
	int16_t index[HASH_SIZE]; /* node slot, -1 empty */
};

/* ---- the name index ---- */

static uint32_t name_hash(const char *s)
{
	uint32_t h = 2166136261u;

	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 16777619u;
	return h;
}

/* The index position holding name, or of the empty slot where it would go. */
static int index_pos(const struct rdzv *r, const char *name, uint32_t h)
{
	int i = (int)(h & HASH_MASK);

	while (r->index[i] >= 0 && strcmp(r->nodes[r->index[i]].node.name, name) != 0)
		i = (i + 1) & HASH_MASK;
	return i;
}

static int find(const struct rdzv *r, const char *name)
{
	return r->index[index_pos(r, name, name_hash(name))];
}

/* Remove the entry at position i, shifting later entries of its probe run
 * back so lookups never stop early (no tombstones). */
static void index_delete(struct rdzv *r, int i)
{
	int j = i;

	for (;;) {
		r->index[i] = -1;
		for (;;) {
			j = (j + 1) & HASH_MASK;
			if (r->index[j] < 0)
				return;
			int k = (int)(r->nodes[r->index[j]].hash & HASH_MASK);
			/* entry j may move to i unless its home lies in (i, j] */
			bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
			if (!stays)
				break;
		}
		r->index[i] = r->index[j];
		i = j;
	}
}

static void node_remove(struct rdzv *r, int slot)
{
	struct rnode *nd = &r->nodes[slot];

	if (nd->status == NODE_WAITING)
		r->nwaiting--;
	index_delete(r, index_pos(r, nd->node.name, nd->hash));
	int last = r->n - 1;
	if (slot != last) {
		struct rnode *mv = &r->nodes[last];
		r->index[index_pos(r, mv->node.name, mv->hash)] = (int16_t)slot;
		*nd = *mv;
	}
	r->n--;
}

/* ---- rounds ---- */

static bool node_valid(const struct rdzv_node *n, const char **why)
{
	size_t len = strnlen(n->name, sizeof(n->name));

	*why = "name must be 1 to 63 printable characters without quotes or backslashes";
	if (len == 0 || len == sizeof(n->name))
		return false;
	for (size_t i = 0; i < len; i++)
		if (n->name[i] <= ' ' || n->name[i] > '~' || n->name[i] == '"' ||
		    n->name[i] == '\\')
			return false;
	*why = "addr must be at most 63 printable characters without quotes or backslashes";
	len = strnlen(n->addr, sizeof(n->addr));
	if (len == sizeof(n->addr))
		return false;
	for (size_t i = 0; i < len; i++)
		if (n->addr[i] <= ' ' || n->addr[i] > '~' || n->addr[i] == '"' ||
		    n->addr[i] == '\\')
			return false;
	*why = "local_world_size must be between 1 and 65536";
	return n->local_world_size >= 1 && n->local_world_size <= 65536;
}

/* Keep min_at_ms in step with the waiting count. */
static void note_min(struct rdzv *r, int64_t now)
{
	if (r->nwaiting < r->eff_min)
		r->min_at_ms = -1;
	else if (r->min_at_ms < 0)
		r->min_at_ms = now;
}

/* Supersede the complete world: its members remember their ranks and must
 * join again; spares keep waiting for the new round. */
static void open_round(struct rdzv *r, int64_t now)
{
	for (int i = 0; i < r->n; i++) {
		struct rnode *nd = &r->nodes[i];
		nd->prev_rank = nd->status == NODE_MEMBER ? nd->rank : -1;
		if (nd->status == NODE_MEMBER)
			nd->status = NODE_IDLE;
		nd->rank = -1;
	}
	r->round++;
	r->state = RDZV_GATHERING;
	r->open_ms = now;
	r->min_at_ms = -1;
	r->lost_round = false;
	r->nworld = r->world_size = 0;
	note_min(r, now);
}

struct pick {
	int slot;
	int prev_rank;
	int64_t seq;
};

/* Previous members first by their rank, then the others in join order. */
static int pick_cmp(const void *a, const void *b)
{
	const struct pick *x = a, *y = b;
	bool xp = x->prev_rank >= 0, yp = y->prev_rank >= 0;

	if (xp != yp)
		return xp ? -1 : 1;
	if (xp && x->prev_rank != y->prev_rank)
		return x->prev_rank < y->prev_rank ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static void complete(struct rdzv *r)
{
	struct pick picks[RDZV_MAX_NODES] = { { 0 } };
	bool used[RDZV_MAX_NODES] = { false };
	int np = 0;

	for (int i = 0; i < r->n; i++)
		if (r->nodes[i].status == NODE_WAITING)
			picks[np++] = (struct pick){ i, r->nodes[i].prev_rank, r->nodes[i].seq };
	qsort(picks, (size_t)np, sizeof(picks[0]), pick_cmp);

	int u = r->c.node_unit;
	int k = (np < r->eff_max ? np : r->eff_max) / u * u;
	/* a previous member keeps its rank when the world still has it ... */
	for (int i = 0; i < k; i++) {
		struct rnode *nd = &r->nodes[picks[i].slot];
		nd->rank = -1;
		if (nd->prev_rank >= 0 && nd->prev_rank < k) {
			nd->rank = nd->prev_rank;
			used[nd->rank] = true;
		}
	}
	/* ... the others take the free ranks in pick order */
	int next = 0;
	r->world_size = 0;
	for (int i = 0; i < k; i++) {
		struct rnode *nd = &r->nodes[picks[i].slot];
		if (nd->rank < 0) {
			while (used[next])
				next++;
			nd->rank = next;
			used[next] = true;
		}
		nd->status = NODE_MEMBER;
		r->world_size += nd->node.local_world_size;
	}
	r->nworld = k;
	r->last_world_size = r->world_size;
	r->nwaiting -= k;
	r->state = RDZV_COMPLETE;
	r->rounds_completed++;
	r->min_at_ms = -1;
}

/* Every member of the previous world still known waits again.  Until then
 * a round at eff_max waits for its last call rather than completing at once:
 * spares must not take the places of healthy members rejoining. */
static bool members_back(const struct rdzv *r)
{
	for (int i = 0; i < r->n; i++)
		if (r->nodes[i].status == NODE_IDLE && r->nodes[i].prev_rank >= 0)
			return false;
	return true;
}

/* Whether the last call may end the round: every previous member still
 * known is back, or had a heartbeat timeout's time since the round opened
 * to hear of it.  Without that wait a round opened by a late node (or a
 * member joining again) would complete at once under a short last call
 * without the members that must join again, the one left out would open
 * the next round alone in turn, and the world would be re-formed at every
 * heartbeat. */
static bool members_heard(const struct rdzv *r, int64_t now)
{
	return members_back(r) || now - r->open_ms >= r->c.heartbeat_timeout_ms;
}

/* Apply what time and the waiting set call for; 1 when the round or its
 * state changed. */
static int advance(struct rdzv *r, int64_t now)
{
	int changed = 0;

	if (r->round == 0 || r->state == RDZV_FAILED)
		return 0;
	if (r->state == RDZV_COMPLETE) {
		if (r->nworld >= r->eff_max || r->nwaiting < r->c.node_unit)
			return 0;
		open_round(r, now); /* spares can grow the world */
		changed = 1;
	}
	note_min(r, now);
	if (r->min_at_ms >= 0 &&
	    (((r->nwaiting >= r->eff_max || r->lost_round) && members_back(r)) ||
	     (now - r->min_at_ms >= r->c.last_call_ms && members_heard(r, now)))) {
		complete(r);
		return 1;
	}
	if (r->min_at_ms < 0 && r->c.max_wait_ms > 0 && now - r->open_ms >= r->c.max_wait_ms) {
		r->state = RDZV_FAILED;
		snprintf(r->reason, sizeof(r->reason),
			 "round %" PRId64 " gathered %d of at least %d nodes in %" PRId64 " ms",
			 r->round, r->nwaiting, r->eff_min, r->c.max_wait_ms);
		return 1;
	}
	return changed;
}

/* ---- API ---- */

struct rdzv *rdzv_new(const struct rdzv_conf *c, struct rv_err *err)
{
	if (c->min_nodes < 1 || c->min_nodes > RDZV_MAX_NODES)
		return rv_err_set(err, -EINVAL, "min_nodes", "min_nodes must be between 1 and %d",
				  RDZV_MAX_NODES),
		       NULL;
	if (c->max_nodes < c->min_nodes || c->max_nodes > RDZV_MAX_NODES)
		return rv_err_set(err, -EINVAL, "max_nodes",
				  "max_nodes must be between min_nodes (%d) and %d", c->min_nodes,
				  RDZV_MAX_NODES),
		       NULL;
	if (c->node_unit < 1 || c->node_unit > c->max_nodes)
		return rv_err_set(err, -EINVAL, "node_unit",
				  "node_unit must be between 1 and max_nodes (%d)", c->max_nodes),
		       NULL;
	int lo = (c->min_nodes + c->node_unit - 1) / c->node_unit * c->node_unit;
	int hi = c->max_nodes / c->node_unit * c->node_unit;
	if (lo > hi)
		return rv_err_set(
			       err, -EINVAL, "node_unit",
			       "no multiple of node_unit %d between min_nodes %d and max_nodes %d",
			       c->node_unit, c->min_nodes, c->max_nodes),
		       NULL;
	if (c->last_call_ms < 0 || c->max_wait_ms < 0 || c->heartbeat_timeout_ms < 0)
		return rv_err_set(err, -EINVAL,
				  c->last_call_ms < 0  ? "last_call_ms"
				  : c->max_wait_ms < 0 ? "max_wait_ms"
						       : "heartbeat_timeout_ms",
				  "timeouts must not be negative"),
		       NULL;

	struct rdzv *r = calloc(1, sizeof(*r));
	if (!r)
		return rv_err_set(err, -ENOMEM, "", "could not allocate the rendezvous"), NULL;
	r->c = *c;
	r->eff_min = lo;
	r->eff_max = hi;
	r->min_at_ms = -1;
	memset(r->index, 0xff, sizeof(r->index));
	return r;
}

void rdzv_free(struct rdzv *r)
{
	free(r);
}

int64_t rdzv_join(struct rdzv *r, const struct rdzv_node *n, int64_t now_ms)
{
	const char *why;

	if (!n || !node_valid(n, &why))
		return -EINVAL;
	if (r->state == RDZV_FAILED)
		return -ECANCELED;

	uint32_t h = name_hash(n->name);
	int pos = index_pos(r, n->name, h);
	int slot = r->index[pos];
	if (slot < 0) {
		if (r->n == RDZV_MAX_NODES)
			return -ENOSPC;
		slot = r->n++;
		r->index[pos] = (int16_t)slot;
		r->nodes[slot] = (struct rnode){
			.hash = h, .status = NODE_IDLE, .rank = -1, .prev_rank = -1
		};
	}
	if (r->round == 0) {
		r->round = 1;
		r->open_ms = now_ms;
	}
	struct rnode *nd = &r->nodes[slot];
	if (nd->status == NODE_MEMBER)
		open_round(r, now_ms); /* its workers restarted: a new world */
	if (nd->status != NODE_WAITING) {
		nd->status = NODE_WAITING;
		nd->seq = ++r->seq;
		r->nwaiting++;
	}
	nd->node = *n;
	nd->last_seen = now_ms;
	nd->done = false;
	advance(r, now_ms);
	return r->round;
}

static void fill_world(const struct rdzv *r, struct rdzv_world *w)
{
	w->round = r->round;
	w->nnodes = r->nworld;
	w->world_size = r->world_size;
	if (r->state != RDZV_COMPLETE) {
		w->nnodes = w->world_size = 0;
		return;
	}
	for (int i = 0; i < r->n; i++) {
		const struct rnode *nd = &r->nodes[i];
		if (nd->status == NODE_MEMBER)
			w->members[nd->rank] = (struct rdzv_member){ nd->node, nd->rank, 0 };
	}
	int off = 0;
	for (int i = 0; i < r->nworld; i++) {
		w->members[i].rank_offset = off;
		off += w->members[i].node.local_world_size;
	}
}

int rdzv_world(const struct rdzv *r, const char *name, int64_t round, struct rdzv_world *w,
	       int *group_rank)
{
	if (r->state == RDZV_FAILED)
		return -ECANCELED;
	int slot = name ? find(r, name) : -1;
	if (slot < 0)
		return -ENOENT;
	if (round <= 0 || round > r->round)
		return -EINVAL;
	if (round < r->round)
		return -ESTALE;

	const struct rnode *nd = &r->nodes[slot];
	if (r->state == RDZV_GATHERING)
		return nd->status == NODE_WAITING ? 0 : -ESTALE;
	if (nd->status == NODE_WAITING)
		return -EAGAIN;
	if (nd->status != NODE_MEMBER)
		return -ESTALE;
	if (w)
		fill_world(r, w);
	if (group_rank)
		*group_rank = nd->rank;
	return 1;
}

static int leave(struct rdzv *r, const char *name, int64_t now_ms, bool lost)
{
	int slot = name ? find(r, name) : -1;

	if (slot < 0)
		return -ENOENT;
	bool member = r->nodes[slot].status == NODE_MEMBER && r->state == RDZV_COMPLETE;
	if (member) {
		open_round(r, now_ms);
		r->lost_round = lost;
	}
	node_remove(r, slot);
	advance(r, now_ms);
	return member;
}

int rdzv_leave(struct rdzv *r, const char *name, int64_t now_ms)
{
	return leave(r, name, now_ms, false);
}

int rdzv_lost(struct rdzv *r, const char *name, int64_t now_ms)
{
	return leave(r, name, now_ms, true);
}

int rdzv_heartbeat(struct rdzv *r, const char *name, int64_t now_ms)
{
	int slot = name ? find(r, name) : -1;

	if (slot < 0)
		return -ENOENT;
	if (now_ms > r->nodes[slot].last_seen)
		r->nodes[slot].last_seen = now_ms;
	return 0;
}

bool rdzv_alive(const struct rdzv *r, const char *name, int64_t now_ms)
{
	int slot = name ? find(r, name) : -1;

	if (slot < 0 || r->nodes[slot].done)
		return false;
	return r->c.heartbeat_timeout_ms <= 0 ||
	       now_ms - r->nodes[slot].last_seen < r->c.heartbeat_timeout_ms;
}

int rdzv_done(struct rdzv *r, const char *name)
{
	int slot = name ? find(r, name) : -1;

	if (slot < 0)
		return -ENOENT;
	r->nodes[slot].done = true;
	return 0;
}

int rdzv_grace(struct rdzv *r, int64_t now_ms)
{
	for (int i = 0; i < r->n; i++)
		if (now_ms > r->nodes[i].last_seen)
			r->nodes[i].last_seen = now_ms;
	return r->n;
}

struct silent {
	int64_t last_seen;
	const char *name;
};

static int silent_cmp(const void *a, const void *b)
{
	const struct silent *x = a, *y = b;

	if (x->last_seen != y->last_seen)
		return x->last_seen < y->last_seen ? -1 : 1;
	return strcmp(x->name, y->name);
}

int rdzv_tick(struct rdzv *r, int64_t now_ms, char (*dead)[64], int max_dead, int *ndead)
{
	int changed = 0, nd = 0;

	if (r->c.heartbeat_timeout_ms > 0 && max_dead > 0 && dead) {
		struct silent s[RDZV_MAX_NODES] = { { 0 } };
		int ns = 0;
		for (int i = 0; i < r->n; i++)
			if (!r->nodes[i].done &&
			    now_ms - r->nodes[i].last_seen >= r->c.heartbeat_timeout_ms)
				s[ns++] = (struct silent){ r->nodes[i].last_seen,
							   r->nodes[i].node.name };
		qsort(s, (size_t)ns, sizeof(s[0]), silent_cmp);
		/* copy the names first: leaving moves nodes around the table */
		for (nd = 0; nd < ns && nd < max_dead; nd++)
			memcpy(dead[nd], s[nd].name, sizeof(dead[nd]));
		for (int i = 0; i < nd; i++)
			changed |= leave(r, dead[i], now_ms, true) > 0;
	}
	if (ndead)
		*ndead = nd;
	return advance(r, now_ms) | changed;
}

int64_t rdzv_next_deadline(const struct rdzv *r)
{
	int64_t t = INT64_MAX;

	if (r->round > 0 && r->state == RDZV_GATHERING) {
		if (r->min_at_ms >= 0) {
			t = r->min_at_ms + r->c.last_call_ms;
			if (!members_back(r) && r->open_ms + r->c.heartbeat_timeout_ms > t)
				t = r->open_ms + r->c.heartbeat_timeout_ms;
		} else if (r->c.max_wait_ms > 0)
			t = r->open_ms + r->c.max_wait_ms;
	}
	if (r->c.heartbeat_timeout_ms > 0)
		for (int i = 0; i < r->n; i++)
			if (!r->nodes[i].done &&
			    r->nodes[i].last_seen + r->c.heartbeat_timeout_ms < t)
				t = r->nodes[i].last_seen + r->c.heartbeat_timeout_ms;
	return t;
}

int rdzv_waiting(const struct rdzv *r)
{
	return r->state == RDZV_GATHERING ? r->nwaiting : 0;
}

int rdzv_state(const struct rdzv *r, int64_t *round, int *nnodes)
{
	if (round)
		*round = r->round;
	if (nnodes)
		*nnodes = r->state == RDZV_COMPLETE ? r->nworld : r->nwaiting;
	return r->state;
}

int rdzv_nknown(const struct rdzv *r)
{
	return r->n;
}

int rdzv_last_world_size(const struct rdzv *r)
{
	return r->last_world_size;
}

int rdzv_current(const struct rdzv *r, struct rdzv_world *w)
{
	fill_world(r, w);
	return r->state;
}

const char *rdzv_reason(const struct rdzv *r)
{
	return r->state == RDZV_FAILED ? r->reason : "";
}

void rdzv_stats(const struct rdzv *r, struct rdzv_stats *st)
{
	*st = (struct rdzv_stats){ .known = r->n, .rounds_completed = r->rounds_completed };
	for (int i = 0; i < r->n; i++) {
		int s = r->nodes[i].status;
		st->members += s == NODE_MEMBER;
		st->waiting += s == NODE_WAITING;
		st->idle += s == NODE_IDLE;
	}
}

/* ---- snapshot ---- */

int rdzv_snapshot_save(const struct rdzv *r, struct rv_buf *out)
{
	/* names, addresses and the reason hold no quote, backslash or control
	 * character (node_valid, our own format), so no escaping is needed */
	rv_buf_printf(out,
		      "{\"version\":1,\"state\":\"%s\",\"round\":%" PRId64 ",\"open_ms\":%" PRId64
		      ",\"min_at_ms\":%" PRId64 ",\"seq\":%" PRId64 ",\"rounds_completed\":%" PRId64
		      ",\"last_world_size\":%d,\"lost_round\":%s,\"reason\":\"%s\",\"nodes\":[",
		      state_names[r->state], r->round, r->open_ms, r->min_at_ms, r->seq,
		      r->rounds_completed, r->last_world_size, r->lost_round ? "true" : "false",
		      r->state == RDZV_FAILED ? r->reason : "");
	for (int i = 0; i < r->n; i++) {
		const struct rnode *nd = &r->nodes[i];
		rv_buf_printf(out,
			      "%s{\"name\":\"%s\",\"addr\":\"%s\",\"local_world_size\":%d,"
			      "\"status\":\"%s\",\"rank\":%d,\"prev_rank\":%d,\"seq\":%" PRId64
			      ",\"last_seen\":%" PRId64 "%s}",
			      i ? "," : "", nd->node.name, nd->node.addr, nd->node.local_world_size,
			      status_names[nd->status], nd->rank, nd->prev_rank, nd->seq,
			      nd->last_seen, nd->done ? ",\"done\":true" : "");
	}
	rv_buf_puts(out, "]}");
	return rv_buf_failed(out) ? -ENOMEM : 0;
}

static int pick_name(const char *s, const char *const *names, int n)
{
	for (int i = 0; i < n; i++)
		if (strcmp(s, names[i]) == 0)
			return i;
	return -1;
}

/* Timestamps travel through a JSON double: exact up to 2^53 ms. */
#define TS_MAX ((int64_t)1 << 53)

static int load_node(struct rdzv *t, const cJSON *it, int i, struct rv_err *err)
{
	char path[64], field[128], s[16];
	struct rnode nd = { .rank = -1, .prev_rank = -1 };
	int64_t v;
	int rc;
	const char *why;

	rv_json_path_index(path, sizeof(path), "nodes", i);
	if (!cJSON_IsObject(it))
		return rv_err_set(err, -EINVAL, path, "%s must be an object", path);
	if ((rc = rv_json_get_string(it, "name", path, true, nd.node.name, sizeof(nd.node.name),
				     err)) < 0 ||
	    (rc = rv_json_get_string(it, "addr", path, true, nd.node.addr, sizeof(nd.node.addr),
				     err)) < 0 ||
	    (rc = rv_json_get_int(it, "local_world_size", path, true, 1, 65536, &v, err)) < 0)
		return rc;
	nd.node.local_world_size = (int)v;
	if (!node_valid(&nd.node, &why))
		return rv_err_set(err, -EINVAL, rv_json_path(field, sizeof(field), path, "name"),
				  "%s: %s", path, why);
	if ((rc = rv_json_get_string(it, "status", path, true, s, sizeof(s), err)) < 0)
		return rc;
	if ((nd.status = pick_name(s, status_names, 3)) < 0)
		return rv_err_set(err, -EINVAL, rv_json_path(field, sizeof(field), path, "status"),
				  "%s must be idle, waiting or member", field);
	if ((rc = rv_json_get_int(it, "rank", path, true, -1, RDZV_MAX_NODES - 1, &v, err)) < 0)
		return rc;
	nd.rank = (int)v;
	if ((rc = rv_json_get_int(it, "prev_rank", path, true, -1, RDZV_MAX_NODES - 1, &v, err)) <
	    0)
		return rc;
	nd.prev_rank = (int)v;
	if ((rc = rv_json_get_int(it, "seq", path, true, 0, TS_MAX, &nd.seq, err)) < 0 ||
	    (rc = rv_json_get_int(it, "last_seen", path, true, -TS_MAX, TS_MAX, &nd.last_seen,
				  err)) < 0 ||
	    (rc = rv_json_get_bool(it, "done", path, false, &nd.done, err)) < 0)
		return rc;
	if ((nd.status == NODE_MEMBER) != (nd.rank >= 0) ||
	    (t->state != RDZV_COMPLETE && nd.status == NODE_MEMBER))
		return rv_err_set(err, -EINVAL, rv_json_path(field, sizeof(field), path, "rank"),
				  "%s: only members of a complete world have a rank", path);

	nd.hash = name_hash(nd.node.name);
	int pos = index_pos(t, nd.node.name, nd.hash);
	if (t->index[pos] >= 0)
		return rv_err_set(err, -EINVAL, rv_json_path(field, sizeof(field), path, "name"),
				  "%s: name %s appears twice", path, nd.node.name);
	t->index[pos] = (int16_t)t->n;
	t->nodes[t->n++] = nd;
	if (nd.status == NODE_WAITING)
		t->nwaiting++;
	if (nd.status == NODE_MEMBER) {
		t->nworld++;
		t->world_size += nd.node.local_world_size;
	}
	return 0;
}

/* Ranks of members form 0..nworld-1; previous ranks are distinct. */
static int check_ranks(const struct rdzv *t, struct rv_err *err)
{
	bool rank[RDZV_MAX_NODES] = { false }, prev[RDZV_MAX_NODES] = { false };

	for (int i = 0; i < t->n; i++) {
		const struct rnode *nd = &t->nodes[i];
		if (nd->rank >= 0) {
			if (nd->rank >= t->nworld || rank[nd->rank])
				return rv_err_set(err, -EINVAL, "nodes",
						  "group ranks of members "
						  "must be 0..%d, each once",
						  t->nworld - 1);
			rank[nd->rank] = true;
		}
		if (nd->prev_rank >= 0) {
			if (prev[nd->prev_rank])
				return rv_err_set(err, -EINVAL, "nodes",
						  "previous rank %d appears twice", nd->prev_rank);
			prev[nd->prev_rank] = true;
		}
	}
	if (t->state == RDZV_COMPLETE && t->nworld == 0)
		return rv_err_set(err, -EINVAL, "state", "a complete round has members");
	return 0;
}

int rdzv_snapshot_load(struct rdzv *r, const char *doc, size_t len, struct rv_err *err)
{
	RV_CLEANUP_CJSON cJSON *root = rv_json_parse(doc, len, err);
	RV_CLEANUP_FREE struct rdzv *t = NULL;
	char s[16];
	int64_t v;
	int rc;

	if (!root)
		return -EINVAL;
	if (!cJSON_IsObject(root))
		return rv_err_set(err, -EINVAL, "", "a rendezvous snapshot is a json object");
	if ((rc = rv_json_get_int(root, "version", "", true, 1, 1, &v, err)) < 0)
		return rc;
	if (!(t = calloc(1, sizeof(*t))))
		return rv_err_set(err, -ENOMEM, "", "could not allocate the rendezvous");
	t->c = r->c;
	t->eff_min = r->eff_min;
	t->eff_max = r->eff_max;
	memset(t->index, 0xff, sizeof(t->index));
	if ((rc = rv_json_get_string(root, "state", "", true, s, sizeof(s), err)) < 0)
		return rc;
	if ((t->state = pick_name(s, state_names, 3)) < 0)
		return rv_err_set(err, -EINVAL, "state",
				  "state must be gathering, complete or failed");
	if ((rc = rv_json_get_int(root, "round", "", true, 0, TS_MAX, &t->round, err)) < 0 ||
	    (rc = rv_json_get_int(root, "open_ms", "", true, -TS_MAX, TS_MAX, &t->open_ms, err)) <
		    0 ||
	    (rc = rv_json_get_int(root, "min_at_ms", "", true, -TS_MAX, TS_MAX, &t->min_at_ms,
				  err)) < 0 ||
	    (rc = rv_json_get_int(root, "seq", "", true, 0, TS_MAX, &t->seq, err)) < 0 ||
	    (rc = rv_json_get_int(root, "rounds_completed", "", true, 0, TS_MAX,
				  &t->rounds_completed, err)) < 0 ||
	    (rc = rv_json_get_string(root, "reason", "", true, t->reason, sizeof(t->reason), err)) <
		    0 ||
	    (rc = rv_json_get_bool(root, "lost_round", "", false, &t->lost_round, err)) < 0)
		return rc;
	if (t->round == 0 && t->state != RDZV_GATHERING)
		return rv_err_set(err, -EINVAL, "round", "round 0 is gathering");

	const cJSON *nodes = rv_json_get_array(root, "nodes", "", true, &rc, err);
	if (!nodes)
		return rc;
	int i = 0;
	const cJSON *it;
	cJSON_ArrayForEach(it, nodes)
	{
		if (i == RDZV_MAX_NODES)
			return rv_err_set(err, -EINVAL, "nodes", "more than %d nodes",
					  RDZV_MAX_NODES);
		if ((rc = load_node(t, it, i++, err)) < 0)
			return rc;
	}
	if ((rc = check_ranks(t, err)) < 0)
		return rc;
	/* absent in snapshots taken before it was kept: the world's, if any */
	int64_t last = t->world_size;
	if ((rc = rv_json_get_int(root, "last_world_size", "", false, 0, INT32_MAX, &last, err)) <
	    0)
		return rc;
	t->last_world_size = (int)last;
	if (t->round == 0 && t->n > 0)
		return rv_err_set(err, -EINVAL, "round", "nodes are known but no round opened");
	*r = *t;
	return 0;
}
