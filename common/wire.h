/*
 * wire.h: the wire messages shared by brain, master, monitor and roverctl:
 * job spec (ElasticJob), metrics batch, event, ScalePlan, cluster node report.
 *
 * Each has *_from_json (validates every field; on failure returns -EINVAL
 * with err->field naming the first bad field, e.g. "samples[3].speed", and
 * leaves *out released), *_to_json (a new cJSON tree, caller owns it with
 * cJSON_Delete) and *_release (frees what from_json allocated; accepts a
 * zeroed struct).  Limits on every client-controlled size are the RV_MAX_*
 * constants below.  Pure functions, thread-safe.
 */
#ifndef RV_WIRE_H
#define RV_WIRE_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "err.h"

#define RV_NAME_MAX 64          /* names: DNS-1123 label, 1..63 chars [a-z0-9-] */
#define RV_MAX_LABELS 16
#define RV_MAX_DATASETS 8
#define RV_MAX_COMMAND 64       /* argv entries */
#define RV_MAX_SAMPLES 10000    /* per metrics batch */
#define RV_MAX_PLAN_NODES 64    /* launch/remove/migrate entries */
#define RV_MAX_CLUSTER_NODES 4096
#define RV_MAX_CPU 1024.0       /* cores per node */
#define RV_MAX_MEMORY_MB (4LL * 1024 * 1024)  /* 4 TiB per node */
#define RV_MAX_GPU 64
#define RV_MAX_REPLICAS 10000
#define RV_ID_MAX            65 /* client-chosen ids: 1..64 chars [A-Za-z0-9._-] */

enum rv_strategy { RV_STRATEGY_ALLREDUCE, RV_STRATEGY_PS };
enum rv_optimize_mode { RV_OPT_MANUAL, RV_OPT_SINGLE_JOB, RV_OPT_CLUSTER };
enum rv_role { RV_ROLE_WORKER, RV_ROLE_PS, RV_ROLE_CHIEF, RV_ROLE_EVALUATOR, RV_ROLE_COUNT };

/* "AllreduceStrategy"/"ParameterServerStrategy"; "manual"/"single-job"/"cluster";
 * "worker"/"ps"/"chief"/"evaluator".  parse returns the enum value or -EINVAL. */
const char *rv_strategy_name(enum rv_strategy s);
int rv_strategy_parse(const char *s);
const char *rv_optimize_mode_name(enum rv_optimize_mode m);
int rv_optimize_mode_parse(const char *s);
const char *rv_role_name(enum rv_role r);
int rv_role_parse(const char *s);

struct rv_resource {
	double cpu;          /* cores, 0 < cpu <= RV_MAX_CPU */
	int64_t memory_mb;   /* JSON: "memory":"8Gi" in specs, "memory_mb":8192 in plans */
	int gpu;             /* 0..RV_MAX_GPU */
};

struct rv_replica_spec {
	bool present;
	int replicas, min_replicas, max_replicas;  /* 0 <= min <= replicas <= max */
	int restart_count;
	char priority[16];                          /* "high"/"low"/"" */
	bool has_resources;   /* false: resources omitted, the brain decides */
	struct rv_resource resource;
	char **command;       /* malloc'd argv, ncommand entries */
	int ncommand;
};

struct rv_dataset {
	char name[RV_NAME_MAX];
	int64_t size, shard_size;   /* records; shard_size > 0 */
	int epochs;
	bool shuffle;
};

struct rv_label {
	char key[RV_NAME_MAX];
	char value[128];
};

struct rv_job_spec {
	char name[RV_NAME_MAX];
	char namespace_[RV_NAME_MAX];     /* default "default" */
	struct rv_label labels[RV_MAX_LABELS];
	int nlabels;
	char user[128];                   /* labels.user, or "" */
	enum rv_strategy strategy;
	enum rv_optimize_mode optimize_mode;  /* default cluster */
	char brain_service[256];
	struct rv_replica_spec replicas[RV_ROLE_COUNT];
	struct rv_dataset datasets[RV_MAX_DATASETS];
	int ndatasets;
	int64_t model_parameters;   /* 0 = unknown */
	int batch_size;             /* 0 = unknown */
};

