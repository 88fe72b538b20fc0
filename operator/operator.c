/*
 * operator.c: rover-operator's reconcile pass: the caches read once, each
 * ElasticJob decided (reconcile.h) and the decisions applied as API calls:
 * creates (409 AlreadyExists is success: the name is the job's), deletes,
 * a merge patch of /status when it changed, an Event per transition.
 * The main thread only.
 */
#include "operator.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cleanup.h"
#include "json.h"
#include "log.h"

static const char *op_str(const cJSON *j, const char *a, const char *b)
{
	const cJSON *o = cJSON_GetObjectItem(j, a);
	const char *v = cJSON_GetStringValue(b ? cJSON_GetObjectItem(o, b) : o);
	return v ? v : "";
}

static void op_now(char *out, size_t size)
{
	time_t t = time(NULL);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(out, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* metadata of an object the job owns: name, namespace, labels, owner. */
static cJSON *op_owned_meta(const cJSON *job, const char *name)
{
	cJSON *md = cJSON_CreateObject();
	cJSON_AddStringToObject(md, "name", name);
	cJSON_AddStringToObject(md, "namespace", op_str(job, "metadata", "namespace"));
	cJSON *labels = cJSON_AddObjectToObject(md, "labels");
	cJSON_AddStringToObject(labels, RECONCILE_LABEL_JOB, op_str(job, "metadata", "name"));
	cJSON_AddStringToObject(labels, RECONCILE_LABEL_ROLE, "master");
	cJSON *ref = cJSON_CreateObject();
	cJSON_AddStringToObject(ref, "apiVersion", op_str(job, "apiVersion", NULL));
	cJSON_AddStringToObject(ref, "kind", "ElasticJob");
	cJSON_AddStringToObject(ref, "name", op_str(job, "metadata", "name"));
	cJSON_AddStringToObject(ref, "uid", op_str(job, "metadata", "uid"));
	cJSON_AddBoolToObject(ref, "controller", true);
	cJSON_AddBoolToObject(ref, "blockOwnerDeletion", true);
	cJSON_AddItemToArray(cJSON_AddArrayToObject(md, "ownerReferences"), ref);
	return md;
}

/* The job as the master reads it: apiVersion, kind, name, namespace,
 * labels and spec (no status, no annotations: they change on their own). */
static char *op_job_spec(const cJSON *job)
{
	RV_CLEANUP_CJSON cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "apiVersion", op_str(job, "apiVersion", NULL));
	cJSON_AddStringToObject(j, "kind", "ElasticJob");
	cJSON *md = cJSON_AddObjectToObject(j, "metadata");
	cJSON_AddStringToObject(md, "name", op_str(job, "metadata", "name"));
	cJSON_AddStringToObject(md, "namespace", op_str(job, "metadata", "namespace"));
	const cJSON *labels = cJSON_GetObjectItem(cJSON_GetObjectItem(job, "metadata"), "labels");
	if (labels)
		cJSON_AddItemToObject(md, "labels", cJSON_Duplicate(labels, true));
	cJSON_AddItemToObject(j, "spec", cJSON_Duplicate(cJSON_GetObjectItem(job, "spec"), true));
	return cJSON_PrintUnformatted(j);
}

static void op_env(cJSON *env, const char *name, const char *value)
{
	cJSON *e = cJSON_CreateObject();
	cJSON_AddStringToObject(e, "name", name);
	cJSON_AddStringToObject(e, "value", value);
	cJSON_AddItemToArray(env, e);
}

static void op_arg(cJSON *args, const char *a, const char *b)
{
	cJSON_AddItemToArray(args, cJSON_CreateString(a));
	if (b)
		cJSON_AddItemToArray(args, cJSON_CreateString(b));
}

/* The master's command line: the spec written from the env to a file
 * (the master reads a file), then rover-master with --scheduler k8s. */
static cJSON *op_master_command(const struct operator_cfg *cfg, const cJSON *job)
{
	const char *name = op_str(job, "metadata", "name");
	const char *ns = op_str(job, "metadata", "namespace");
	char listen[64], buf[PATH_MAX + 300];
	cJSON *cmd = cJSON_CreateArray();
	op_arg(cmd, "sh", "-c");
	op_arg(cmd,
	       "f=\"${TMPDIR:-/tmp}/rover-job-$$.json\"; printf '%s' \"$ROVER_JOB_SPEC\" > \"$f\" "
	       "&& { [ -z \"$ROVER_STATE_DIR\" ] || mkdir -p \"$ROVER_STATE_DIR\"; } "
	       "&& exec \"$0\" --job \"$f\" \"$@\"",
	       NULL);
	op_arg(cmd, cfg->master_command, NULL);
	snprintf(listen, sizeof(listen), "0.0.0.0:%lld", cfg->master_port);
	op_arg(cmd, "--scheduler", "k8s");
	op_arg(cmd, "--listen", listen);
	op_arg(cmd, "--k8s-namespace", ns);
	if (cfg->master_addr_host[0])
		snprintf(buf, sizeof(buf), "%s:%lld", cfg->master_addr_host, cfg->master_port);
	else
		snprintf(buf, sizeof(buf), "%s%s.%s.svc:%lld", name, RECONCILE_MASTER_SUFFIX, ns,
			 cfg->master_port);
	op_arg(cmd, "--k8s-master-addr", buf);
	if (cfg->master_kubeconfig[0])
		op_arg(cmd, "--kubeconfig", cfg->master_kubeconfig);
	char extra[sizeof(cfg->master_args)], *save = NULL;
	snprintf(extra, sizeof(extra), "%s", cfg->master_args);
	for (char *t = strtok_r(extra, " ", &save); t; t = strtok_r(NULL, " ", &save))
		op_arg(cmd, t, NULL);
	return cmd;
}

cJSON *operator_master_pod(const struct operator_cfg *cfg, const cJSON *job)
{
	char name[300];
	snprintf(name, sizeof(name), "%s%s", op_str(job, "metadata", "name"),
		 RECONCILE_MASTER_SUFFIX);
	cJSON *pod = cJSON_CreateObject();
	cJSON_AddStringToObject(pod, "apiVersion", "v1");
	cJSON_AddStringToObject(pod, "kind", "Pod");
	cJSON_AddItemToObject(pod, "metadata", op_owned_meta(job, name));
	cJSON *spec = cJSON_AddObjectToObject(pod, "spec");
	cJSON_AddStringToObject(spec, "restartPolicy", "Never");
	if (cfg->master_service_account[0])
		cJSON_AddStringToObject(spec, "serviceAccountName", cfg->master_service_account);
	cJSON *c = cJSON_CreateObject();
	cJSON_AddStringToObject(c, "name", "master");
	cJSON_AddStringToObject(c, "image", cfg->master_image);
	cJSON_AddItemToObject(c, "command", op_master_command(cfg, job));
	cJSON *env = cJSON_AddArrayToObject(c, "env");
	RV_CLEANUP_FREE char *js = op_job_spec(job);
	op_env(env, "ROVER_JOB_SPEC", js ? js : "{}");
	if (cfg->master_state_root[0]) { /* the master's state.dir, made by the command */
		char dir[PATH_MAX + 200];
		snprintf(dir, sizeof(dir), "%s/%s/%s", cfg->master_state_root,
			 op_str(job, "metadata", "namespace"), op_str(job, "metadata", "name"));
		op_env(env, "ROVER_STATE_DIR", dir);
	}
	cJSON *port = cJSON_CreateObject();
	cJSON_AddStringToObject(port, "name", "api");
	cJSON_AddNumberToObject(port, "containerPort", (double)cfg->master_port);
	cJSON_AddItemToArray(cJSON_AddArrayToObject(c, "ports"), port);
	cJSON_AddItemToArray(cJSON_AddArrayToObject(spec, "containers"), c);
	return pod;
}

cJSON *operator_service(const struct operator_cfg *cfg, const cJSON *job)
{
	char name[300];
	snprintf(name, sizeof(name), "%s%s", op_str(job, "metadata", "name"),
		 RECONCILE_MASTER_SUFFIX);
	cJSON *svc = cJSON_CreateObject();
	cJSON_AddStringToObject(svc, "apiVersion", "v1");
	cJSON_AddStringToObject(svc, "kind", "Service");
	cJSON_AddItemToObject(svc, "metadata", op_owned_meta(job, name));
	cJSON *spec = cJSON_AddObjectToObject(svc, "spec");
	cJSON *sel = cJSON_AddObjectToObject(spec, "selector");
	cJSON_AddStringToObject(sel, RECONCILE_LABEL_JOB, op_str(job, "metadata", "name"));
	cJSON_AddStringToObject(sel, RECONCILE_LABEL_ROLE, "master");
	cJSON *port = cJSON_CreateObject();
	cJSON_AddStringToObject(port, "name", "api");
	cJSON_AddNumberToObject(port, "port", (double)cfg->master_port);
	cJSON_AddNumberToObject(port, "targetPort", (double)cfg->master_port);
	cJSON_AddItemToArray(cJSON_AddArrayToObject(spec, "ports"), port);
	return svc;
}

/* POST obj to path: true when created or already there (409). */
static bool op_create(struct operator* op, const char *path, const cJSON *obj, const char *what)
{
	RV_CLEANUP_FREE char *body = cJSON_PrintUnformatted(obj);
	long code = 0;
	RV_CLEANUP_CJSON cJSON *out = NULL;
	struct rv_err err = { 0 };
	int rc = kube_call(&op->k, "POST", path, body, NULL, &code, &out, &err);
	const char *name = op_str(obj, "metadata", "name");
	if (code == 201 || code == 200) {
		op->creates++;
		rv_log_info("created", "what=%s name=%s", what, name);
		return true;
	}
	if (code == 409) {
		op->conflicts++;
		return true;
	}
	char q[300];
	rv_log_warn("could not create", "what=%s name=%s code=%ld reason=%s", what, name, code,
		    rv_log_q(q, sizeof(q), rc < 0 ? err.msg : op_str(out, "message", NULL)));
	return false;
}

static void op_delete(struct operator* op, const char *path, const char *what)
{
	long code = 0;
	RV_CLEANUP_CJSON cJSON *out = NULL;
	struct rv_err err = { 0 };
	kube_call(&op->k, "DELETE", path, NULL, NULL, &code, &out, &err);
	if (code != 200 && code != 202 && code != 404)
		rv_log_warn("could not delete", "what=%s path=%s code=%ld", what, path, code);
}

/* An Event about the job (as `kubectl describe ej` shows them). */
static void op_event(struct operator* op, const cJSON *job, const struct reconcile_out *out)
{
	char now[32], path[200], name[300];
	op_now(now, sizeof(now));
	const char *ns = op_str(job, "metadata", "namespace");
	snprintf(name, sizeof(name), "%s.%llx", op_str(job, "metadata", "name"),
		 (unsigned long long)time(NULL) * 1000003ull + (unsigned long long)op->passes);
	RV_CLEANUP_CJSON cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "apiVersion", "v1");
	cJSON_AddStringToObject(ev, "kind", "Event");
	cJSON *md = cJSON_AddObjectToObject(ev, "metadata");
	cJSON_AddStringToObject(md, "name", name);
	cJSON_AddStringToObject(md, "namespace", ns);
	cJSON *io = cJSON_AddObjectToObject(ev, "involvedObject");
	cJSON_AddStringToObject(io, "apiVersion", op_str(job, "apiVersion", NULL));
	cJSON_AddStringToObject(io, "kind", "ElasticJob");
	cJSON_AddStringToObject(io, "name", op_str(job, "metadata", "name"));
	cJSON_AddStringToObject(io, "namespace", ns);
	cJSON_AddStringToObject(io, "uid", op_str(job, "metadata", "uid"));
	cJSON_AddStringToObject(ev, "type", out->event_type);
	cJSON_AddStringToObject(ev, "reason", out->event_reason);
	cJSON_AddStringToObject(ev, "message", out->event_msg);
	cJSON_AddStringToObject(cJSON_AddObjectToObject(ev, "source"), "component",
				"rover-operator");
	cJSON_AddStringToObject(ev, "firstTimestamp", now);
	cJSON_AddStringToObject(ev, "lastTimestamp", now);
	cJSON_AddNumberToObject(ev, "count", 1);
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s/events", ns);
	RV_CLEANUP_FREE char *body = cJSON_PrintUnformatted(ev);
	long code = 0;
	RV_CLEANUP_CJSON cJSON *reply = NULL;
	struct rv_err err = { 0 };
	kube_call(&op->k, "POST", path, body, NULL, &code, &reply, &err);
}

