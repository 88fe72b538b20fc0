/*
 * wire_job.c: the job spec (wire.h struct rv_job_spec: an ElasticJob,
 * Rover's or DLRover's) to and from JSON, and the enums it names.
 *
 * Each JSON object is its table (the bottom of the file), read and written
 * by wire_codec.c; metadata, spec and model are objects over the one flat
 * struct.  Hooks only for CPU and memory quantities, the pod template (kept
 * whole, sizing the replica), replica specs keyed by role, labels, and the
 * rules across fields (min <= replicas <= max, ps with its strategy, what a
 * stream refuses, names given twice).  The first bad field wins and names
 * itself; the output is released.  Unknown keys are ignored (newer
 * senders), except replica keys, which are role names and must be known.
 * to_json emits what from_json reads back to an equal struct.  Pure and
 * thread-safe.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "json.h"
#include "parse.h"
#include "wire_codec.h"

#define API_PREFIX       "elastic.rover.dev/"
#define API_VERSION      API_PREFIX "v1alpha1"
/* DLRover's ElasticJob: its fields mean what Rover's do. */
#define API_DLROVER      "elastic.iml.github.io/v1alpha1"
#define MAX_ARG_LEN      4096
#define MAX_RESTARTS     1000
#define DEFAULT_RESTARTS 3
#define MAX_BATCH        (1 << 30)
/* ---- enum names ---- */

static const char *const strategy_names[] = {
	[RV_STRATEGY_ALLREDUCE] = "AllreduceStrategy",
	[RV_STRATEGY_PS] = "ParameterServerStrategy",
};

const char *rv_strategy_name(enum rv_strategy s)
{
	return rv_wire_name_of(strategy_names, (int)RV_ARRAY_SIZE(strategy_names), (int)s);
}

int rv_strategy_parse(const char *s)
{
	return rv_wire_parse_of(strategy_names, (int)RV_ARRAY_SIZE(strategy_names), s);
}

const char *rv_optimize_mode_name(enum rv_optimize_mode m)
{
	return rv_wire_name_of(rv_wire_optimize_names, RV_ARRAY_SIZE(rv_wire_optimize_names),
			       (int)m);
}

int rv_optimize_mode_parse(const char *s)
{
	return rv_wire_parse_of(rv_wire_optimize_names, RV_ARRAY_SIZE(rv_wire_optimize_names), s);
}

const char *rv_role_name(enum rv_role r)
{
	return rv_wire_name_of(rv_wire_role_names, RV_ARRAY_SIZE(rv_wire_role_names), (int)r);
}

int rv_role_parse(const char *s)
{
	return rv_wire_parse_of(rv_wire_role_names, RV_ARRAY_SIZE(rv_wire_role_names), s);
}

/* ---- job spec: quantities ---- */

/* cpu: a number of cores, or a Kubernetes quantity string ("500m", "4", "1.5"). */
static int get_cpu(const cJSON *res, const char *path, double *out, struct rv_err *err)
{
	rv_wire_path f;
	rv_json_path(f, sizeof(f), path, "cpu");
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(res, "cpu");
	if (!it || cJSON_IsNull(it))
		return rv_err_set(err, -EINVAL, f, "%s is required", f);
	double v;
	if (cJSON_IsNumber(it)) {
		v = it->valuedouble;
		if (!isfinite(v))
			return rv_err_set(err, -EINVAL, f, "%s must be a finite number", f);
	} else if (cJSON_IsString(it)) {
		char buf[64];
		size_t n = strlen(it->valuestring);
		if (n == 0 || n >= sizeof(buf))
			return rv_err_set(err, -EINVAL, f,
					  "%s must be a number of cores like \"4\" or \"500m\"", f);
		memcpy(buf, it->valuestring, n + 1);
		/* Divide rather than multiply by 1e-3: 1500/1000 is exactly 1.5. */
		double div = 1.0;
		if (buf[n - 1] == 'm') {
			buf[n - 1] = '\0';
			div = 1000.0;
		}
		/* rv_parse_double alone would take " 4", "0x4" and "4e2"; a quantity
		 * is digits with an optional fraction. */
		bool digits = buf[0] != '\0';
		for (char *c = buf; *c; c++)
			if (!((*c >= '0' && *c <= '9') || *c == '.'))
				digits = false;
		if (!digits || rv_parse_double(buf, 0, 1e15, &v) < 0)
			return rv_err_set(err, -EINVAL, f,
					  "%s must be a number of cores like \"4\" or \"500m\"", f);
		v /= div;
	} else {
		return rv_err_set(err, -EINVAL, f, "%s must be a number or a string", f);
	}
	if (!(v > 0) || v > RV_MAX_CPU)
		return rv_err_set(err, -EINVAL, f, "%s must be greater than 0 and at most %g cores",
				  f, RV_MAX_CPU);
	*out = v;
	return 1;
}

