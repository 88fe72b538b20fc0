/*
 * netcheck.c: groups and verdicts of the two-round network check, and the
 * run the master serves (see netcheck.h).  Pure; O(n log n); allocates a
 * scratch array per call.
 */
#include "netcheck.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "json.h"

struct timed {
	double t;
	int i;
};

static int timed_cmp(const void *a, const void *b)
{
	const struct timed *x = a, *y = b;

	if (x->t != y->t)
		return x->t < y->t ? -1 : 1;
	return (x->i > y->i) - (x->i < y->i);
}

/* Round-0 key used to order nodes: on time by their time, then the one
 * alone (untimed), then the late, then the failed or nonsense. */
static double order_time(const struct netcheck_node *nd, bool alone)
{
	if (!nd->ok[0] || !isfinite(nd->time_s[0]) || nd->time_s[0] < 0)
		return INFINITY;
	if (nd->late[0])
		return 2e9 + nd->time_s[0];
	return alone ? 1e9 : nd->time_s[0];
}

int netcheck_groups(int round, const struct netcheck_node *nodes, int n, struct netcheck_group *g,
		    int max_groups)
{
	if ((round != 0 && round != 1) || n < 2 || (round == 1 && !nodes))
		return -EINVAL;
	int ng = (n + 1) / 2;
	if (max_groups < ng)
		return -ENOSPC;
	if (round == 0) {
		for (int k = 0; k < ng; k++) {
			g[k].n = 2 * k + 1 < n ? 2 : 1;
			g[k].nodes[0] = 2 * k;
			g[k].nodes[1] = 2 * k + 1 < n ? 2 * k + 1 : -1;
		}
		return ng;
	}
	struct timed *o = malloc((size_t)n * sizeof(*o));
	if (!o)
		return -ENOMEM;
	for (int i = 0; i < n; i++)
		o[i] = (struct timed){ order_time(&nodes[i], n % 2 && i == n - 1), i };
	qsort(o, (size_t)n, sizeof(*o), timed_cmp);
	int m = n;
	if (n % 2) {
		/* alone: the fastest that was not alone in round 0 (node n-1) */
		int a = o[0].i == n - 1 ? 1 : 0;
		struct timed t = o[a];
		memmove(&o[a], &o[a + 1], (size_t)(n - 1 - a) * sizeof(*o));
		o[--m] = t;
		g[ng - 1] = (struct netcheck_group){ .n = 1, .nodes = { t.i, -1 } };
	}
	for (int k = 0; k < m / 2; k++) {
		g[k].n = 2;
		g[k].nodes[0] = o[k].i;         /* k-th fastest */
		g[k].nodes[1] = o[m - 1 - k].i; /* k-th slowest */
	}
	free(o);
	return ng;
}

/* Whether node i was alone in round r (groups known). */
static bool alone_in(const struct netcheck_group *const groups[2], const int ngroups[2], int r,
		     int i)
{
	for (int k = 0; groups && groups[r] && k < ngroups[r]; k++)
		if (groups[r][k].n == 1 && groups[r][k].nodes[0] == i)
			return true;
	return false;
}

/* The group of node i in round r, NULL when not known. */
static const struct netcheck_group *group_of(const struct netcheck_group *const groups[2],
					     const int ngroups[2], int r, int i)
{
	for (int k = 0; groups && groups[r] && k < ngroups[r]; k++)
		for (int j = 0; j < groups[r][k].n; j++)
			if (groups[r][k].nodes[j] == i)
				return &groups[r][k];
	return NULL;
}

static bool timed_ok(const struct netcheck_node *nd, int r)
{
	return nd->ok[r] && isfinite(nd->time_s[r]) && nd->time_s[r] >= 0;
}

/* Whether node i's slowness rests on one paired round that its own work
 * explains, against a round it ran alone within limit: the paired round's
 * compute above the compute it showed alone (noise on a loaded machine) is
 * taken off that round's time, and what is left is within limit.  A slow
 * link shows in the paired round's communication, which a round alone
 * does not measure, so without compute times (the TCP check) nothing is
 * cleared. */
