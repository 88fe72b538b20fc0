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
#include "master_client.h"
#include "parse.h"

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

/* A new object of apiVersion and kind named name, owned by the job (the
 * caller's, cJSON_Delete). */
static cJSON *op_owned_object(const cJSON *job, const char *api_version, const char *kind,
			      const char *name)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "apiVersion", api_version);
	cJSON_AddStringToObject(o, "kind", kind);
	cJSON_AddItemToObject(o, "metadata", op_owned_meta(job, name));
	return o;
}

/* A new v1 object of kind named <the job's name><suffix>, owned by the job
 * (the caller's, cJSON_Delete). */
static cJSON *op_v1_object(const cJSON *job, const char *kind, const char *suffix)
{
	char name[300];
	snprintf(name, sizeof(name), "%s%s", op_str(job, "metadata", "name"), suffix);
	return op_owned_object(job, "v1", kind, name);
}

/* Each replica's pod template gets the label OPERATOR_LABEL_OWNER: the
 * master copies a template's labels (never its ownerReferences) onto the
 * worker pods, and the pass deletes worker pods whose job is gone. */
static void op_mark_templates(cJSON *spec, const char *job, const char *uid)
{
	cJSON *rs;
	cJSON_ArrayForEach(rs, cJSON_GetObjectItem(spec, "replicaSpecs"))
	{
		cJSON *t = cJSON_GetObjectItem(rs, "template");
		if (!cJSON_IsObject(t))
			continue;
		cJSON *md = cJSON_GetObjectItem(t, "metadata");
		if (!cJSON_IsObject(md))
			md = cJSON_AddObjectToObject(t, "metadata");
		cJSON *labels = cJSON_GetObjectItem(md, "labels");
		if (!cJSON_IsObject(labels))
			labels = cJSON_AddObjectToObject(md, "labels");
		cJSON_DeleteItemFromObjectCaseSensitive(labels, OPERATOR_LABEL_OWNER);
		cJSON_AddStringToObject(labels, OPERATOR_LABEL_OWNER, job);
		cJSON_DeleteItemFromObjectCaseSensitive(labels, OPERATOR_LABEL_OWNER_UID);
		cJSON_AddStringToObject(labels, OPERATOR_LABEL_OWNER_UID, uid);
	}
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
	cJSON *spec = cJSON_Duplicate(cJSON_GetObjectItem(job, "spec"), true);
	cJSON_AddItemToObject(j, "spec", spec);
	op_mark_templates(spec, op_str(job, "metadata", "name"), op_str(job, "metadata", "uid"));
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

/* The service account the master pod runs under, into out. */
static void op_sa_name(const struct operator_cfg *cfg, const cJSON *job, char *out, size_t size)
{
	if (cfg->master_service_account[0])
		snprintf(out, size, "%s", cfg->master_service_account);
	else
		snprintf(out, size, "%s%s", OPERATOR_SA_PREFIX, op_str(job, "metadata", "name"));
}

/* The job's claim as the pod's volume, mounted at master_state_mount; the
 * group the master's image runs as (65532, Dockerfile.master) may write it. */
static void op_state_mount(const struct operator_cfg *cfg, const cJSON *job, cJSON *spec,
			   cJSON *container)
{
	char claim[300];
	snprintf(claim, sizeof(claim), "%s%s", op_str(job, "metadata", "name"),
		 OPERATOR_STATE_SUFFIX);
	cJSON *v = cJSON_CreateObject();
	cJSON_AddStringToObject(v, "name", OPERATOR_STATE_VOLUME);
	cJSON_AddStringToObject(cJSON_AddObjectToObject(v, "persistentVolumeClaim"), "claimName",
				claim);
	cJSON_AddItemToArray(cJSON_AddArrayToObject(spec, "volumes"), v);
	cJSON *m = cJSON_CreateObject();
	cJSON_AddStringToObject(m, "name", OPERATOR_STATE_VOLUME);
	cJSON_AddStringToObject(m, "mountPath", cfg->master_state_mount);
	cJSON_AddItemToArray(cJSON_AddArrayToObject(container, "volumeMounts"), m);
	cJSON_AddNumberToObject(cJSON_AddObjectToObject(spec, "securityContext"), "fsGroup", 65532);
}

cJSON *operator_master_pod(const struct operator_cfg *cfg, const cJSON *job)
{
	cJSON *pod = op_v1_object(job, "Pod", RECONCILE_MASTER_SUFFIX);
	cJSON *spec = cJSON_AddObjectToObject(pod, "spec");
	cJSON_AddStringToObject(spec, "restartPolicy", "Never");
	char sa[300];
	op_sa_name(cfg, job, sa, sizeof(sa));
	cJSON_AddStringToObject(spec, "serviceAccountName", sa);
	cJSON *c = cJSON_CreateObject();
	cJSON_AddStringToObject(c, "name", "master");
	cJSON_AddStringToObject(c, "image", cfg->master_image);
	cJSON_AddItemToObject(c, "command", op_master_command(cfg, job));
	cJSON *env = cJSON_AddArrayToObject(c, "env");
	RV_CLEANUP_FREE char *js = op_job_spec(job);
	op_env(env, "ROVER_JOB_SPEC", js ? js : "{}");
	/* the master refuses a state folder another job (uid) wrote */
	op_env(env, "ROVER_JOB_UID", op_str(job, "metadata", "uid"));
	if (cfg->master_state_root[0]) { /* the master's state.dir, made by the command */
		char dir[PATH_MAX + 300];
		snprintf(dir, sizeof(dir), "%s/%s/%s-%s", cfg->master_state_root,
			 op_str(job, "metadata", "namespace"), op_str(job, "metadata", "name"),
			 op_str(job, "metadata", "uid"));
		op_env(env, "ROVER_STATE_DIR", dir);
	} else {
		op_env(env, "ROVER_STATE_DIR", cfg->master_state_mount);
		op_state_mount(cfg, job, spec, c);
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
	cJSON *svc = op_v1_object(job, "Service", RECONCILE_MASTER_SUFFIX);
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

cJSON *operator_service_account(const struct operator_cfg *cfg, const cJSON *job)
{
	char name[300];
	op_sa_name(cfg, job, name, sizeof(name));
	return op_owned_object(job, "v1", "ServiceAccount", name);
}

cJSON *operator_role_binding(const struct operator_cfg *cfg, const cJSON *job)
{
	char name[300];
	op_sa_name(cfg, job, name, sizeof(name));
	cJSON *rb = op_owned_object(job, "rbac.authorization.k8s.io/v1", "RoleBinding", name);
	cJSON *ref = cJSON_AddObjectToObject(rb, "roleRef");
	cJSON_AddStringToObject(ref, "apiGroup", "rbac.authorization.k8s.io");
	cJSON_AddStringToObject(ref, "kind", "ClusterRole");
	cJSON_AddStringToObject(ref, "name", cfg->master_cluster_role);
	cJSON *sub = cJSON_CreateObject();
	cJSON_AddStringToObject(sub, "kind", "ServiceAccount");
	cJSON_AddStringToObject(sub, "name", name);
	cJSON_AddStringToObject(sub, "namespace", op_str(job, "metadata", "namespace"));
	cJSON_AddItemToArray(cJSON_AddArrayToObject(rb, "subjects"), sub);
	return rb;
}

cJSON *operator_state_claim(const struct operator_cfg *cfg, const cJSON *job)
{
	const cJSON *ms = cJSON_GetObjectItem(cJSON_GetObjectItem(job, "spec"), "masterState");
	const char *cls = cJSON_GetStringValue(cJSON_GetObjectItem(ms, "storageClassName"));
	const char *size = cJSON_GetStringValue(cJSON_GetObjectItem(ms, "size"));
	cls = cls ? cls : cfg->master_state_class;
	cJSON *pvc = op_v1_object(job, "PersistentVolumeClaim", OPERATOR_STATE_SUFFIX);
	cJSON *spec = cJSON_AddObjectToObject(pvc, "spec");
	cJSON_AddItemToArray(cJSON_AddArrayToObject(spec, "accessModes"),
			     cJSON_CreateString("ReadWriteOnce"));
	if (cls[0]) /* else the cluster's default class */
		cJSON_AddStringToObject(spec, "storageClassName", cls);
	cJSON *req =
		cJSON_AddObjectToObject(cJSON_AddObjectToObject(spec, "resources"), "requests");
	cJSON_AddStringToObject(req, "storage", size && size[0] ? size : cfg->master_state_size);
	return pvc;
}

/* POST obj to path: the HTTP code (201 created, 409 already there; 0 no
 * answer), the failures logged. */
static long op_create(struct operator_state *op, const char *path, const cJSON *obj,
		      const char *what)
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
		return code;
	}
	if (code == 409) {
		op->conflicts++;
		return code;
	}
	char q[300];
	rv_log_warn("could not create", "what=%s name=%s code=%ld reason=%s", what, name, code,
		    rv_log_q(q, sizeof(q), rc < 0 ? err.msg : op_str(out, "message", NULL)));
	return code;
}

/* The uid of the owner obj names as its controller ("" none). */
static const char *op_owner_uid(const cJSON *obj)
{
	const cJSON *refs =
		cJSON_GetObjectItem(cJSON_GetObjectItem(obj, "metadata"), "ownerReferences");
	const cJSON *r;
	cJSON_ArrayForEach(r, refs)
	{
		if (cJSON_IsTrue(cJSON_GetObjectItem(r, "controller")))
			return op_str(r, "uid", NULL);
	}
	return "";
}

enum op_claim_seen { OP_CLAIM_UNKNOWN = -1, OP_CLAIM_OURS, OP_CLAIM_BUSY, OP_CLAIM_ABSENT };

/* The job's state claim, JOB-master-state: the job's own (owned by its
 * uid, not being deleted), absent (op_create_master_parts makes it), busy
 * (an earlier job's of the same name, which garbage collection takes in
 * its own time; why in msg) or not known.  A claim not the job's own is
 * never mounted: its journal is another job's. */
static enum op_claim_seen op_claim(struct operator_state *op, const cJSON *job, char *msg,
				   size_t size)
{
	const char *ns = op_str(job, "metadata", "namespace");
	char path[600], name[300];
	snprintf(name, sizeof(name), "%s%s", op_str(job, "metadata", "name"),
		 OPERATOR_STATE_SUFFIX);
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s/persistentvolumeclaims/%s", ns, name);
	long code = 0;
	RV_CLEANUP_CJSON cJSON *got = NULL;
	struct rv_err err = { 0 };
	kube_call(&op->k, "GET", path, NULL, NULL, &code, &got, &err);
	if (code == 404)
		return OP_CLAIM_ABSENT;
	if (code != 200)
		return OP_CLAIM_UNKNOWN;
	const char *owner = op_owner_uid(got);
	if (cJSON_GetObjectItem(cJSON_GetObjectItem(got, "metadata"), "deletionTimestamp"))
		snprintf(msg, size,
			 "the state claim %s is being deleted (owner uid %s): a new one once it is "
			 "gone",
			 name, owner[0] ? owner : "none");
	else if (strcmp(owner, op_str(job, "metadata", "uid")) != 0)
		snprintf(msg, size,
			 "the state claim %s belongs to another job (uid %s), not mounted: a new "
			 "one once it is gone",
			 name, owner[0] ? owner : "none");
	else
		return OP_CLAIM_OURS;
	return OP_CLAIM_BUSY;
}

static void op_delete(struct operator_state *op, const char *path, const char *what)
{
	long code = 0;
	RV_CLEANUP_CJSON cJSON *out = NULL;
	struct rv_err err = { 0 };
	kube_call(&op->k, "DELETE", path, NULL, NULL, &code, &out, &err);
	if (code != 200 && code != 202 && code != 404)
		rv_log_warn("could not delete", "what=%s path=%s code=%ld", what, path, code);
}

/* An Event about the job (as `kubectl describe ej` shows them). */
static void op_event(struct operator_state *op, const cJSON *job, const struct reconcile_out *out)
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

static void op_status(struct operator_state *op, const cJSON *job, const cJSON *status)
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

/* What the master pod needs before it is made (each a 409 when there): the
 * job's own service account and its binding, the state claim when op_claim
 * found none (false when it could not be made: one made meanwhile is not
 * known to be the job's, so no master this pass). */
static bool op_create_master_parts(struct operator_state *op, const cJSON *job, bool new_claim)
{
	const char *ns = op_str(job, "metadata", "namespace");
	char path[600];
	if (!op->cfg.master_service_account[0]) {
		RV_CLEANUP_CJSON cJSON *sa = operator_service_account(&op->cfg, job);
		snprintf(path, sizeof(path), "/api/v1/namespaces/%s/serviceaccounts", ns);
		op_create(op, path, sa, "service account");
		RV_CLEANUP_CJSON cJSON *rb = operator_role_binding(&op->cfg, job);
		snprintf(path, sizeof(path),
			 "/apis/rbac.authorization.k8s.io/v1/namespaces/%s/rolebindings", ns);
		op_create(op, path, rb, "role binding");
	}
	if (!new_claim)
		return true;
	RV_CLEANUP_CJSON cJSON *pvc = operator_state_claim(&op->cfg, job);
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s/persistentvolumeclaims", ns);
	long code = op_create(op, path, pvc, "state volume");
	return code == 201 || code == 200;
}

/* Apply one job's decisions (new_claim: its state claim is to be made). */
static void op_apply(struct operator_state *op, const cJSON *job, const struct reconcile_out *out,
		     bool new_claim)
{
	const char *ns = op_str(job, "metadata", "namespace");
	const char *name = op_str(job, "metadata", "name");
	char path[600];
	if (out->create_service) {
		RV_CLEANUP_CJSON cJSON *svc = operator_service(&op->cfg, job);
		snprintf(path, sizeof(path), "/api/v1/namespaces/%s/services", ns);
		op_create(op, path, svc, "service");
	}
	if (out->create_master && op_create_master_parts(op, job, new_claim)) {
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

/* The worker pods of job among every worker pod (label rover.dev/job), but
 * those of an earlier job of the same name (another owner uid). */
static cJSON *op_workers_of(const cJSON *workers, const cJSON *job)
{
	const char *ns = op_str(job, "metadata", "namespace");
	const char *name = op_str(job, "metadata", "name");
	const char *uid = op_str(job, "metadata", "uid");
	cJSON *arr = cJSON_CreateArray();
	const cJSON *p;
	cJSON_ArrayForEach(p, workers)
	{
		const cJSON *labels =
			cJSON_GetObjectItem(cJSON_GetObjectItem(p, "metadata"), "labels");
		const char *j = cJSON_GetStringValue(cJSON_GetObjectItem(labels, "rover.dev/job"));
		const char *u =
			cJSON_GetStringValue(cJSON_GetObjectItem(labels, OPERATOR_LABEL_OWNER_UID));
		if (j && !strcmp(j, name) && !strcmp(op_str(p, "metadata", "namespace"), ns) &&
		    (!u || !strcmp(u, uid)))
			cJSON_AddItemReferenceToArray(arr, (cJSON *)p);
	}
	return arr;
}

/* true when the job a worker pod names (by uid, else by name for a pod
 * made before the uid label) is among jobs. */
static bool op_owner_here(const cJSON *jobs, const char *ns, const char *owner, const char *uid)
{
	char key[400];
	snprintf(key, sizeof(key), "%s/%s", ns, owner);
	const cJSON *job = cJSON_GetObjectItem(jobs, key);
	if (uid && job)
		return strcmp(op_str(job, "metadata", "uid"), uid) == 0;
	return job != NULL;
}

/* Worker pods made for a job of ours that is gone (deleted while they ran:
 * they name no owner the garbage collector knows), by the job's uid: a job
 * made again under the same name keeps its own pods and loses the old. */
static void op_sweep(struct operator_state *op, const cJSON *jobs, const cJSON *workers)
{
	const cJSON *p;
	cJSON_ArrayForEach(p, workers)
	{
		const cJSON *md = cJSON_GetObjectItem(p, "metadata");
		const cJSON *labels = cJSON_GetObjectItem(md, "labels");
		const char *owner =
			cJSON_GetStringValue(cJSON_GetObjectItem(labels, OPERATOR_LABEL_OWNER));
		const char *uid =
			cJSON_GetStringValue(cJSON_GetObjectItem(labels, OPERATOR_LABEL_OWNER_UID));
		const char *ns = op_str(p, "metadata", "namespace");
		char path[600];
		if (!owner || cJSON_GetObjectItem(md, "deletionTimestamp"))
			continue;
		if (op_owner_here(jobs, ns, owner, uid))
			continue;
		snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s", ns,
			 op_str(p, "metadata", "name"));
		rv_log_info("deleting a worker pod of a job that is gone", "pod=%s/%s job=%s", ns,
			    op_str(p, "metadata", "name"), owner);
		op_delete(op, path, "worker pod");
	}
}

/* The master's newest plan into *pl, asked of its API (a short timeout,
 * no retry) at most every master.poll_ms per job: true when asked and
 * answered. */
static bool op_master_plan(struct operator_state *op, const cJSON *job, const char *key,
			   struct rv_plan_state *pl)
{
	if (op->cfg.master_poll_ms <= 0 || strcmp(op_str(job, "status", "phase"), "Running") != 0)
		return false;
	if (!op->polled)
		op->polled = cJSON_CreateObject();
	int64_t now = rv_mono_ms();
	const cJSON *at = cJSON_GetObjectItem(op->polled, key);
	if (cJSON_IsNumber(at) && now - (int64_t)at->valuedouble < op->cfg.master_poll_ms)
		return false;
	cJSON_DeleteItemFromObjectCaseSensitive(op->polled, key);
	cJSON_AddNumberToObject(op->polled, key, (double)now);
	char url[400];
	const char *ns = op_str(job, "metadata", "namespace");
	if (op->cfg.master_addr_host[0])
		snprintf(url, sizeof(url), "http://%s:%lld", op->cfg.master_addr_host,
			 op->cfg.master_port);
	else
		snprintf(url, sizeof(url), "http://%s%s.%s.svc:%lld",
			 op_str(job, "metadata", "name"), RECONCILE_MASTER_SUFFIX, ns,
			 op->cfg.master_port);
	struct rv_master_opts mo = {
		.url = url, .connect_timeout_ms = 1000, .timeout_ms = 2000, .max_attempts = 1
	};
	struct rv_err err = { 0 };
	struct rv_master_client *mc = rv_master_client_new(&mo, &err);
	struct rv_job_status *js = calloc(1, sizeof(*js));
	bool ok = mc && js && rv_master_job(mc, js, &err) == 0 && js->has_plan;
	if (ok)
		*pl = js->plan;
	else if (mc && js)
		rv_log_debug("could not ask the master for its plan", "job=%s reason=%s", key,
			     err.msg);
	free(js);
	rv_master_client_free(mc);
	return ok;
}

/* Forget when the masters of jobs that are gone were asked. */
static void op_prune_polled(struct operator_state *op, const cJSON *jobs)
{
	int n = 0;
	for (cJSON *e = op->polled ? op->polled->child : NULL, *next; e; e = next) {
		next = e->next;
		if (cJSON_GetObjectItem(jobs, e->string))
			n++;
		else
			cJSON_Delete(cJSON_DetachItemViaPointer(op->polled, e));
	}
	op->polled_n = n;
}

/* Decide for one job: a master pod of another uid (an earlier job of the
 * same name, going) is not the job's; a master is made only on a state
 * claim of the job's own (true: that claim is still to be made).  msg
 * holds in->busy_msg. */
static bool op_decide(struct operator_state *op, struct reconcile_in *in, struct reconcile_out *out,
		      char *msg, size_t size)
{
	const char *uid = op_str(in->job, "metadata", "uid");
	if (in->master && strcmp(op_owner_uid(in->master), uid) != 0) {
		snprintf(msg, size,
			 "the master pod %s belongs to another job (uid %s): a new one once it is "
			 "gone",
			 op_str(in->master, "metadata", "name"), op_owner_uid(in->master));
		in->master = NULL;
		in->busy_reason = "MasterPodBusy";
		in->busy_msg = msg;
	}
	reconcile_job(in, out);
	if (!out->create_master || op->cfg.master_state_root[0])
		return false;
	enum op_claim_seen c = op_claim(op, in->job, msg, size);
	if (c == OP_CLAIM_BUSY) {
		reconcile_out_release(out);
		in->busy_reason = "StateClaimBusy";
		in->busy_msg = msg;
		reconcile_job(in, out);
	} else if (c == OP_CLAIM_UNKNOWN) {
		out->create_master = false; /* the next pass asks again */
	}
	return c == OP_CLAIM_ABSENT;
}

void operator_pass(struct operator_state *op)
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
		RV_CLEANUP_CJSON cJSON *mine = op_workers_of(workers, job);
		struct reconcile_in in = {
			.job = job,
			.master = cJSON_GetObjectItem(masters, key),
			.service = cJSON_GetObjectItem(services, key) != NULL,
			.workers = mine,
			.max_restarts = (int)op->cfg.master_max_restarts,
			.now = now,
		};
		struct rv_plan_state plan;
		char jkey[400];
		snprintf(jkey, sizeof(jkey), "%s/%s", ns, name);
		if (op_master_plan(op, job, jkey, &plan))
			in.plan = &plan;
		struct reconcile_out out;
		char busy[600]; /* in.busy_msg */
		bool new_claim = op_decide(op, &in, &out, busy, sizeof(busy));
		op_apply(op, job, &out, new_claim);
		reconcile_out_release(&out);
	}
	op_sweep(op, jobs, workers);
	op_prune_polled(op, jobs);
}
