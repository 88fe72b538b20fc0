/*
 * reconcile.c: one ElasticJob's decisions (reconcile.h).  Pure.
 */
#include "reconcile.h"

#include <stdio.h>
#include <string.h>

static const cJSON *reconcile_get(const cJSON *j, const char *a, const char *b)
{
	const cJSON *o = cJSON_GetObjectItem(j, a);
	return b ? cJSON_GetObjectItem(o, b) : o;
}

static const char *reconcile_str(const cJSON *j, const char *a, const char *b)
{
	const char *v = cJSON_GetStringValue(reconcile_get(j, a, b));
	return v ? v : "";
}

static void reconcile_set_str(cJSON *o, const char *key, const char *v)
{
	cJSON_DeleteItemFromObjectCaseSensitive(o, key);
	cJSON_AddStringToObject(o, key, v);
}

static void reconcile_set_num(cJSON *o, const char *key, double v)
{
	cJSON_DeleteItemFromObjectCaseSensitive(o, key);
	cJSON_AddNumberToObject(o, key, v);
}

/* Set condition type (its time changes only when its status does). */
static void reconcile_condition(cJSON *st, const char *type, const char *status, const char *reason,
				const char *msg, const char *now)
{
	cJSON *conds = cJSON_GetObjectItem(st, "conditions");
	if (!cJSON_IsArray(conds)) {
		cJSON_DeleteItemFromObjectCaseSensitive(st, "conditions");
		conds = cJSON_AddArrayToObject(st, "conditions");
	}
	cJSON *c = NULL, *it;
	cJSON_ArrayForEach(it, conds) if (!strcmp(reconcile_str(it, "type", NULL), type)) c = it;
	if (!c) {
		c = cJSON_CreateObject();
		cJSON_AddStringToObject(c, "type", type);
		cJSON_AddItemToArray(conds, c);
	}
	if (strcmp(reconcile_str(c, "status", NULL), status) != 0)
		reconcile_set_str(c, "lastTransitionTime", now);
	reconcile_set_str(c, "status", status);
	reconcile_set_str(c, "reason", reason);
	reconcile_set_str(c, "message", msg);
}

static bool reconcile_has_condition(const cJSON *st, const char *type)
{
	const cJSON *c;
	cJSON_ArrayForEach(c, cJSON_GetObjectItem(
				      st, "conditions")) if (!strcmp(reconcile_str(c, "type", NULL),
								     type)) return true;
	return false;
}

static void reconcile_phase(cJSON *st, const char *phase, const char *now)
{
	if (!strcmp(phase, "Running") && !cJSON_GetObjectItem(st, "startTime"))
		reconcile_set_str(st, "startTime", now);
	if ((!strcmp(phase, "Succeeded") || !strcmp(phase, "Failed")) &&
	    !cJSON_GetObjectItem(st, "completionTime"))
		reconcile_set_str(st, "completionTime", now);
	reconcile_set_str(st, "phase", phase);
}

static void reconcile_event(struct reconcile_out *out, const char *type, const char *reason,
			    const char *msg)
{
	snprintf(out->event_type, sizeof(out->event_type), "%s", type);
	snprintf(out->event_reason, sizeof(out->event_reason), "%s", reason);
	snprintf(out->event_msg, sizeof(out->event_msg), "%s", msg);
}

static bool reconcile_pod_ready(const cJSON *pod)
{
	const cJSON *c;
	cJSON_ArrayForEach(
		c,
		reconcile_get(
			pod, "status",
			"conditions")) if (!strcmp(reconcile_str(c, "type", NULL),
						   "Ready")) return !strcmp(reconcile_str(c,
											  "status",
											  NULL),
									    "True");
	return !strcmp(reconcile_str(pod, "status", "phase"), "Running");
}

static void reconcile_count(cJSON *r, const char *key)
{
	cJSON *n = cJSON_GetObjectItem(r, key);
	if (cJSON_IsNumber(n))
		cJSON_SetNumberHelper(n, n->valuedouble + 1);
}

/* status.replicas: per role (label rover.dev/role), pods active, ready,
 * succeeded and failed. */
