/*
 * check_reconcile.c: rover-operator's rules for one ElasticJob
 * (operator/reconcile.c) and the master pod it makes (operator.c), without
 * a server: a new job gets its Service and master pod; the master's phase
 * is the job's; exit 1 fails the job, any other end makes a new master and
 * a new uid counts one restart; past max_restarts the job fails; suspend
 * deletes the master and the worker pods; a deleted or ended job is left
 * alone; replicas are counted per role; the master's new plan becomes
 * status.lastPlan and one Event; the master pod is owned by the job and
 * carries only the job in its env.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "operator.h"
#include "reconcile.h"
#include "testutil.h"

static cJSON *job(const char *status_json, bool suspend, bool deleting)
{
	char buf[2048];
	snprintf(buf, sizeof(buf),
		 "{\"apiVersion\":\"elastic.rover.dev/v1alpha1\",\"kind\":\"ElasticJob\","
		 "\"metadata\":{\"name\":\"j\",\"namespace\":\"ns\",\"uid\":\"u-job\","
		 "\"generation\":2%s},"
		 "\"spec\":{\"distributionStrategy\":\"AllreduceStrategy\",\"suspend\":%s,"
		 "\"replicaSpecs\":{\"worker\":{\"replicas\":2,\"template\":{\"spec\":{"
		 "\"containers\":[{\"name\":\"main\"}]}}}}},\"status\":%s}",
		 deleting ? ",\"deletionTimestamp\":\"2026-01-01T00:00:00Z\"" : "",
		 suspend ? "true" : "false", status_json ? status_json : "{}");
	cJSON *j = cJSON_Parse(buf);
	ck_assert_ptr_nonnull(j);
	return j;
}

static cJSON *pod(const char *uid, const char *phase, int exit_code, bool deleting)
{
	char buf[1024], term[200] = "";
	if (exit_code >= 0)
		snprintf(term, sizeof(term),
			 "\"containerStatuses\":[{\"state\":{\"terminated\":{\"exitCode\":%d,"
			 "\"reason\":\"%s\"}}}],",
			 exit_code, exit_code == 137 ? "OOMKilled" : "Error");
	snprintf(buf, sizeof(buf),
		 "{\"metadata\":{\"name\":\"j-master\",\"uid\":\"%s\"%s,"
		 "\"labels\":{\"rover.dev/role\":\"worker\"}},"
		 "\"status\":{%s\"phase\":\"%s\",\"conditions\":[{\"type\":\"Ready\",\"status\":"
		 "\"%s\"}]}}",
		 uid, deleting ? ",\"deletionTimestamp\":\"x\"" : "", term, phase,
		 strcmp(phase, "Running") == 0 ? "True" : "False");
	cJSON *j = cJSON_Parse(buf);
	ck_assert_ptr_nonnull(j);
	return j;
}

static const char *st(const struct reconcile_out *o, const char *key)
{
	const char *v = cJSON_GetStringValue(cJSON_GetObjectItem(o->status, key));
	return v ? v : "";
}

static double num(const struct reconcile_out *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItem(o->status, key);
	return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

static void run(cJSON *jb, cJSON *master, bool service, cJSON *workers, struct reconcile_out *o)
{
	struct reconcile_in in = { .job = jb,
				   .master = master,
				   .service = service,
				   .workers = workers,
				   .max_restarts = 2,
				   .now = "2026-11-29T00:00:00Z" };
	reconcile_job(&in, o);
}

START_TEST(test_new_job)
{
	cJSON *j = job(NULL, false, false), *w = cJSON_CreateArray();
	struct reconcile_out o;
	run(j, NULL, false, w, &o);
	ck_assert(o.create_master && o.create_service && !o.delete_master);
	ck_assert_str_eq(st(&o, "phase"), "Pending");
	ck_assert_int_eq((int)num(&o, "observedGeneration"), 2);
	reconcile_out_release(&o);
	cJSON_Delete(j);
	cJSON_Delete(w);
}
END_TEST

START_TEST(test_master_phases)
{
	cJSON *j = job("{\"phase\":\"Pending\",\"masterUID\":\"m1\"}", false, false);
	cJSON *w = cJSON_CreateArray();
	struct reconcile_out o;
	cJSON *m = pod("m1", "Running", -1, false);
	run(j, m, true, w, &o);
	ck_assert(!o.create_master && !o.create_service && !o.delete_master);
	ck_assert_str_eq(st(&o, "phase"), "Running");
	ck_assert_int_eq((int)num(&o, "restarts"), 0);
	ck_assert(reconcile_status_differs(cJSON_GetObjectItem(j, "status"), o.status));
	reconcile_out_release(&o);
	cJSON_Delete(m);
	m = pod("m1", "Succeeded", 0, false);
	run(j, m, true, w, &o);
	ck_assert_str_eq(st(&o, "phase"), "Succeeded");
	ck_assert_str_eq(o.event_reason, "JobSucceeded");
	reconcile_out_release(&o);
	cJSON_Delete(m);
	m = pod("m1", "Failed", 1, false);
	run(j, m, true, w, &o);
	ck_assert_str_eq(st(&o, "phase"), "Failed");
	ck_assert(!o.delete_master);
	reconcile_out_release(&o);
	cJSON_Delete(m);
	cJSON_Delete(j);
	cJSON_Delete(w);
}
END_TEST

START_TEST(test_master_killed_is_made_again)
{
	cJSON *j = job("{\"phase\":\"Running\",\"masterUID\":\"m1\",\"restarts\":0}", false, false);
	cJSON *w = cJSON_CreateArray(), *m = pod("m1", "Failed", 137, false);
	struct reconcile_out o;
	run(j, m, true, w, &o);
	ck_assert(o.delete_master && !o.create_master);
	ck_assert_str_eq(st(&o, "phase"), "Running");
	ck_assert_str_eq(o.event_reason, "MasterEnded");
	ck_assert_ptr_nonnull(strstr(o.event_msg, "exit 137, OOMKilled"));
	reconcile_out_release(&o);
	/* while it goes: nothing; once gone: a new one */
	cJSON_Delete(m);
	m = pod("m1", "Failed", 137, true);
	run(j, m, true, w, &o);
	ck_assert(!o.delete_master && !o.create_master);
	reconcile_out_release(&o);
	run(j, NULL, true, w, &o);
	ck_assert(o.create_master);
	reconcile_out_release(&o);
	/* the new pod's uid: one restart, counted once */
	cJSON_Delete(m);
	m = pod("m2", "Running", -1, false);
	run(j, m, true, w, &o);
	ck_assert_int_eq((int)num(&o, "restarts"), 1);
	ck_assert_str_eq(st(&o, "masterUID"), "m2");
	reconcile_out_release(&o);
	cJSON *j2 =
		job("{\"phase\":\"Running\",\"masterUID\":\"m2\",\"restarts\":1}", false, false);
	run(j2, m, true, w, &o);
	ck_assert_int_eq((int)num(&o, "restarts"), 1);
	reconcile_out_release(&o);
	/* past max_restarts (2): the job fails */
	cJSON *j3 =
		job("{\"phase\":\"Running\",\"masterUID\":\"m3\",\"restarts\":2}", false, false);
	run(j3, NULL, true, w, &o);
	ck_assert(!o.create_master);
	ck_assert_str_eq(st(&o, "phase"), "Failed");
	ck_assert_str_eq(o.event_reason, "MasterRestartLimit");
	reconcile_out_release(&o);
	cJSON_Delete(j3);
	cJSON_Delete(j2);
	cJSON_Delete(m);
	cJSON_Delete(j);
	cJSON_Delete(w);
}
END_TEST