/* memory: a Kubernetes quantity string ("8Gi") or a number of bytes. */
static int get_memory(const cJSON *res, const char *path, int64_t *out, struct rv_err *err)
{
	rv_wire_path f;
	rv_json_path(f, sizeof(f), path, "memory");
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(res, "memory");
	if (!it || cJSON_IsNull(it))
		return rv_err_set(err, -EINVAL, f, "%s is required", f);
	int64_t mb;
	if (cJSON_IsNumber(it)) {
		double b = it->valuedouble;
		if (!isfinite(b) || b < 0)
			return rv_err_set(err, -EINVAL, f,
					  "%s must be a non-negative number of bytes", f);
		double m = ceil(b / (1024.0 * 1024.0));
		if (m > (double)RV_MAX_MEMORY_MB)
			m = (double)RV_MAX_MEMORY_MB + 1; /* reported below */
		mb = (int64_t)m;
	} else if (cJSON_IsString(it)) {
		/* strtod underneath would also take " 8Gi" and "0x10Gi". */
		const char *s = it->valuestring;
		bool shape = strlen(s) <= 64 && ((s[0] >= '0' && s[0] <= '9') || s[0] == '.') &&
			     !strpbrk(s, "xX \t\r\n");
		int rc = shape ? rv_parse_memory_mb(s, &mb) : -EINVAL;
		if (rc == -ERANGE)
			mb = RV_MAX_MEMORY_MB + 1;
		else if (rc < 0)
			return rv_err_set(err, -EINVAL, f,
					  "%s must be a quantity like \"512Mi\" or \"8Gi\"", f);
	} else {
		return rv_err_set(err, -EINVAL, f, "%s must be a string or a number", f);
	}
	if (mb <= 0 || mb > RV_MAX_MEMORY_MB)
		return rv_err_set(err, -EINVAL, f, "%s must be greater than 0 and at most %lld MiB",
				  f, (long long)RV_MAX_MEMORY_MB);
	*out = mb;
	return 1;
}

/* Whole MiB as the largest exact binary unit: 8192 -> "8Gi", 1536 -> "1536Mi". */
static void format_memory(char *buf, size_t size, int64_t mb)
{
	if (mb > 0 && mb % (1024 * 1024) == 0)
		snprintf(buf, size, "%" PRId64 "Ti", mb / (1024 * 1024));
	else if (mb > 0 && mb % 1024 == 0)
		snprintf(buf, size, "%" PRId64 "Gi", mb / 1024);
	else
		snprintf(buf, size, "%" PRId64 "Mi", mb);
}

/* One container's cpu or memory (key): its request, else its limit, as
 * Kubernetes defaults a request to the limit.  Adds it to *cpu or *mb;
 * returns 1 when given, 0 when not, or -EINVAL naming the field. */
static int container_quantity(const cJSON *res, const char *path, const char *key, double *cpu,
			      int64_t *mb, struct rv_err *err)
{
	static const char *const from[] = { "requests", "limits" };
	for (size_t i = 0; i < RV_ARRAY_SIZE(from); i++) {
		int rc;
		rv_wire_path p;
		rv_json_path(p, sizeof(p), path, from[i]);
		const cJSON *q = rv_json_get_object(res, from[i], path, false, &rc, err);
		if (rc < 0)
			return rc;
		if (!q || !cJSON_GetObjectItemCaseSensitive(q, key))
			continue;
		double c = 0;
		int64_t m = 0;
		rc = *key == 'c' ? get_cpu(q, p, &c, err) : get_memory(q, p, &m, err);
		*cpu += c;
		*mb += m;
		return rc;
	}
	return 0;
}

/* template.spec.containers[*].resources, summed over the containers as the
 * pod's request is.  Both cpu and memory, or neither (the brain decides):
 * Rover sizes a node by both. */
static int template_resources(const cJSON *tmpl, const char *path, struct rv_replica_spec *r,
			      struct rv_err *err)
{
	int rc;
	rv_wire_path sp, cp;
	rv_json_path(sp, sizeof(sp), path, "spec");
	const cJSON *spec = rv_json_get_object(tmpl, "spec", path, false, &rc, err);
	if (!spec)
		return rc;
	const cJSON *cs = rv_json_get_array(spec, "containers", sp, false, &rc, err);
	if (!cs)
		return rc;
	rv_json_path(cp, sizeof(cp), sp, "containers");
	double cpu = 0;
	int64_t mb = 0;
	int ncpu = 0, nmem = 0, i = 0;
	for (const cJSON *c = cs->child; c; c = c->next, i++) {
		rv_wire_path ci, rp;
		rv_json_path_index(ci, sizeof(ci), cp, i);
		if (!cJSON_IsObject(c))
			return rv_err_set(err, -EINVAL, ci, "%s must be an object", ci);
		const cJSON *res = rv_json_get_object(c, "resources", ci, false, &rc, err);
		if (!res) {
			if (rc < 0)
				return rc;
			continue;
		}
		rv_json_path(rp, sizeof(rp), ci, "resources");
		if ((rc = container_quantity(res, rp, "cpu", &cpu, &mb, err)) < 0)
			return rc;
		ncpu += rc;
		if ((rc = container_quantity(res, rp, "memory", &cpu, &mb, err)) < 0)
			return rc;
		nmem += rc;
	}
	if (ncpu == 0 && nmem == 0)
		return 0;
	if (ncpu == 0 || nmem == 0)
		return rv_err_set(err, -EINVAL, cp,
				  "%s give %s but no %s: Rover sizes a node by both", cp,
				  ncpu ? "cpu" : "memory", ncpu ? "memory" : "cpu");
	if (cpu > RV_MAX_CPU || mb > RV_MAX_MEMORY_MB)
		return rv_err_set(err, -EINVAL, cp, "%s ask for more than a node can have", cp);
	r->has_resources = true;
	r->resource.cpu = cpu;
	r->resource.memory_mb = mb;
	return 1;
}

