/*
 * plan.c: wire messages to the policy's structs and back (rover_plan.h).
 * rover-brain's planner and rover-master's single-job planner both plan
 * through these, so one job gets the same plans from either.
 */
#include "rover_plan.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

enum rv_alg_strategy rv_plan_strategy(enum rv_strategy s)
{
	return s == RV_STRATEGY_PS ? RV_ALG_PS : RV_ALG_ALLREDUCE;
}

enum rv_alg_role rv_plan_role(enum rv_role r)
{
	return r == RV_ROLE_PS ? RV_ALG_PS_ROLE : RV_ALG_WORKER;
}

void rv_plan_limits(const struct rv_job_spec *spec, const struct rv_alg_params *p,
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

void rv_plan_features(const struct rv_job_spec *spec, struct rv_alg_job_features *f)
{
	memset(f, 0, sizeof(*f));
	f->strategy = rv_plan_strategy(spec->strategy);
	f->parameters = (double)spec->model_parameters;
	f->batch_size = spec->batch_size;
	for (int i = 0; i < spec->ndatasets; i++)
		f->dataset_size += (double)spec->datasets[i].size;
	f->user = spec->user;
	f->name = spec->name;
}

void rv_plan_ask(const struct rv_job_spec *spec, struct rv_alg_ask *ask)
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

void rv_plan_config(const struct rv_scale_plan *plan, struct rv_alg_config *cfg)
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

void rv_plan_applied(const struct rv_scale_plan *plan, struct rv_alg_applied *a)
{
	memset(a, 0, sizeof(*a));
	a->id = plan->id;
	a->based_on_ts_ms = plan->based_on_ts_ms;
	a->predicted_speed = plan->predicted_speed;
	rv_plan_config(plan, &a->cfg);
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

void rv_plan_from_decision(const struct rv_alg_decision *d, const struct rv_job_spec *spec,
			   const char *uid, const char *stage, struct rv_scale_plan *plan)
{
	memset(plan, 0, sizeof(*plan));
	snprintf(plan->job, sizeof(plan->job), "%s", uid);
	snprintf(plan->stage, sizeof(plan->stage), "%s", stage);
	snprintf(plan->algorithm, sizeof(plan->algorithm), "%s", d->algorithm);
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

int rv_plan_oom(const struct rv_alg_config *cur, const struct rv_event *ev, int ooms,
		const struct rv_job_spec *spec, const char *uid, const struct rv_alg_limits *lim,
		const struct rv_alg_params *p, struct rv_scale_plan *plan)
{
	struct rv_alg_config cfg = *cur;
	enum rv_alg_role role = rv_plan_role(ev->role);
	struct rv_alg_group *g = role == RV_ALG_PS_ROLE ? &cfg.ps : &cfg.worker;
	/* the memory the node really had, when the event says */
	if (ev->memory_mb > 0)
		g->res.memory_mb = ev->memory_mb;
	struct rv_alg_decision d;
	int rc = rv_alg_plan_oom(&cfg, role, ev->peak_memory_mb > 0 ? ev->peak_memory_mb : 0,
				 ooms < 1 ? 1 : ooms, lim, p, &d);
	if (rc < 0)
		return rc;
	d.algorithm = "oom_memory_step";
	rv_plan_from_decision(&d, spec, uid, "oom", plan);
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