START_TEST(test_suspend_deleted_ended)
{
	cJSON *w = cJSON_CreateArray();
	cJSON_AddItemToArray(w, pod("w1", "Running", -1, false));
	cJSON_AddItemToArray(w, pod("w2", "Pending", -1, false));
	cJSON *m = pod("m1", "Running", -1, false);
	cJSON *j = job("{\"phase\":\"Running\",\"masterUID\":\"m1\"}", true, false);
	struct reconcile_out o;
	run(j, m, true, w, &o);
	ck_assert(o.delete_master && o.delete_workers && !o.create_master);
	ck_assert_str_eq(st(&o, "phase"), "Suspended");
	const cJSON *r = cJSON_GetObjectItem(cJSON_GetObjectItem(o.status, "replicas"), "worker");
	ck_assert_int_eq(cJSON_GetObjectItem(r, "active")->valueint, 2);
	ck_assert_int_eq(cJSON_GetObjectItem(r, "ready")->valueint, 1);
	reconcile_out_release(&o);
	cJSON_Delete(j);
	j = job("{\"phase\":\"Running\"}", false, true);
	run(j, NULL, false, w, &o);
	ck_assert(!o.create_master && !o.create_service);
	reconcile_out_release(&o);
	cJSON_Delete(j);
	j = job("{\"phase\":\"Succeeded\"}", false, false);
	run(j, NULL, false, w, &o);
	ck_assert(!o.create_master && !o.create_service);
	reconcile_out_release(&o);
	cJSON_Delete(j);
	cJSON_Delete(m);
	cJSON_Delete(w);
}
END_TEST

