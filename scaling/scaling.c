/*
 * plan.c: wire messages to the policy's structs and back (rover_scaling.h).
 * rover-brain's planner and rover-master's single-job planner both plan
 * through these, so one job gets the same plans from either.
 */
#include "rover_scaling.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum rv_alg_strategy rv_scaling_strategy(enum rv_strategy s)
{
	return s == RV_STRATEGY_PS ? RV_ALG_PS : RV_ALG_ALLREDUCE;
}

enum rv_alg_role rv_scaling_role(enum rv_role r)
{
	return r == RV_ROLE_PS ? RV_ALG_PS_ROLE : RV_ALG_WORKER;
}

void rv_scaling_limits(const struct rv_job_spec *spec, const struct rv_alg_params *p,
		       struct rv_alg_limits *lim)
{
	const struct rv_replica_spec *w = &spec->replicas[RV_ROLE_WORKER];
	const struct rv_replica_spec *ps = &spec->replicas[RV_ROLE_PS];
	memset(lim, 0, sizeof(*lim));
	lim->min_workers = w->min_replicas > 0 ? w->min_replicas : 1;
	lim->max_workers = w->max_replicas >= lim->min_workers ? w->max_replicas : lim->min_workers;
	lim->node_unit = 1;
	if (ps->present) {
		lim->min_ps = ps->min_replicas > 0 ? ps->min_replicas : 1;
		lim->max_ps = ps->max_replicas >= lim->min_ps ? ps->max_replicas : lim->min_ps;
	}
	lim->max_cpu = p->node_cpu_default;
	lim->max_memory_mb = p->node_memory_mb_default;
	lim->free_cpu = -1;
	lim->free_memory_mb = -1;
}

void rv_scaling_features(const struct rv_job_spec *spec, struct rv_alg_job_features *f)
{
	memset(f, 0, sizeof(*f));
	f->strategy = rv_scaling_strategy(spec->strategy);
	f->parameters = (double)spec->model_parameters;
	f->batch_size = spec->batch_size;
	for (int i = 0; i < spec->ndatasets; i++)
		f->dataset_size += (double)spec->datasets[i].size;
	f->user = spec->user;
	f->name = spec->name;
}

void rv_scaling_ask(const struct rv_job_spec *spec, struct rv_alg_ask *ask)
{
	const struct rv_replica_spec *w = &spec->replicas[RV_ROLE_WORKER];
	const struct rv_replica_spec *ps = &spec->replicas[RV_ROLE_PS];
	memset(ask, 0, sizeof(*ask));
	ask->has_ps = ps->present;
	ask->worker_given = w->has_resources;
	ask->ps_given = ps->present && ps->has_resources;
	ask->cfg.worker.count = w->replicas;
	ask->cfg.worker.res.cpu = w->resource.cpu;
	ask->cfg.worker.res.memory_mb = w->resource.memory_mb;
	ask->cfg.ps.count = ps->replicas;
	ask->cfg.ps.res.cpu = ps->resource.cpu;
	ask->cfg.ps.res.memory_mb = ps->resource.memory_mb;
}

void rv_scaling_config(const struct rv_scale_plan *plan, struct rv_alg_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	const struct rv_plan_group *w = &plan->groups[RV_ROLE_WORKER];
	const struct rv_plan_group *ps = &plan->groups[RV_ROLE_PS];
	if (w->present) {
		cfg->worker.count = w->count;
		cfg->worker.res.cpu = w->resource.cpu;
		cfg->worker.res.memory_mb = w->resource.memory_mb;
	}
	if (ps->present) {
		cfg->ps.count = ps->count;
		cfg->ps.res.cpu = ps->resource.cpu;
		cfg->ps.res.memory_mb = ps->resource.memory_mb;
	}
}

void rv_scaling_applied(const struct rv_scale_plan *plan, struct rv_alg_applied *a)
{
	memset(a, 0, sizeof(*a));
	a->id = plan->id;
	a->based_on_ts_ms = plan->based_on_ts_ms;
	a->predicted_speed = plan->predicted_speed;
	rv_scaling_config(plan, &a->cfg);
	a->n_migrate = plan->nmigrate;
	a->n_replace = plan->nremove;
}