static void op_status(struct operator* op, const cJSON *job, const cJSON *status)
{
	char path[600];
	snprintf(path, sizeof(path),
		 "/apis/elastic.rover.dev/v1alpha1/namespaces/%s/elasticjobs/%s/status",
		 op_str(job, "metadata", "namespace"), op_str(job, "metadata", "name"));
	RV_CLEANUP_CJSON cJSON *p = cJSON_CreateObject();
	cJSON_AddItemToObject(p, "status", cJSON_Duplicate(status, true));
	RV_CLEANUP_FREE char *body = cJSON_PrintUnformatted(p);
	long code = 0;
	RV_CLEANUP_CJSON cJSON *out = NULL;
	struct rv_err err = { 0 };
	kube_call(&op->k, "PATCH", path, body, "application/merge-patch+json", &code, &out, &err);
	if (code != 200) {
		char q[300];
		rv_log_warn("could not update the job's status", "job=%s code=%ld reason=%s",
			    op_str(job, "metadata", "name"), code,
			    rv_log_q(q, sizeof(q), op_str(out, "message", NULL)));
	}
}

/* Apply one job's decisions. */
static void op_apply(struct operator* op, const cJSON *job, const struct reconcile_out *out)
{
	const char *ns = op_str(job, "metadata", "namespace");
	const char *name = op_str(job, "metadata", "name");
	char path[600];
	if (out->create_service) {
		RV_CLEANUP_CJSON cJSON *svc = operator_service(&op->cfg, job);
		snprintf(path, sizeof(path), "/api/v1/namespaces/%s/services", ns);
		op_create(op, path, svc, "service");
	}
	if (out->create_master) {
		RV_CLEANUP_CJSON cJSON *pod = operator_master_pod(&op->cfg, job);
		snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods", ns);
		op_create(op, path, pod, "master pod");
	}
	if (out->delete_master) {
		snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s%s?gracePeriodSeconds=0",
			 ns, name, RECONCILE_MASTER_SUFFIX);
		op_delete(op, path, "master pod");
	}
	if (out->delete_workers) {
		snprintf(path, sizeof(path),
			 "/api/v1/namespaces/%s/pods?labelSelector=rover.dev%%2Fjob%%3D%s", ns,
			 name);
		op_delete(op, path, "worker pods");
	}
	bool changed = reconcile_status_differs(cJSON_GetObjectItem(job, "status"), out->status);
	if (changed)
		op_status(op, job, out->status);
	if (out->event_reason[0] && changed) { /* once per transition */
		rv_log_info("job event", "job=%s/%s reason=%s", ns, name, out->event_reason);
		op_event(op, job, out);
	}
}