static bool noisy_pair_fast_alone(const struct netcheck_node *nd,
				  const struct netcheck_group *const groups[2],
				  const int ngroups[2], int i, double limit)
{
	int paired = -1, alone = -1, npaired = 0;
	for (int r = 0; r < 2; r++) {
		if (!timed_ok(nd, r) || nd->late[r])
			continue;
		if (alone_in(groups, ngroups, r, i)) {
			alone = r;
		} else {
			paired = r;
			npaired++;
		}
	}
	if (npaired != 1 || alone < 0 || nd->time_s[alone] > limit || !(nd->compute_s[alone] > 0) ||
	    !(nd->compute_s[paired] > 0))
		return false;
	double noise = fmax(0, nd->compute_s[paired] - nd->compute_s[alone]);
	return nd->time_s[paired] - noise <= limit;
}

/* Whether node i's slowness rests on one paired round, its other round
 * untimed (failed beside a cut partner, or late), that its partner shows
 * was slow for both: the partner's compute in that round above its
 * compute in its own other round (noise on a loaded machine, which slowed
 * the pair alike) is taken off i's time, and what is left is within limit.
 * A slow node's own compute does not slow its partner's, and a slow link
 * shows in communication, so neither is cleared this way. */
static bool noisy_round_shared(const struct netcheck_node *nodes,
			       const struct netcheck_group *const groups[2], const int ngroups[2],
			       int i, double limit)
{
	const struct netcheck_node *nd = &nodes[i];
	int r = -1, ntimed = 0;
	for (int k = 0; k < 2; k++)
		if (timed_ok(nd, k) && !nd->late[k]) {
			ntimed++;
			r = k;
		}
	const struct netcheck_group *g = ntimed == 1 ? group_of(groups, ngroups, r, i) : NULL;
	if (!g || g->n != 2)
		return false;
	const struct netcheck_node *p = &nodes[g->nodes[0] == i ? g->nodes[1] : g->nodes[0]];
	int o = 1 - r;
	if (!timed_ok(p, r) || !timed_ok(p, o) || p->late[o] || !(p->compute_s[r] > 0) ||
	    !(p->compute_s[o] > 0))
		return false;
	double noise = fmax(0, p->compute_s[r] - p->compute_s[o]);
	return nd->time_s[r] - noise <= limit;
}

/* Median of the nt times in t (sorted here); 0 when nt == 0. */
static double median_of(struct timed *t, int nt)
{
	if (nt == 0)
		return 0;
	qsort(t, (size_t)nt, sizeof(*t), timed_cmp);
	return nt % 2 ? t[nt / 2].t : (t[nt / 2 - 1].t + t[nt / 2].t) / 2;
}

/* A flagged node whose every bad round had a partner flagged with more bad
 * rounds is cleared: the partner explains its rounds. */
static void clear_explained(const struct netcheck_group *const groups[2], const int ngroups[2],
			    int n, const unsigned char (*bad)[2], int *verdict)
{
	int *nbad = calloc((size_t)n, sizeof(*nbad));
	bool *clear = calloc((size_t)n, sizeof(*clear));
	for (int i = 0; nbad && i < n; i++)
		nbad[i] = bad[i][0] + bad[i][1];
	for (int i = 0; nbad && clear && i < n; i++) {
		if (verdict[i] == NETCHECK_OK)
			continue;
		bool all = true;
		for (int r = 0; r < 2 && all; r++) {
			const struct netcheck_group *g = group_of(groups, ngroups, r, i);
			bool explained = false;
			for (int j = 0; bad[i][r] && g && j < g->n; j++) {
				int p = g->nodes[j];
				explained |= p != i && verdict[p] != NETCHECK_OK &&
					     nbad[p] > nbad[i];
			}
			all = !bad[i][r] || explained;
		}
		clear[i] = all;
	}
	for (int i = 0; nbad && clear && i < n; i++)
		if (clear[i])
			verdict[i] = NETCHECK_OK;
	free(nbad);
	free(clear);
}