static void reconcile_replicas(cJSON *st, const cJSON *workers)
{
	cJSON *reps = cJSON_CreateObject();
	const cJSON *pod;
	cJSON_ArrayForEach(pod, workers)
	{
		const char *role = cJSON_GetStringValue(
			cJSON_GetObjectItem(reconcile_get(pod, "metadata", "labels"),
					    "rover.dev/role"));
		const char *phase = reconcile_str(pod, "status", "phase");
		if (!role)
			role = "worker";
		cJSON *r = cJSON_GetObjectItem(reps, role);
		if (!r) {
			r = cJSON_AddObjectToObject(reps, role);
			const char *keys[] = { "active", "ready", "succeeded", "failed" };
			for (int i = 0; i < 4; i++)
				cJSON_AddNumberToObject(r, keys[i], 0);
		}
		const char *key = !strcmp(phase, "Succeeded") ? "succeeded"
				  : !strcmp(phase, "Failed")  ? "failed"
							      : "active";
		reconcile_count(r, key);
		if (!strcmp(phase, "Running") && reconcile_pod_ready(pod))
			reconcile_count(r, "ready");
	}
	cJSON_DeleteItemFromObjectCaseSensitive(st, "replicas");
	cJSON_AddItemToObject(st, "replicas", reps);
}

/* The exit code of the master's container, -1 when not terminated. */
static int reconcile_exit_code(const cJSON *pod)
{
	const cJSON *cs = cJSON_GetArrayItem(reconcile_get(pod, "status", "containerStatuses"), 0);
	const cJSON *term = reconcile_get(cJSON_GetObjectItem(cs, "state"), "terminated", NULL);
	const cJSON *code = cJSON_GetObjectItem(term, "exitCode");
	return cJSON_IsNumber(code) ? code->valueint : -1;
}

/* The master pod's end: the job's verdict, or a restart. */
static void reconcile_master_ended(const struct reconcile_in *in, struct reconcile_out *out,
				   cJSON *st, const char *phase)
{
	int code = reconcile_exit_code(in->master);
	char msg[200];
	if (!strcmp(phase, "Succeeded")) {
		reconcile_phase(st, "Succeeded", in->now);
		reconcile_condition(st, "Succeeded", "True", "JobSucceeded",
				    "the master reports every node done", in->now);
		reconcile_condition(st, "Running", "False", "JobSucceeded", "", in->now);
		reconcile_condition(st, "MasterReady", "False", "JobSucceeded", "", in->now);
		reconcile_event(out, "Normal", "JobSucceeded", "the job succeeded");
		return;
	}
	if (code == 1) {
		reconcile_phase(st, "Failed", in->now);
		reconcile_condition(st, "Failed", "True", "JobFailed",
				    "the master gave the job up (exit 1): see its log", in->now);
		reconcile_condition(st, "Running", "False", "JobFailed", "", in->now);
		reconcile_condition(st, "MasterReady", "False", "JobFailed", "", in->now);
		reconcile_event(out, "Warning", "JobFailed", "the master gave the job up (exit 1)");
		return;
	}
	const cJSON *cs =
		cJSON_GetArrayItem(reconcile_get(in->master, "status", "containerStatuses"), 0);
	const char *why =
		reconcile_str(reconcile_get(cJSON_GetObjectItem(cs, "state"), "terminated", NULL),
			      "reason", NULL);
	if (!why[0])
		why = reconcile_str(in->master, "status", "reason");
	snprintf(msg, sizeof(msg), "the master pod ended (exit %d, %s): making a new one", code,
		 why[0] ? why : "no reason given");
	out->delete_master = true;
	reconcile_condition(st, "MasterReady", "False", "MasterEnded", msg, in->now);
	reconcile_event(out, "Warning", "MasterEnded", msg);
}

/* A master pod exists: its uid counted, its phase read. */
static void reconcile_master(const struct reconcile_in *in, struct reconcile_out *out, cJSON *st)
{
	const char *uid = reconcile_str(in->master, "metadata", "uid");
	const char *seen = reconcile_str(st, "masterUID", NULL);
	const cJSON *rs = cJSON_GetObjectItem(st, "restarts");
	double restarts = cJSON_IsNumber(rs) ? rs->valuedouble : 0;
	if (seen[0] && strcmp(seen, uid) != 0)
		restarts++;
	reconcile_set_num(st, "restarts", restarts);
	reconcile_set_str(st, "masterUID", uid);
	reconcile_set_str(st, "master", reconcile_str(in->master, "metadata", "name"));
	if (reconcile_get(in->master, "metadata", "deletionTimestamp"))
		return; /* going: a new one once it is gone */
	const char *phase = reconcile_str(in->master, "status", "phase");
	if (!strcmp(phase, "Succeeded") || !strcmp(phase, "Failed")) {
		reconcile_master_ended(in, out, st, phase);
		return;
	}
	bool running = !strcmp(phase, "Running");
	reconcile_phase(st, running ? "Running" : "Pending", in->now);
	reconcile_condition(st, "MasterReady", running ? "True" : "False",
			    running ? "MasterRunning" : "MasterPending", "", in->now);
	if (running)
		reconcile_condition(st, "Running", "True", "MasterRunning",
				    "the master runs the job", in->now);
}