/* root is the whole ElasticJob document (apiVersion, kind, metadata, spec).
 * Requires kind "ElasticJob", metadata.name, a worker replica spec; ps for PS jobs. */
int rv_job_spec_from_json(const cJSON *root, struct rv_job_spec *out, struct rv_err *err);
cJSON *rv_job_spec_to_json(const struct rv_job_spec *spec);
void rv_job_spec_release(struct rv_job_spec *spec);

/* ---- metrics batch: {"batch_id":"...", "samples":[{...}, ...]} ---- */
enum rv_sample_kind { RV_SAMPLE_SPEED, RV_SAMPLE_NODE, RV_SAMPLE_MODEL };

struct rv_sample {
	enum rv_sample_kind kind;   /* "kind":"speed"|"node"|"model" */
	int64_t ts_ms;              /* "ts": sample time, ms since epoch (job time), > 0 */
	/* speed: {"speed":samples/s >= 0, "step":global step >= 0,
	 *         "workers":n >= 0, "ps":n >= 0 (the configuration measured)} */
	double speed;
	int64_t step;
	int workers, ps;
	/* node: {"node":"worker-0", "role":"worker", "rank":0, "cpu":cores used,
	 *        "memory_mb":used, "cpu_limit":cores, "memory_limit_mb":limit,
	 *        "step_time":seconds per step (optional, -1 when absent)} */
	char node[RV_NAME_MAX];
	enum rv_role role;
	int rank;
	double cpu;
	int64_t memory_mb;
	double cpu_limit;
	int64_t memory_limit_mb;
	double step_time;
	/* model: {"parameters":n, "batch_size":n, "flops":x (optional)} */
	int64_t parameters;
	int batch_size;
	double flops;
};

struct rv_metrics_batch {
	/* "batch_id": chosen by the sender, "" when absent (older senders).  The
	 * brain stores a batch id once per job, so a resend is not stored twice. */
	char batch_id[RV_ID_MAX];
	struct rv_sample *samples;   /* malloc'd array */
	int n;                       /* 1..RV_MAX_SAMPLES */
};

/* One bad sample rejects the batch: err->field is "samples[i].<field>". */
int rv_metrics_batch_from_json(const cJSON *root, struct rv_metrics_batch *out,
			       struct rv_err *err);
cJSON *rv_metrics_batch_to_json(const struct rv_metrics_batch *b);
void rv_metrics_batch_release(struct rv_metrics_batch *b);

/* ---- events ---- */
enum rv_event_type {
	RV_EVENT_NODE_FAILED,      /* "node_failed" */
	RV_EVENT_NODE_OOM,         /* "node_oom" */
	RV_EVENT_NODE_RELAUNCHED,  /* "node_relaunched" */
	RV_EVENT_NODE_FINISHED,    /* "node_finished" */
	RV_EVENT_JOB_FINISHED,     /* "job_finished" */
	RV_EVENT_JOB_FAILED,       /* "job_failed" */
	RV_EVENT_PLAN_APPLIED,     /* "plan_applied": plan_id says which */
};
const char *rv_event_type_name(enum rv_event_type t);
int rv_event_type_parse(const char *s);

struct rv_event {
	/* "event_id": chosen by the sender, "" when absent; stored once per job
	 * like batch_id, so a resent node_oom counts one OOM and makes one plan. */
	char event_id[RV_ID_MAX];
	enum rv_event_type type;
	int64_t ts_ms;             /* "ts", > 0 */
	char node[RV_NAME_MAX];    /* required for node_* events */
	enum rv_role role;         /* "role", default worker */
	int rank;                  /* -1 when absent */
	int exit_code;             /* -1 when absent */
	char reason[256];          /* free text */
	int64_t memory_mb;         /* limit in force (oom), 0 when absent */
	int64_t peak_memory_mb;    /* observed peak (oom), 0 when absent */
	int64_t plan_id;           /* plan_applied: the plan id, 0 when absent */
};
int rv_event_from_json(const cJSON *root, struct rv_event *out, struct rv_err *err);
cJSON *rv_event_to_json(const struct rv_event *ev);

