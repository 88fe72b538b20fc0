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
#define RV_NOT_APPLIED_MAX   512   /* plan_applied: the parts not applied */
#define RV_MAX_CLUSTER_NODES 4096
#define RV_MAX_CPU 1024.0       /* cores per node */
#define RV_MAX_MEMORY_MB (4LL * 1024 * 1024)  /* 4 TiB per node */
#define RV_MAX_GPU 64
#define RV_MAX_REPLICAS 10000
#define RV_ID_MAX            65 /* client-chosen ids: 1..64 chars [A-Za-z0-9._-] */
#define RV_MAX_TEMPLATE      (64 * 1024) /* a replica's pod template, bytes of JSON */

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
	/* "template": the Kubernetes PodTemplateSpec as given, compact JSON
	 * (malloc'd, NULL when none).  Its containers' resources.requests (else
	 * limits), summed, fill resource when "resources" is not given. */
	char *template_json;
	/* "stateHandover": "flashCheckpoint" says a relaunched node of the role
	 * reloads its state from its own flash checkpoint on the machine it ran
	 * on (examples/ps_rover.py's PS), so a migration on that machine hands
	 * its partition over; "none" (the default): it starts without it. */
	bool state_handover;
};

/* A partition of a streaming dataset: offsets from start_offset; end_offset
 * is what is known available now (-1: unbounded, absent in JSON). */
#define RV_MAX_PARTITIONS 64
struct rv_partition {
	char name[RV_NAME_MAX];
	int64_t start_offset, end_offset;
};

struct rv_dataset {
	char name[RV_NAME_MAX];
	int64_t size, shard_size; /* records; shard_size > 0; size 0 when streaming */
	int epochs;
	bool shuffle;
	/* "streaming": true: shards are offset ranges of the partitions
	 * (1..RV_MAX_PARTITIONS); size, epochs and shuffle do not apply. */
	bool streaming;
	struct rv_partition partitions[RV_MAX_PARTITIONS];
	int npartitions;
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
	bool optimize_mode_given;             /* the spec named it */
	char brain_service[256];
	struct rv_replica_spec replicas[RV_ROLE_COUNT];
	struct rv_dataset datasets[RV_MAX_DATASETS];
	int ndatasets;
	int64_t model_parameters;   /* 0 = unknown */
	int batch_size;             /* 0 = unknown */
};

/* root is the whole ElasticJob document (apiVersion, kind, metadata, spec).
 * Requires kind "ElasticJob", metadata.name, a worker replica spec; ps for PS jobs.
 * apiVersion elastic.rover.dev/... or DLRover's elastic.iml.github.io/v1alpha1;
 * DLRover's replicaSpecs.dlrover-master is skipped. */
int rv_job_spec_from_json(const cJSON *root, struct rv_job_spec *out, struct rv_err *err);
cJSON *rv_job_spec_to_json(const struct rv_job_spec *spec);
void rv_job_spec_release(struct rv_job_spec *spec);

/* ---- metrics batch: {"batch_id":"...", "samples":[{...}, ...]} ---- */
enum rv_sample_kind { RV_SAMPLE_SPEED, RV_SAMPLE_NODE, RV_SAMPLE_MODEL, RV_SAMPLE_PROGRESS };

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
	 *        "step_time":seconds per step (optional, -1 when absent),
	 *        "compute_time":seconds per step of the node's own work, without
	 *        the wait for its peers (optional, 0 when absent),
	 *        "nr_periods", "nr_throttled", "throttled_usec": the node's cgroup
	 *        CPU throttling counters as cpu.stat has them (cumulative since the
	 *        node's cgroup was made; v1's throttled_time in ns / 1000), all
	 *        optional, 0 when absent (no CPU quota, or not read)} */
	char node[RV_NAME_MAX];
	enum rv_role role;
	int rank;
	double cpu;
	int64_t memory_mb;
	double cpu_limit;
	int64_t memory_limit_mb;
	double step_time;
	double compute_time;
	int64_t nr_periods, nr_throttled, throttled_usec;
	/* model: {"parameters":n, "batch_size":n, "flops":x (optional)} */
	int64_t parameters;
	int batch_size;
	double flops;
	/* progress: the master's data shards of one dataset of the job spec:
	 * {"dataset":name, "epoch":n, "samples_total":n, "samples_done":n <=
	 *  samples_total, "shards_total":n (0: not known, a stream),
	 *  "shards_done":n, "shards_doing":n, "finished":bool}.  A shard is
	 * counted done once every sample of it is. */
	char dataset[RV_NAME_MAX];
	int epoch;
	int64_t samples_total, samples_done;
	int64_t shards_total, shards_done, shards_doing;
	bool finished;
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
	/* plan_applied: the parts of the plan not applied, "; "-separated;
	 * "" when it was applied in full */
	char not_applied[RV_NOT_APPLIED_MAX];
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