/* A new plan of the master's: status.lastPlan and an Event (unless the
 * pass has one already: the next pass tells no more, the status keeps it). */
static void reconcile_plan(const struct reconcile_in *in, struct reconcile_out *out, cJSON *st)
{
	const struct rv_plan_state *pl = in->plan;
	if (!pl || pl->id <= 0 || (!pl->applied && !pl->proposed))
		return;
	char id[32];
	snprintf(id, sizeof(id), "%lld", (long long)pl->id);
	if (!strcmp(reconcile_str(st, "lastPlan", "id"), id))
		return;
	cJSON *lp = cJSON_CreateObject();
	cJSON_AddStringToObject(lp, "id", id);
	cJSON_AddStringToObject(lp, "stage", pl->stage);
	cJSON_AddStringToObject(lp, "reason", pl->reason);
	cJSON_AddBoolToObject(lp, "applied", pl->applied);
	if (pl->groups[RV_ROLE_WORKER].present)
		cJSON_AddNumberToObject(lp, "workers", pl->groups[RV_ROLE_WORKER].count);
	cJSON_AddStringToObject(lp, "time", in->now);
	cJSON_DeleteItemFromObjectCaseSensitive(st, "lastPlan");
	cJSON_AddItemToObject(st, "lastPlan", lp);
	if (!out->event_reason[0])
		reconcile_event(out, "Normal", pl->applied ? "PlanApplied" : "PlanProposed",
				pl->reason);
}

static bool reconcile_ended(const cJSON *st)
{
	const char *p = reconcile_str(st, "phase", NULL);
	return !strcmp(p, "Succeeded") || !strcmp(p, "Failed");
}

void reconcile_job(const struct reconcile_in *in, struct reconcile_out *out)
{
	memset(out, 0, sizeof(*out));
	const cJSON *old = cJSON_GetObjectItem(in->job, "status");
	cJSON *st = cJSON_IsObject(old) ? cJSON_Duplicate(old, true) : cJSON_CreateObject();
	out->status = st;
	const cJSON *gen = reconcile_get(in->job, "metadata", "generation");
	if (cJSON_IsNumber(gen))
		reconcile_set_num(st, "observedGeneration", gen->valuedouble);
	reconcile_replicas(st, in->workers);
	if (reconcile_get(in->job, "metadata", "deletionTimestamp") || reconcile_ended(st))
		return;
	if (cJSON_IsTrue(reconcile_get(in->job, "spec", "suspend"))) {
		out->delete_master = in->master &&
				     !reconcile_get(in->master, "metadata", "deletionTimestamp");
		out->delete_workers = cJSON_GetArraySize(in->workers) > 0;
		if (strcmp(reconcile_str(st, "phase", NULL), "Suspended") != 0)
			reconcile_event(out, "Normal", "Suspended", "spec.suspend: the job stops");
		reconcile_phase(st, "Suspended", in->now);
		reconcile_condition(st, "Suspended", "True", "Suspended", "spec.suspend is true",
				    in->now);
		return;
	}
	if (reconcile_has_condition(st, "Suspended")) /* said only once it was suspended */
		reconcile_condition(st, "Suspended", "False", "Resumed", "", in->now);
	out->create_service = !in->service;
	if (in->master) {
		reconcile_master(in, out, st);
		reconcile_plan(in, out, st);
		return;
	}
	const cJSON *rs = cJSON_GetObjectItem(st, "restarts");
	if (cJSON_IsNumber(rs) && rs->valuedouble >= in->max_restarts &&
	    reconcile_str(st, "masterUID", NULL)[0]) {
		reconcile_phase(st, "Failed", in->now);
		reconcile_condition(st, "Failed", "True", "MasterRestartLimit",
				    "the master pod ended more often than master.max_restarts",
				    in->now);
		reconcile_event(out, "Warning", "MasterRestartLimit",
				"the master pod ended more often than master.max_restarts");
		return;
	}
	if (!cJSON_GetObjectItem(st, "phase") ||
	    !strcmp(reconcile_str(st, "phase", NULL), "Suspended"))
		reconcile_phase(st, "Pending", in->now);
	if (in->busy_reason) { /* not made: another job's claim or pod is still there */
		const char *msg = in->busy_msg ? in->busy_msg : "";
		reconcile_condition(st, "MasterReady", "False", in->busy_reason, msg, in->now);
		reconcile_event(out, "Warning", in->busy_reason, msg);
		return;
	}
	out->create_master = true;
}

void reconcile_out_release(struct reconcile_out *out)
{
	cJSON_Delete(out->status);
	out->status = NULL;
}

bool reconcile_status_differs(const cJSON *a, const cJSON *b)
{
	if (!a || !b)
		return a != b;
	return !cJSON_Compare(a, b, true);
}
