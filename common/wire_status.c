/*
 * wire_status.c: GET /v1/job's reply (wire.h struct rv_job_status): the
 * rendezvous, the data, the link to the brain, the newest plan, what the
 * job should run and the nodes the master runs.  Its table and those of the
 * objects it holds; hooks for the maps keyed by role and the lists of
 * names.
 */
#include <stdint.h>
#include <stdio.h>

#include "json.h"
#include "wire_codec.h"

#define REQ RV_WIRE_REQ

#define T struct rv_role_target
static const struct rv_wire_field f_role_target[] = {
	WINT("count", count, REQ, 0, RV_MAX_REPLICAS, "nodes of the role"),
	WNUM("cpu", cpu, 0, 0, RV_MAX_CPU, "cores per node, 0: no limit"),
	WINT("memory_mb", memory_mb, 0, 0, RV_MAX_MEMORY_MB, "memory per node, MiB, 0: no limit"),
	WINT("gpu", gpu, 0, 0, RV_MAX_GPU, "GPUs per node"),
};
const struct rv_wire_message rv_wire_role_target_msg =
	RV_WIRE_MSG("RoleTarget", "one role's node count and per-node resources", f_role_target,
		    NULL, NULL);
#undef T

/* A map of role -> RoleTarget at f->name into the array at f->off; a
 * count_off names the bool that says it was given. */
static int role_map_parse(const cJSON *o, const char *path, const struct rv_wire_field *f, void *m,
			  struct rv_err *err)
{
	struct rv_role_target *out = (struct rv_role_target *)((char *)m + f->off);
	rv_wire_path p0;
	int rc;
	const cJSON *map = rv_json_get_object(o, f->name, path, false, &rc, err);
	if (!map)
		return rc;
	rv_json_path(p0, sizeof(p0), path, f->name);
	if ((rc = rv_wire_decode_role_map(&rv_wire_role_target_msg, map, p0, out,
					  offsetof(struct rv_role_target, present), "role", NULL,
					  err)) < 0)
		return rc;
	if (f->count_off)
		*(bool *)((char *)m + f->count_off) = true;
	return 1;
}

static bool role_map_emit(cJSON *o, const struct rv_wire_field *f, const void *m)
{
	if (f->count_off && !*(const bool *)((const char *)m + f->count_off))
		return true;
	return rv_wire_encode_role_map(&rv_wire_role_target_msg, o, f->name,
				       (const char *)m + f->off,
				       offsetof(struct rv_role_target, present));
}

#define T struct rv_dataset_status
static const struct rv_wire_field f_dataset_status[] = {
	WSTR("name", name, REQ, "dataset"),
	WINT("samples_total", samples_total, REQ, 0, INT64_MAX, "size times epochs"),
	WINT("samples_done", samples_done, REQ, 0, INT64_MAX, "samples counted done"),
	WINT("epoch", epoch, 0, 0, RV_WIRE_MAX_EPOCHS, "current epoch"),
	WBOOL("finished", finished, 0, "every epoch done"),
};
const struct rv_wire_message rv_wire_dataset_status_msg =
	RV_WIRE_MSG("DatasetStatus", "one dataset's progress", f_dataset_status, NULL, NULL);
#undef T

#define T struct rv_brain_link
static const struct rv_wire_field f_brain_link[] = {
	WENUM("mode", mode, REQ, rv_wire_optimize_names, "manual|single-job|cluster",
	      "cluster: rover-brain plans; single-job: the same policy in the master; manual: "
	      "plans are only proposed"),
	WSTR("uid", uid, 0, "the job's uid at the brain, \"\" until registered"),
	WBOOL("reachable", reachable, 0, "the last call to the brain got an answer"),
	WINT("queued", queued, 0, 0, INT64_MAX, "reports waiting to be sent"),
	WINT("sent", sent, 0, 0, INT64_MAX, "reports the brain acknowledged"),
	WINT("dropped", dropped, 0, 0, INT64_MAX,
	     "reports dropped, oldest first, from a full queue"),
	WSTR("last_error", last_error, 0, "the last failed call, \"\" when none"),
};
const struct rv_wire_message rv_wire_brain_link_msg =
	RV_WIRE_MSG("BrainLink", "the master's link to the planner", f_brain_link, NULL, NULL);
#undef T

