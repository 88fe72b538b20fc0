/*
 * rover_plan.h: the glue between the wire messages (common/wire.h) and the
 * policy (algorithms/rover_alg.h), shared by every daemon that plans.
 *
 * A job spec becomes the policy's limits, features and ask; an applied
 * ScalePlan becomes the configuration the policy reasons about; a decision
 * becomes a ScalePlan with the nodes named the way the brain names them.
 * No I/O and no state: the caller reads its history (a database, a ring in
 * memory) and keeps its plans.  Every pointer is borrowed for the call;
 * strings written into structs are copied, except where said.
 */
#ifndef ROVER_PLAN_H
#define ROVER_PLAN_H

#include "rover_alg.h"
#include "wire.h"

/* The policy's name for a strategy and for a role (any role but PS is a
 * worker to the policy). */
enum rv_alg_strategy rv_plan_strategy(enum rv_strategy s);
enum rv_alg_role rv_plan_role(enum rv_role r);

/* The spec's replica bounds and p's node defaults as the policy's limits;
 * the cluster's free capacity unknown (-1) until the caller knows it. */
void rv_plan_limits(const struct rv_job_spec *spec, const struct rv_alg_params *p,
		    struct rv_alg_limits *lim);

/* The spec as the features the create stage compares jobs by; user and
 * name borrow spec's strings. */
void rv_plan_features(const struct rv_job_spec *spec, struct rv_alg_job_features *f);

/* What the spec asked for, and which resources it gave. */
void rv_plan_ask(const struct rv_job_spec *spec, struct rv_alg_ask *ask);

/* A ScalePlan's worker and PS groups as the policy's configuration. */
void rv_plan_config(const struct rv_scale_plan *plan, struct rv_alg_config *cfg);

/* A plan as the policy's applied plan: id, prediction, configuration and
 * node counts; stage, algorithm, outcome and applied time are the
 * caller's to fill. */
void rv_plan_applied(const struct rv_scale_plan *plan, struct rv_alg_applied *a);

/* A decision as a ScalePlan of job uid in stage: groups (roles the policy
 * does not size keep what the spec asked), reason, prediction, and the PS
 * it migrates and workers it replaces by name.  id and based_on_ts_ms are
 * left 0 for the caller. */
void rv_plan_from_decision(const struct rv_alg_decision *d, const struct rv_job_spec *spec,
			   const char *uid, const char *stage, struct rv_scale_plan *plan);

/* The oom plan for node_oom event ev: the applied configuration cur with
 * the node's group grown past the memory it ran out of (ooms: how many
 * times that node ran out, at least 1), relaunching the node by its name.
 * Returns 0, or the policy's negative errno (plan then undefined). */
int rv_plan_oom(const struct rv_alg_config *cur, const struct rv_event *ev, int ooms,
		const struct rv_job_spec *spec, const char *uid, const struct rv_alg_limits *lim,
		const struct rv_alg_params *p, struct rv_scale_plan *plan);

#endif