int netcheck_verdict(const struct netcheck_node *nodes, int n,
		     const struct netcheck_group *const groups[2], const int ngroups[2],
		     double straggler_ratio, int *verdict)
{
	if (n < 1 || !(straggler_ratio > 1.0))
		return -EINVAL;
	struct timed *t = malloc((size_t)n * sizeof(*t));
	double *best = malloc((size_t)n * sizeof(*best));
	unsigned char(*bad)[2] = calloc((size_t)n, sizeof(*bad));
	int nt = 0, nbad = 0;
	if (!t || !best || !bad) {
		free(t);
		free(best);
		free(bad);
		return -ENOMEM;
	}
	for (int i = 0; i < n; i++) {
		best[i] = INFINITY;
		for (int r = 0; r < 2; r++)
			if (timed_ok(&nodes[i], r) && !nodes[i].late[r] &&
			    !alone_in(groups, ngroups, r, i) && nodes[i].time_s[r] < best[i])
				best[i] = nodes[i].time_s[r];
		if (isfinite(best[i]))
			t[nt++] = (struct timed){ best[i], i };
	}
	double median = median_of(t, nt);
	for (int i = 0; i < n; i++) {
		bool paired_ok = false, failed = false;
		for (int r = 0; r < 2; r++) {
			const struct netcheck_node *nd = &nodes[i];
			bool alone = alone_in(groups, ngroups, r, i);
			bool slow = nt >= 3 && timed_ok(nd, r) &&
				    nd->time_s[r] > straggler_ratio * median;
			failed |= !nd->ok[r];
			paired_ok |= nd->ok[r] && !alone;
			bad[i][r] = !nd->ok[r] || (n >= 3 && (nd->late[r] || slow));
		}
		if (!paired_ok && failed)
			verdict[i] = NETCHECK_FAULTY;
		else if (n >= 3 &&
			 ((nt >= 3 && isfinite(best[i]) && best[i] > straggler_ratio * median &&
			   !noisy_pair_fast_alone(&nodes[i], groups, ngroups, i,
						  straggler_ratio * median) &&
			   !noisy_round_shared(nodes, groups, ngroups, i,
					       straggler_ratio * median)) ||
			  (nodes[i].late[0] && nodes[i].late[1])))
			verdict[i] = NETCHECK_STRAGGLER;
		else
			verdict[i] = NETCHECK_OK;
	}
	if (groups)
		clear_explained(groups, ngroups, n, (const unsigned char(*)[2])bad, verdict);
	for (int i = 0; i < n; i++)
		nbad += verdict[i] != NETCHECK_OK;
	free(t);
	free(best);
	free(bad);
	return nbad;
}

/* ---- the run ---- */

void netcheck_run_release(struct netcheck_run *r)
{
	free(r->m);
	free(r->groups[0]);
	free(r->groups[1]);
	memset(r, 0, sizeof(*r));
}

/* Groups of round for the members' results so far. */
static int open_round(struct netcheck_run *r, int round)
{
	if (r->n < 2)
		return -EINVAL;
	int max = (r->n + 1) / 2;
	struct netcheck_node *nodes = malloc((size_t)r->n * sizeof(*nodes));
	struct netcheck_group *g = malloc((size_t)max * sizeof(*g));
	if (!nodes || !g) {
		free(nodes);
		free(g);
		return -ENOMEM;
	}
	for (int i = 0; i < r->n; i++)
		nodes[i] = r->m[i].res;
	int ng = netcheck_groups(round, nodes, r->n, g, max);
	free(nodes);
	if (ng < 0) {
		free(g);
		return ng;
	}
	free(r->groups[round]);
	r->groups[round] = g;
	r->ngroups[round] = ng;
	return 0;
}

int netcheck_run_start(struct netcheck_run *r, int64_t world, const char (*nodes)[64],
		       const char (*addrs)[64], int n, int64_t now_ms,
		       const struct netcheck_limits *lim)
{
	if (n < 2 || n > NETCHECK_MAX_NODES || lim->timeout_ms <= 0 ||
	    !(lim->straggler_ratio > 1.0) || !(lim->wait > 0) || lim->wait_min_ms < 0)
		return -EINVAL;
	struct netcheck_run nr = { .id = r->id + 1,
				   .world = world,
				   .state = NETCHECK_RUNNING,
				   .deadline_ms = now_ms + lim->timeout_ms,
				   .opened_ms = now_ms,
				   .half_ms = -1,
				   .timeout_ms = lim->timeout_ms,
				   .straggler_ratio = lim->straggler_ratio,
				   .wait = lim->wait,
				   .wait_min_ms = lim->wait_min_ms,
				   .n = n };
	nr.m = calloc((size_t)n, sizeof(*nr.m));
	if (!nr.m)
		return -ENOMEM;
	for (int i = 0; i < n; i++) {
		snprintf(nr.m[i].node, sizeof(nr.m[i].node), "%s", nodes[i]);
		snprintf(nr.m[i].addr, sizeof(nr.m[i].addr), "%s", addrs[i]);
	}
	int rc = open_round(&nr, 0);
	if (rc < 0) {
		netcheck_run_release(&nr);
		return rc;
	}
	netcheck_run_release(r);
	*r = nr;
	return 0;
}