START_TEST(test_plan_recorded_once)
{
	cJSON *j = job("{\"phase\":\"Running\",\"masterUID\":\"m1\"}", false, false);
	cJSON *w = cJSON_CreateArray(), *m = pod("m1", "Running", -1, false);
	struct rv_plan_state pl = { .id = 7, .applied = true };
	snprintf(pl.stage, sizeof(pl.stage), "running");
	snprintf(pl.reason, sizeof(pl.reason), "speed flat: 3 workers");
	pl.groups[RV_ROLE_WORKER] = (struct rv_role_target){ .present = true, .count = 3 };
	struct reconcile_in in = { .job = j,
				   .master = m,
				   .service = true,
				   .workers = w,
				   .max_restarts = 2,
				   .now = "2026-11-29T00:00:00Z",
				   .plan = &pl };
	struct reconcile_out o;
	reconcile_job(&in, &o);
	const cJSON *lp = cJSON_GetObjectItem(o.status, "lastPlan");
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(lp, "id")), "7");
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(lp, "reason")),
			 "speed flat: 3 workers");
	ck_assert_int_eq(cJSON_GetObjectItem(lp, "workers")->valueint, 3);
	ck_assert_str_eq(o.event_reason, "PlanApplied");
	/* the same plan seen again: no second Event */
	cJSON *j2 = cJSON_Duplicate(j, true);
	cJSON_ReplaceItemInObject(j2, "status", cJSON_Duplicate(o.status, true));
	reconcile_out_release(&o);
	in.job = j2;
	reconcile_job(&in, &o);
	ck_assert_str_eq(o.event_reason, "");
	ck_assert(!reconcile_status_differs(cJSON_GetObjectItem(j2, "status"), o.status));
	reconcile_out_release(&o);
	cJSON_Delete(j2);
	cJSON_Delete(j);
	cJSON_Delete(m);
	cJSON_Delete(w);
}
END_TEST

/* o printed on one line (the caller frees it with cJSON_free); o deleted. */
static char *printed(cJSON *o)
{
	char *s = cJSON_PrintUnformatted(o);
	ck_assert_ptr_nonnull(s);
	cJSON_Delete(o);
	return s;
}