/* ---- hooks: quantities and the rules across fields ---- */

#define REQ          RV_WIRE_REQ
/* The member row f describes, in m. */
#define MEMBER(m, f) ((void *)((char *)(m) + (f)->off))

static int cpu_parse(const cJSON *o, const char *path, const struct rv_wire_field *f, void *m,
		     struct rv_err *err)
{
	return get_cpu(o, path, MEMBER(m, f), err);
}

static int memory_parse(const cJSON *o, const char *path, const struct rv_wire_field *f, void *m,
			struct rv_err *err)
{
	return get_memory(o, path, MEMBER(m, f), err);
}

static bool memory_emit(cJSON *o, const struct rv_wire_field *f, const void *m)
{
	char mem[32];
	format_memory(mem, sizeof(mem), *(const int64_t *)((const char *)m + f->off));
	return rv_wire_add_str(o, f->name, mem);
}

/* replicaSpecs.<role>.template: a Kubernetes PodTemplateSpec, kept whole
 * (the k8s backend makes its pods from it).  Its containers' resources size
 * the replica unless the replica's own "resources" does (read before it). */
static int template_parse(const cJSON *o, const char *path, const struct rv_wire_field *f, void *m,
			  struct rv_err *err)
{
	struct rv_replica_spec *r = m;
	int rc;
	rv_wire_path p;
	const cJSON *t = rv_json_get_object(o, f->name, path, false, &rc, err);
	if (!t)
		return rc;
	rv_json_path(p, sizeof(p), path, f->name);
	r->template_json = cJSON_PrintUnformatted(t);
	if (!r->template_json)
		return rv_err_set(err, -ENOMEM, p, "could not allocate %s", p);
	if (strlen(r->template_json) > RV_MAX_TEMPLATE)
		return rv_err_set(err, -EINVAL, p, "%s must be at most %d bytes of JSON", p,
				  RV_MAX_TEMPLATE);
	if (r->has_resources)
		return 1;
	return template_resources(t, p, r, err);
}

static bool template_emit(cJSON *o, const struct rv_wire_field *f, const void *m)
{
	const struct rv_replica_spec *r = m;
	if (!r->template_json)
		return true;
	cJSON *t = cJSON_Parse(r->template_json);
	if (t && cJSON_AddItemToObject(o, f->name, t))
		return true;
	cJSON_Delete(t);
	return false;
}

/* "command": argv, NULL-terminated so it can go straight to execvp. */
static int command_parse(const cJSON *o, const char *path, const struct rv_wire_field *f, void *m,
			 struct rv_err *err)
{
	struct rv_replica_spec *r = m;
	rv_wire_path p;
	int rc;
	const cJSON *arr = rv_json_get_array(o, f->name, path, false, &rc, err);
	if (!arr)
		return rc;
	rv_json_path(p, sizeof(p), path, f->name);
	int n = rv_wire_count(arr, (int)f->max);
	if (n > f->max)
		return rv_err_set(err, -EINVAL, p, "%s must have at most %d entries", p,
				  (int)f->max);
	if (n == 0)
		return 1;
	r->command = calloc((size_t)n + 1, sizeof(char *));
	if (!r->command)
		return rv_err_set(err, -ENOMEM, p, "could not allocate %s", p);
	int i = 0;
	for (const cJSON *it = arr->child; it; it = it->next, i++) {
		rv_wire_path pi;
		rv_json_path_index(pi, sizeof(pi), p, i);
		if (!cJSON_IsString(it))
			return rv_err_set(err, -EINVAL, pi, "%s must be a string", pi);
		if (strlen(it->valuestring) > MAX_ARG_LEN)
			return rv_err_set(err, -EINVAL, pi, "%s must be at most %d characters", pi,
					  MAX_ARG_LEN);
		r->command[i] = strdup(it->valuestring);
		if (!r->command[i])
			return rv_err_set(err, -ENOMEM, pi, "could not allocate %s", pi);
		r->ncommand = i + 1;
	}
	return 1;
}

static bool command_emit(cJSON *o, const struct rv_wire_field *f, const void *m)
{
	const struct rv_replica_spec *r = m;
	if (r->ncommand <= 0)
		return true;
	cJSON *cmd = cJSON_AddArrayToObject(o, f->name);
	bool ok = cmd != NULL;
	for (int i = 0; ok && i < r->ncommand; i++) {
		cJSON *s = cJSON_CreateString(r->command[i]);
		ok = s && cJSON_AddItemToArray(cmd, s);
		if (!ok)
			cJSON_Delete(s);
	}
	return ok;
}