/* ---- cluster node reports (monitor): {"report_id":"...","nodes":[{...}]} ---- */
#define RV_MAX_CLUSTER_JOBS 64 /* jobs per node in one sample */
/* What one job's processes use on a node (rover-monitor's job scan). */
struct rv_cluster_job {
	char name[RV_NAME_MAX]; /* the job's name: DNS-1123 label */
	int procs;              /* its processes on the node, >= 1 */
	double cpu_used;        /* cores */
	int64_t memory_used_mb; /* RSS */
	int64_t throttled;      /* CPU periods throttled in its cgroup since the last sample */
};
struct rv_cluster_node {
	char name[RV_NAME_MAX * 2];    /* host name: 1..127 chars [A-Za-z0-9.-_] */
	int64_t ts_ms;
	double cpu;             /* capacity, cores */
	int64_t memory_mb;      /* capacity */
	int gpu;
	double cpu_used;
	int64_t memory_used_mb;
	bool ready;             /* default true */
	/* optional detail, -1 when not measured (absent in JSON) */
	double cpu_pressure, memory_pressure, io_pressure; /* PSI "some" avg10, percent */
	int64_t gpu_memory_used_mb;
	double gpu_util_pct; /* mean over the node's GPUs of the share of time a kernel ran */
	struct rv_cluster_job *jobs; /* malloc'd, njobs entries (0..RV_MAX_CLUSTER_JOBS) */
	int njobs;
};
struct rv_cluster_report {
	char report_id[RV_ID_MAX];      /* "" or the sender's id: a resend is stored once */
	struct rv_cluster_node *nodes;  /* malloc'd */
	int n;                          /* 1..RV_MAX_CLUSTER_NODES */
};
int rv_cluster_report_from_json(const cJSON *root, struct rv_cluster_report *out,
				struct rv_err *err);
cJSON *rv_cluster_report_to_json(const struct rv_cluster_report *r);
/* The jobs of one node as a JSON array (a new tree, the caller's). */
cJSON *rv_cluster_jobs_to_json(const struct rv_cluster_node *n);
/* Frees each node's jobs and the nodes; accepts a zeroed struct. */
void rv_cluster_report_release(struct rv_cluster_report *r);

/* ---- field tables ----
 * Every JSON key of every message above, in one table per message.  The
 * table is the codec: from_json and to_json walk it (wire_codec.c), the
 * brain's and the master's OpenAPI documents publish it (components/schemas)
 * and tests/common/check_wire.c holds it against the documents, key by key.
 * Static storage, read-only. */
enum rv_wire_kind {
	RV_WIRE_DOC,    /* described only: the message's own code reads it */
	RV_WIRE_STRING, /* char[size] */
	RV_WIRE_NAME,   /* char[size]: 1..size-1 of [A-Za-z0-9._-] */
	RV_WIRE_INT,    /* int or int64_t (by size), min..max */
	RV_WIRE_NUMBER, /* double, dmin..dmax */
	RV_WIRE_BOOL,
	RV_WIRE_ENUM,   /* an enum stored as int: one of names */
	RV_WIRE_ARRAY,  /* objects of message elem; their count an int at count_off */
	RV_WIRE_OBJECT, /* one object of message elem; a bool at count_off says it was given */
	RV_WIRE_HOOK,   /* parse and emit below */
};
/* flags */
#define RV_WIRE_REQ         1u   /* required */
#define RV_WIRE_DEF         2u   /* absent: def */
#define RV_WIRE_OMIT        4u   /* emitted only when not "", > 0 or true */
#define RV_WIRE_ALLOC       8u   /* array: a malloc'd pointer at off, not storage in place */
#define RV_WIRE_REQ_VARIANT 16u  /* required in its variant; the documents say which */
#define RV_WIRE_OMIT_NEG    32u  /* emitted only when >= 0 (-1: not measured) */
#define RV_WIRE_NONEMPTY    64u  /* array: at least one entry */
#define RV_WIRE_MAX_EINVAL  128u /* array: too many is -EINVAL, not -E2BIG (the plan's) */
#define RV_WIRE_GIVEN       256u /* the bool at count_off says it was read; emitted if so */
struct rv_wire_message;
struct rv_wire_field;
/* A hook reads key f->name of o (path: where o is) into the message m; it
 * returns like json.h's getters.  Its emit adds the key to o, false when out
 * of memory. */
