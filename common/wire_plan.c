/*
 * wire_plan.c: the ScalePlan (wire.h): what the brain proposes for a job,
 * by role and by node.  Its table and those of the objects it holds; hooks
 * for the stage kept as text and the groups keyed by role.
 */
#include <stdint.h>
#include <stdio.h>

#include "json.h"
#include "wire_codec.h"

#define REQ   RV_WIRE_REQ
#define NODES (RV_WIRE_MAX_EINVAL)

static const char *const stage_names[] = { "create", "running", "oom" };

#define T struct rv_resource
static const struct rv_wire_field f_plan_resource[] = {
	WNUM("cpu", cpu, 0, 0, RV_MAX_CPU, "cores, 0: unchanged"),
	WINT("memory_mb", memory_mb, 0, 0, RV_MAX_MEMORY_MB, "MiB, 0: unchanged"),
	WINT("gpu", gpu, 0, 0, RV_MAX_GPU, "GPUs"),
};
const struct rv_wire_message rv_wire_plan_resource_msg =
	RV_WIRE_MSG("PlanResource", "per-node resources of a plan", f_plan_resource, NULL, NULL);
#undef T

#define T struct rv_plan_group
static const struct rv_wire_field f_plan_group[] = {
	WINT("count", count, REQ, 0, RV_MAX_REPLICAS, "nodes of the role"),
	WOBJ0("resource", resource, 0, &rv_wire_plan_resource_msg, "PlanResource", "per node"),
};
const struct rv_wire_message rv_wire_plan_group_msg =
	RV_WIRE_MSG("PlanGroup", "a role's node count and per-node resources", f_plan_group, NULL,
		    NULL);
#undef T

#define T struct rv_plan_node
static const struct rv_wire_field f_plan_node[] = {
	WNAME("node", node, REQ, "node name"),
	WENUM("role", role, 0, rv_wire_role_names, "worker|ps|chief|evaluator", "default worker"),
	WOBJ0("resource", resource, 0, &rv_wire_plan_resource_msg, "PlanResource",
	      "its new resources"),
};
const struct rv_wire_message rv_wire_plan_node_msg =
	RV_WIRE_MSG("PlanNode", "one node a plan names", f_plan_node, NULL, NULL);
#undef T

/* "stage": one of stage_names, kept as its text. */
static int stage_parse(const cJSON *o, const char *path, const struct rv_wire_field *f, void *m,
		       struct rv_err *err)
{
	int stage = 0;
	int rc = rv_wire_get_enum(o, f->name, path, true, stage_names,
				  (int)RV_ARRAY_SIZE(stage_names), NULL, &stage, err);
	if (rc == 1)
		snprintf((char *)m + f->off, f->size, "%s", stage_names[stage]);
	return rc;
}

/* "groups": role -> PlanGroup, each role once. */
static int groups_parse(const cJSON *o, const char *path, const struct rv_wire_field *f, void *mp,
			struct rv_err *err)
{
	struct rv_scale_plan *pl = mp;
	int rc;
	const cJSON *groups = rv_json_get_object(o, f->name, path, false, &rc, err);
	for (const cJSON *it = groups ? groups->child : NULL; it; it = it->next) {
		rv_wire_path p;
		const char *key = it->string ? it->string : "";
		rv_json_path(p, sizeof(p), f->name, key);
		int role = rv_role_parse(key);
		if (role < 0)
			return rv_err_set(err, -EINVAL, p,
					  "unknown group \"%.32s\" (expected worker, ps, chief or "
					  "evaluator)",
					  key);
		struct rv_plan_group *g = &pl->groups[role];
		if (g->present)
			return rv_err_set(err, -EINVAL, p, "%s is given twice", p);
		if (!cJSON_IsObject(it))
			return rv_err_set(err, -EINVAL, p, "%s must be an object", p);
		g->present = true;
		if ((rc = rv_wire_decode_fields(&rv_wire_plan_group_msg, it, p, g, err)) < 0)
			return rc;
	}
	return rc;
}

static bool groups_emit(cJSON *o, const struct rv_wire_field *f, const void *mp)
{
	const struct rv_scale_plan *pl = mp;
	cJSON *groups = cJSON_AddObjectToObject(o, f->name);
	for (int r = 0; groups && r < RV_ROLE_COUNT; r++) {
		if (!pl->groups[r].present)
			continue;
		cJSON *g = cJSON_AddObjectToObject(groups, rv_role_name((enum rv_role)r));
		if (!g || !rv_wire_encode_fields(&rv_wire_plan_group_msg, g, &pl->groups[r]))
			return false;
	}
	return groups != NULL;
}

#define T struct rv_scale_plan
static const struct rv_wire_field f_scale_plan[] = {
	WSTR("job", job, 0, "job uid"),
	WINT("id", id, 0, 0, INT64_MAX, "plan id, grows with every plan stored"),
	WSTR("stage", stage, REQ, "which stage made it", .enums = "create|running|oom",
	     .parse = stage_parse),
	WSTR("algorithm", algorithm, 0, "the algorithm that decided"),
	WSTR("reason", reason, 0, "why, in words"),
	WNUM("predicted_speed", predicted_speed, 0, 0, RV_WIRE_MAX_SPEED,
	     "samples/s, 0: no prediction"),
	WINT("based_on_ts", based_on_ts_ms, 0, 0, INT64_MAX,
	     "newest sample time the plan saw, ms (job time)"),
	WHOOK("groups", "object", 0, groups_parse, groups_emit, "by role: count and resource",
	      .ref = "PlanGroup", .map = true),
	WARRAY("launch", launch, nlaunch, NODES, RV_MAX_PLAN_NODES, &rv_wire_plan_node_msg,
	       "PlanNode", "nodes to relaunch with new resources"),
	WARRAY("remove", remove, nremove, NODES, RV_MAX_PLAN_NODES, &rv_wire_plan_node_msg,
	       "PlanNode", "nodes to remove"),
	WARRAY("migrate", migrate, nmigrate, NODES, RV_MAX_PLAN_NODES, &rv_wire_plan_node_msg,
	       "PlanNode", "nodes to move to new resources"),
};
const struct rv_wire_message rv_wire_scale_plan_msg =
	RV_WIRE_MSG("ScalePlan", "what the brain proposes for a job", f_scale_plan, "scale plan",
		    NULL);
#undef T

RV_WIRE_CODEC(scale_plan, rv_wire_scale_plan_msg, struct rv_scale_plan)