int netcheck_run_member(const struct netcheck_run *r, const char *node)
{
	for (int i = 0; i < r->n; i++)
		if (strcmp(r->m[i].node, node) == 0)
			return i;
	return -ENOENT;
}

int netcheck_run_group(const struct netcheck_run *r, const char *node, int round,
		       struct netcheck_group *out)
{
	if (round != 0 && round != 1)
		return -EINVAL;
	int i = r->state == NETCHECK_NONE ? -ENOENT : netcheck_run_member(r, node);
	if (i < 0)
		return i;
	if (!r->groups[round])
		return 0;
	for (int k = 0; k < r->ngroups[round]; k++)
		for (int j = 0; j < r->groups[round][k].n; j++)
			if (r->groups[round][k].nodes[j] == i) {
				*out = r->groups[round][k];
				return 1;
			}
	return -ENOENT;
}

/* Whether a member of i's group in round reported a failure. */
static bool group_failed(const struct netcheck_run *r, int round, int i)
{
	const struct netcheck_group *const gs[2] = { r->groups[0], r->groups[1] };
	const struct netcheck_group *g = group_of(gs, r->ngroups, round, i);
	for (int j = 0; g && j < g->n; j++)
		if (r->m[g->nodes[j]].reported[round] && !r->m[g->nodes[j]].res.ok[round])
			return true;
	return false;
}

/* The verdicts, once round 1 closed. */
static int decide(struct netcheck_run *r)
{
	struct netcheck_node *nodes = malloc((size_t)r->n * sizeof(*nodes));
	int *verdict = malloc((size_t)r->n * sizeof(*verdict));
	int rc = nodes && verdict ? 0 : -ENOMEM;
	for (int i = 0; rc == 0 && i < r->n; i++)
		nodes[i] = r->m[i].res;
	const struct netcheck_group *const gs[2] = { r->groups[0], r->groups[1] };
	if (rc == 0 && (rc = netcheck_verdict(nodes, r->n, gs, r->ngroups, r->straggler_ratio,
					      verdict)) >= 0) {
		for (int i = 0; i < r->n; i++)
			r->m[i].verdict = verdict[i];
		r->state = NETCHECK_DONE;
		r->deadline_ms = INT64_MAX;
		rc = 0;
	}
	free(nodes);
	free(verdict);
	return rc;
}

/* Close the open round: a member that has not reported is late when the
 * round closed before its timeout, it had joined and no one of its group
 * reported a failure (its time: how long the round was open); else failed
 * and silent.  Then open the next round or decide. */
static int close_round(struct netcheck_run *r, int64_t now_ms)
{
	int k = r->round;
	bool early = now_ms < r->opened_ms + r->timeout_ms;
	for (int i = 0; i < r->n; i++) {
		struct netcheck_member *mb = &r->m[i];
		if (mb->reported[k])
			continue;
		if (early && mb->joined && !group_failed(r, k, i)) {
			mb->res.ok[k] = true;
			mb->res.late[k] = true;
			mb->res.time_s[k] = (double)(now_ms - r->opened_ms) / 1000.0;
		} else {
			mb->res.ok[k] = false;
			mb->silent = true;
		}
	}
	if (k == 1)
		return decide(r);
	int rc = open_round(r, 1);
	if (rc < 0)
		return rc;
	r->round = 1;
	r->opened_ms = now_ms;
	r->half_ms = -1;
	r->deadline_ms = now_ms + r->timeout_ms;
	return 0;
}

/* The straggler wait: once every member joined and half of the others
 * reported the open round (one of three), the others have wait x the median reported time (at least
 * wait_min_ms) from then. */