typedef int (*rv_wire_parse_fn)(const cJSON *o, const char *path, const struct rv_wire_field *f,
				void *m, struct rv_err *err);
typedef bool (*rv_wire_emit_fn)(cJSON *o, const struct rv_wire_field *f, const void *m);
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
	/* the codec */
	enum rv_wire_kind kind;
	unsigned flags;
	size_t off, size;         /* the member: offsetof, sizeof */
	int64_t min, max;         /* RV_WIRE_INT; RV_WIRE_ARRAY: max entries */
	double dmin, dmax;        /* RV_WIRE_NUMBER */
	double def;               /* RV_WIRE_DEF */
	const char *const *names; /* RV_WIRE_ENUM, nnames of them */
	int nnames;
	const struct rv_wire_message *elem; /* RV_WIRE_ARRAY, RV_WIRE_OBJECT */
	size_t count_off; /* the count, or the bool "given"; 0: an object without one */
	/* > 0: the row is read and written only when the message's first
	 * field (an enum) is variant - 1: a sample's kind, say */
	int variant;
	rv_wire_parse_fn parse; /* RV_WIRE_HOOK; set on another kind, they replace */
	rv_wire_emit_fn emit;   /* its reading or writing */
};

struct rv_wire_message {
	const char *name; /* schema name: "MetricsBatch", "Sample", ... */
	const char *description;
	const struct rv_wire_field *fields;
	int nfields;
	/* the codec */
	const char *what; /* top level: "<what> must be a json object" */
	size_t size;      /* of its struct */
	/* Rules across fields, after every field of o (at path) was read into m. */
	int (*check)(const cJSON *o, const char *path, void *m, struct rv_err *err);
};

/* The messages, top-level ones first; *n gets the count. */
const struct rv_wire_message *rv_wire_messages(int *n);
/* One message by schema name, or NULL. */
const struct rv_wire_message *rv_wire_message(const char *name);

/* ---- master control API (rover-master; agents and the trainer library) ----
 * Requests and replies of the master's routes (master/README.md).  Same
 * conventions as above: from_json validates every field and names the first
 * bad one, to_json builds a new tree, release frees what from_json allocated.
 * Node names: 1..63 of [A-Za-z0-9._-].  Worker ids: >= 0, unique in a job
 * (the trainer library uses the global rank). */
#define RV_ADDR_MAX        64         /* "host:port" an agent is reached at */
#define RV_MAX_WORLD_NODES 1024       /* members of one world */
#define RV_MAX_CKPT_DOC    (16 << 20) /* a data checkpoint document, bytes */

/* POST /v1/rdzv/join: {"node","addr","local_world_size"}. */
struct rv_rdzv_join {
	char node[RV_NAME_MAX];
	char addr[RV_ADDR_MAX]; /* "" when absent */
	int local_world_size;   /* workers on the node, 1..1024, default 1 */
};
int rv_rdzv_join_from_json(const cJSON *root, struct rv_rdzv_join *out, struct rv_err *err);
cJSON *rv_rdzv_join_to_json(const struct rv_rdzv_join *m);

/* Its reply: {"round"}: the round the node waits for. */
struct rv_rdzv_joined {
	int64_t round;
};
int rv_rdzv_joined_from_json(const cJSON *root, struct rv_rdzv_joined *out, struct rv_err *err);
cJSON *rv_rdzv_joined_to_json(const struct rv_rdzv_joined *m);

/* What GET /v1/rdzv/world says of a node's round. */
enum rv_rdzv_status {
	RV_RDZV_COMPLETE,  /* "complete": the world is in members, the node is group_rank */
	RV_RDZV_GATHERING, /* "gathering": not complete yet (the wait ran out) */
	RV_RDZV_STALE,     /* "stale": the round was superseded: join again */
	RV_RDZV_SPARE,     /* "spare": complete without this node; it waits for the next */
	RV_RDZV_FAILED,    /* "failed": min nodes not reached within the max wait */
	RV_RDZV_UNKNOWN,   /* "unknown": the master does not know the node: join again */
};
const char *rv_rdzv_status_name(enum rv_rdzv_status s);
int rv_rdzv_status_parse(const char *s);