START_TEST(test_master_pod)
{
	struct operator_cfg cfg = { .master_port = 50001 };
	snprintf(cfg.master_image, sizeof(cfg.master_image), "rover-master:1");
	snprintf(cfg.master_command, sizeof(cfg.master_command), "rover-master");
	snprintf(cfg.master_service_account, sizeof(cfg.master_service_account), "rover-master");
	snprintf(cfg.master_state_mount, sizeof(cfg.master_state_mount), "/var/lib/rover-master");
	cJSON *j = job(NULL, false, false);
	cJSON *p = operator_master_pod(&cfg, j);
	char *s = cJSON_PrintUnformatted(p);
	ck_assert_ptr_nonnull(strstr(s, "\"name\":\"j-master\""));
	ck_assert_ptr_nonnull(strstr(s, "\"uid\":\"u-job\",\"controller\":true"));
	ck_assert_ptr_nonnull(strstr(s, "\"serviceAccountName\":\"rover-master\""));
	ck_assert_ptr_nonnull(strstr(s, "\"--scheduler\",\"k8s\""));
	ck_assert_ptr_nonnull(strstr(s, "\"j-master.ns.svc:50001\""));
	/* the worker templates carry the owner's name and uid; no kubeconfig;
	 * the env: the spec and the state folder, the claim's mount */
	/* (inside ROVER_JOB_SPEC, a JSON string: its quotes escaped) */
	ck_assert_ptr_nonnull(strstr(s, "\\\"elastic.rover.dev/owner\\\":\\\"j\\\""));
	ck_assert_ptr_nonnull(strstr(s, "\\\"elastic.rover.dev/owner-uid\\\":\\\"u-job\\\""));
	ck_assert_ptr_null(strstr(s, "--kubeconfig"));
	const cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(p, "spec"),
								"containers"),
					    0);
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(c, "env")), 3);
	ck_assert_ptr_nonnull(
		strstr(s, "{\"name\":\"ROVER_STATE_DIR\",\"value\":\"/var/lib/rover-master\"}"));
	/* the master keeps the job's uid in its state folder, refuses another's */
	ck_assert_ptr_nonnull(strstr(s, "{\"name\":\"ROVER_JOB_UID\",\"value\":\"u-job\"}"));
	ck_assert_ptr_nonnull(
		strstr(s, "\"persistentVolumeClaim\":{\"claimName\":\"j-master-state\"}"));
	ck_assert_ptr_nonnull(
		strstr(s, "{\"name\":\"state\",\"mountPath\":\"/var/lib/rover-master\"}"));
	cJSON_free(s);
	cJSON_Delete(p);
	/* with a state root: no claim, the folder ROOT/NS/JOB-UID (a job made
	 * again under the name gets another) */
	snprintf(cfg.master_state_root, sizeof(cfg.master_state_root), "/srv/rover");
	s = printed(operator_master_pod(&cfg, j));
	ck_assert_ptr_null(strstr(s, "persistentVolumeClaim"));
	ck_assert_ptr_nonnull(strstr(s, "\"value\":\"/srv/rover/ns/j-u-job\""));
	cJSON_free(s);
	cJSON_Delete(j);
}
END_TEST

/* master_service_account "": the job's own account, bound to the master's
 * ClusterRole in its namespace; the state claim from the spec, else the
 * operator's defaults; each owned by the job. */