static int handover_parse(const cJSON *o, const char *path, const struct rv_wire_field *f, void *m,
			  struct rv_err *err)
{
	struct rv_replica_spec *r = m;
	char v[32];
	int rc = rv_json_get_string(o, f->name, path, false, v, sizeof(v), err);
	if (rc <= 0)
		return rc;
	r->state_handover = !strcmp(v, "flashCheckpoint");
	if (!r->state_handover && strcmp(v, "none") != 0) {
		rv_wire_path p;
		rv_json_path(p, sizeof(p), path, f->name);
		return rv_err_set(err, -EINVAL, p, "%s must be \"none\" or \"flashCheckpoint\"", p);
	}
	return 1;
}

static bool handover_emit(cJSON *o, const struct rv_wire_field *f, const void *m)
{
	return !((const struct rv_replica_spec *)m)->state_handover ||
	       rv_wire_add_str(o, f->name, "flashCheckpoint");
}

static int priority_parse(const cJSON *o, const char *path, const struct rv_wire_field *f, void *m,
			  struct rv_err *err)
{
	const char *v = MEMBER(m, f);
	int rc = rv_wire_decode_row(o, path, f, m, err);
	if (rc == 1 && strcmp(v, "high") != 0 && strcmp(v, "low") != 0) {
		rv_wire_path p;
		rv_json_path(p, sizeof(p), path, f->name);
		return rv_err_set(err, -EINVAL, p, "%s must be \"high\" or \"low\"", p);
	}
	return rc;
}

/* minReplicas and maxReplicas: replicas when absent; once both are read,
 * min <= replicas <= max. */
static int range_parse(const cJSON *o, const char *path, const struct rv_wire_field *f, void *m,
		       struct rv_err *err)
{
	struct rv_replica_spec *r = m;
	rv_wire_path p;
	*(int *)MEMBER(m, f) = r->replicas;
	int rc = rv_wire_decode_row(o, path, f, m, err);
	if (rc < 0 || f->off != offsetof(struct rv_replica_spec, max_replicas))
		return rc;
	if (r->min_replicas > r->replicas)
		return rv_err_set(err, -EINVAL, rv_json_path(p, sizeof(p), path, "minReplicas"),
				  "%s (%d) must not exceed replicas (%d)", p, r->min_replicas,
				  r->replicas);
	if (r->max_replicas < r->replicas)
		return rv_err_set(err, -EINVAL, rv_json_path(p, sizeof(p), path, "maxReplicas"),
				  "%s (%d) must be at least replicas (%d)", p, r->max_replicas,
				  r->replicas);
	return rc;
}

/* replicaSpecs: ReplicaSpecs keyed by role; worker always, ps with the
 * ParameterServerStrategy only (read before). */
static int replicas_parse(const cJSON *o, const char *path, const struct rv_wire_field *f, void *m,
			  struct rv_err *err)
{
	struct rv_job_spec *out = m;
	rv_wire_path at, p;
	int rc;
	const cJSON *specs = rv_json_get_object(o, f->name, path, true, &rc, err);
	if (!specs)
		return rc;
	rv_json_path(at, sizeof(at), path, f->name);
	/* DLRover's template for its own master pod ("dlrover-master") is
	 * passed over: the master here is started by whoever runs the job, not
	 * by this spec. */
	if ((rc = rv_wire_decode_role_map(&rv_wire_replica_spec_msg, specs, at, out->replicas,
					  offsetof(struct rv_replica_spec, present), "replica type",
					  "dlrover-master", err)) < 0)
		return rc;
	if (!out->replicas[RV_ROLE_WORKER].present)
		return rv_err_set(err, -EINVAL, rv_json_path(p, sizeof(p), at, "worker"),
				  "%s is required", p);
	bool ps = out->strategy == RV_STRATEGY_PS;
	rv_json_path(p, sizeof(p), at, "ps");
	if (ps && !out->replicas[RV_ROLE_PS].present)
		return rv_err_set(err, -EINVAL, p, "%s is required for ParameterServerStrategy", p);
	if (!ps && out->replicas[RV_ROLE_PS].present)
		return rv_err_set(err, -EINVAL, p,
				  "%s is only allowed with ParameterServerStrategy", p);
	return 1;
}

static bool replicas_emit(cJSON *o, const struct rv_wire_field *f, const void *m)
{
	const struct rv_job_spec *spec = m;
	return rv_wire_encode_role_map(&rv_wire_replica_spec_msg, o, f->name, spec->replicas,
				       offsetof(struct rv_replica_spec, present));
}

/* Label keys are identifiers (Kubernetes label keys); values are data and
 * kept verbatim whatever they hold. */
static bool label_key_ok(const char *key, size_t max)
{
	size_t n = strlen(key);
	bool ok = n > 0 && n <= max;
	for (size_t i = 0; ok && i < n; i++)
		ok = (key[i] >= 'a' && key[i] <= 'z') || (key[i] >= 'A' && key[i] <= 'Z') ||
		     (key[i] >= '0' && key[i] <= '9') || strchr("._-/", key[i]);
	return ok;
}