/* ---- ScalePlan ---- */
struct rv_plan_group {
	bool present;
	int count;
	struct rv_resource resource;
};

struct rv_plan_node {
	char node[RV_NAME_MAX];
	enum rv_role role;
	struct rv_resource resource;
};

struct rv_scale_plan {
	char job[64];              /* job uid */
	int64_t id;                /* assigned by the store, 0 before */
	char stage[16];            /* "create" | "running" | "oom" */
	char algorithm[64];
	char reason[512];
	double predicted_speed;    /* samples/s, 0 when not predicted */
	int64_t based_on_ts_ms;    /* newest sample time the plan saw (job time) */
	struct rv_plan_group groups[RV_ROLE_COUNT];
	struct rv_plan_node launch[RV_MAX_PLAN_NODES];
	int nlaunch;
	struct rv_plan_node remove[RV_MAX_PLAN_NODES];
	int nremove;
	struct rv_plan_node migrate[RV_MAX_PLAN_NODES];
	int nmigrate;
};
/* JSON as in DESIGN.md: {"job","id","stage","algorithm","reason","predicted_speed",
 * "groups":{"worker":{"count","resource":{"cpu","memory_mb","gpu"}}},
 * "launch":[{"node","role","resource"}],"remove":[...],"migrate":[...]} */
int rv_scale_plan_from_json(const cJSON *root, struct rv_scale_plan *out, struct rv_err *err);
cJSON *rv_scale_plan_to_json(const struct rv_scale_plan *plan);

/* ---- cluster node reports (monitor): {"nodes":[{...}]} ---- */
struct rv_cluster_node {
	char name[RV_NAME_MAX * 2];    /* host name: 1..127 chars [A-Za-z0-9.-_] */
	int64_t ts_ms;
	double cpu;             /* capacity, cores */
	int64_t memory_mb;      /* capacity */
	int gpu;
	double cpu_used;
	int64_t memory_used_mb;
	bool ready;             /* default true */
};
struct rv_cluster_report {
	struct rv_cluster_node *nodes;  /* malloc'd */
	int n;                          /* 1..RV_MAX_CLUSTER_NODES */
};
int rv_cluster_report_from_json(const cJSON *root, struct rv_cluster_report *out,
				struct rv_err *err);
cJSON *rv_cluster_report_to_json(const struct rv_cluster_report *r);
void rv_cluster_report_release(struct rv_cluster_report *r);

/* ---- field tables ----
 * Every JSON key of every message above, in one table per message: what the
 * brain's OpenAPI document publishes (components/schemas, generated from
 * these tables) and what tests/common/check_wire.c holds equal to the
 * from_json/to_json code, key by key.  Static storage, read-only. */
struct rv_wire_field {
	const char *name;  /* JSON key */
	const char *type;  /* JSON Schema type: "string", "integer", "number",
				   * "boolean", "object", "array"; "a|b" when either */
	bool required;     /* from_json rejects the message without it */
	const char *ref;   /* object: the message it holds; array: the message of
				   * its items ("string": plain strings); NULL otherwise */
	bool map;          /* object keyed by names (roles, label keys) whose values
				   * are ref */
	const char *enums; /* "a|b|c": the only values accepted; NULL: any */
	const char *description;
};

struct rv_wire_message {
	const char *name; /* schema name: "MetricsBatch", "Sample", ... */
	const char *description;
	const struct rv_wire_field *fields;
	int nfields;
};

/* The messages, top-level ones first; *n gets the count. */
const struct rv_wire_message *rv_wire_messages(int *n);
/* One message by schema name, or NULL. */
const struct rv_wire_message *rv_wire_message(const char *name);

#endif