#define T struct rv_plan_state
static const struct rv_wire_field f_plan_state[] = {
	WINT("id", id, REQ, 0, INT64_MAX, "the plan's id (the brain's, or the master's own)"),
	WSTR("stage", stage, 0, "create, running or oom"),
	WSTR("reason", reason, 0, "why the planner made it"),
	WBOOL("applied", applied, 0, "in force: desired follows it"),
	WBOOL("proposed", proposed, 0, "manual mode: shown only, nothing was changed"),
	{ .name = "groups",
	  .type = "object",
	  .ref = "RoleTarget",
	  .map = true,
	  .description = "by role: what the plan asks for",
	  .kind = RV_WIRE_HOOK,
	  .off = offsetof(T, groups),
	  .parse = role_map_parse,
	  .emit = role_map_emit },
	WSTR("not_applied", not_applied, RV_WIRE_OMIT,
	     "applied: the parts of the plan the master did not apply, \"; \"-separated "
	     "(absent: applied in full)"),
};
const struct rv_wire_message rv_wire_plan_state_msg =
	RV_WIRE_MSG("PlanState", "the newest plan handed to the master", f_plan_state, NULL, NULL);
#undef T

#define T struct rv_node_status
static const struct rv_wire_field f_node_status[] = {
	WSTR("name", name, REQ, "<role>-<rank>: its rendezvous name"),
	WSTR("instance", instance, 0,
	     "the current launch: name, then name.<attempt> after each relaunch"),
	WSTR("role", role, REQ, "worker, ps, chief or evaluator"),
	WINT("rank", rank, REQ, 0, INT32_MAX, "stable across relaunches"),
	WSTR("host", host, 0, "where it runs (\"\": this machine)"),
	{ .name = "state",
	  .type = "string",
	  .required = true,
	  .enums = "launched|running|exited|succeeded|failed",
	  .description = "exited: ended by a failure, a relaunch follows",
	  .kind = RV_WIRE_STRING,
	  .flags = REQ,
	  .off = offsetof(T, state),
	  .size = sizeof(((T *)0)->state) },
	WINT("pid", pid, 0, 0, INT32_MAX, "its process (local scheduler), 0 if none"),
	WINT("restarts", restarts, 0, 0, INT32_MAX, "relaunches after crashes"),
	WINT("oom_relaunches", oom_relaunches, 0, 0, INT32_MAX,
	     "relaunches with more memory after an OOM kill"),
	WINT("memory_limit_mb", memory_limit_mb, 0, 0, INT64_MAX, "its memory limit, 0: none"),
	WNUMD("cpu_seconds", cpu_seconds, 0, -1, -1, 1e15, "CPU used, -1: not measured yet"),
	WINTD("memory_mb", memory_mb, 0, -1, -1, INT64_MAX, "memory used, -1: not measured yet"),
	WINTD("throttled_usec", throttled_usec, 0, -1, -1, INT64_MAX,
	      "time held by its CPU quota, -1: not measured"),
};
const struct rv_wire_message rv_wire_node_status_msg =
	RV_WIRE_MSG("NodeStatus", "one node the master runs", f_node_status, NULL, NULL);
#undef T

/* An optional array of node names at f->name, at most f->max. */
static int names_parse(const cJSON *o, const char *path, const struct rv_wire_field *f, void *m,
		       struct rv_err *err)
{
	char(*out)[RV_NAME_MAX] = (char(*)[RV_NAME_MAX])((char *)m + f->off);
	int *n = (int *)((char *)m + f->count_off), rc;
	const cJSON *arr = rv_json_get_array(o, f->name, path, false, &rc, err);
	if (!arr)
		return rc;
	if (rv_wire_count(arr, (int)f->max) > f->max)
		return rv_err_set(err, -EINVAL, f->name, "%s must have at most %d entries", f->name,
				  (int)f->max);
	for (const cJSON *it = arr->child; it; it = it->next) {
		rv_wire_path p;
		rv_json_path_index(p, sizeof(p), f->name, *n);
		const char *v = cJSON_GetStringValue(it);
		if (!v)
			return rv_err_set(err, -EINVAL, p, "%s must be a string", p);
		snprintf(out[*n], RV_NAME_MAX, "%s", v);
		if ((rc = rv_wire_check_name(out[*n], RV_NAME_MAX - 1, p, err)) < 0)
			return rc;
		(*n)++;
	}
	return 1;
}

static bool names_emit(cJSON *o, const struct rv_wire_field *f, const void *m)
{
	const char(*names)[RV_NAME_MAX] = (const char(*)[RV_NAME_MAX])((const char *)m + f->off);
	int n = *(const int *)((const char *)m + f->count_off);
	cJSON *arr = cJSON_AddArrayToObject(o, f->name);
	for (int i = 0; arr && i < n; i++) {
		cJSON *v = cJSON_CreateString(names[i]);
		if (!v || !cJSON_AddItemToArray(arr, v)) {
			cJSON_Delete(v);
			return false;
		}
	}
	return arr != NULL;
}