struct rv_rdzv_member {
	char node[RV_NAME_MAX];
	char addr[RV_ADDR_MAX];
	int local_world_size;
	int group_rank;
	int rank_offset; /* global rank of the node's local rank 0 */
};

/* {"status","round","group_rank","nnodes","world_size","waiting","members":[...]} */
struct rv_rdzv_world_reply {
	enum rv_rdzv_status status;
	int64_t round;
	int group_rank;                 /* -1 unless complete */
	int nnodes, world_size;         /* 0 unless complete */
	int waiting;                    /* nodes waiting that would change the world */
	struct rv_rdzv_member *members; /* malloc'd, nmembers entries, group rank order */
	int nmembers;
};
int rv_rdzv_world_reply_from_json(const cJSON *root, struct rv_rdzv_world_reply *out,
				  struct rv_err *err);
cJSON *rv_rdzv_world_reply_to_json(const struct rv_rdzv_world_reply *m);
void rv_rdzv_world_reply_release(struct rv_rdzv_world_reply *m);

/* POST /v1/heartbeat: {"node"}; reply {"round","waiting","rejoin"}: rejoin
 * true when the node should rendezvous again (its world changed or can grow). */
struct rv_heartbeat {
	char node[RV_NAME_MAX];
	bool done; /* every worker of the node finished: its silence is no death */
};
int rv_heartbeat_from_json(const cJSON *root, struct rv_heartbeat *out, struct rv_err *err);
cJSON *rv_heartbeat_to_json(const struct rv_heartbeat *m);

struct rv_heartbeat_reply {
	int64_t round;
	int waiting;
	bool rejoin;
};
int rv_heartbeat_reply_from_json(const cJSON *root, struct rv_heartbeat_reply *out,
				 struct rv_err *err);
cJSON *rv_heartbeat_reply_to_json(const struct rv_heartbeat_reply *m);

/* POST /v1/failure: {"node","reason","exit_code"}: the node left or died;
 * its shards go back to the queue at once. */
struct rv_failure_report {
	char node[RV_NAME_MAX];
	char reason[256]; /* "" when absent */
	int exit_code;    /* -255..255, -1 when absent */
};
int rv_failure_report_from_json(const cJSON *root, struct rv_failure_report *out,
				struct rv_err *err);
cJSON *rv_failure_report_to_json(const struct rv_failure_report *m);

/* POST /v1/shards/next: {"node","worker","dataset","req"} (dataset "": the
 * first).  req (optional, > 0) is chosen by the sender: a request repeated
 * with the worker's last req gets the same task again, so a retry after a
 * lost reply does not take a second one. */
struct rv_shard_next {
	char node[RV_NAME_MAX];
	int64_t worker;
	char dataset[RV_NAME_MAX];
	int64_t req; /* 0 when absent */
};
int rv_shard_next_from_json(const cJSON *root, struct rv_shard_next *out, struct rv_err *err);
cJSON *rv_shard_next_to_json(const struct rv_shard_next *m);

enum rv_shard_status {
	RV_SHARD_TASK,     /* "task": samples [start, end) of dataset, epoch */
	RV_SHARD_WAIT,     /* "wait": all handed out, some in flight: ask again */
	RV_SHARD_FINISHED, /* "finished": every epoch is done */
};
const char *rv_shard_status_name(enum rv_shard_status s);
int rv_shard_status_parse(const char *s);

/* Its reply: {"status","id","dataset","partition","epoch","start","end"};
 * of a streaming dataset, partition names the partition and [start, end)
 * are offsets (epoch 0). */
struct rv_shard_task {
	enum rv_shard_status status;
	int64_t id; /* > 0 for a task, 0 otherwise */
	char dataset[RV_NAME_MAX];
	char partition[RV_NAME_MAX]; /* "" unless streaming */
	int epoch;
	int64_t start, end;
};
int rv_shard_task_from_json(const cJSON *root, struct rv_shard_task *out, struct rv_err *err);
cJSON *rv_shard_task_to_json(const struct rv_shard_task *m);

