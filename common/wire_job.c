/*
 * wire_job.c: the job spec (wire.h struct rv_job_spec: an ElasticJob,
 * Rover's or DLRover's) to and from JSON, and the enums it names.
 *
 * Still read and written by its own code, not the codec: CPU and memory
 * quantities, the pod template, replica specs keyed by role.  Its tables
 * (RV_WIRE_DOC rows) describe it for the OpenAPI document and check_wire.
 * from_json validates every field through the json.c getters, so an error
 * always names the field; the first error wins and the output is released.
 * Unknown keys are ignored (newer senders), except replica keys, which are
 * role names and must be known.  to_json emits what from_json reads back to
 * an equal struct.  Pure and thread-safe.
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
#define MAX_EPOCHS       1000000
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

/* ---- job spec ---- */

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

static int parse_command(const cJSON *rs, const char *path, struct rv_replica_spec *r,
			 struct rv_err *err)
{
	rv_wire_path f;
	int rc;
	const cJSON *arr = rv_json_get_array(rs, "command", path, false, &rc, err);
	if (!arr)
		return rc;
	rv_json_path(f, sizeof(f), path, "command");
	int n = rv_wire_count(arr, RV_MAX_COMMAND);
	if (n > RV_MAX_COMMAND)
		return rv_err_set(err, -EINVAL, f, "%s must have at most %d entries", f,
				  RV_MAX_COMMAND);
	if (n == 0)
		return 1;
	/* NULL-terminated so it can go straight to execvp. */
	r->command = calloc((size_t)n + 1, sizeof(char *));
	if (!r->command)
		return rv_err_set(err, -ENOMEM, f, "could not allocate %s", f);
	int i = 0;
	for (const cJSON *it = arr->child; it; it = it->next, i++) {
		rv_wire_path fi;
		rv_json_path_index(fi, sizeof(fi), f, i);
		if (!cJSON_IsString(it))
			return rv_err_set(err, -EINVAL, fi, "%s must be a string", fi);
		if (strlen(it->valuestring) > MAX_ARG_LEN)
			return rv_err_set(err, -EINVAL, fi, "%s must be at most %d characters", fi,
					  MAX_ARG_LEN);
		r->command[i] = strdup(it->valuestring);
		if (!r->command[i])
			return rv_err_set(err, -ENOMEM, fi, "could not allocate %s", fi);
		r->ncommand = i + 1;
	}
	return 1;
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

/* replicaSpecs.<role>.template: a Kubernetes PodTemplateSpec, kept whole
 * (the k8s backend makes its pods from it).  Its containers' resources size
 * the replica unless the replica's own "resources" does. */
static int parse_template(const cJSON *rs, const char *path, struct rv_replica_spec *r,
			  struct rv_err *err)
{
	int rc;
	rv_wire_path f;
	const cJSON *t = rv_json_get_object(rs, "template", path, false, &rc, err);
	if (!t)
		return rc;
	rv_json_path(f, sizeof(f), path, "template");
	r->template_json = cJSON_PrintUnformatted(t);
	if (!r->template_json)
		return rv_err_set(err, -ENOMEM, f, "could not allocate %s", f);
	if (strlen(r->template_json) > RV_MAX_TEMPLATE)
		return rv_err_set(err, -EINVAL, f, "%s must be at most %d bytes of JSON", f,
				  RV_MAX_TEMPLATE);
	if (r->has_resources)
		return 1;
	return template_resources(t, f, r, err);
}

static int parse_handover(const cJSON *rs, const char *path, struct rv_replica_spec *r,
			  struct rv_err *err)
{
	char v[32];
	int rc = rv_json_get_string(rs, "stateHandover", path, false, v, sizeof(v), err);
	if (rc <= 0)
		return rc;
	r->state_handover = !strcmp(v, "flashCheckpoint");
	if (!r->state_handover && strcmp(v, "none") != 0) {
		rv_wire_path f;
		rv_json_path(f, sizeof(f), path, "stateHandover");
		return rv_err_set(err, -EINVAL, f, "%s must be \"none\" or \"flashCheckpoint\"", f);
	}
	return 0;
}

static int parse_replica(const cJSON *rs, const char *path, struct rv_replica_spec *r,
			 struct rv_err *err)
{
	int rc;
	int64_t v;
	rv_wire_path f;