/* The worker pods of job among every worker pod (label rover.dev/job). */
static cJSON *op_workers_of(const cJSON *workers, const char *ns, const char *name)
{
	cJSON *arr = cJSON_CreateArray();
	const cJSON *p;
	cJSON_ArrayForEach(p, workers)
	{
		const cJSON *labels =
			cJSON_GetObjectItem(cJSON_GetObjectItem(p, "metadata"), "labels");
		const char *j = cJSON_GetStringValue(cJSON_GetObjectItem(labels, "rover.dev/job"));
		if (j && !strcmp(j, name) && !strcmp(op_str(p, "metadata", "namespace"), ns))
			cJSON_AddItemReferenceToArray(arr, (cJSON *)p);
	}
	return arr;
}

void operator_pass(struct operator* op)
{
	RV_CLEANUP_CJSON cJSON *jobs = kube_snapshot(op->jobs);
	RV_CLEANUP_CJSON cJSON *masters = kube_snapshot(op->masters);
	RV_CLEANUP_CJSON cJSON *services = kube_snapshot(op->services);
	RV_CLEANUP_CJSON cJSON *workers = kube_snapshot(op->workers);
	if (!jobs || !masters || !services || !workers)
		return; /* not all listed yet: deciding now could make a second master */
	op->passes++;
	char now[32];
	op_now(now, sizeof(now));
	const cJSON *job;
	cJSON_ArrayForEach(job, jobs)
	{
		const char *ns = op_str(job, "metadata", "namespace");
		const char *name = op_str(job, "metadata", "name");
		char key[400];
		snprintf(key, sizeof(key), "%s/%s%s", ns, name, RECONCILE_MASTER_SUFFIX);
		RV_CLEANUP_CJSON cJSON *mine = op_workers_of(workers, ns, name);
		struct reconcile_in in = {
			.job = job,
			.master = cJSON_GetObjectItem(masters, key),
			.service = cJSON_GetObjectItem(services, key) != NULL,
			.workers = mine,
			.max_restarts = (int)op->cfg.master_max_restarts,
			.now = now,
		};
		struct reconcile_out out;
		reconcile_job(&in, &out);
		op_apply(op, job, &out);
		reconcile_out_release(&out);
	}
}