/* metadata.labels: at most RV_MAX_LABELS strings; labels.user is the user. */
static int labels_parse(const cJSON *o, const char *path, const struct rv_wire_field *f, void *m,
			struct rv_err *err)
{
	struct rv_job_spec *out = m;
	rv_wire_path at, p;
	int rc;
	const cJSON *labels = rv_json_get_object(o, f->name, path, false, &rc, err);
	if (!labels)
		return rc;
	rv_json_path(at, sizeof(at), path, f->name);
	if (rv_wire_count(labels, RV_MAX_LABELS) > RV_MAX_LABELS)
		return rv_err_set(err, -EINVAL, at, "%s must have at most %d entries", at,
				  RV_MAX_LABELS);
	for (const cJSON *it = labels->child; it; it = it->next) {
		struct rv_label *l = &out->labels[out->nlabels];
		const char *key = it->string ? it->string : "";
		rv_json_path(p, sizeof(p), at, key);
		if (!label_key_ok(key, sizeof(l->key) - 1))
			return rv_err_set(err, -EINVAL, at,
					  "%s keys must be 1 to %zu characters of "
					  "letters, digits, '.', '_', '-' and '/'",
					  at, sizeof(l->key) - 1);
		for (int j = 0; j < out->nlabels; j++)
			if (strcmp(out->labels[j].key, key) == 0)
				return rv_err_set(err, -EINVAL, p, "%s is given twice", p);
		if ((rc = rv_json_get_string(labels, key, at, true, l->value, sizeof(l->value),
					     err)) < 0)
			return rc;
		snprintf(l->key, sizeof(l->key), "%s", key);
		if (strcmp(key, "user") == 0)
			snprintf(out->user, sizeof(out->user), "%s", l->value);
		out->nlabels++;
	}
	return 1;
}

static bool labels_emit(cJSON *o, const struct rv_wire_field *f, const void *m)
{
	const struct rv_job_spec *spec = m;
	cJSON *labels = cJSON_AddObjectToObject(o, f->name);
	bool ok = labels != NULL, user_label = false;
	for (int i = 0; ok && i < spec->nlabels; i++) {
		ok = rv_wire_add_str(labels, spec->labels[i].key, spec->labels[i].value);
		user_label |= strcmp(spec->labels[i].key, "user") == 0;
	}
	/* user comes from labels.user; keep it when a caller set only the field. */
	return ok && (user_label || !spec->user[0] || rv_wire_add_str(labels, "user", spec->user));
}

/* metadata.name and namespace: DNS labels, read through a bigger buffer so
 * an over-long one gets the DNS rule's message rather than the buffer's;
 * an absent namespace is "default". */
static int dns_parse(const cJSON *o, const char *path, const struct rv_wire_field *f, void *m,
		     struct rv_err *err)
{
	char buf[128] = "default";
	rv_wire_path p;
	int rc = rv_json_get_string(o, f->name, path, f->required, buf, sizeof(buf), err);
	if (rc < 0 || (rc == 0 && f->required))
		return rc;
	if ((rc = rv_wire_check_dns_label(buf, rv_json_path(p, sizeof(p), path, f->name), err)) < 0)
		return rc;
	snprintf(MEMBER(m, f), f->size, "%s", buf);
	return 1;
}

static bool namespace_emit(cJSON *o, const struct rv_wire_field *f, const void *m)
{
	const char *ns = (const char *)m + f->off;
	return rv_wire_add_str(o, f->name, ns[0] ? ns : "default");
}

static int api_version_parse(const cJSON *o, const char *path, const struct rv_wire_field *f,
			     void *m, struct rv_err *err)
{
	(void)m;
	char buf[128];
	int rc = rv_json_get_string(o, f->name, path, false, buf, sizeof(buf), err);
	if (rc == 1 && strcmp(buf, API_DLROVER) != 0 &&
	    (strncmp(buf, API_PREFIX, strlen(API_PREFIX)) != 0 ||
	     strlen(buf) == strlen(API_PREFIX)))
		return rv_err_set(err, -EINVAL, "apiVersion",
				  "apiVersion must start with \"" API_PREFIX
				  "\" (or be DLRover's \"" API_DLROVER "\")");
	return rc;
}

static bool api_version_emit(cJSON *o, const struct rv_wire_field *f, const void *m)
{
	(void)m;
	return rv_wire_add_str(o, f->name, API_VERSION);
}

static int kind_parse(const cJSON *o, const char *path, const struct rv_wire_field *f, void *m,
		      struct rv_err *err)
{
	(void)m;
	char buf[128];
	int rc = rv_json_get_string(o, f->name, path, true, buf, sizeof(buf), err);
	if (rc == 1 && strcmp(buf, f->enums) != 0)
		return rv_err_set(err, -EINVAL, "kind", "kind must be \"%s\"", f->enums);
	return rc;
}

static bool kind_emit(cJSON *o, const struct rv_wire_field *f, const void *m)
{
	(void)m;
	return rv_wire_add_str(o, f->name, f->enums);
}

static int strategy_parse(const cJSON *o, const char *path, const struct rv_wire_field *f, void *m,
			  struct rv_err *err)
{
	return rv_wire_get_enum(o, f->name, path, f->required, f->names, f->nnames,
				"AllreduceStrategy or ParameterServerStrategy", MEMBER(m, f), err);
}