	r->present = true;
	r->replicas = 1;
	r->restart_count = DEFAULT_RESTARTS;
	if ((rc = rv_wire_get_int32(rs, "replicas", path, false, 0, RV_MAX_REPLICAS, &r->replicas,
				    err)) < 0)
		return rc;
	r->min_replicas = r->max_replicas = r->replicas;
	if ((rc = rv_wire_get_int32(rs, "minReplicas", path, false, 0, RV_MAX_REPLICAS,
				    &r->min_replicas, err)) < 0)
		return rc;
	if ((rc = rv_wire_get_int32(rs, "maxReplicas", path, false, 0, RV_MAX_REPLICAS,
				    &r->max_replicas, err)) < 0)
		return rc;
	if (r->min_replicas > r->replicas) {
		rv_json_path(f, sizeof(f), path, "minReplicas");
		return rv_err_set(err, -EINVAL, f, "%s (%d) must not exceed replicas (%d)", f,
				  r->min_replicas, r->replicas);
	}
	if (r->max_replicas < r->replicas) {
		rv_json_path(f, sizeof(f), path, "maxReplicas");
		return rv_err_set(err, -EINVAL, f, "%s (%d) must be at least replicas (%d)", f,
				  r->max_replicas, r->replicas);
	}
	if ((rc = rv_wire_get_int32(rs, "restartCount", path, false, 0, MAX_RESTARTS,
				    &r->restart_count, err)) < 0)
		return rc;
	if ((rc = rv_json_get_string(rs, "priority", path, false, r->priority, sizeof(r->priority),
				     err)) < 0)
		return rc;
	if (rc == 1 && strcmp(r->priority, "high") != 0 && strcmp(r->priority, "low") != 0) {
		rv_json_path(f, sizeof(f), path, "priority");
		return rv_err_set(err, -EINVAL, f, "%s must be \"high\" or \"low\"", f);
	}

