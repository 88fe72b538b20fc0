/*
 * nodes.c: the node manager's relaunch policy (see nodes.h).
 *
 * A node is its (role, rank); each launch of it is an instance named
 * <base>.<attempt> (attempt 0 keeps the base name).  Only events of the
 * current instance count, so a late event of a replaced one changes nothing.
 * Crashes use the role's restartCount; OOM kills their own budget, since a
 * node that needs more memory is not faulty.  Crashes are also charged to
 * the host they ran on.
 */
#include "nodes.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ROLES 8

/* snprintf that truncates quietly: names and reasons are bounded on purpose. */
__attribute__((format(printf, 3, 4))) static void fmt(char *buf, size_t size, const char *f, ...)
{
	va_list ap;
	va_start(ap, f);
	vsnprintf(buf, size, f, ap);
	va_end(ap);
}

enum node_state { N_LAUNCHED = 0, N_RUNNING, N_SUCCEEDED, N_REMOVED, N_FAILED };

struct node {
	char base[SCHED_NAME_MAX], name[SCHED_NAME_MAX];
	char role[SCHED_ROLE_MAX], host[SCHED_NAME_MAX];
	char left[SCHED_NAME_MAX]; /* the host its last instance left for a fault */
	int rank;
	struct sched_resources res;
	enum node_state state;
	int attempt, restarts, ooms;
};

struct host {
	char name[SCHED_NAME_MAX];
	int crashes;
	bool bad;
};

struct role_conf {
	char role[SCHED_ROLE_MAX];
	int restart_count;
};

struct nodes {
	struct nodes_conf conf;
	nodes_oom_plan_fn oom;
	void *ctx;
	char cand[NODES_MAX_HOSTS][SCHED_NAME_MAX]; /* conf.hosts, copied */
	int ncand;
	struct host hosts[NODES_MAX_HOSTS];
	int nhosts;
	struct role_conf roles[MAX_ROLES];
	int nroles;
	struct node *nodes;
	int n, cap;
	int restarts, oom_relaunches;
	bool failed;
	char reason[NODES_REASON_MAX];
};

struct nodes *nodes_new(const struct nodes_conf *c, nodes_oom_plan_fn oom, void *ctx,
			struct rv_err *err)
{
	struct nodes *m = calloc(1, sizeof(*m));
	if (!m) {
		rv_err_set(err, -ENOMEM, "", "out of memory");
		return NULL;
	}
	if (c)
		m->conf = *c;
	else
		m->conf.default_restart_count = -1;
	if (m->conf.host_max_crashes <= 0)
		m->conf.host_max_crashes = 2;
	if (m->conf.max_oom_relaunches <= 0)
		m->conf.max_oom_relaunches = 5;
	if (m->conf.default_restart_count < 0)
		m->conf.default_restart_count = 3;
	for (int i = 0; c && c->hosts && c->hosts[i]; i++) {
		if (i >= NODES_MAX_HOSTS || !c->hosts[i][0] ||
		    strlen(c->hosts[i]) >= SCHED_NAME_MAX) {
			rv_err_set(err, -EINVAL, "hosts", "at most %d hosts of 1 to %d bytes each",
				   NODES_MAX_HOSTS, SCHED_NAME_MAX - 1);
			free(m);
			return NULL;
		}
		fmt(m->cand[m->ncand++], SCHED_NAME_MAX, "%s", c->hosts[i]);
	}
	m->conf.hosts = NULL; /* borrowed for the call only */
	m->oom = oom;
	m->ctx = ctx;
	return m;
}

struct nodes *nodes_free(struct nodes *m)
{
	if (m) {
		free(m->nodes);
		free(m);
	}
	return NULL;
}

static int restart_count(const struct nodes *m, const char *role)
{
	for (int i = 0; i < m->nroles; i++)
		if (!strcmp(m->roles[i].role, role))
			return m->roles[i].restart_count;
	return m->conf.default_restart_count;
}

int nodes_set_restart_count(struct nodes *m, const char *role, int rc)
{
	if (!role || !role[0] || strlen(role) >= SCHED_ROLE_MAX || rc < 0)
		return -EINVAL;
	for (int i = 0; i < m->nroles; i++)
		if (!strcmp(m->roles[i].role, role)) {
			m->roles[i].restart_count = rc;
			return 0;
		}
	if (m->nroles == MAX_ROLES)
		return -ENOSPC;
	fmt(m->roles[m->nroles].role, SCHED_ROLE_MAX, "%s", role);
	m->roles[m->nroles++].restart_count = rc;
	return 0;
}

