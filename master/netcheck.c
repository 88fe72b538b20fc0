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

/* Round-0 time used to order nodes: failed or nonsense times sort last. */
static double order_time(const struct netcheck_node *nd)
{
	return nd->ok[0] && isfinite(nd->time_s[0]) && nd->time_s[0] >= 0 ? nd->time_s[0]
									  : INFINITY;
}

int netcheck_groups(int round, const struct netcheck_node *nodes, int n, struct netcheck_group *g,
		    int max_groups)
{
	if ((round != 0 && round != 1) || n < 2 || (round == 1 && !nodes))
		return -EINVAL;
	int ng = n / 2;
	if (max_groups < ng)
		return -ENOSPC;

	struct timed *o = malloc((size_t)n * sizeof(*o));
	if (!o)
		return -ENOMEM;
	for (int i = 0; i < n; i++)
		o[i] = (struct timed){ round == 1 ? order_time(&nodes[i]) : 0, i };
	if (round == 1)
		qsort(o, (size_t)n, sizeof(*o), timed_cmp);
	for (int k = 0; k < ng; k++) {
		g[k].n = 2;
		if (round == 0) {
			g[k].nodes[0] = o[2 * k].i;
			g[k].nodes[1] = o[2 * k + 1].i;
		} else {
			g[k].nodes[0] = o[k].i;         /* k-th fastest */
			g[k].nodes[1] = o[n - 1 - k].i; /* k-th slowest */
		}
	}
	if (n % 2) {
		/* round 0: the last index; round 1: the median node */
		g[ng - 1].nodes[g[ng - 1].n++] = o[round == 0 ? n - 1 : ng].i;
	}
	free(o);
	return ng;
}

int netcheck_verdict(const struct netcheck_node *nodes, int n, double straggler_ratio, int *verdict)
{
	if (n < 1 || !(straggler_ratio > 1.0))
		return -EINVAL;

	struct timed *t = malloc((size_t)n * sizeof(*t));
	double *best = malloc((size_t)n * sizeof(*best));
	int nt = 0, bad = 0;
	if (!t || !best) {
		free(t);
		free(best);
		return -ENOMEM;
	}
	for (int i = 0; i < n; i++) {
		best[i] = INFINITY;
		for (int r = 0; r < 2; r++)
			if (nodes[i].ok[r] && isfinite(nodes[i].time_s[r]) &&
			    nodes[i].time_s[r] >= 0 && nodes[i].time_s[r] < best[i])
				best[i] = nodes[i].time_s[r];
		if (isfinite(best[i]))
			t[nt++] = (struct timed){ best[i], i };
	}
	double median = 0;
	if (nt >= 3) {
		qsort(t, (size_t)nt, sizeof(*t), timed_cmp);
		median = nt % 2 ? t[nt / 2].t : (t[nt / 2 - 1].t + t[nt / 2].t) / 2;
	}
	for (int i = 0; i < n; i++) {
		if (!nodes[i].ok[0] && !nodes[i].ok[1])
			verdict[i] = NETCHECK_FAULTY;
		else if (nt >= 3 && isfinite(best[i]) && best[i] > straggler_ratio * median)
			verdict[i] = NETCHECK_STRAGGLER;
		else
			verdict[i] = NETCHECK_OK;
		bad += verdict[i] != NETCHECK_OK;
	}
	free(t);
	free(best);
	return bad;
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
	struct netcheck_node *nodes = malloc((size_t)r->n * sizeof(*nodes));
	struct netcheck_group *g = malloc((size_t)(r->n / 2) * sizeof(*g));
	if (!nodes || !g) {
		free(nodes);
		free(g);
		return -ENOMEM;
	}
	for (int i = 0; i < r->n; i++)
		nodes[i] = r->m[i].res;
	int ng = netcheck_groups(round, nodes, r->n, g, r->n / 2);
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
		       const char (*addrs)[64], int n, int64_t now_ms, int64_t timeout_ms,
		       double straggler_ratio)
{
	if (n < 2 || n > NETCHECK_MAX_NODES || timeout_ms <= 0 || !(straggler_ratio > 1.0))
		return -EINVAL;
	struct netcheck_run nr = { .id = r->id + 1,
				   .world = world,
				   .state = NETCHECK_RUNNING,
				   .deadline_ms = now_ms + timeout_ms,
				   .timeout_ms = timeout_ms,
				   .straggler_ratio = straggler_ratio,
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

/* Close the open round: the silent fail it; open the next or decide. */
static int close_round(struct netcheck_run *r, int64_t now_ms)
{
	for (int i = 0; i < r->n; i++)
		if (!r->m[i].reported[r->round]) {
			r->m[i].res.ok[r->round] = false;
			r->m[i].silent = true;
		}
	if (r->round == 0) {
		int rc = open_round(r, 1);
		if (rc < 0)
			return rc;
		r->round = 1;
		r->deadline_ms = now_ms + r->timeout_ms;
		return 0;
	}
	struct netcheck_node *nodes = malloc((size_t)r->n * sizeof(*nodes));
	int *verdict = malloc((size_t)r->n * sizeof(*verdict));
	int rc = nodes && verdict ? 0 : -ENOMEM;
	for (int i = 0; rc == 0 && i < r->n; i++)
		nodes[i] = r->m[i].res;
	if (rc == 0 && (rc = netcheck_verdict(nodes, r->n, r->straggler_ratio, verdict)) >= 0) {
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

int netcheck_run_report(struct netcheck_run *r, const char *node, int round, bool ok, double time_s,
			int64_t now_ms)
{
	if (round != 0 && round != 1)
		return -EINVAL;
	if (ok && !(isfinite(time_s) && time_s >= 0))
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
		return 0; /* after its round closed: it counted as failed */
	if (round > r->round)
		return -EAGAIN;
	mb->reported[round] = true;
	mb->res.ok[round] = ok;
	mb->res.time_s[round] = ok ? time_s : 0;
	for (int k = 0; k < r->n; k++)
		if (!r->m[k].reported[round])
			return 1;
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
		      "\"members\":[",
		      r->id, r->world, (int)r->state, r->round,
		      r->deadline_ms == INT64_MAX ? (int64_t)-1 : r->deadline_ms, r->timeout_ms,
		      r->straggler_ratio);
	for (int i = 0; i < r->n; i++) {
		const struct netcheck_member *mb = &r->m[i];
		rv_buf_puts(out, i ? ",{\"node\":" : "{\"node\":");
		put_str(out, mb->node);
		rv_buf_puts(out, ",\"addr\":");
		put_str(out, mb->addr);
		rv_buf_printf(out,
			      ",\"ok\":[%d,%d],\"time\":[%.17g,%.17g],\"reported\":[%d,%d],"
			      "\"silent\":%d,\"verdict\":%d}",
			      mb->res.ok[0], mb->res.ok[1], mb->res.time_s[0], mb->res.time_s[1],
			      mb->reported[0], mb->reported[1], mb->silent, mb->verdict);
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
		    0)
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