	const cJSON *res = rv_json_get_object(rs, "resources", path, false, &rc, err);
	if (rc < 0)
		return rc;
	if (res) {
		rv_wire_path rp;
		rv_json_path(rp, sizeof(rp), path, "resources");
		r->has_resources = true;
		if ((rc = get_cpu(res, rp, &r->resource.cpu, err)) < 0)
			return rc;
		if ((rc = get_memory(res, rp, &r->resource.memory_mb, err)) < 0)
			return rc;
		if ((rc = rv_json_get_int(res, "gpu", rp, false, 0, RV_MAX_GPU, &v, err)) < 0)
			return rc;
		r->resource.gpu = rc == 1 ? (int)v : 0;
	}
	if ((rc = parse_template(rs, path, r, err)) < 0)
		return rc;
	if ((rc = parse_handover(rs, path, r, err)) < 0)
		return rc;
	return parse_command(rs, path, r, err);
}

static int parse_replica_specs(const cJSON *spec, struct rv_job_spec *out, struct rv_err *err)
{
	int rc;
	rv_wire_path f;
	const cJSON *specs = rv_json_get_object(spec, "replicaSpecs", "spec", true, &rc, err);
	if (!specs)
		return rc;
	for (const cJSON *it = specs->child; it; it = it->next) {
		rv_wire_path p;
		const char *key = it->string ? it->string : "";
		rv_json_path(p, sizeof(p), "spec.replicaSpecs", key);
		/* DLRover's template for its own master pod: the master here is
		 * started by whoever runs the job, not by this spec. */
		if (!strcmp(key, "dlrover-master"))
			continue;
		int role = rv_role_parse(key);
		if (role < 0)
			return rv_err_set(err, -EINVAL, p,
					  "unknown replica type \"%.32s\" (expected worker, ps, "
					  "chief or evaluator)",
					  key);
		if (out->replicas[role].present)
			return rv_err_set(err, -EINVAL, p, "%s is given twice", p);
		if (!cJSON_IsObject(it))
			return rv_err_set(err, -EINVAL, p, "%s must be an object", p);
		if ((rc = parse_replica(it, p, &out->replicas[role], err)) < 0)
			return rc;
	}
	if (!out->replicas[RV_ROLE_WORKER].present)
		return rv_err_set(err, -EINVAL, "spec.replicaSpecs.worker",
				  "spec.replicaSpecs.worker is required");
	bool ps = out->strategy == RV_STRATEGY_PS;
	rv_json_path(f, sizeof(f), "spec.replicaSpecs", "ps");
	if (ps && !out->replicas[RV_ROLE_PS].present)
		return rv_err_set(err, -EINVAL, f, "%s is required for ParameterServerStrategy", f);
	if (!ps && out->replicas[RV_ROLE_PS].present)
		return rv_err_set(err, -EINVAL, f,
				  "%s is only allowed with ParameterServerStrategy", f);
	return 0;
}

static int parse_labels(const cJSON *meta, struct rv_job_spec *out, struct rv_err *err)
{
	int rc;
	const cJSON *labels = rv_json_get_object(meta, "labels", "metadata", false, &rc, err);
	if (!labels)
		return rc;
	if (rv_wire_count(labels, RV_MAX_LABELS) > RV_MAX_LABELS)
		return rv_err_set(err, -EINVAL, "metadata.labels",
				  "metadata.labels must have at most %d entries", RV_MAX_LABELS);
	for (const cJSON *it = labels->child; it; it = it->next) {
		struct rv_label *l = &out->labels[out->nlabels];
		const char *key = it->string ? it->string : "";
		rv_wire_path f;
		rv_json_path(f, sizeof(f), "metadata.labels", key);
		/* Keys are identifiers (Kubernetes label keys); values are data and
		 * kept verbatim whatever they hold. */
		size_t n = strlen(key);
		bool ok = n > 0 && n < sizeof(l->key);
		for (size_t i = 0; ok && i < n; i++)
			ok = (key[i] >= 'a' && key[i] <= 'z') || (key[i] >= 'A' && key[i] <= 'Z') ||
			     (key[i] >= '0' && key[i] <= '9') || strchr("._-/", key[i]);
		if (!ok)
			return rv_err_set(err, -EINVAL, "metadata.labels",
					  "metadata.labels keys must be 1 to %zu characters of "
					  "letters, digits, '.', '_', '-' and '/'",
					  sizeof(l->key) - 1);
		for (int j = 0; j < out->nlabels; j++)
			if (strcmp(out->labels[j].key, key) == 0)
				return rv_err_set(err, -EINVAL, f, "%s is given twice", f);
		if ((rc = rv_json_get_string(labels, key, "metadata.labels", true, l->value,
					     sizeof(l->value), err)) < 0)
			return rc;
		memcpy(l->key, key, n + 1);
		if (strcmp(key, "user") == 0)
			snprintf(out->user, sizeof(out->user), "%s", l->value);
		out->nlabels++;
	}
	return 0;
}

#define MAX_OFFSET (INT64_C(1) << 52)

/* spec.datasets[i].partitions: required of a streaming dataset, refused
 * of another. */
static int parse_partitions(const cJSON *it, const char *p, struct rv_dataset *d,
			    struct rv_err *err)
{
	int rc;
	rv_wire_path ap, f;
	rv_json_path(ap, sizeof(ap), p, "partitions");
	const cJSON *arr = rv_json_get_array(it, "partitions", p, d->streaming, &rc, err);
	if (!arr)
		return rc;
	if (!d->streaming)
		return rv_err_set(err, -EINVAL, ap, "%s needs \"streaming\": true", ap);
	int n = rv_wire_count(arr, RV_MAX_PARTITIONS);
	if (n < 1 || n > RV_MAX_PARTITIONS)
		return rv_err_set(err, -EINVAL, ap, "%s must have 1 to %d entries", ap,
				  RV_MAX_PARTITIONS);
	int j = 0;
	for (const cJSON *pj = arr->child; pj; pj = pj->next, j++) {
		struct rv_partition *pt = &d->partitions[j];
		rv_wire_path q;
		rv_json_path_index(q, sizeof(q), ap, j);
		if (!cJSON_IsObject(pj))
			return rv_err_set(err, -EINVAL, q, "%s must be an object", q);
		if ((rc = rv_json_get_string(pj, "name", q, true, pt->name, sizeof(pt->name),
					     err)) < 0 ||
		    (rc = rv_wire_check_name(pt->name, RV_NAME_MAX - 1,
					     rv_json_path(f, sizeof(f), q, "name"), err)) < 0)
			return rc;
		for (int k = 0; k < j; k++)
			if (strcmp(d->partitions[k].name, pt->name) == 0)
				return rv_err_set(err, -EINVAL, f, "%s \"%s\" is given twice", f,
						  pt->name);
		pt->end_offset = -1;
		if ((rc = rv_json_get_int(pj, "start_offset", q, false, 0, MAX_OFFSET,
					  &pt->start_offset, err)) < 0 ||
		    (rc = rv_json_get_int(pj, "end_offset", q, false, 0, MAX_OFFSET,
					  &pt->end_offset, err)) < 0)
			return rc;
		if (rc == 1 && pt->end_offset < pt->start_offset)
			return rv_err_set(err, -EINVAL, rv_json_path(f, sizeof(f), q, "end_offset"),
					  "%s must not be below start_offset", f);
		d->npartitions = j + 1;
	}
	return 0;
}

static int parse_datasets(const cJSON *spec, struct rv_job_spec *out, struct rv_err *err)
{
	int rc;
	int64_t v;
	const cJSON *arr = rv_json_get_array(spec, "datasets", "spec", false, &rc, err);
	if (!arr)
		return rc;
	if (rv_wire_count(arr, RV_MAX_DATASETS) > RV_MAX_DATASETS)
		return rv_err_set(err, -EINVAL, "spec.datasets",
				  "spec.datasets must have at most %d entries", RV_MAX_DATASETS);
	int i = 0;
	for (const cJSON *it = arr->child; it; it = it->next, i++) {
		struct rv_dataset *d = &out->datasets[i];
		rv_wire_path p, f;
		rv_json_path_index(p, sizeof(p), "spec.datasets", i);
		if (!cJSON_IsObject(it))
			return rv_err_set(err, -EINVAL, p, "%s must be an object", p);
		if ((rc = rv_json_get_string(it, "name", p, true, d->name, sizeof(d->name), err)) <
		    0)
			return rc;
		rv_json_path(f, sizeof(f), p, "name");
		if ((rc = rv_wire_check_name(d->name, RV_NAME_MAX - 1, f, err)) < 0)
			return rc;
		for (int j = 0; j < i; j++)
			if (strcmp(out->datasets[j].name, d->name) == 0)
				return rv_err_set(err, -EINVAL, f, "%s \"%s\" is given twice", f,
						  d->name);
		if ((rc = rv_json_get_bool(it, "streaming", p, false, &d->streaming, err)) < 0 ||
		    (rc = rv_json_get_int(it, "size", p, !d->streaming, 0, INT64_MAX, &d->size,
					  err)) < 0)
			return rc;
		if ((rc = rv_json_get_int(it, "shardSize", p, true, 1, INT64_MAX, &d->shard_size,
					  err)) < 0)
			return rc;
		d->epochs = 1;
		if ((rc = rv_json_get_int(it, "epochs", p, false, 1, d->streaming ? 1 : MAX_EPOCHS,
					  &v, err)) < 0)
			return rc;
		if (rc == 1)
			d->epochs = (int)v;
		if ((rc = rv_json_get_bool(it, "shuffle", p, false, &d->shuffle, err)) < 0)
			return rc;
		if (d->streaming && d->shuffle)
			return rv_err_set(err, -EINVAL, rv_json_path(f, sizeof(f), p, "shuffle"),
					  "%s must be false: a stream is read in offset order", f);
		if ((rc = parse_partitions(it, p, d, err)) < 0)
			return rc;
		out->ndatasets = i + 1;
	}
	return 0;
}

static bool partitions_to_json(cJSON *o, const struct rv_dataset *d)
{
	cJSON *arr = cJSON_AddArrayToObject(o, "partitions");
	for (int j = 0; arr && j < d->npartitions; j++) {
		const struct rv_partition *pt = &d->partitions[j];
		cJSON *e = cJSON_CreateObject();
		if (!e || !cJSON_AddItemToArray(arr, e)) {
			cJSON_Delete(e);
			return false;
		}
		if (!rv_wire_add_str(e, "name", pt->name) ||
		    !rv_wire_add_num(e, "start_offset", (double)pt->start_offset) ||
		    (pt->end_offset >= 0 &&
		     !rv_wire_add_num(e, "end_offset", (double)pt->end_offset)))
			return false;
	}
	return arr != NULL;
}

static int job_spec_parse(const cJSON *root, struct rv_job_spec *out, struct rv_err *err)
{
	int rc;
	char buf[128];

	if (!cJSON_IsObject(root))
		return rv_err_set(err, -EINVAL, "", "job spec must be a json object");
	if ((rc = rv_json_get_string(root, "apiVersion", "", false, buf, sizeof(buf), err)) < 0)
		return rc;
	if (rc == 1 && strcmp(buf, API_DLROVER) != 0 &&
	    (strncmp(buf, API_PREFIX, strlen(API_PREFIX)) != 0 ||
	     strlen(buf) == strlen(API_PREFIX)))
		return rv_err_set(err, -EINVAL, "apiVersion",
				  "apiVersion must start with \"" API_PREFIX
				  "\" (or be DLRover's \"" API_DLROVER "\")");
	if ((rc = rv_json_get_string(root, "kind", "", true, buf, sizeof(buf), err)) < 0)
		return rc;
	if (strcmp(buf, "ElasticJob") != 0)
		return rv_err_set(err, -EINVAL, "kind", "kind must be \"ElasticJob\"");

	const cJSON *meta = rv_json_get_object(root, "metadata", "", true, &rc, err);
	if (!meta)
		return rc;
	/* Read through a bigger buffer so an over-long name gets the DNS rule's
	 * message rather than the buffer's. */
	if ((rc = rv_json_get_string(meta, "name", "metadata", true, buf, sizeof(buf), err)) < 0)
		return rc;
	if ((rc = rv_wire_check_dns_label(buf, "metadata.name", err)) < 0)
		return rc;
	memcpy(out->name, buf, strlen(buf) + 1);
	strcpy(buf, "default");
	if ((rc = rv_json_get_string(meta, "namespace", "metadata", false, buf, sizeof(buf), err)) <
	    0)
		return rc;
	if ((rc = rv_wire_check_dns_label(buf, "metadata.namespace", err)) < 0)
		return rc;
	memcpy(out->namespace_, buf, strlen(buf) + 1);
	if ((rc = parse_labels(meta, out, err)) < 0)
		return rc;

	const cJSON *spec = rv_json_get_object(root, "spec", "", true, &rc, err);
	if (!spec)
		return rc;
	int v = 0;
	if ((rc = rv_wire_get_enum(spec, "distributionStrategy", "spec", true, strategy_names,
				   (int)RV_ARRAY_SIZE(strategy_names),
				   "AllreduceStrategy or ParameterServerStrategy", &v, err)) < 0)
		return rc;
	out->strategy = (enum rv_strategy)v;
	out->optimize_mode = RV_OPT_CLUSTER;
	if ((rc = rv_wire_get_enum(spec, "optimizeMode", "spec", false, rv_wire_optimize_names,
				   (int)RV_ARRAY_SIZE(rv_wire_optimize_names),
				   "one of manual, single-job, cluster", &v, err)) < 0)
		return rc;
	if (rc == 1) {
		out->optimize_mode = (enum rv_optimize_mode)v;
		out->optimize_mode_given = true;
	}
	if ((rc = rv_json_get_string(spec, "brainService", "spec", false, out->brain_service,
				     sizeof(out->brain_service), err)) < 0)
		return rc;
	if (rc == 1) {
		const char *u = out->brain_service;
		bool ok = strncmp(u, "http://", 7) == 0 || strncmp(u, "https://", 8) == 0;
		for (const char *c = u; ok && *c; c++)
			ok = (unsigned char)*c > ' ' && *c != 0x7f;
		if (!ok || strlen(u) <= 8)
			return rv_err_set(err, -EINVAL, "spec.brainService",
					  "spec.brainService must be an http:// or https:// url");
	}
	if ((rc = parse_replica_specs(spec, out, err)) < 0)
		return rc;
	if ((rc = parse_datasets(spec, out, err)) < 0)
		return rc;

	const cJSON *model = rv_json_get_object(spec, "model", "spec", false, &rc, err);
	if (rc < 0)
		return rc;
	if (model) {
		if ((rc = rv_json_get_int(model, "parameters", "spec.model", false, 0, INT64_MAX,
					  &out->model_parameters, err)) < 0)
			return rc;
		if ((rc = rv_wire_get_int32(model, "batchSize", "spec.model", false, 0, MAX_BATCH,
					    &out->batch_size, err)) < 0)
			return rc;
	}
	return 0;
}

int rv_job_spec_from_json(const cJSON *root, struct rv_job_spec *out, struct rv_err *err)
{
	memset(out, 0, sizeof(*out));
	int rc = job_spec_parse(root, out, err);
	if (rc < 0) {
		rv_job_spec_release(out);
		return rc;
	}
	return 0;
}

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
		rs->template_json = NULL;
		rs->command = NULL;
		rs->ncommand = 0;
	}
	memset(spec, 0, sizeof(*spec));
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