/* POST /v1/shards/done: {"node","worker","id"}; reply {"counted"}: false for
 * a late or repeated done (nothing is counted twice). */
struct rv_shard_done {
	char node[RV_NAME_MAX];
	int64_t worker;
	int64_t id;
};
int rv_shard_done_from_json(const cJSON *root, struct rv_shard_done *out, struct rv_err *err);
cJSON *rv_shard_done_to_json(const struct rv_shard_done *m);

struct rv_shard_done_reply {
	bool counted;
};
int rv_shard_done_reply_from_json(const cJSON *root, struct rv_shard_done_reply *out,
				  struct rv_err *err);
cJSON *rv_shard_done_reply_to_json(const struct rv_shard_done_reply *m);

/* POST /v1/shards/ckpt/report: {"step","worker","task_id","consumed"}: at
 * model step S the worker was in task task_id (0: none) and had consumed
 * that many of its samples. */
struct rv_ckpt_report {
	int64_t step, worker, task_id, consumed;
};
int rv_ckpt_report_from_json(const cJSON *root, struct rv_ckpt_report *out, struct rv_err *err);
cJSON *rv_ckpt_report_to_json(const struct rv_ckpt_report *m);

/* GET /v1/shards/ckpt?step= replies, POST /v1/shards/ckpt/import takes:
 * {"step","checkpoint":{...}}: the data position at model step S, as the
 * master's shard module writes it (ranges, not lists). */
struct rv_data_ckpt {
	int64_t step;     /* 0 when absent on import */
	char *checkpoint; /* malloc'd JSON text of the object */
	size_t len;
};
int rv_data_ckpt_from_json(const cJSON *root, struct rv_data_ckpt *out, struct rv_err *err);
cJSON *rv_data_ckpt_to_json(const struct rv_data_ckpt *m);
void rv_data_ckpt_release(struct rv_data_ckpt *m);

/* POST /v1/steps: {"node","step","speed","ts","compute_time"}: the global
 * step and samples/s. */
struct rv_step_report {
	char node[RV_NAME_MAX];
	int64_t step;
	double speed;
	int64_t ts_ms;       /* "ts", 0 when absent (the master's clock) */
	double compute_time; /* s of the node's own work in this step, 0: unknown */
};
int rv_step_report_from_json(const cJSON *root, struct rv_step_report *out, struct rv_err *err);
cJSON *rv_step_report_to_json(const struct rv_step_report *m);

/* POST /v1/usage: one node's resource usage as its rover-run measured it
 * since its previous report: {"node","rank","cpu","cpu_limit","memory_mb",
 * "throttled","nr_periods","nr_throttled","throttled_us","gpus",
 * "gpu_memory_mb","gpu_memory_total_mb","ts"}.  cpu: cores used by the
 * node's workers (their process tree); cpu_limit: its cgroup's CPU quota in
 * cores (0: none); throttled: share of quota periods throttled since the
 * previous report (0..1), and the cgroup's cumulative counters; gpu_*: the
 * node's GPUs and their memory in use (0 without GPUs). */
struct rv_node_usage {
	char node[RV_NAME_MAX];
	int rank; /* the node's group rank, -1 unknown */
	double cpu, cpu_limit;
	int64_t memory_mb;
	double throttled;
	int64_t nr_periods, nr_throttled, throttled_us;
	int gpus;
	int64_t gpu_memory_mb, gpu_memory_total_mb;
	int64_t ts_ms; /* "ts", 0 when absent (the master's clock) */
};
int rv_node_usage_from_json(const cJSON *root, struct rv_node_usage *out, struct rv_err *err);
cJSON *rv_node_usage_to_json(const struct rv_node_usage *m);

/* GET /v1/job. */
#define RV_MAX_VERDICT_NAMES 32 /* faulty / straggler names listed in JobStatus */
/* A network check's state: "none" (none yet), "running", "done". */
enum rv_netcheck_state { RV_NETCHECK_NONE, RV_NETCHECK_RUNNING, RV_NETCHECK_DONE };
const char *rv_netcheck_state_name(enum rv_netcheck_state s);

struct rv_dataset_status {
	char name[RV_NAME_MAX];
	int64_t samples_total; /* size * epochs */
	int64_t samples_done;
	int epoch;
	bool finished;
};
/* "desired" and "plan.groups" of GET /v1/job, by role: {"count","cpu",
 * "memory_mb","gpu"}: nodes of the role and each node's resources (0: no
 * limit). */