static void config_to_groups(const struct rv_alg_config *cfg, const struct rv_job_spec *spec,
			     struct rv_scale_plan *plan)
{
	struct rv_plan_group *w = &plan->groups[RV_ROLE_WORKER];
	w->present = true;
	w->count = cfg->worker.count;
	w->resource.cpu = cfg->worker.res.cpu;
	w->resource.memory_mb = cfg->worker.res.memory_mb;
	w->resource.gpu = spec->replicas[RV_ROLE_WORKER].resource.gpu;
	if (spec->replicas[RV_ROLE_PS].present) {
		struct rv_plan_group *ps = &plan->groups[RV_ROLE_PS];
		ps->present = true;
		ps->count = cfg->ps.count;
		ps->resource.cpu = cfg->ps.res.cpu;
		ps->resource.memory_mb = cfg->ps.res.memory_mb;
	}
	/* Other roles (chief, evaluator) keep what the spec asked. */
	for (int r = RV_ROLE_CHIEF; r < RV_ROLE_COUNT; r++) {
		const struct rv_replica_spec *rs = &spec->replicas[r];
		if (!rs->present)
			continue;
		plan->groups[r].present = true;
		plan->groups[r].count = rs->replicas;
		plan->groups[r].resource = rs->resource;
	}
}

/* Reasons are cut at the buffer's end rather than refused. */
__attribute__((format(printf, 2, 3))) static void reason_set(struct rv_scale_plan *plan,
							     const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(plan->reason, sizeof(plan->reason), fmt, ap);
	va_end(ap);
	(void)n;
}

void rv_scaling_from_decision(const struct rv_alg_decision *d, const struct rv_job_spec *spec,
			      const char *uid, const char *stage, struct rv_scale_plan *plan)
{
	memset(plan, 0, sizeof(*plan));
	snprintf(plan->job, sizeof(plan->job), "%s", uid);
	snprintf(plan->stage, sizeof(plan->stage), "%s", stage);
	snprintf(plan->algorithm, sizeof(plan->algorithm), "%s", rv_alg_id_name(d->algorithm));
	reason_set(plan, "%s", d->reason);
	plan->predicted_speed = d->predicted_speed;
	config_to_groups(&d->cfg, spec, plan);
	for (size_t i = 0; i < d->n_migrate && plan->nmigrate < RV_MAX_PLAN_NODES; i++) {
		struct rv_plan_node *m = &plan->migrate[plan->nmigrate++];
		rv_alg_node_name(RV_ALG_PS_ROLE, d->migrate[i].node, m->node, sizeof(m->node));
		m->role = RV_ROLE_PS;
		m->resource.cpu = d->migrate[i].res.cpu;
		m->resource.memory_mb = d->migrate[i].res.memory_mb;
	}
	for (size_t i = 0; i < d->n_replace && plan->nremove < RV_MAX_PLAN_NODES; i++) {
		struct rv_plan_node *m = &plan->remove[plan->nremove++];
		rv_alg_node_name(RV_ALG_WORKER, d->replace[i], m->node, sizeof(m->node));
		m->role = RV_ROLE_WORKER;
		struct rv_plan_node *l = &plan->launch[plan->nlaunch++];
		*l = *m;
		l->resource.cpu = d->cfg.worker.res.cpu;
		l->resource.memory_mb = d->cfg.worker.res.memory_mb;
	}
}

int rv_scaling_oom(const struct rv_alg_config *cur, const struct rv_event *ev, int ooms,
		   const struct rv_job_spec *spec, const char *uid, const struct rv_alg_limits *lim,
		   const struct rv_alg_params *p, struct rv_scale_plan *plan)
{
	struct rv_alg_config cfg = *cur;
	enum rv_alg_role role = rv_scaling_role(ev->role);
	struct rv_alg_group *g = role == RV_ALG_PS_ROLE ? &cfg.ps : &cfg.worker;
	/* the memory the node really had, when the event says */
	if (ev->memory_mb > 0)
		g->res.memory_mb = ev->memory_mb;
	struct rv_alg_decision d;
	int rc = rv_alg_plan_oom(&cfg, role, ev->peak_memory_mb > 0 ? ev->peak_memory_mb : 0,
				 ooms < 1 ? 1 : ooms, lim, p, &d);
	if (rc < 0)
		return rc;
	d.algorithm = RV_ALG_ID_OOM_MEMORY_STEP;
	rv_scaling_from_decision(&d, spec, uid, "oom", plan);
	reason_set(plan, "node %s: %s", ev->node, d.reason);
	plan->predicted_speed = 0;
	plan->based_on_ts_ms = ev->ts_ms;
	plan->nlaunch = 1;
	snprintf(plan->launch[0].node, sizeof(plan->launch[0].node), "%s", ev->node);
	plan->launch[0].role = ev->role;
	const struct rv_alg_group *ng = role == RV_ALG_PS_ROLE ? &d.cfg.ps : &d.cfg.worker;
	plan->launch[0].resource.cpu = ng->res.cpu;
	plan->launch[0].resource.memory_mb = ng->res.memory_mb;
	return 0;
}