static void straggler_deadline(struct netcheck_run *r, int64_t now_ms)
{
	int k = r->round, nrep = 0, nt = 0;
	bool all = true;
	for (int i = 0; i < r->n; i++) {
		all &= r->m[i].joined;
		nrep += r->m[i].reported[k];
	}
	if (!all || nrep == 0 || 2 * nrep < r->n - 1)
		return;
	if (r->half_ms < 0)
		r->half_ms = now_ms;
	struct timed *t = malloc((size_t)r->n * sizeof(*t));
	for (int i = 0; t && i < r->n; i++)
		if (r->m[i].reported[k] && timed_ok(&r->m[i].res, k))
			t[nt++] = (struct timed){ r->m[i].res.time_s[k], i };
	double med = t ? median_of(t, nt) : 0;
	free(t);
	double w = r->wait * med * 1000.0;
	if (!(w < (double)r->timeout_ms))
		w = (double)r->timeout_ms;
	int64_t until = r->half_ms + (w > (double)r->wait_min_ms ? (int64_t)w : r->wait_min_ms);
	if (until < r->deadline_ms)
		r->deadline_ms = until;
}

int netcheck_run_join(struct netcheck_run *r, const char *node, int64_t now_ms)
{
	if (r->state != NETCHECK_RUNNING)
		return 0;
	int i = netcheck_run_member(r, node);
	if (i < 0)
		return i;
	if (r->m[i].joined)
		return 0;
	r->m[i].joined = true;
	/* a member whose interpreter was slow to import has its full round:
	 * its partner waits for it, and neither is silent */
	if (r->round == 0 && !r->m[i].reported[0] && r->deadline_ms < now_ms + r->timeout_ms) {
		r->deadline_ms = now_ms + r->timeout_ms;
		r->opened_ms = now_ms; /* the round's age counts from here */
	}
	straggler_deadline(r, now_ms);
	return 1;
}

int netcheck_run_report(struct netcheck_run *r, const char *node, int round, bool ok, double time_s,
			double compute_s, int64_t now_ms)
{
	if (round != 0 && round != 1)
		return -EINVAL;
	if (ok && !(isfinite(time_s) && time_s >= 0 && isfinite(compute_s) && compute_s >= 0))
		return -EINVAL;
	int i = r->state == NETCHECK_NONE ? -ENOENT : netcheck_run_member(r, node);
	if (i < 0)
		return i;
	struct netcheck_member *mb = &r->m[i];
	if (mb->reported[round]) {
		bool same = mb->res.ok[round] == ok && (!ok || mb->res.time_s[round] == time_s);
		return same ? 0 : -EEXIST;
	}
	if (r->state == NETCHECK_DONE || round < r->round)
		return 0; /* after its round closed: it counted as failed or late */
	if (round > r->round)
		return -EAGAIN;
	mb->reported[round] = true;
	mb->joined = true;
	mb->res.ok[round] = ok;
	mb->res.time_s[round] = ok ? time_s : 0;
	mb->res.compute_s[round] = ok ? fmin(compute_s, time_s) : 0;
	for (int k = 0; k < r->n; k++)
		if (!r->m[k].reported[round]) {
			straggler_deadline(r, now_ms);
			return 1;
		}
	int rc = close_round(r, now_ms);
	return rc < 0 ? rc : 1;
}

int netcheck_run_tick(struct netcheck_run *r, int64_t now_ms)
{
	if (r->state != NETCHECK_RUNNING || now_ms < r->deadline_ms)
		return 0;
	int rc = close_round(r, now_ms);
	return rc < 0 ? rc : 1;
}

int netcheck_run_grace(struct netcheck_run *r, int64_t now_ms)
{
	if (r->state != NETCHECK_RUNNING || r->deadline_ms >= now_ms + r->timeout_ms)
		return 0;
	r->deadline_ms = now_ms + r->timeout_ms;
	return 1;
}

int64_t netcheck_run_deadline(const struct netcheck_run *r)
{
	return r->state == NETCHECK_RUNNING ? r->deadline_ms : INT64_MAX;
}

/* s as a JSON string (quoted and escaped: an address is the agent's text). */
static void put_str(struct rv_buf *out, const char *s)
{
	RV_CLEANUP_CJSON cJSON *v = cJSON_CreateString(s);
	RV_CLEANUP_FREE char *t = v ? cJSON_PrintUnformatted(v) : NULL;
	if (!t)
		out->failed = true;
	else
		rv_buf_puts(out, t);
}