struct rv_role_target {
	bool present;
	int count;
	double cpu;
	int64_t memory_mb;
	int gpu;
};

/* "brain" of GET /v1/job: the link to the planner.
 * {"mode","uid","reachable","queued","sent","dropped","last_error"} */
struct rv_brain_link {
	enum rv_optimize_mode mode;
	char uid[RV_NAME_MAX]; /* the job at the brain, "" until registered */
	bool reachable;        /* the last call to the brain got an answer */
	int64_t queued;        /* reports waiting to be sent */
	int64_t sent;          /* reports the brain acknowledged */
	int64_t dropped;       /* reports dropped, oldest first, from a full queue */
	char last_error[512];  /* "" when none */
};

/* "plan" of GET /v1/job: the newest plan handed to the master.
 * {"id","stage","reason","applied","proposed","groups":{role:{...}}} */
struct rv_plan_state {
	int64_t id;
	char stage[16];
	char reason[512];
	bool applied;  /* in force: "desired" follows it */
	bool proposed; /* manual mode: shown only, nothing changed */
	struct rv_role_target groups[RV_ROLE_COUNT];
	char not_applied[RV_NOT_APPLIED_MAX]; /* applied: the parts left undone, "" none */
};

/* One node the master runs (its node manager), in GET /v1/job. */
#define RV_MAX_STATUS_NODES 64
struct rv_node_status {
	char name[RV_NAME_MAX];     /* <role>-<rank>: its rendezvous name */
	char instance[RV_NAME_MAX]; /* the current launch: name, then name.<attempt> */
	char role[32];
	char host[RV_NAME_MAX];
	char state[16]; /* launched, running, exited, succeeded, failed */
	int rank, pid, restarts, oom_relaunches;
	int64_t memory_limit_mb; /* 0: none */
	double cpu_seconds;      /* -1: not measured */
	int64_t memory_mb;       /* -1: not measured */
	int64_t throttled_usec;  /* -1: not measured */
};
struct rv_job_status {
	char job[RV_NAME_MAX];
	enum rv_rdzv_status state; /* complete, gathering or failed */
	int64_t round;
	int nnodes, world_size, waiting;
	int64_t step;
	double speed;
	bool finished; /* every dataset finished */
	struct rv_dataset_status datasets[RV_MAX_DATASETS];
	int ndatasets;
	bool has_brain, has_plan, has_desired; /* the objects below are given */
	struct rv_brain_link brain;
	struct rv_plan_state plan;
	struct rv_role_target desired[RV_ROLE_COUNT]; /* what the job should run */
	/* The last network check: "netcheck" its state, "faulty" and
	 * "stragglers" the nodes it named (at most RV_MAX_VERDICT_NAMES each). */
	enum rv_netcheck_state netcheck;
	char faulty[RV_MAX_VERDICT_NAMES][RV_NAME_MAX];
	int nfaulty;
	char stragglers[RV_MAX_VERDICT_NAMES][RV_NAME_MAX];
	int nstragglers;
	/* The job's end as the node manager sees it: "running", "succeeded" or
	 * "failed" (job_reason says why); its nodes, the first
	 * RV_MAX_STATUS_NODES ("nodes"; none when agents are started by
	 * someone else). */
	char job_state[16];
	char job_reason[384];
	struct rv_node_status node_list[RV_MAX_STATUS_NODES];
	int nnode_list;
};
int rv_job_status_from_json(const cJSON *root, struct rv_job_status *out, struct rv_err *err);
cJSON *rv_job_status_to_json(const struct rv_job_status *m);

/* POST /v1/streams/{dataset}/partitions: {"partition","end_offset"}: a
 * producer says offsets below end_offset are available. */
struct rv_stream_end {
	char partition[RV_NAME_MAX];
	int64_t end_offset;
};
int rv_stream_end_from_json(const cJSON *root, struct rv_stream_end *out, struct rv_err *err);
cJSON *rv_stream_end_to_json(const struct rv_stream_end *m);

/* GET /v1/streams/{dataset}: {"dataset","partitions":[{"name",
 * "start_offset","committed_offset","end_offset","doing"}]}; committed: the
 * lowest offset not done; end_offset -1: unbounded. */