/* ---- applying a plan ---- */

void rv_scaling_target_init(struct rv_scaling_target *t, const struct rv_job_spec *spec)
{
	memset(t, 0, sizeof(*t));
	for (int r = 0; r < RV_ROLE_COUNT; r++) {
		const struct rv_replica_spec *rs = &spec->replicas[r];
		if (!rs->present)
			continue;
		t->groups[r].present = true;
		t->groups[r].count = rs->replicas;
		if (rs->has_resources)
			t->groups[r].resource = rs->resource;
	}
}

/* "<role>-<rank>" of role r: the rank, or -1 for any other name. */
static int node_rank(enum rv_role r, const char *node)
{
	const char *role = rv_role_name(r);
	size_t n = strlen(role);
	if (strncmp(node, role, n) != 0 || node[n] != '-' || node[n + 1] < '0' || node[n + 1] > '9')
		return -1;
	char *end = NULL;
	long rank = strtol(node + n + 1, &end, 10);
	return *end || rank > 1 << 20 ? -1 : (int)rank;
}

static int own_find(const struct rv_scaling_target *t, const char *node)
{
	for (int i = 0; i < t->nown; i++)
		if (!strcmp(t->own[i].node, node))
			return i;
	return -1;
}

struct rv_resource rv_scaling_node_resource(const struct rv_scaling_target *t, enum rv_role role,
					    const char *node)
{
	int i = own_find(t, node);
	return i >= 0 ? t->own[i].resource : t->groups[role].resource;
}

/* Append one part not applied, "; "-separated, cut at the buffer's end. */
__attribute__((format(printf, 2, 3))) static void not_applied(struct rv_scaling_effect *eff,
							      const char *fmt, ...)
{
	size_t len = strlen(eff->not_applied);
	if (len + 3 >= sizeof(eff->not_applied))
		return;
	if (len)
		len += (size_t)snprintf(eff->not_applied + len, sizeof(eff->not_applied) - len,
					"; ");
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(eff->not_applied + len, sizeof(eff->not_applied) - len, fmt, ap);
	va_end(ap);
}

static bool resource_same(const struct rv_resource *a, const struct rv_resource *b)
{
	return a->cpu == b->cpu && a->memory_mb == b->memory_mb && a->gpu == b->gpu;
}

/* Drop role r's own resources (all, or of the ranks from count on). */
static void own_drop(struct rv_scaling_target *t, enum rv_role r, int from_rank)
{
	for (int i = 0; i < t->nown;) {
		int rank = node_rank(r, t->own[i].node);
		if (t->own[i].role == r && rank >= from_rank)
			t->own[i] = t->own[--t->nown];
		else
			i++;
	}
}

/* The plan's groups: counts within the spec's bounds, resources. */
static void apply_groups(const struct rv_scale_plan *plan, const struct rv_job_spec *spec,
			 struct rv_scaling_target *t, struct rv_scaling_effect *eff)
{
	for (int r = 0; r < RV_ROLE_COUNT; r++) {
		const struct rv_plan_group *pg = &plan->groups[r];
		struct rv_plan_group *g = &t->groups[r];
		if (!pg->present)
			continue;
		const struct rv_replica_spec *rs = &spec->replicas[r];
		int lo = rs->present ? rs->min_replicas : 0;
		int hi = rs->present && rs->max_replicas > 0 ? rs->max_replicas : INT_MAX;
		int count = pg->count < lo ? lo : pg->count > hi ? hi : pg->count;
		if (count != pg->count) {
			eff->asked[r] = pg->count;
			not_applied(eff, "%s count %d: clamped to %d by the replica spec",
				    rv_role_name((enum rv_role)r), pg->count, count);
		}
		eff->changed |= !g->present || g->count != count;
		g->present = true;
		if (count < g->count)
			own_drop(t, (enum rv_role)r, count);
		g->count = count;
		const struct rv_resource *res = &pg->resource;
		if ((res->cpu > 0 || res->memory_mb > 0 || res->gpu > 0) &&
		    !resource_same(res, &g->resource)) {
			g->resource = *res;
			own_drop(t, (enum rv_role)r, 0);
			eff->changed = true;
		}
	}
}