static int brain_parse(const cJSON *o, const char *path, const struct rv_wire_field *f, void *m,
		       struct rv_err *err)
{
	const char *u = MEMBER(m, f);
	int rc = rv_wire_decode_row(o, path, f, m, err);
	if (rc != 1)
		return rc;
	bool ok = strncmp(u, "http://", 7) == 0 || strncmp(u, "https://", 8) == 0;
	for (const char *c = u; ok && *c; c++)
		ok = (unsigned char)*c > ' ' && *c != 0x7f;
	if (!ok || strlen(u) <= 8) {
		rv_wire_path p;
		rv_json_path(p, sizeof(p), path, f->name);
		return rv_err_set(err, -EINVAL, p, "%s must be an http:// or https:// url", p);
	}
	return rc;
}

/* Items of arr (at path at) into base, each a msg whose first row is its
 * "name" and whose first member holds it: a name given twice is refused
 * once read, before the item's other fields, as an item is read in order. */
static int decode_unique(const struct rv_wire_message *msg, const cJSON *arr, const char *at,
			 void *base, int *count, struct rv_err *err)
{
	int i = 0, rc;
	for (const cJSON *it = arr->child; it; it = it->next, i++) {
		char *item = (char *)base + (size_t)i * msg->size;
		rv_wire_path p, f;
		rv_json_path_index(p, sizeof(p), at, i);
		if (!cJSON_IsObject(it))
			return rv_err_set(err, -EINVAL, p, "%s must be an object", p);
		if ((rc = rv_wire_decode_row(it, p, &msg->fields[0], item, err)) < 0)
			return rc;
		for (int j = 0; j < i; j++)
			if (strcmp((char *)base + (size_t)j * msg->size, item) == 0)
				return rv_err_set(err, -EINVAL,
						  rv_json_path(f, sizeof(f), p, "name"),
						  "%s \"%s\" is given twice", f, item);
		if ((rc = rv_wire_decode_fields(msg, it, p, item, err)) < 0)
			return rc;
		*count = i + 1;
	}
	return 1;
}

static int datasets_parse(const cJSON *o, const char *path, const struct rv_wire_field *f, void *m,
			  struct rv_err *err)
{
	struct rv_job_spec *out = m;
	rv_wire_path at;
	int rc;
	const cJSON *arr = rv_json_get_array(o, f->name, path, false, &rc, err);
	if (!arr)
		return rc;
	rv_json_path(at, sizeof(at), path, f->name);
	if (rv_wire_count(arr, (int)f->max) > f->max)
		return rv_err_set(err, -EINVAL, at, "%s must have at most %d entries", at,
				  (int)f->max);
	return decode_unique(f->elem, arr, at, out->datasets, &out->ndatasets, err);
}

/* spec.datasets[i].partitions: required of a streaming dataset (its
 * "streaming" read before), refused of another. */
static int partitions_parse(const cJSON *o, const char *path, const struct rv_wire_field *f,
			    void *m, struct rv_err *err)
{
	struct rv_dataset *d = m;
	rv_wire_path at;
	int rc;
	const cJSON *arr = rv_json_get_array(o, f->name, path, d->streaming, &rc, err);
	if (!arr)
		return rc;
	rv_json_path(at, sizeof(at), path, f->name);
	if (!d->streaming)
		return rv_err_set(err, -EINVAL, at, "%s needs \"streaming\": true", at);
	int n = rv_wire_count(arr, (int)f->max);
	if (n < 1 || n > f->max)
		return rv_err_set(err, -EINVAL, at, "%s must have 1 to %d entries", at,
				  (int)f->max);
	return decode_unique(f->elem, arr, at, d->partitions, &d->npartitions, err);
}

static bool partitions_emit(cJSON *o, const struct rv_wire_field *f, const void *m)
{
	return !((const struct rv_dataset *)m)->streaming || rv_wire_encode_row(o, f, m);
}

static int partition_check(const cJSON *o, const char *path, void *m, struct rv_err *err)
{
	(void)o;
	const struct rv_partition *pt = m;
	rv_wire_path p;
	if (pt->end_offset >= 0 && pt->end_offset < pt->start_offset)
		return rv_err_set(err, -EINVAL, rv_json_path(p, sizeof(p), path, "end_offset"),
				  "%s must not be below start_offset", p);
	return 0;
}

/* A dataset's size is required unless it is streaming; its "streaming"
 * is read here, before the rows it rules (and again in its own row). */
static int size_parse(const cJSON *o, const char *path, const struct rv_wire_field *f, void *m,
		      struct rv_err *err)
{
	struct rv_dataset *d = m;
	struct rv_wire_field row = *f;
	int rc = rv_json_get_bool(o, "streaming", path, false, &d->streaming, err);
	if (rc < 0)
		return rc;
	row.flags |= d->streaming ? 0 : RV_WIRE_REQ;
	return rv_wire_decode_row(o, path, &row, m, err);
}

/* A stream is read once, in offset order: one epoch, no shuffle. */
static int epochs_parse(const cJSON *o, const char *path, const struct rv_wire_field *f, void *m,
			struct rv_err *err)
{
	struct rv_wire_field row = *f;
	if (((struct rv_dataset *)m)->streaming)
		row.max = 1;
	return rv_wire_decode_row(o, path, &row, m, err);
}