struct rv_stream_partition_status {
	char name[RV_NAME_MAX];
	int64_t start_offset, committed_offset, end_offset, doing;
};
struct rv_stream_status {
	char dataset[RV_NAME_MAX];
	struct rv_stream_partition_status partitions[RV_MAX_PARTITIONS];
	int npartitions;
};
int rv_stream_status_from_json(const cJSON *root, struct rv_stream_status *out, struct rv_err *err);
cJSON *rv_stream_status_to_json(const struct rv_stream_status *m);

/* ---- network check (master/README.md "Network check") ---- */

/* POST /v1/netcheck/join: {"node"}: the node is ready to check; the first
 * join of a world starts a check of its members.  Reply NetcheckJoined
 * {"check","world","nodes"}: the check id, the rendezvous round it checks
 * and its member count. */
struct rv_netcheck_join {
	char node[RV_NAME_MAX];
};
int rv_netcheck_join_from_json(const cJSON *root, struct rv_netcheck_join *out, struct rv_err *err);
cJSON *rv_netcheck_join_to_json(const struct rv_netcheck_join *m);

struct rv_netcheck_joined {
	int64_t check, world;
	int nodes;
};
int rv_netcheck_joined_from_json(const cJSON *root, struct rv_netcheck_joined *out,
				 struct rv_err *err);
cJSON *rv_netcheck_joined_to_json(const struct rv_netcheck_joined *m);

/* GET /v1/netcheck/group?node=&round=: {"check","round","status","peers"}:
 * status "ready" with the group's members (the node itself among them),
 * or "wait" (round 1 opens once round 0 is over: ask again). */
enum rv_netcheck_group_status { RV_NETCHECK_READY, RV_NETCHECK_WAIT };
const char *rv_netcheck_group_status_name(enum rv_netcheck_group_status s);
int rv_netcheck_group_status_parse(const char *s);

struct rv_netcheck_peer {
	char node[RV_NAME_MAX];
	char addr[RV_ADDR_MAX];
};
struct rv_netcheck_group_reply {
	int64_t check;
	int round;
	enum rv_netcheck_group_status status;
	struct rv_netcheck_peer peers[3];
	int npeers; /* 0 unless ready */
};
int rv_netcheck_group_reply_from_json(const cJSON *root, struct rv_netcheck_group_reply *out,
				      struct rv_err *err);
cJSON *rv_netcheck_group_reply_to_json(const struct rv_netcheck_group_reply *m);

/* POST /v1/netcheck/report: {"node","check","round","ok","time_s"}. */
struct rv_netcheck_report {
	char node[RV_NAME_MAX];
	int64_t check;
	int round; /* 0 or 1 */
	bool ok;
	double time_s; /* the collective's time, >= 0; ignored when !ok */
	double compute_s; /* the part of it that was the node's own work (0: not measured) */
};
int rv_netcheck_report_from_json(const cJSON *root, struct rv_netcheck_report *out,
				 struct rv_err *err);
cJSON *rv_netcheck_report_to_json(const struct rv_netcheck_report *m);

/* GET /v1/netcheck: {"check","world","state","round","nodes":[...]}. */
enum rv_netcheck_verdict {
	RV_VERDICT_PENDING,
	RV_VERDICT_OK,
	RV_VERDICT_FAULTY,
	RV_VERDICT_STRAGGLER,
};
const char *rv_netcheck_verdict_name(enum rv_netcheck_verdict v);

struct rv_netcheck_result {
	char node[RV_NAME_MAX];
	enum rv_netcheck_verdict verdict;
	bool silent; /* missed a round's report deadline: counted failed */
	bool ok0, ok1;
	double time0_s, time1_s;
};
struct rv_netcheck_status {
	int64_t check, world; /* 0: no check yet */
	enum rv_netcheck_state state;
	int round;                        /* the open round while running */
	struct rv_netcheck_result *nodes; /* malloc'd, nnodes entries */
	int nnodes;
};
int rv_netcheck_status_from_json(const cJSON *root, struct rv_netcheck_status *out,
				 struct rv_err *err);
cJSON *rv_netcheck_status_to_json(const struct rv_netcheck_status *m);
void rv_netcheck_status_release(struct rv_netcheck_status *m);

/* The master's messages (for its OpenAPI document), like rv_wire_messages. */
const struct rv_wire_message *rv_wire_master_messages(int *n);
const struct rv_wire_message *rv_wire_master_message(const char *name);

#endif