int netcheck_run_save(const struct netcheck_run *r, struct rv_buf *out)
{
	rv_buf_printf(out,
		      "{\"id\":%" PRId64 ",\"world\":%" PRId64 ",\"state\":%d,\"round\":%d,"
		      "\"deadline\":%" PRId64 ",\"timeout\":%" PRId64 ",\"ratio\":%.17g,"
		      "\"opened\":%" PRId64 ",\"half\":%" PRId64 ",\"wait\":%.17g,"
		      "\"wait_min\":%" PRId64 ",\"members\":[",
		      r->id, r->world, (int)r->state, r->round,
		      r->deadline_ms == INT64_MAX ? (int64_t)-1 : r->deadline_ms, r->timeout_ms,
		      r->straggler_ratio, r->opened_ms, r->half_ms, r->wait, r->wait_min_ms);
	for (int i = 0; i < r->n; i++) {
		const struct netcheck_member *mb = &r->m[i];
		rv_buf_puts(out, i ? ",{\"node\":" : "{\"node\":");
		put_str(out, mb->node);
		rv_buf_puts(out, ",\"addr\":");
		put_str(out, mb->addr);
		rv_buf_printf(out,
			      ",\"ok\":[%d,%d],\"time\":[%.17g,%.17g],\"compute\":[%.17g,%.17g],"
			      "\"reported\":[%d,%d],\"late\":[%d,%d],\"joined\":%d,\"silent\":%d,"
			      "\"verdict\":%d}",
			      mb->res.ok[0], mb->res.ok[1], mb->res.time_s[0], mb->res.time_s[1],
			      mb->res.compute_s[0], mb->res.compute_s[1], mb->reported[0],
			      mb->reported[1], mb->res.late[0], mb->res.late[1], mb->joined,
			      mb->silent, mb->verdict);
	}
	rv_buf_puts(out, "]}");
	return rv_buf_failed(out) ? -ENOMEM : 0;
}

static int pair_item(const cJSON *o, const char *key, int k, double *out)
{
	const cJSON *v = cJSON_GetArrayItem(cJSON_GetObjectItem(o, key), k);
	if (!cJSON_IsNumber(v))
		return -EINVAL;
	*out = cJSON_GetNumberValue(v);
	return 0;
}

/* The straggler wait's state (absent from an older master's snapshot: no
 * early close for that run). */
static int load_wait(const cJSON *root, struct netcheck_run *nr, struct rv_err *err)
{
	nr->half_ms = -1;
	nr->wait = 1e9;
	int rc;
	if ((rc = rv_json_get_int(root, "opened", "", false, 0, INT64_MAX, &nr->opened_ms, err)) <
		    0 ||
	    (rc = rv_json_get_int(root, "half", "", false, -1, INT64_MAX, &nr->half_ms, err)) < 0 ||
	    (rc = rv_json_get_double(root, "wait", "", false, 0, 1e9, &nr->wait, err)) < 0 ||
	    (rc = rv_json_get_int(root, "wait_min", "", false, 0, INT64_MAX, &nr->wait_min_ms,
				  err)) < 0)
		return rc;
	return 0;
}

/* A member's late rounds, compute times and joined flag (absent from an
 * older snapshot). */
static void load_member_extra(const cJSON *o, struct netcheck_member *mb)
{
	double l0 = 0, l1 = 0, c0 = 0, c1 = 0;
	const cJSON *j = cJSON_GetObjectItem(o, "joined");
	if (pair_item(o, "late", 0, &l0) == 0 && pair_item(o, "late", 1, &l1) == 0) {
		mb->res.late[0] = l0 != 0;
		mb->res.late[1] = l1 != 0;
	}
	if (pair_item(o, "compute", 0, &c0) == 0 && pair_item(o, "compute", 1, &c1) == 0 &&
	    c0 >= 0 && c1 >= 0) {
		mb->res.compute_s[0] = c0;
		mb->res.compute_s[1] = c1;
	}
	mb->joined = cJSON_IsNumber(j) && cJSON_GetNumberValue(j) != 0;
}