static int shuffle_parse(const cJSON *o, const char *path, const struct rv_wire_field *f, void *m,
			 struct rv_err *err)
{
	const struct rv_dataset *d = m;
	rv_wire_path p;
	int rc = rv_wire_decode_row(o, path, f, m, err);
	if (rc == 1 && d->streaming && d->shuffle)
		return rv_err_set(err, -EINVAL, rv_json_path(p, sizeof(p), path, f->name),
				  "%s must be false: a stream is read in offset order", p);
	return rc;
}

/* ---- the tables: one per JSON object, in the order written ---- */

/* A row of kind k read (and written, with e) by hooks, its documents'
 * type ty ("number|string" for a quantity). */
#define WAS(k, key, ty, mem, fl, p, e, desc)                                                       \
	{                                                                                          \
		RV_WIRE_DOC_(key, ty, fl, desc), .kind = (k), RV_WIRE_MEMBER_(mem), .parse = (p),  \
						 .emit = (e)                                       \
	}

#define T struct rv_resource
static const struct rv_wire_field f_resources[] = {
	WAS(RV_WIRE_NUMBER, "cpu", "number|string", cpu, REQ, cpu_parse, NULL,
	    "cores: 4, \"4\" or \"500m\""),
	WAS(RV_WIRE_INT, "memory", "string|integer", memory_mb, REQ, memory_parse, memory_emit,
	    "quantity (\"8Gi\") or bytes"),
	WINT("gpu", gpu, 0, 0, RV_MAX_GPU, "GPUs per node, default 0"),
};
const struct rv_wire_message rv_wire_resources_msg =
	RV_WIRE_MSG("Resources", "per-node resources requested", f_resources, NULL, NULL);
#undef T

#define T struct rv_replica_spec
static const struct rv_wire_field f_replica_spec[] = {
	WINTD("replicas", replicas, 0, 1, 0, RV_MAX_REPLICAS, "nodes to start with, default 1"),
	WINT("minReplicas", min_replicas, 0, 0, RV_MAX_REPLICAS,
	     "at most replicas; default replicas", .parse = range_parse),
	WINT("maxReplicas", max_replicas, 0, 0, RV_MAX_REPLICAS,
	     "at least replicas; default replicas", .parse = range_parse),
	WINTD("restartCount", restart_count, 0, DEFAULT_RESTARTS, 0, MAX_RESTARTS,
	      "restarts per node, default 3"),
	WSTR("priority", priority, RV_WIRE_OMIT, "scheduling priority", .enums = "high|low",
	     .parse = priority_parse),
	WHOOK("stateHandover", "string", 0, handover_parse, handover_emit,
	      "flashCheckpoint: a relaunched node reloads its state from its flash checkpoint on "
	      "the same machine, so a migrated PS keeps its partition; default none",
	      .enums = "none|flashCheckpoint"),
	WOBJ("resources", resource, has_resources, RV_WIRE_OMIT, &rv_wire_resources_msg,
	     "Resources", "per node; omitted: the brain decides"),
	WHOOK("template", "object", 0, template_parse, template_emit,
	      "a Kubernetes PodTemplateSpec; its containers' resources size the node when "
	      "resources is omitted"),
	WHOOK("command", "array", 0, command_parse, command_emit, "argv, at most 64 entries",
	      .ref = "string", .max = RV_MAX_COMMAND),
};
const struct rv_wire_message rv_wire_replica_spec_msg =
	RV_WIRE_MSG("ReplicaSpec", "one role's nodes", f_replica_spec, NULL, NULL);
#undef T

#define T struct rv_partition
static const struct rv_wire_field f_partition[] = {
	WNAME("name", name, REQ, "unique within the dataset"),
	WINT("start_offset", start_offset, 0, 0, RV_WIRE_MAX_OFFSET, "first offset, default 0"),
	WINTD("end_offset", end_offset, RV_WIRE_OMIT_NEG, -1, 0, RV_WIRE_MAX_OFFSET,
	      "offsets known available now end here; absent: unbounded"),
};
const struct rv_wire_message rv_wire_partition_msg =
	RV_WIRE_MSG("Partition", "a partition of a streaming dataset", f_partition, NULL,
		    partition_check);
#undef T

#define T struct rv_dataset
static const struct rv_wire_field f_dataset[] = {
	WNAME("name", name, REQ, "unique within the job"),
	WINT("size", size, 0, 0, INT64_MAX, "records; required for a dataset that is not streaming",
	     .parse = size_parse),
	WINT("shardSize", shard_size, REQ, 1, INT64_MAX, "records per shard, > 0"),
	WINTD("epochs", epochs, 0, 1, 1, RV_WIRE_MAX_EPOCHS, "default 1 (1 when streaming)",
	      .parse = epochs_parse),
	WBOOL("shuffle", shuffle, 0, "default false (false when streaming)",
	      .parse = shuffle_parse),
	WBOOL("streaming", streaming, RV_WIRE_OMIT,
	      "true (required for a dataset with partitions): shards are offset ranges of the "
	      "partitions (online learning)"),
	WARRAY("partitions", partitions, npartitions, 0, RV_MAX_PARTITIONS, &rv_wire_partition_msg,
	       "Partition",
	       "1..64 partitions; required for a streaming dataset, refused of another",
	       .parse = partitions_parse, .emit = partitions_emit),
};
const struct rv_wire_message rv_wire_dataset_msg =
	RV_WIRE_MSG("Dataset", "a dataset the job reads in shards", f_dataset, NULL, NULL);