static bool replica_to_json(cJSON *specs, enum rv_role role, const struct rv_replica_spec *r)
{
	cJSON *o = cJSON_AddObjectToObject(specs, rv_role_name(role));
	if (!o)
		return false;
	bool ok = rv_wire_add_num(o, "replicas", r->replicas) &&
		  rv_wire_add_num(o, "minReplicas", r->min_replicas) &&
		  rv_wire_add_num(o, "maxReplicas", r->max_replicas) &&
		  rv_wire_add_num(o, "restartCount", r->restart_count);
	if (ok && r->priority[0])
		ok = rv_wire_add_str(o, "priority", r->priority);
	if (ok && r->state_handover)
		ok = rv_wire_add_str(o, "stateHandover", "flashCheckpoint");
	if (ok && r->has_resources) {
		char mem[32];
		format_memory(mem, sizeof(mem), r->resource.memory_mb);
		cJSON *res = cJSON_AddObjectToObject(o, "resources");
		ok = res && rv_wire_add_num(res, "cpu", r->resource.cpu) &&
		     rv_wire_add_str(res, "memory", mem) &&
		     rv_wire_add_num(res, "gpu", r->resource.gpu);
	}
	if (ok && r->template_json) {
		cJSON *t = cJSON_Parse(r->template_json);
		ok = t && cJSON_AddItemToObject(o, "template", t);
		if (!ok)
			cJSON_Delete(t);
	}
	if (ok && r->ncommand > 0) {
		cJSON *cmd = cJSON_AddArrayToObject(o, "command");
		ok = cmd != NULL;
		for (int i = 0; ok && i < r->ncommand; i++) {
			cJSON *s = cJSON_CreateString(r->command[i]);
			ok = s && cJSON_AddItemToArray(cmd, s);
		}
	}
	return ok;
}

