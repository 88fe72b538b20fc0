/*
 * nodelink.c: what the node manager sees, told to the planner.
 *
 * nodelink_attach() points the node manager's hooks (master.h) at the brain
 * link (plans.h): a node that exits, fails to start or is relaunched becomes
 * a node event under its stable name <role>-<rank>; an OOM kill asks
 * plans_oom_memory() for the memory of the relaunch (the brain's oom plan,
 * or the in-process policy), which also reports the OOM.  The plans thread
 * calls nodelink_usage_report() every node.usage_interval_ms: each node's
 * last usage becomes a usage sample, CPU as cores used since the previous
 * report and throttling as the share of quota periods throttled since then.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "master.h"
#include "nodelink.h"
#include "nodemgr.h"
#include "parse.h"
#include "plans.h"

/* The previous report of one node instance. */
struct prev {
	char instance[SCHED_NAME_MAX];
	double cpu_seconds;
	int64_t periods, throttled, ms;
	bool seen; /* still in the table at the last report */
};

struct nodelink_usage {
	struct prev *v;
	int n, cap;
};

static enum rv_role role_of(const char *role)
{
	int r = rv_role_parse(role);
	return r < 0 ? RV_ROLE_WORKER : (enum rv_role)r;
}

static void stable_name(char *out, size_t size, const char *role, int rank)
{
	snprintf(out, size, "%s-%d", role, rank);
}

static int oom_plan(void *ctx, const struct nodes_oom_req *req, int64_t *out_mb, char *reason,
		    size_t rsize)
{
	struct master *m = ctx;
	struct rv_event ev = {
		.type = RV_EVENT_NODE_OOM,
		.role = role_of(req->role),
		.rank = req->rank,
		.exit_code = -1,
		.memory_mb = req->memory_mb,
		.peak_memory_mb = req->peak_mb,
	};
	stable_name(ev.node, sizeof(ev.node), req->role, req->rank);
	snprintf(ev.reason, sizeof(ev.reason), "killed for memory (OOM %d of this node)",
		 req->oom_count);
	int64_t mb = 0;
	int rc = plans_oom_memory(m, &ev, &mb);
	if (rc < 0)
		return rc;
	if (mb <= req->memory_mb) {
		snprintf(reason, rsize, "the planner keeps %lld MiB for %s",
			 (long long)req->memory_mb, ev.node);
		return 0;
	}
	*out_mb = mb;
	snprintf(reason, rsize, "%s gives %s %lld MiB (had %lld)",
		 rc == 1 ? "the planner's oom plan" : "the in-process oom policy", ev.node,
		 (long long)mb, (long long)req->memory_mb);
	return 1;
}

static void node_event(void *ctx, const struct sched_event *sev, const struct nodes_action *act)
{
	struct master *m = ctx;
	struct rv_event ev = {
		.role = role_of(sev->role),
		.rank = sev->rank,
		.exit_code = sev->exit_code,
	};
	stable_name(ev.node, sizeof(ev.node), sev->role, sev->rank);
	snprintf(ev.reason, sizeof(ev.reason), "%s", sev->detail);
	bool send = true;
	switch (sev->type) {
	case SCHED_EV_EXITED:
		if (sev->removed)
			send = false; /* the master asked for it: a plan, not a fault */
		ev.type = sev->exit_code == 0 ? RV_EVENT_NODE_FINISHED : RV_EVENT_NODE_FAILED;
		break;
	case SCHED_EV_FAILED:
		ev.type = RV_EVENT_NODE_FAILED;
		break;
	case SCHED_EV_OOM: /* reported by plans_oom_memory when it was asked */
	case SCHED_EV_STARTED:
		send = false;
		break;
	}
	if (send && plans_node_event(m, &ev) < 0)
		rv_log_debug("node event not queued for the planner", "node=%s", ev.node);
	if (act && act->type == NODES_RELAUNCH) {
		struct rv_event re = ev;
		re.type = RV_EVENT_NODE_RELAUNCHED;
		re.exit_code = -1;
		re.memory_mb = act->res.memory_mb;
		snprintf(re.reason, sizeof(re.reason), "%.*s", (int)sizeof(re.reason) - 1,
			 act->reason);
		if (plans_node_event(m, &re) < 0)
			rv_log_debug("node event not queued for the planner", "node=%s", re.node);
	}
}

void nodelink_attach(struct master *m)
{
	m->oom_plan = oom_plan;
	m->oom_ctx = m;
	m->node_event = node_event;
	m->node_event_ctx = m;
}

struct nodelink_usage *nodelink_usage_new(void)
{
	return calloc(1, sizeof(struct nodelink_usage));
}

void nodelink_usage_free(struct nodelink_usage *u)
{
	if (u)
		free(u->v);
	free(u);
}

/* What one report collects under the lock. */
struct sweep {
	struct plans_usage *out;
	struct sched_usage *raw;
	char (*instance)[SCHED_NAME_MAX];
	int n, cap;
};

static void collect(void *ctx, const struct master_node *n)
{
	struct sweep *s = ctx;
	if (!n->has_usage || n->state != MASTER_NODE_RUNNING || s->n >= s->cap)
		return;
	struct plans_usage *u = &s->out[s->n];
	memset(u, 0, sizeof(*u));
	stable_name(u->node, sizeof(u->node), n->role, n->rank);
	u->role = role_of(n->role);
	u->rank = n->rank;
	u->ts_ms = n->usage_ms;
	u->cpu_limit = n->res.cpu;
	u->memory_limit_mb = n->res.memory_mb;
	u->memory_mb = n->usage.memory_bytes >= 0 ? n->usage.memory_bytes / (1024 * 1024) : 0;
	u->step_time = -1;
	s->raw[s->n] = n->usage;
	snprintf(s->instance[s->n], SCHED_NAME_MAX, "%s", n->instance);
	s->n++;
}