int nodes_add(struct nodes *m, const char *name, const char *role, int rank, const char *host,
	      const struct sched_resources *res)
{
	/* room for ".<attempt>" behind the base name */
	if (!name || !name[0] || strlen(name) >= SCHED_NAME_MAX - 8 || !role || !role[0] ||
	    strlen(role) >= SCHED_ROLE_MAX || (host && strlen(host) >= SCHED_NAME_MAX) || !res ||
	    rank < 0)
		return -EINVAL;
	for (int i = 0; i < m->n; i++)
		if (!strcmp(m->nodes[i].base, name) ||
		    (!strcmp(m->nodes[i].role, role) && m->nodes[i].rank == rank))
			return -EEXIST;
	if (m->n == m->cap) {
		int cap = m->cap ? m->cap * 2 : 16;
		struct node *v = realloc(m->nodes, (size_t)cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		m->nodes = v;
		m->cap = cap;
	}
	struct node *n = &m->nodes[m->n++];
	memset(n, 0, sizeof(*n));
	fmt(n->base, sizeof(n->base), "%s", name);
	fmt(n->name, sizeof(n->name), "%s", name);
	fmt(n->role, sizeof(n->role), "%s", role);
	fmt(n->host, sizeof(n->host), "%s", host ? host : "");
	n->rank = rank;
	n->res = *res;
	return 0;
}

static struct host *host_get(struct nodes *m, const char *name, bool add)
{
	for (int i = 0; i < m->nhosts; i++)
		if (!strcmp(m->hosts[i].name, name))
			return &m->hosts[i];
	if (!add || m->nhosts == NODES_MAX_HOSTS)
		return NULL;
	struct host *h = &m->hosts[m->nhosts++];
	memset(h, 0, sizeof(*h));
	fmt(h->name, sizeof(h->name), "%s", name);
	return h;
}

bool nodes_host_bad(const struct nodes *m, const char *host)
{
	for (int i = 0; host && host[0] && i < m->nhosts; i++)
		if (!strcmp(m->hosts[i].name, host))
			return m->hosts[i].bad;
	return false;
}

int nodes_host_failed(struct nodes *m, const char *host)
{
	if (!host || !host[0] || strlen(host) >= SCHED_NAME_MAX)
		return -EINVAL;
	struct host *h = host_get(m, host, true);
	if (!h)
		return -ENOSPC;
	h->bad = true;
	return 0;
}

/* Where a relaunch of n goes: its own host unless bad, else the first good
 * candidate, else (conf.backend_places) where the backend puts it.  false
 * when none is left. */
static bool pick_host(const struct nodes *m, const struct node *n, char *out)
{
	if (!nodes_host_bad(m, n->host)) {
		fmt(out, SCHED_NAME_MAX, "%s", n->host);
		return true;
	}
	for (int i = 0; i < m->ncand; i++)
		if (!nodes_host_bad(m, m->cand[i])) {
			fmt(out, SCHED_NAME_MAX, "%s", m->cand[i]);
			return true;
		}
	if (m->conf.backend_places) {
		out[0] = '\0'; /* wherever the backend finds room off the bad hosts */
		return true;
	}
	return false;
}

static void give_up(struct nodes *m, struct node *n, struct nodes_action *act, const char *why)
{
	n->state = N_FAILED;
	act->type = NODES_GIVE_UP;
	fmt(act->reason, sizeof(act->reason), "node %s (%s rank %d): %s", n->base, n->role, n->rank,
	    why);
	if (!m->failed) { /* the first cause is the job's */
		m->failed = true;
		fmt(m->reason, sizeof(m->reason), "%s", act->reason);
	}
}

static void relaunch(struct node *n, const char *host, struct nodes_action *act)
{
	char h[SCHED_NAME_MAX];
	fmt(h, sizeof(h), "%s", host); /* host may be n->host itself */
	n->attempt++;
	n->state = N_LAUNCHED;
	fmt(n->host, sizeof(n->host), "%s", h);
	fmt(n->name, sizeof(n->name), "%s.%d", n->base, n->attempt);
	act->type = NODES_RELAUNCH;
	fmt(act->name, sizeof(act->name), "%s", n->name);
	fmt(act->role, sizeof(act->role), "%s", n->role);
	fmt(act->host, sizeof(act->host), "%s", n->host);
	act->rank = n->rank;
	act->res = n->res;
	act->attempt = n->attempt;
}

/* What the event says happened, for reasons. */
static void death_text(const struct sched_event *ev, char *buf, size_t size)
{
	if (ev->type == SCHED_EV_FAILED)
		fmt(buf, size, "could not start: %s", ev->detail[0] ? ev->detail : "?");
	else if (ev->signal)
		fmt(buf, size, "killed by signal %d", ev->signal);
	else
		fmt(buf, size, "exited with code %d", ev->exit_code);
}

static void on_crash(struct nodes *m, struct node *n, const struct sched_event *ev,
		     struct nodes_action *act)
{
	char what[SCHED_DETAIL_MAX + 32], why[NODES_REASON_MAX], was[SCHED_NAME_MAX];
	death_text(ev, what, sizeof(what));
	fmt(was, sizeof(was), "%s", n->host);
	if (n->host[0]) {
		struct host *h = host_get(m, n->host, true);
		if (h && ++h->crashes >= m->conf.host_max_crashes)
			h->bad = true;
		fmt(n->left, sizeof(n->left), "%s", n->host);
	}
	int budget = restart_count(m, n->role);
	if (n->restarts >= budget) {
		fmt(why, sizeof(why),
		    "%s; restartCount %d of role %s exhausted after %d restart(s)", what, budget,
		    n->role, n->restarts);
		give_up(m, n, act, why);
		return;
	}
	char host[SCHED_NAME_MAX];
	if (!pick_host(m, n, host)) {
		fmt(why, sizeof(why), "%s; no usable host left (host %s is bad)", what, n->host);
		give_up(m, n, act, why);
		return;
	}
	n->restarts++;
	m->restarts++;
	relaunch(n, host, act);
	bool moved = host[0] && strcmp(host, was) != 0;
	fmt(act->reason, sizeof(act->reason), "%s%s%s; restart %d of %d%s%s", what,
	    was[0] ? " on host " : "", was, n->restarts, budget, moved ? ", now on host " : "",
	    moved ? host : "");
}

static void on_oom(struct nodes *m, struct node *n, const struct sched_event *ev,
		   struct nodes_action *act)
{
	char why[NODES_REASON_MAX], plan[NODES_REASON_MAX] = "";
	int64_t had = ev->memory_limit_mb > 0 ? ev->memory_limit_mb : n->res.memory_mb;
	n->ooms++;
	if (!m->oom) {
		on_crash(m, n, ev, act);
		return;
	}
	if (n->ooms > m->conf.max_oom_relaunches) {
		fmt(why, sizeof(why),
		    "oom-killed %d times (limit %lld MiB); max_oom_relaunches %d exhausted",
		    n->ooms, (long long)had, m->conf.max_oom_relaunches);
		give_up(m, n, act, why);
		return;
	}
	struct nodes_oom_req req = { n->name, n->role, n->rank, had, ev->peak_memory_mb, n->ooms };
	int64_t next = 0;
	int r = m->oom(m->ctx, &req, &next, plan, sizeof(plan));
	if (r <= 0 || next <= had) {
		fmt(why, sizeof(why), "oom-killed under %lld MiB and memory cannot grow%s%s",
		    (long long)had, plan[0] ? ": " : "", plan);
		give_up(m, n, act, why);
		return;
	}
	n->res.memory_mb = next;
	m->oom_relaunches++;
	relaunch(n, n->host, act); /* memory, not the host, was at fault */
	fmt(act->reason, sizeof(act->reason),
	    "oom-killed under %lld MiB; relaunch with %lld MiB%s%s", (long long)had,
	    (long long)next, plan[0] ? ": " : "", plan);
}

int nodes_on_event(struct nodes *m, const struct sched_event *ev, struct nodes_action *act)
{
	if (!m || !ev || !act)
		return -EINVAL;
	memset(act, 0, sizeof(*act));
	struct node *n = NULL;
	for (int i = 0; i < m->n && !n; i++)
		if (!strcmp(m->nodes[i].name, ev->name))
			n = &m->nodes[i];
	if (!n || n->state == N_FAILED || n->state == N_SUCCEEDED || n->state == N_REMOVED)
		return 0; /* unknown, replaced or already settled */
	switch (ev->type) {
	case SCHED_EV_STARTED:
		n->state = N_RUNNING;
		if (ev->host[0]) /* where the backend placed it */
			fmt(n->host, sizeof(n->host), "%s", ev->host);
		break;
	case SCHED_EV_EXITED:
		/* an end seen before its start (a Slurm job cancelled between
		 * two polls) still names where it ran: charged there */
		if (ev->host[0] && !ev->removed)
			fmt(n->host, sizeof(n->host), "%s", ev->host);
		if (ev->removed) {
			n->state = N_REMOVED;
		} else if (ev->lost) {
			/* its machine, not its program, failed: kept off it */
			const char *gone = ev->host[0] ? ev->host : n->host;
			fmt(n->left, sizeof(n->left), "%s", gone);
			relaunch(n, n->host, act);
			fmt(act->reason, sizeof(act->reason),
			    "%s%s%s: its machine was lost; not counted as a restart",
			    ev->detail[0] ? ev->detail : "lost", gone[0] ? " on host " : "", gone);
		} else if (ev->exit_code == 0 && !ev->signal)
			n->state = N_SUCCEEDED;
		else
			on_crash(m, n, ev, act);
		break;
	case SCHED_EV_FAILED:
		if (ev->err == -ETIMEDOUT) {
			/* it waited for resources past the gang wait: a retry waits again */
			char why[NODES_REASON_MAX];
			fmt(why, sizeof(why), "could not start: %s",
			    ev->detail[0] ? ev->detail : "?");
			give_up(m, n, act, why);
		} else {
			on_crash(m, n, ev, act);
		}
		break;
	case SCHED_EV_OOM:
		on_oom(m, n, ev, act);
		break;
	default:
		return -EINVAL;
	}
	return 0;
}

void nodes_status(const struct nodes *m, struct nodes_status *st)
{
	memset(st, 0, sizeof(*st));
	st->nodes = m->n;
	for (int i = 0; i < m->n; i++) {
		st->running += m->nodes[i].state == N_RUNNING || m->nodes[i].state == N_LAUNCHED;
		st->succeeded += m->nodes[i].state == N_SUCCEEDED;
	}
	for (int i = 0; i < m->nhosts; i++)
		st->bad_hosts += m->hosts[i].bad;
	st->restarts = m->restarts;
	st->oom_relaunches = m->oom_relaunches;
	if (m->failed) {
		st->state = NODES_JOB_FAILED;
		fmt(st->reason, sizeof(st->reason), "%s", m->reason);
	} else if (m->n > 0 && st->succeeded == m->n) {
		st->state = NODES_JOB_SUCCEEDED;
	}
}

static struct node *by_base(const struct nodes *m, const char *base)
{
	for (int i = 0; base && i < m->n; i++)
		if (!strcmp(m->nodes[i].base, base))
			return &m->nodes[i];
	return NULL;
}

int nodes_get(const struct nodes *m, const char *base, struct nodes_info *out)
{
	const struct node *n = by_base(m, base);
	if (!n)
		return -ENOENT;
	memset(out, 0, sizeof(*out));
	fmt(out->name, sizeof(out->name), "%s", n->name);
	fmt(out->role, sizeof(out->role), "%s", n->role);
	fmt(out->host, sizeof(out->host), "%s", n->host);
	out->rank = n->rank;
	out->attempt = n->attempt;
	out->restarts = n->restarts;
	out->ooms = n->ooms;
	out->res = n->res;
	fmt(out->left, sizeof(out->left), "%s", n->left);
	if (n->left[0])
		fmt(out->avoid[out->navoid++], SCHED_NAME_MAX, "%s", n->left);
	for (int i = 0; i < m->nhosts && out->navoid < NODES_AVOID_MAX; i++)
		if (m->hosts[i].bad && strcmp(m->hosts[i].name, n->left) != 0)
			fmt(out->avoid[out->navoid++], SCHED_NAME_MAX, "%s", m->hosts[i].name);
	out->live = n->state == N_LAUNCHED || n->state == N_RUNNING;
	out->succeeded = n->state == N_SUCCEEDED;
	out->failed = n->state == N_FAILED;
	out->removed = n->state == N_REMOVED;
	return 0;
}

int nodes_restore(struct nodes *m, const char *base, int attempt, int restarts, int ooms,
		  bool succeeded, const char *left)
{
	struct node *n = by_base(m, base);
	if (!n || attempt < 0 || restarts < 0 || ooms < 0 ||
	    (left && strlen(left) >= SCHED_NAME_MAX))
		return n ? -EINVAL : -ENOENT;
	fmt(n->left, sizeof(n->left), "%s", left ? left : "");
	n->attempt = attempt;
	n->restarts = restarts;
	n->ooms = ooms;
	m->restarts += restarts;
	m->oom_relaunches += ooms;
	if (attempt > 0)
		fmt(n->name, sizeof(n->name), "%s.%d", n->base, attempt);
	if (succeeded)
		n->state = N_SUCCEEDED;
	return 0;
}

int nodes_hosts(const struct nodes *m, struct nodes_host *out, int max)
{
	int k = 0;
	for (int i = 0; i < m->nhosts; i++) {
		const struct host *h = &m->hosts[i];
		if (!h->crashes && !h->bad)
			continue;
		if (out && k < max) {
			fmt(out[k].name, sizeof(out[k].name), "%s", h->name);
			out[k].crashes = h->crashes;
			out[k].bad = h->bad;
		}
		k++;
	}
	return k;
}

int nodes_host_restore(struct nodes *m, const char *host, int crashes, bool bad)
{
	if (!host || !host[0] || strlen(host) >= SCHED_NAME_MAX || crashes < 0)
		return -EINVAL;
	struct host *h = host_get(m, host, true);
	if (!h)
		return -ENOSPC;
	h->crashes = crashes;
	h->bad = bad || crashes >= m->conf.host_max_crashes;
	return 0;
}

/* The node of base, still to run or running, into *out, with res (when
 * not NULL) and act cleared for its relaunch: 0, -ENOENT when none,
 * -EALREADY when it has ended. */
static int relaunchable(struct nodes *m, const char *base, const struct sched_resources *res,
			struct nodes_action *act, struct node **out)
{
	struct node *n = by_base(m, base);
	if (!n)
		return -ENOENT;
	if (n->state == N_FAILED || n->state == N_SUCCEEDED)
		return -EALREADY;
	memset(act, 0, sizeof(*act));
	if (res)
		n->res = *res;
	*out = n;
	return 0;
}

int nodes_relaunch(struct nodes *m, const char *base, const struct sched_resources *res,
		   struct nodes_action *act)
{
	struct node *n;
	int rc = relaunchable(m, base, res, act, &n);
	if (rc == 0)
		relaunch(n, n->host, act);
	return rc;
}

int nodes_replace(struct nodes *m, const char *base, const struct sched_resources *res,
		  struct nodes_action *act)
{
	struct node *n;
	int rc = relaunchable(m, base, res, act, &n);
	if (rc < 0)
		return rc;
	char slow[SCHED_NAME_MAX], host[SCHED_NAME_MAX];
	fmt(slow, sizeof(slow), "%s", n->host);
	if (slow[0]) {
		struct host *h = host_get(m, slow, true);
		if (h && ++h->crashes >= m->conf.host_max_crashes)
			h->bad = true;
		fmt(n->left, sizeof(n->left), "%s", slow);
	}
	/* another good host first: the slowness may be the host's */
	fmt(host, sizeof(host), "%s", slow);
	for (int i = 0; i < m->ncand; i++)
		if (strcmp(m->cand[i], slow) != 0 && !nodes_host_bad(m, m->cand[i])) {
			fmt(host, sizeof(host), "%s", m->cand[i]);
			break;
		}
	relaunch(n, host, act);
	fmt(act->reason, sizeof(act->reason), "straggler replaced%s%s%s%s",
	    slow[0] ? " (host " : "", slow, slow[0] ? " charged)" : "",
	    strcmp(host, slow) ? " on another host" : "");
	return 0;
}

int nodes_set_resources(struct nodes *m, const char *base, const struct sched_resources *res)
{
	struct node *n = by_base(m, base);
	if (!n || !res)
		return n ? -EINVAL : -ENOENT;
	n->res = *res;
	return 0;
}

int nodes_forget(struct nodes *m, const char *base)
{
	struct node *n = by_base(m, base);
	if (!n)
		return -ENOENT;
	*n = m->nodes[--m->n];
	return 0;
}

int nodes_alg_oom_plan(void *ctx, const struct nodes_oom_req *req, int64_t *out_mb, char *reason,
		       size_t rsize)
{
	const struct nodes_alg_oom *a = ctx;
	if (!a || !req || !out_mb)
		return -EINVAL;
	enum rv_alg_role role = !strcmp(req->role, "ps") ? RV_ALG_PS_ROLE : RV_ALG_WORKER;
	struct rv_alg_config cur;
	memset(&cur, 0, sizeof(cur));
	struct rv_alg_group *g = role == RV_ALG_PS_ROLE ? &cur.ps : &cur.worker;
	g->count = 1;
	g->res.memory_mb = req->memory_mb;
	struct rv_alg_decision *d = malloc(sizeof(*d)); /* large: migrations listed */
	if (!d)
		return -ENOMEM;
	int r = rv_alg_plan_oom(&cur, role, req->peak_mb, req->oom_count, &a->lim, &a->p, d);
	if (r == 0) {
		const struct rv_alg_group *ng = role == RV_ALG_PS_ROLE ? &d->cfg.ps
								       : &d->cfg.worker;
		*out_mb = ng->res.memory_mb;
		r = d->changed && *out_mb > req->memory_mb;
		if (reason && rsize)
			fmt(reason, rsize, "%s", d->reason);
	}
	free(d);
	return r;
}