#undef T

/* The rest are objects over struct rv_job_spec itself. */
#define T struct rv_job_spec
static const struct rv_wire_field f_model[] = {
	WINT("parameters", model_parameters, 0, 0, INT64_MAX, "parameter count, 0 = unknown"),
	WINT("batchSize", batch_size, 0, 0, MAX_BATCH, "per-worker batch, 0 = unknown"),
};
const struct rv_wire_message rv_wire_model_msg =
	RV_WIRE_MSG("Model", "model features", f_model, NULL, NULL);

static const struct rv_wire_field f_job_spec[] = {
	WENUM("distributionStrategy", strategy, REQ, strategy_names,
	      "AllreduceStrategy|ParameterServerStrategy", "how workers share the model",
	      .parse = strategy_parse),
	WENUM("optimizeMode", optimize_mode, RV_WIRE_DEF | RV_WIRE_GIVEN, rv_wire_optimize_names,
	      "manual|single-job|cluster", "who plans resources; default cluster",
	      .def = RV_OPT_CLUSTER, .count_off = offsetof(T, optimize_mode_given)),
	WSTR("brainService", brain_service, RV_WIRE_OMIT, "http:// or https:// URL of the brain",
	     .parse = brain_parse),
	WHOOK("replicaSpecs", "object", REQ, replicas_parse, replicas_emit,
	      "by role: worker (required), ps (ParameterServerStrategy only), chief, evaluator",
	      .ref = "ReplicaSpec", .map = true),
	WARRAY("datasets", datasets, ndatasets, RV_WIRE_OMIT | RV_WIRE_MAX_EINVAL, RV_MAX_DATASETS,
	       &rv_wire_dataset_msg, "Dataset", "at most 8 datasets", .parse = datasets_parse),
	WFLAT("model", 0, &rv_wire_model_msg, "Model", "model features the brain plans from"),
};
const struct rv_wire_message rv_wire_job_spec_msg =
	RV_WIRE_MSG("JobSpec", "what to run and within which limits", f_job_spec, NULL, NULL);

static const struct rv_wire_field f_job_metadata[] = {
	WSTR("name", name, REQ,
	     "DNS-1123 label: 1..63 of [a-z0-9-]; one running job per name in a namespace",
	     .parse = dns_parse),
	WSTR("namespace", namespace_, 0, "DNS-1123 label, default \"default\"", .parse = dns_parse,
	     .emit = namespace_emit),
	WHOOK("labels", "object", 0, labels_parse, labels_emit,
	      "at most 16 string labels; labels.user names the job's owner", .ref = "string",
	      .map = true),
};
const struct rv_wire_message rv_wire_job_metadata_msg =
	RV_WIRE_MSG("JobMetadata", "the job's name, namespace and labels", f_job_metadata, NULL,
		    NULL);

static const struct rv_wire_field f_elastic_job[] = {
	WHOOK("apiVersion", "string", 0, api_version_parse, api_version_emit,
	      "\"elastic.rover.dev/<version>\"; default elastic.rover.dev/v1alpha1"),
	WHOOK("kind", "string", REQ, kind_parse, kind_emit, "always ElasticJob",
	      .enums = "ElasticJob"),
	WFLAT("metadata", REQ, &rv_wire_job_metadata_msg, "JobMetadata", "name, namespace, labels"),
	WFLAT("spec", REQ, &rv_wire_job_spec_msg, "JobSpec", "what to run and within which limits"),
};
const struct rv_wire_message rv_wire_elastic_job_msg =
	RV_WIRE_MSG("ElasticJob", "a job spec, shaped like DLRover's ElasticJob resource",
		    f_elastic_job, "job spec", NULL);
#undef T

/* root is the whole document; on failure *out is released and zeroed. */
int rv_job_spec_from_json(const cJSON *root, struct rv_job_spec *out, struct rv_err *err)
{
	memset(out, 0, sizeof(*out));
	int rc = cJSON_IsObject(root)
			 ? rv_wire_decode_fields(&rv_wire_elastic_job_msg, root, "", out, err)
			 : rv_err_set(err, -EINVAL, "", "job spec must be a json object");
	if (rc < 0) {
		rv_job_spec_release(out);
		return rc;
	}
	return 0;
}

cJSON *rv_job_spec_to_json(const struct rv_job_spec *spec)
{
	return rv_wire_encode(&rv_wire_elastic_job_msg, spec);
}

/* The hooks own the command and the template: the codec frees neither. */
void rv_job_spec_release(struct rv_job_spec *spec)
{
	if (!spec)
		return;
	for (int r = 0; r < RV_ROLE_COUNT; r++) {
		struct rv_replica_spec *rs = &spec->replicas[r];
		if (rs->command)
			for (int i = 0; i < rs->ncommand; i++)
				free(rs->command[i]);
		free(rs->command);
		free(rs->template_json);
	}
	memset(spec, 0, sizeof(*spec));
}