static struct prev *prev_get(struct nodelink_usage *t, const char *instance)
{
	for (int i = 0; i < t->n; i++)
		if (!strcmp(t->v[i].instance, instance))
			return &t->v[i];
	if (t->n == t->cap) {
		int cap = t->cap ? t->cap * 2 : 16;
		struct prev *v = realloc(t->v, (size_t)cap * sizeof(*v));
		if (!v)
			return NULL;
		t->v = v;
		t->cap = cap;
	}
	struct prev *p = &t->v[t->n++];
	memset(p, 0, sizeof(*p));
	snprintf(p->instance, sizeof(p->instance), "%s", instance);
	p->ms = -1;
	return p;
}

int nodelink_usage_report(struct master *m, struct nodelink_usage *t)
{
	state_lock(m, "nodelink_usage_report");
	int cap = m->nnodes;
	state_unlock(m);
	if (cap <= 0)
		return 0;
	struct sweep s = { .cap = cap };
	s.out = calloc((size_t)cap, sizeof(*s.out));
	s.raw = calloc((size_t)cap, sizeof(*s.raw));
	s.instance = calloc((size_t)cap, sizeof(*s.instance));
	int sent = 0;
	if (!s.out || !s.raw || !s.instance) {
		sent = -ENOMEM;
		goto out;
	}
	nodemgr_usage_each(m, collect, &s);
	for (int i = 0; i < t->n; i++)
		t->v[i].seen = false;
	for (int i = 0; i < s.n; i++) {
		struct plans_usage *u = &s.out[i];
		const struct sched_usage *r = &s.raw[i];
		struct prev *p = prev_get(t, s.instance[i]);
		if (!p)
			break;
		p->seen = true;
		bool have_prev = p->ms >= 0 && u->ts_ms > p->ms;
		if (have_prev && r->cpu_seconds >= p->cpu_seconds)
			u->cpu = (r->cpu_seconds - p->cpu_seconds) * 1000.0 /
				 (double)(u->ts_ms - p->ms);
		u->nr_periods = r->nr_periods;
		u->nr_throttled = r->nr_throttled;
		u->throttled_usec = r->throttled_usec;
		if (have_prev && r->nr_periods > p->periods && r->nr_throttled >= p->throttled)
			u->throttled = (double)(r->nr_throttled - p->throttled) /
				       (double)(r->nr_periods - p->periods);
		p->cpu_seconds = r->cpu_seconds;
		p->periods = r->nr_periods;
		p->throttled = r->nr_throttled;
		p->ms = u->ts_ms;
		/* An instance's first measurement has no rate yet, and one not
		 * measured again since the last report says nothing new. */
		if (have_prev && plans_node_sample(m, u) == 0)
			sent++;
	}
	/* Instances gone since the last report are forgotten. */
	int k = 0;
	for (int i = 0; i < t->n; i++)
		if (t->v[i].seen)
			t->v[k++] = t->v[i];
	t->n = k;
out:
	free(s.out);
	free(s.raw);
	free(s.instance);
	return sent;
}

int nodelink_agent_usage(struct master *m, const struct rv_node_usage *u)
{
	struct rv_node_usage kept = *u;
	if (kept.ts_ms <= 0)
		kept.ts_ms = rv_now_ms();
	state_lock(m, "nodelink_agent_usage");
	int i = 0;
	while (i < m->nagent_usage && strcmp(m->agent_usage[i].node, u->node) != 0)
		i++;
	if (i == m->nagent_usage) {
		if (i >= MASTER_USAGE_MAX) {
			state_unlock(m);
			return -ENOSPC;
		}
		struct rv_node_usage *v =
			realloc(m->agent_usage, (size_t)(i + 1) * sizeof(*m->agent_usage));
		if (!v) {
			state_unlock(m);
			return -ENOMEM;
		}
		m->agent_usage = v;
		m->nagent_usage++;
	}
	m->agent_usage[i] = kept;
	/* The planner knows a node by the rank in its name (<role>-<rank>, the
	 * name a plan's remove gives back); rover-run reports its rank in the
	 * rendezvous, which follows the order the nodes joined. */
	int rank = u->rank;
	for (int k = 0; k < m->nnodes; k++)
		if (!strcmp(m->nodes[k].name, u->node))
			rank = m->nodes[k].rank;
	state_unlock(m);
	/* to the planner as the node manager's samples go (the brain's sample
	 * has no GPU field: GPU memory stays in GET /v1/usage) */
	struct plans_usage pu = {
		.role = RV_ROLE_WORKER,
		.rank = rank,
		.ts_ms = kept.ts_ms,
		.cpu = u->cpu,
		.cpu_limit = u->cpu_limit,
		.memory_mb = u->memory_mb,
		.throttled = u->throttled,
		.nr_periods = u->nr_periods,
		.nr_throttled = u->nr_throttled,
		.throttled_usec = u->throttled_us,
		.step_time = -1,
	};
	snprintf(pu.node, sizeof(pu.node), "%s", u->node);
	if (plans_node_sample(m, &pu) < 0)
		rv_log_debug("usage sample not queued for the planner", "node=%s", u->node);
	return 0;
}