/* A node of the plan's lists that the job runs after its groups: its role
 * and rank, or false with the part named not applied. */
static bool node_known(const struct rv_scaling_target *t, const struct rv_plan_node *n,
		       const char *list, struct rv_scaling_effect *eff, int *rank)
{
	*rank = (unsigned)n->role < RV_ROLE_COUNT ? node_rank(n->role, n->node) : -1;
	if (*rank < 0 || !t->groups[n->role].present || *rank >= t->groups[n->role].count) {
		not_applied(eff, "%s %s: the job runs no such node", list, n->node);
		return false;
	}
	return true;
}

static void add_action(struct rv_scaling_effect *eff, enum rv_scaling_action_kind kind,
		       const struct rv_plan_node *n, int rank, const struct rv_resource *res)
{
	for (int i = 0; i < eff->nact; i++)
		if (!strcmp(eff->act[i].node, n->node)) {
			/* one relaunch a node: a migration's resources win */
			if (kind == RV_SCALING_MIGRATE) {
				eff->act[i].kind = kind;
				eff->act[i].resource = *res;
			}
			return;
		}
	if (eff->nact >= (int)(sizeof(eff->act) / sizeof(eff->act[0])))
		return;
	struct rv_scaling_action *a = &eff->act[eff->nact++];
	a->kind = kind;
	snprintf(a->node, sizeof(a->node), "%s", n->node);
	a->role = n->role;
	a->rank = rank;
	a->resource = *res;
}

void rv_scaling_apply(const struct rv_scale_plan *plan, const struct rv_job_spec *spec,
		      struct rv_scaling_target *t, struct rv_scaling_effect *eff)
{
	memset(eff, 0, sizeof(*eff));
	for (int r = 0; r < RV_ROLE_COUNT; r++)
		eff->asked[r] = -1;
	apply_groups(plan, spec, t, eff);
	int rank;
	for (int i = 0; i < plan->nremove; i++) {
		const struct rv_plan_node *n = &plan->remove[i];
		if (!node_known(t, n, "remove", eff, &rank))
			continue;
		struct rv_resource res = rv_scaling_node_resource(t, n->role, n->node);
		add_action(eff, RV_SCALING_REPLACE, n, rank, &res);
	}
	for (int i = 0; i < plan->nmigrate; i++) {
		const struct rv_plan_node *n = &plan->migrate[i];
		if (!node_known(t, n, "migrate", eff, &rank))
			continue;
		struct rv_resource res = rv_scaling_node_resource(t, n->role, n->node);
		if (n->resource.cpu > 0)
			res.cpu = n->resource.cpu;
		if (n->resource.memory_mb > 0)
			res.memory_mb = n->resource.memory_mb;
		if (n->resource.gpu > 0)
			res.gpu = n->resource.gpu;
		int k = own_find(t, n->node);
		if (k < 0 && t->nown < RV_MAX_PLAN_NODES)
			k = t->nown++;
		if (k >= 0) {
			t->own[k] = *n;
			t->own[k].resource = res;
		}
		add_action(eff, RV_SCALING_MIGRATE, n, rank, &res);
		/* with stateHandover the relaunch reloads the partition from its
		 * flash checkpoint: the migration is carried out in full */
		if (n->role == RV_ROLE_PS && !spec->replicas[RV_ROLE_PS].state_handover)
			not_applied(eff,
				    "migrate %s: the PS data handover (relaunched with "
				    "its resources, its state not carried over)",
				    n->node);
	}
	for (int i = 0; i < plan->nlaunch; i++)
		node_known(t, &plan->launch[i], "launch", eff, &rank);
}