cJSON *rv_job_spec_to_json(const struct rv_job_spec *spec)
{
	RV_CLEANUP_CJSON cJSON *root = cJSON_CreateObject();
	if (!root)
		return NULL;
	bool ok = rv_wire_add_str(root, "apiVersion", API_VERSION) &&
		  rv_wire_add_str(root, "kind", "ElasticJob");
	cJSON *meta = ok ? cJSON_AddObjectToObject(root, "metadata") : NULL;
	ok = meta && rv_wire_add_str(meta, "name", spec->name) &&
	     rv_wire_add_str(meta, "namespace", spec->namespace_[0] ? spec->namespace_ : "default");
	cJSON *labels = ok ? cJSON_AddObjectToObject(meta, "labels") : NULL;
	ok = labels != NULL;
	bool user_label = false;
	for (int i = 0; ok && i < spec->nlabels; i++) {
		ok = rv_wire_add_str(labels, spec->labels[i].key, spec->labels[i].value);
		user_label |= strcmp(spec->labels[i].key, "user") == 0;
	}
	/* user comes from labels.user; keep it when a caller set only the field. */
	if (ok && !user_label && spec->user[0])
		ok = rv_wire_add_str(labels, "user", spec->user);

	cJSON *s = ok ? cJSON_AddObjectToObject(root, "spec") : NULL;
	ok = s && rv_wire_add_str(s, "distributionStrategy", rv_strategy_name(spec->strategy));
	/* An unnamed mode stays unnamed: the reader applies its own default. */
	if (ok && spec->optimize_mode_given)
		ok = rv_wire_add_str(s, "optimizeMode", rv_optimize_mode_name(spec->optimize_mode));
	if (ok && spec->brain_service[0])
		ok = rv_wire_add_str(s, "brainService", spec->brain_service);
	cJSON *specs = ok ? cJSON_AddObjectToObject(s, "replicaSpecs") : NULL;
	ok = specs != NULL;
	for (int r = 0; ok && r < RV_ROLE_COUNT; r++)
		if (spec->replicas[r].present)
			ok = replica_to_json(specs, (enum rv_role)r, &spec->replicas[r]);
	if (ok && spec->ndatasets > 0) {
		cJSON *ds = cJSON_AddArrayToObject(s, "datasets");
		ok = ds != NULL;
		for (int i = 0; ok && i < spec->ndatasets; i++) {
			const struct rv_dataset *d = &spec->datasets[i];
			cJSON *o = cJSON_CreateObject();
			ok = o && cJSON_AddItemToArray(ds, o);
			if (!ok) {
				cJSON_Delete(o);
				break;
			}
			ok = rv_wire_add_str(o, "name", d->name) &&
			     rv_wire_add_num(o, "size", (double)d->size) &&
			     rv_wire_add_num(o, "shardSize", (double)d->shard_size) &&
			     rv_wire_add_num(o, "epochs", d->epochs) &&
			     rv_wire_add_bool(o, "shuffle", d->shuffle);
			if (ok && d->streaming)
				ok = rv_wire_add_bool(o, "streaming", true) &&
				     partitions_to_json(o, d);
		}
	}
	cJSON *model = ok ? cJSON_AddObjectToObject(s, "model") : NULL;
	ok = model && rv_wire_add_num(model, "parameters", (double)spec->model_parameters) &&
	     rv_wire_add_num(model, "batchSize", spec->batch_size);
	return ok ? RV_TAKE_PTR(root) : NULL;
}