/* job_reason and nodes are written with a job_state only (the master runs
 * no nodes otherwise). */
static bool with_job_state(cJSON *o, const struct rv_wire_field *f, const void *mp)
{
	const struct rv_job_status *m = mp;
	if (!m->job_state[0])
		return true;
	if (f->kind == RV_WIRE_ARRAY)
		return rv_wire_encode_row(o, f, m);
	return rv_wire_add_str(o, f->name, m->job_reason);
}

#define T struct rv_job_status
static const struct rv_wire_field f_job_status[] = {
	WSTR("job", job, REQ, "job name"),
	WENUM("state", state, REQ, rv_wire_rdzv_status_names,
	      "complete|gathering|stale|spare|failed|unknown",
	      "rendezvous state: complete, gathering or failed"),
	WINT("round", round, 0, 0, INT64_MAX, "current round"),
	WINT("nnodes", nnodes, 0, 0, RV_MAX_WORLD_NODES, "nodes in the world"),
	WINT("world_size", world_size, 0, 0, INT32_MAX, "workers in the world"),
	WINT("waiting", waiting, 0, 0, INT32_MAX, "nodes waiting"),
	WINT("step", step, 0, 0, INT64_MAX, "latest step reported"),
	WNUM("speed", speed, 0, 0, RV_WIRE_MAX_SPEED, "latest speed reported, samples/s"),
	WBOOL("finished", finished, 0, "every dataset done"),
	WENUM("netcheck", netcheck, 0, rv_wire_netcheck_state_names, "none|running|done",
	      "state of the last network check"),
	WLIST("faulty", "array", faulty, nfaulty, 0, RV_MAX_VERDICT_NAMES, "string", names_parse,
	      names_emit, "nodes the last network check found faulty (at most 32)"),
	WLIST("stragglers", "array", stragglers, nstragglers, 0, RV_MAX_VERDICT_NAMES, "string",
	      names_parse, names_emit, "nodes the last network check found slow (at most 32)"),
	WARRAY("datasets", datasets, ndatasets, 0, RV_MAX_DATASETS, &rv_wire_dataset_status_msg,
	       "DatasetStatus", "shard progress per dataset"),
	WOBJ("brain", brain, has_brain, RV_WIRE_OMIT, &rv_wire_brain_link_msg, "BrainLink",
	     "the link to the planner"),
	WOBJ("plan", plan, has_plan, RV_WIRE_OMIT, &rv_wire_plan_state_msg, "PlanState",
	     "the newest plan handed to the master (absent before the first)"),
	{ .name = "desired",
	  .type = "object",
	  .ref = "RoleTarget",
	  .map = true,
	  .description = "by role: what the job should run, from the spec and each applied plan",
	  .kind = RV_WIRE_HOOK,
	  .off = offsetof(T, desired),
	  .count_off = offsetof(T, has_desired),
	  .parse = role_map_parse,
	  .emit = role_map_emit },
	{ .name = "job_state",
	  .type = "string",
	  .enums = "running|succeeded|failed",
	  .description = "the job's end: succeeded once every node the master runs exited 0, "
			 "failed once one was given up (absent: the master runs no nodes)",
	  .kind = RV_WIRE_STRING,
	  .flags = RV_WIRE_OMIT,
	  .off = offsetof(T, job_state),
	  .size = sizeof(((T *)0)->job_state) },
	{ .name = "job_reason",
	  .type = "string",
	  .description = "why it failed, naming the node",
	  .kind = RV_WIRE_STRING,
	  .off = offsetof(T, job_reason),
	  .size = sizeof(((T *)0)->job_reason),
	  .emit = with_job_state },
	{ .name = "nodes",
	  .type = "array",
	  .ref = "NodeStatus",
	  .description = "the nodes the master runs (scheduler local), at most 64",
	  .kind = RV_WIRE_ARRAY,
	  .off = offsetof(T, node_list),
	  .max = RV_MAX_STATUS_NODES,
	  .elem = &rv_wire_node_status_msg,
	  .count_off = offsetof(T, nnode_list),
	  .emit = with_job_state },
};
const struct rv_wire_message rv_wire_job_status_msg =
	RV_WIRE_MSG("JobStatus", "rendezvous and shard progress of the job", f_job_status,
		    "job status", NULL);
#undef T

RV_WIRE_CODEC(job_status, rv_wire_job_status_msg, struct rv_job_status)