int netcheck_run_load(struct netcheck_run *r, const char *doc, size_t len, struct rv_err *err)
{
	RV_CLEANUP_CJSON cJSON *root = rv_json_parse(doc, len, err);
	if (!root)
		return -EINVAL;
	struct netcheck_run nr = { 0 };
	int64_t state, round, deadline;
	int rc;
	if ((rc = rv_json_get_int(root, "id", "", true, 0, INT64_MAX, &nr.id, err)) < 0 ||
	    (rc = rv_json_get_int(root, "world", "", true, 0, INT64_MAX, &nr.world, err)) < 0 ||
	    (rc = rv_json_get_int(root, "state", "", true, 0, 2, &state, err)) < 0 ||
	    (rc = rv_json_get_int(root, "round", "", true, 0, 1, &round, err)) < 0 ||
	    (rc = rv_json_get_int(root, "deadline", "", true, -1, INT64_MAX, &deadline, err)) < 0 ||
	    (rc = rv_json_get_int(root, "timeout", "", true, 0, INT64_MAX, &nr.timeout_ms, err)) <
		    0 ||
	    (rc = rv_json_get_double(root, "ratio", "", true, 0, 1e9, &nr.straggler_ratio, err)) <
		    0 ||
	    (rc = load_wait(root, &nr, err)) < 0)
		return rc;
	nr.state = (enum netcheck_state)state;
	nr.round = (int)round;
	nr.deadline_ms = deadline < 0 ? INT64_MAX : deadline;
	const cJSON *arr = rv_json_get_array(root, "members", "", true, &rc, err);
	if (!arr)
		return rc;
	int n = cJSON_GetArraySize(arr);
	if (n > NETCHECK_MAX_NODES || (nr.state != NETCHECK_NONE && n < 2))
		return rv_err_set(err, -EINVAL, "members", "bad member count %d", n);
	if (n > 0 && !(nr.m = calloc((size_t)n, sizeof(*nr.m))))
		return rv_err_set(err, -ENOMEM, "", "out of memory");
	nr.n = n;
	for (int i = 0; i < n; i++) {
		const cJSON *o = cJSON_GetArrayItem(arr, i);
		struct netcheck_member *mb = &nr.m[i];
		double v[8];
		int64_t silent, verdict;
		char p[32];
		rv_json_path_index(p, sizeof(p), "members", i);
		if ((rc = rv_json_get_string(o, "node", p, true, mb->node, sizeof(mb->node), err)) <
			    0 ||
		    (rc = rv_json_get_string(o, "addr", p, true, mb->addr, sizeof(mb->addr), err)) <
			    0 ||
		    (rc = rv_json_get_int(o, "silent", p, true, 0, 1, &silent, err)) < 0 ||
		    (rc = rv_json_get_int(o, "verdict", p, true, 0, 2, &verdict, err)) < 0)
			goto fail;
		if (pair_item(o, "ok", 0, &v[0]) < 0 || pair_item(o, "ok", 1, &v[1]) < 0 ||
		    pair_item(o, "time", 0, &v[2]) < 0 || pair_item(o, "time", 1, &v[3]) < 0 ||
		    pair_item(o, "reported", 0, &v[4]) < 0 ||
		    pair_item(o, "reported", 1, &v[5]) < 0) {
			rc = rv_err_set(err, -EINVAL, p, "%s has bad results", p);
			goto fail;
		}
		mb->res.ok[0] = v[0] != 0;
		mb->res.ok[1] = v[1] != 0;
		mb->res.time_s[0] = v[2];
		mb->res.time_s[1] = v[3];
		mb->reported[0] = v[4] != 0;
		mb->reported[1] = v[5] != 0;
		mb->silent = silent != 0;
		mb->verdict = (int)verdict;
		load_member_extra(o, mb);
	}
	for (int k = 0; nr.state != NETCHECK_NONE && k <= nr.round + (nr.state == NETCHECK_DONE);
	     k++)
		if (k < 2 && (rc = open_round(&nr, k)) < 0) {
			rc = rv_err_set(err, rc, "", "could not rebuild the check's groups");
			goto fail;
		}
	netcheck_run_release(r);
	*r = nr;
	return 0;
fail:
	netcheck_run_release(&nr);
	return rc;
}
