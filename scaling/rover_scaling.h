/*
 * rover_scaling.h: the glue between the wire messages (common/wire.h) and the
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
enum rv_alg_strategy rv_scaling_strategy(enum rv_strategy s);
enum rv_alg_role rv_scaling_role(enum rv_role r);

/* The spec's replica bounds and p's node defaults as the policy's limits;
 * the cluster's free capacity unknown (-1) until the caller knows it. */
void rv_scaling_limits(const struct rv_job_spec *spec, const struct rv_alg_params *p,
		       struct rv_alg_limits *lim);

/* The spec as the features the create stage compares jobs by; user and
 * name borrow spec's strings. */
void rv_scaling_features(const struct rv_job_spec *spec, struct rv_alg_job_features *f);

/* What the spec asked for, and which resources it gave. */
void rv_scaling_ask(const struct rv_job_spec *spec, struct rv_alg_ask *ask);

/* A ScalePlan's worker and PS groups as the policy's configuration. */
void rv_scaling_config(const struct rv_scale_plan *plan, struct rv_alg_config *cfg);

/* A plan as the policy's applied plan: id, prediction, configuration and
 * node counts; stage, algorithm, outcome and applied time are the
 * caller's to fill. */
void rv_scaling_applied(const struct rv_scale_plan *plan, struct rv_alg_applied *a);

/* A decision as a ScalePlan of job uid in stage: groups (roles the policy
 * does not size keep what the spec asked), reason, prediction, and the PS
 * it migrates and workers it replaces by name.  id and based_on_ts_ms are
 * left 0 for the caller. */
void rv_scaling_from_decision(const struct rv_alg_decision *d, const struct rv_job_spec *spec,
			      const char *uid, const char *stage, struct rv_scale_plan *plan);

/* The oom plan for node_oom event ev: the applied configuration cur with
 * the node's group grown past the memory it ran out of (ooms: how many
 * times that node ran out, at least 1), relaunching the node by its name.
 * Returns 0, or the policy's negative errno (plan then undefined). */
int rv_scaling_oom(const struct rv_alg_config *cur, const struct rv_event *ev, int ooms,
		   const struct rv_job_spec *spec, const char *uid, const struct rv_alg_limits *lim,
		   const struct rv_alg_params *p, struct rv_scale_plan *plan);

/* ---- applying a plan: rover-master's plans_apply and rover-sim ---- */

/*
 * What a job runs, as a plan finds it and leaves it: per role whether it
 * runs, its node count and its resources (0: no limit known), and the nodes
 * that run with resources of their own (a migrated PS keeps its own until a
 * plan changes its role's resources or drops its rank).
 */
struct rv_scaling_target {
	struct rv_plan_group groups[RV_ROLE_COUNT];
	struct rv_plan_node own[RV_MAX_PLAN_NODES]; /* resource: what the node runs with */
	int nown;
};

enum rv_scaling_action_kind {
	RV_SCALING_REPLACE = 1, /* a straggler: relaunched with the same rank on another
			      * host where there is one, its host charged like a crash host */
	RV_SCALING_MIGRATE,     /* relaunched with resources of its own (its data handed over
			      * only with the role's stateHandover) */
};

/* One node a plan relaunches. */
struct rv_scaling_action {
	enum rv_scaling_action_kind kind;
	char node[RV_NAME_MAX]; /* <role>-<rank> */
	enum rv_role role;
	int rank;
	struct rv_resource resource; /* what it runs with after */
};

/* What applying a plan did, for the one who carries it out and for
 * plan_applied. */
struct rv_scaling_effect {
	bool changed;             /* a count or a role's resources changed */
	int asked[RV_ROLE_COUNT]; /* the count the plan asked where the spec's
				     * bounds changed it, else -1 */
	struct rv_scaling_action act[2 * RV_MAX_PLAN_NODES];
	int nact;
	/* the parts not applied, "; "-separated ("" when the plan was applied in
	 * full): a count clamped, a node the job does not run, the PS data
	 * handover of a migration */
	char not_applied[RV_NOT_APPLIED_MAX];
};

/* t as the spec starts a job: each present role's replicas and resources. */
void rv_scaling_target_init(struct rv_scaling_target *t, const struct rv_job_spec *spec);

/* The resources node (<role>-<rank>) runs with under t: its own, else its
 * role's. */
struct rv_resource rv_scaling_node_resource(const struct rv_scaling_target *t, enum rv_role role,
					    const char *node);

/*
 * Apply plan to t under the spec's replica bounds: each role the plan
 * sizes gets its count (clamped to minReplicas..maxReplicas) and, where the
 * plan gives any resource, those resources (a change drops the role's own
 * resources); each `remove` entry the job runs is a REPLACE action, each
 * `migrate` entry a MIGRATE action with the entry's resources over the
 * role's (kept in t->own).  A `launch` entry is the replacement of a
 * removed node or the relaunch the node manager makes anyway (an OOM plan);
 * one naming a node beyond its role's count is not applied.  eff says what
 * was done and what was not.  The master applies a plan with this, and the
 * simulator too, so neither credits a plan with more than the other does.
 */
void rv_scaling_apply(const struct rv_scale_plan *plan, const struct rv_job_spec *spec,
		      struct rv_scaling_target *t, struct rv_scaling_effect *eff);

#endif