/* ---- metrics batch ---- */

/* ---- events ---- */

/* ---- ScalePlan ---- */

/* Plan resources: every field optional, 0 meaning "unchanged / not set". */

/* ---- cluster report ---- */

/* An optional percentage; -1 when absent. */

/* ---- field tables (see wire.h) ----
 * One row per JSON key the code above reads or writes; check_wire.c fails
 * when a key is added to the code and not here, or here and not in the code. */

#define F(nm, ty, req, rf, mp, en, desc) WDOC(nm, ty, (req) ? RV_WIRE_REQ : 0u, rf, mp, en, desc)

static const struct rv_wire_field f_elastic_job[] = {
	F("apiVersion", "string", false, NULL, false, NULL,
	  "\"elastic.rover.dev/<version>\"; default elastic.rover.dev/v1alpha1"),
	F("kind", "string", true, NULL, false, "ElasticJob", "always ElasticJob"),
	F("metadata", "object", true, "JobMetadata", false, NULL, "name, namespace, labels"),
	F("spec", "object", true, "JobSpec", false, NULL, "what to run and within which limits"),
};
static const struct rv_wire_field f_job_metadata[] = {
	F("name", "string", true, NULL, false, NULL,
	  "DNS-1123 label: 1..63 of [a-z0-9-]; one running job per name in a namespace"),
	F("namespace", "string", false, NULL, false, NULL, "DNS-1123 label, default \"default\""),
	F("labels", "object", false, "string", true, NULL,
	  "at most 16 string labels; labels.user names the job's owner"),
};
static const struct rv_wire_field f_job_spec[] = {
	F("distributionStrategy", "string", true, NULL, false,
	  "AllreduceStrategy|ParameterServerStrategy", "how workers share the model"),
	F("optimizeMode", "string", false, NULL, false, "manual|single-job|cluster",
	  "who plans resources; default cluster"),
	F("brainService", "string", false, NULL, false, NULL,
	  "http:// or https:// URL of the brain"),
	F("replicaSpecs", "object", true, "ReplicaSpec", true, NULL,
	  "by role: worker (required), ps (ParameterServerStrategy only), chief, evaluator"),
	F("datasets", "array", false, "Dataset", false, NULL, "at most 8 datasets"),
	F("model", "object", false, "Model", false, NULL, "model features the brain plans from"),
};
static const struct rv_wire_field f_replica_spec[] = {
	F("replicas", "integer", false, NULL, false, NULL, "nodes to start with, default 1"),
	F("minReplicas", "integer", false, NULL, false, NULL, "at most replicas; default replicas"),
	F("maxReplicas", "integer", false, NULL, false, NULL,
	  "at least replicas; default replicas"),
	F("restartCount", "integer", false, NULL, false, NULL, "restarts per node, default 3"),
	F("priority", "string", false, NULL, false, "high|low", "scheduling priority"),
	F("resources", "object", false, "Resources", false, NULL,
	  "per node; omitted: the brain decides"),
	F("command", "array", false, "string", false, NULL, "argv, at most 64 entries"),
	F("stateHandover", "string", false, NULL, false, "none|flashCheckpoint",
	  "flashCheckpoint: a relaunched node reloads its state from its flash checkpoint on the "
	  "same machine, so a migrated PS keeps its partition; default none"),
	F("template", "object", false, NULL, false, NULL,
	  "a Kubernetes PodTemplateSpec; its containers' resources size the node when "
	  "resources is omitted"),
};
static const struct rv_wire_field f_resources[] = {
	F("cpu", "number|string", true, NULL, false, NULL, "cores: 4, \"4\" or \"500m\""),
	F("memory", "string|integer", true, NULL, false, NULL, "quantity (\"8Gi\") or bytes"),
	F("gpu", "integer", false, NULL, false, NULL, "GPUs per node, default 0"),
};
static const struct rv_wire_field f_dataset[] = {
	F("name", "string", true, NULL, false, NULL, "unique within the job"),
	F("size", "integer", false, NULL, false, NULL,
	  "records; required for a dataset that is not streaming"),
	F("shardSize", "integer", true, NULL, false, NULL, "records per shard, > 0"),
	F("epochs", "integer", false, NULL, false, NULL, "default 1 (1 when streaming)"),
	F("shuffle", "boolean", false, NULL, false, NULL, "default false (false when streaming)"),
	F("streaming", "boolean", false, NULL, false, NULL,
	  "true (required for a dataset with partitions): shards are offset ranges of the "
	  "partitions (online learning)"),
	F("partitions", "array", false, "Partition", false, NULL,
	  "1..64 partitions; required for a streaming dataset, refused of another"),
};
static const struct rv_wire_field f_partition[] = {
	F("name", "string", true, NULL, false, NULL, "unique within the dataset"),
	F("start_offset", "integer", false, NULL, false, NULL, "first offset, default 0"),
	F("end_offset", "integer", false, NULL, false, NULL,
	  "offsets known available now end here; absent: unbounded"),
};
static const struct rv_wire_field f_model[] = {
	F("parameters", "integer", false, NULL, false, NULL, "parameter count, 0 = unknown"),
	F("batchSize", "integer", false, NULL, false, NULL, "per-worker batch, 0 = unknown"),
};
#undef F

#define M(nm, desc, f)                                                                             \
	{                                                                                          \
		.name = (nm), .description = (desc), .fields = (f),                                \
		.nfields = (int)RV_ARRAY_SIZE(f)                                                   \
	}
const struct rv_wire_message rv_wire_elastic_job_msg =
	M("ElasticJob", "a job spec, shaped like DLRover's ElasticJob resource", f_elastic_job);
const struct rv_wire_message rv_wire_job_metadata_msg =
	M("JobMetadata", "the job's name, namespace and labels", f_job_metadata);
const struct rv_wire_message rv_wire_job_spec_msg =
	M("JobSpec", "what to run and within which limits", f_job_spec);
const struct rv_wire_message rv_wire_replica_spec_msg =
	M("ReplicaSpec", "one role's nodes", f_replica_spec);
const struct rv_wire_message rv_wire_resources_msg =
	M("Resources", "per-node resources requested", f_resources);
const struct rv_wire_message rv_wire_dataset_msg =
	M("Dataset", "a dataset the job reads in shards", f_dataset);
const struct rv_wire_message rv_wire_partition_msg =
	M("Partition", "a partition of a streaming dataset", f_partition);
const struct rv_wire_message rv_wire_model_msg = M("Model", "model features", f_model);
#undef M