START_TEST(test_master_own_account_and_claim)
{
	struct operator_cfg cfg = { .master_port = 50001 };
	snprintf(cfg.master_cluster_role, sizeof(cfg.master_cluster_role), "rover-master");
	snprintf(cfg.master_state_mount, sizeof(cfg.master_state_mount), "/var/lib/rover-master");
	snprintf(cfg.master_state_size, sizeof(cfg.master_state_size), "1Gi");
	cJSON *j = job(NULL, false, false);
	char *s = printed(operator_master_pod(&cfg, j));
	ck_assert_ptr_nonnull(strstr(s, "\"serviceAccountName\":\"rover-master-j\""));
	cJSON_free(s);
	s = printed(operator_service_account(&cfg, j));
	ck_assert_ptr_nonnull(strstr(s, "\"kind\":\"ServiceAccount\""));
	ck_assert_ptr_nonnull(strstr(s, "\"name\":\"rover-master-j\",\"namespace\":\"ns\""));
	ck_assert_ptr_nonnull(strstr(s, "\"uid\":\"u-job\",\"controller\":true"));
	cJSON_free(s);
	s = printed(operator_role_binding(&cfg, j));
	ck_assert_ptr_nonnull(strstr(s, "\"roleRef\":{\"apiGroup\":\"rbac.authorization.k8s.io\","
					"\"kind\":\"ClusterRole\",\"name\":\"rover-master\"}"));
	ck_assert_ptr_nonnull(strstr(s, "\"subjects\":[{\"kind\":\"ServiceAccount\",\"name\":"
					"\"rover-master-j\",\"namespace\":\"ns\"}]"));
	ck_assert_ptr_nonnull(strstr(s, "\"uid\":\"u-job\",\"controller\":true"));
	cJSON_free(s);
	s = printed(operator_state_claim(&cfg, j));
	ck_assert_ptr_nonnull(strstr(s, "\"name\":\"j-master-state\""));
	ck_assert_ptr_nonnull(strstr(s, "\"requests\":{\"storage\":\"1Gi\"}"));
	ck_assert_ptr_null(strstr(s, "storageClassName")); /* the cluster's default */
	ck_assert_ptr_nonnull(strstr(s, "\"uid\":\"u-job\",\"controller\":true"));
	cJSON_free(s);
	/* the spec's own size and class */
	cJSON *ms = cJSON_AddObjectToObject(cJSON_GetObjectItem(j, "spec"), "masterState");
	cJSON_AddStringToObject(ms, "size", "5Gi");
	cJSON_AddStringToObject(ms, "storageClassName", "fast");
	s = printed(operator_state_claim(&cfg, j));
	ck_assert_ptr_nonnull(strstr(s, "\"storageClassName\":\"fast\""));
	ck_assert_ptr_nonnull(strstr(s, "\"requests\":{\"storage\":\"5Gi\"}"));
	cJSON_free(s);
	cJSON_Delete(j);
}
END_TEST

/* A master the caller says is busy (an earlier job's claim or pod still
 * there) is not made: Pending, MasterReady False with the reason, one
 * Warning Event; once free, made. */
START_TEST(test_busy_master_waits)
{
	cJSON *j = job(NULL, false, false), *w = cJSON_CreateArray();
	struct reconcile_in in = {
		.job = j,
		.workers = w,
		.max_restarts = 2,
		.now = "2026-11-29T00:00:00Z",
		.busy_reason = "StateClaimBusy",
		.busy_msg = "the state claim j-master-state belongs to another job"
	};
	struct reconcile_out o;
	reconcile_job(&in, &o);
	ck_assert(!o.create_master && o.create_service);
	ck_assert_str_eq(st(&o, "phase"), "Pending");
	const cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(o.status, "conditions"), 0);
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(c, "type")), "MasterReady");
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(c, "status")), "False");
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(c, "reason")), "StateClaimBusy");
	ck_assert_str_eq(o.event_type, "Warning");
	ck_assert_str_eq(o.event_reason, "StateClaimBusy");
	reconcile_out_release(&o);
	in.busy_reason = in.busy_msg = NULL;
	reconcile_job(&in, &o);
	ck_assert(o.create_master);
	reconcile_out_release(&o);
	cJSON_Delete(j);
	cJSON_Delete(w);
}
END_TEST

RV_TEST_MAIN_TCASE("reconcile", "rules", 30, test_new_job, test_master_phases,
		   test_master_killed_is_made_again, test_suspend_deleted_ended,
		   test_plan_recorded_once, test_master_pod, test_master_own_account_and_claim,
		   test_busy_master_waits)
