/*
 * wire_metrics.c: what jobs and the cluster monitor send the brain (wire.h):
 * metrics batches of samples (speed, node, model, progress: one table, a
 * variant per kind), events and cluster reports.  Each is its table;
 * wire_codec.c reads and writes it, hooks only for bounds set by another
 * field and "required when" rules.
 */
#include <inttypes.h>
#include <stdint.h>

#include "cleanup.h"
#include "json.h"
#include "wire_codec.h"

#define REQ      RV_WIRE_REQ
#define REQV     RV_WIRE_REQ_VARIANT
#define MAX_RANK 1000000
#define SAFE_MAX ((INT64_C(1) << 53) - 1) /* json.h's integer bound */

static const char *const event_names[] = {
	[RV_EVENT_NODE_FAILED] = "node_failed",         [RV_EVENT_NODE_OOM] = "node_oom",
	[RV_EVENT_NODE_RELAUNCHED] = "node_relaunched", [RV_EVENT_NODE_FINISHED] = "node_finished",
	[RV_EVENT_JOB_FINISHED] = "job_finished",       [RV_EVENT_JOB_FAILED] = "job_failed",
	[RV_EVENT_PLAN_APPLIED] = "plan_applied",
};
static const char *const sample_names[] = {
	[RV_SAMPLE_SPEED] = "speed",
	[RV_SAMPLE_NODE] = "node",
	[RV_SAMPLE_MODEL] = "model",
	[RV_SAMPLE_PROGRESS] = "progress",
};

const char *rv_event_type_name(enum rv_event_type t)
{
	return rv_wire_name_of(event_names, RV_ARRAY_SIZE(event_names), (int)t);
}

int rv_event_type_parse(const char *s)
{
	return rv_wire_parse_of(event_names, RV_ARRAY_SIZE(event_names), s);
}

/* An integer bounded by the int64 at f->count_off read before it, or by
 * f->max while that is not > 0: done <= total. */
static int upto_parse(const cJSON *o, const char *path, const struct rv_wire_field *f, void *m,
		      struct rv_err *err)
{
	int64_t bound = *(const int64_t *)((const char *)m + f->count_off);
	bool req = (f->flags & (REQ | REQV)) != 0;
	return rv_json_get_int(o, f->name, path, req, f->min, bound > 0 ? bound : f->max,
			       (int64_t *)((char *)m + f->off), err);
}

/* A node's throttling counters are written when it had quota periods. */
static bool with_periods(cJSON *o, const struct rv_wire_field *f, const void *m)
{
	return ((const struct rv_sample *)m)->nr_periods <= 0 || rv_wire_encode_row(o, f, m);
}

#define SPEED    (RV_SAMPLE_SPEED + 1)
#define NODE     (RV_SAMPLE_NODE + 1)
#define MODEL    (RV_SAMPLE_MODEL + 1)
#define PROGRESS (RV_SAMPLE_PROGRESS + 1)
#define T        struct rv_sample
static const struct rv_wire_field f_sample[] = {
	WENUM("kind", kind, REQ, sample_names, "speed|node|model|progress", "which fields follow"),
	WINT("ts", ts_ms, REQ, 1, INT64_MAX, "sample time, ms since the epoch (job time)"),
	WNUM("speed", speed, REQV, 0, RV_WIRE_MAX_SPEED, "speed: samples/s (required for speed)",
	     .variant = SPEED),
	WINT("step", step, 0, 0, INT64_MAX, "speed: global step", .variant = SPEED),
	WINT("workers", workers, 0, 0, RV_MAX_REPLICAS, "speed: workers measured",
	     .variant = SPEED),
	WINT("ps", ps, 0, 0, RV_MAX_REPLICAS, "speed: parameter servers measured",
	     .variant = SPEED),
	WNAME("node", node, REQV, "node: node name (required for node)", .variant = NODE),
	WENUM("role", role, 0, rv_wire_role_names, "worker|ps|chief|evaluator",
	      "node: the node's role, default worker", .variant = NODE),
	WINTD("rank", rank, 0, -1, -1, MAX_RANK, "node: rank, -1 unknown", .variant = NODE),
	WNUM("cpu", cpu, REQV, 0, RV_MAX_CPU, "node: cores used (required for node)",
	     .variant = NODE),
	WINT("memory_mb", memory_mb, REQV, 0, RV_MAX_MEMORY_MB,
	     "node: memory used, MiB (required for node)", .variant = NODE),
	WNUM("cpu_limit", cpu_limit, 0, 0, RV_MAX_CPU, "node: cores allowed", .variant = NODE),
	WINT("memory_limit_mb", memory_limit_mb, 0, 0, RV_MAX_MEMORY_MB,
	     "node: memory allowed, MiB", .variant = NODE),
	WNUMD("step_time", step_time, RV_WIRE_OMIT_NEG, -1, 0, 1e7, /* over 100 days: no measure */
	      "node: seconds per step", .variant = NODE),
	WNUM("compute_time", compute_time, RV_WIRE_OMIT, 0, 1e7,
	     "node: seconds per step of the node's own work, without the wait for its peers "
	     "(a synchronous job's step times are all the slowest's), 0 or absent: unknown",
	     .variant = NODE),
	WINT("nr_periods", nr_periods, RV_WIRE_OMIT, 0, INT64_MAX,
	     "node: CPU quota periods elapsed (cgroup cpu.stat, cumulative), 0 or absent: none",
	     .variant = NODE),
	WINT("nr_throttled", nr_throttled, 0, 0, 0,
	     "node: periods in which the node was throttled (cumulative), <= nr_periods",
	     .variant = NODE, .count_off = offsetof(T, nr_periods), .parse = upto_parse,
	     .emit = with_periods),
	WINT("throttled_usec", throttled_usec, 0, 0, INT64_MAX,
	     "node: time the node was held by its CPU limit, us (cumulative)", .variant = NODE,
	     .emit = with_periods),
	WINT("parameters", parameters, REQV, 0, INT64_MAX,
	     "model: parameter count (required for model)", .variant = MODEL),
	WINT("batch_size", batch_size, 0, 0, 1 << 30, "model: per-worker batch", .variant = MODEL),
	WNUM("flops", flops, 0, 0, 1e30, "model: floating-point operations per step",
	     .variant = MODEL),
	WNAME("dataset", dataset, REQV,
	      "progress: a dataset of the job's spec (required for progress)", .variant = PROGRESS),
	WINT("epoch", epoch, 0, 0, RV_WIRE_MAX_EPOCHS, "progress: the epoch being handed out",
	     .variant = PROGRESS),
	WINT("samples_total", samples_total, REQV, 0, INT64_MAX,
	     "progress: samples of every epoch (a stream: offsets known so far; required for "
	     "progress)",
	     .variant = PROGRESS),
	WINT("samples_done", samples_done, REQV, 0, 0,
	     "progress: samples done, <= samples_total (required for progress)",
	     .variant = PROGRESS, .count_off = offsetof(T, samples_total), .parse = upto_parse),
	WINT("shards_total", shards_total, 0, 0, INT64_MAX,
	     "progress: shards of every epoch, 0: not known (a stream has no total)",
	     .variant = PROGRESS),
	WINT("shards_done", shards_done, 0, 0, INT64_MAX,
	     "progress: shards every sample of which is done (a stream: its tasks done), "
	     "<= shards_total when known",
	     .variant = PROGRESS, .count_off = offsetof(T, shards_total), .parse = upto_parse),
	WINT("shards_doing", shards_doing, 0, 0, INT64_MAX,
	     "progress: tasks handed out and not done yet", .variant = PROGRESS),
	WBOOL("finished", finished, 0, "progress: every epoch of the dataset is done",
	      .variant = PROGRESS),
};
const struct rv_wire_message rv_wire_sample_msg =
	RV_WIRE_MSG("Sample",
		    "one sample: speed, node usage, model features or data progress (by kind)",
		    f_sample, NULL, NULL);
#undef T

#define T struct rv_metrics_batch
static const struct rv_wire_field f_metrics_batch[] = {
	WNAME("batch_id", batch_id, RV_WIRE_OMIT,
	      "chosen by the sender, 1..64 of [A-Za-z0-9._-]: a batch resent with the same id "
	      "is acknowledged again and stored once"),
	WARRAY("samples", samples, n, REQ | RV_WIRE_ALLOC | RV_WIRE_NONEMPTY, RV_MAX_SAMPLES,
	       &rv_wire_sample_msg, "Sample", "1..10000 samples; one bad sample rejects the batch"),
};
const struct rv_wire_message rv_wire_metrics_batch_msg =
	RV_WIRE_MSG("MetricsBatch", "samples from a job, stored all or nothing", f_metrics_batch,
		    "metrics batch", NULL);
#undef T

void rv_metrics_batch_release(struct rv_metrics_batch *b)
{
	if (!b)
		return;
	rv_wire_release(&rv_wire_metrics_batch_msg, b);
	b->batch_id[0] = '\0';
}

/* A node event names its node; plan_applied its plan. */
static int event_check(const cJSON *o, const char *path, void *mp, struct rv_err *err)
{
	static const char *const node_keys[] = { "node", NULL }, *const plan_keys[] = { "plan_id",
											NULL };
	struct rv_event *ev = mp;
	int rc = 0;
	if (ev->type <= RV_EVENT_NODE_FINISHED)
		rc = rv_wire_decode_required(&rv_wire_event_msg, o, path, ev, node_keys, err);
	if (rc < 0 || ev->type != RV_EVENT_PLAN_APPLIED)
		return rc;
	if ((rc = rv_wire_decode_required(&rv_wire_event_msg, o, path, ev, plan_keys, err)) < 0)
		return rc;
	return ev->plan_id < 1 ? rv_err_set(err, -EINVAL, "plan_id",
					    "plan_id must be between 1 and %" PRId64, SAFE_MAX)
			       : 0;
}

#define T struct rv_event
static const struct rv_wire_field f_event[] = {
	WNAME("event_id", event_id, RV_WIRE_OMIT,
	      "chosen by the sender, 1..64 of [A-Za-z0-9._-]: an event resent with the same id "
	      "gets the first reply again and is stored (and counted) once"),
	WENUM("type", type, REQ, event_names,
	      "node_failed|node_oom|node_relaunched|node_finished|job_finished|job_failed|"
	      "plan_applied",
	      "what happened"),
	WINT("ts", ts_ms, REQ, 1, INT64_MAX, "ms since the epoch (job time)"),
	WNAME("node", node, RV_WIRE_OMIT, "the node (required for node_* events)"),
	WENUM("role", role, 0, rv_wire_role_names, "worker|ps|chief|evaluator", "default worker"),
	WINTD("rank", rank, 0, -1, -1, MAX_RANK, "-1 unknown"),
	/* Negative codes are signals as torch reports them (-9); -1 stays "none". */
	WINTD("exit_code", exit_code, 0, -1, -255, 255, "-255..255, negative: signal; -1 none"),
	WSTR("reason", reason, 0, "free text"),
	WINT("memory_mb", memory_mb, 0, 0, RV_MAX_MEMORY_MB, "node_oom: the limit in force, MiB"),
	WINT("peak_memory_mb", peak_memory_mb, 0, 0, RV_MAX_MEMORY_MB,
	     "node_oom: observed peak, MiB"),
	WINT("plan_id", plan_id, 0, 0, INT64_MAX,
	     "plan_applied: the plan applied (required for plan_applied)"),
	WSTR("not_applied", not_applied, RV_WIRE_OMIT,
	     "plan_applied: the parts of the plan not applied, \"; \"-separated (absent: "
	     "applied in full)"),
};
const struct rv_wire_message rv_wire_event_msg =
	RV_WIRE_MSG("Event", "a node or job event", f_event, "event", event_check);
#undef T

#define T struct rv_cluster_job
static const struct rv_wire_field f_cluster_job[] = {
	WNAME("name", name, REQ, "the job's name"),
	WINT("procs", procs, REQ, 1, 1 << 22, "its processes on the node"),
	WNUM("cpu_used", cpu_used, 0, 0, RV_MAX_CPU, "cores in use"),
	WINT("memory_used_mb", memory_used_mb, 0, 0, RV_MAX_MEMORY_MB, "resident MiB"),
	WINT("throttled", throttled, 0, 0, INT64_MAX,
	     "CPU periods throttled in its cgroup since the previous sample"),
};
const struct rv_wire_message rv_wire_cluster_job_msg =
	RV_WIRE_MSG("ClusterJob", "a job's processes on a cluster node", f_cluster_job, NULL, NULL);
#undef T

#define NEG RV_WIRE_OMIT_NEG
#define T   struct rv_cluster_node
static const struct rv_wire_field f_cluster_node[] = {
	WNAME("name", name, REQ, "host name, 1..127 of [A-Za-z0-9._-]"),
	WINT("ts", ts_ms, REQ, 1, INT64_MAX, "report time, ms since the epoch"),
	WNUM("cpu", cpu, REQ, 0, RV_MAX_CPU, "capacity, cores"),
	WINT("memory_mb", memory_mb, REQ, 0, RV_MAX_MEMORY_MB, "capacity, MiB"),
	WINT("gpu", gpu, 0, 0, RV_MAX_GPU, "GPUs"),
	WNUM("cpu_used", cpu_used, 0, 0, RV_MAX_CPU, "cores in use"),
	WINT("memory_used_mb", memory_used_mb, 0, 0, RV_MAX_MEMORY_MB, "MiB in use"),
	WBOOL("ready", ready, RV_WIRE_DEF, "takes work; default true", .def = 1),
	WNUMD("cpu_pressure", cpu_pressure, NEG, -1, 0, 100,
	      "PSI cpu some avg10, percent of time a task waited for a CPU"),
	WNUMD("memory_pressure", memory_pressure, NEG, -1, 0, 100,
	      "PSI memory some avg10, percent"),
	WNUMD("io_pressure", io_pressure, NEG, -1, 0, 100, "PSI io some avg10, percent"),
	WINTD("gpu_memory_used_mb", gpu_memory_used_mb, NEG, -1, 0, RV_MAX_MEMORY_MB,
	      "GPU memory in use, MiB"),
	WNUMD("gpu_util_pct", gpu_util_pct, NEG, -1, 0, 100,
	      "mean share of time a kernel ran on the node's GPUs (NVML), percent"),
	WARRAY("jobs", jobs, njobs, RV_WIRE_ALLOC | RV_WIRE_OMIT, RV_MAX_CLUSTER_JOBS,
	       &rv_wire_cluster_job_msg, "ClusterJob",
	       "what each Rover job's processes use on the node (0..64)"),
};
const struct rv_wire_message rv_wire_cluster_node_msg =
	RV_WIRE_MSG("ClusterNode", "one cluster node", f_cluster_node, NULL, NULL);
#undef T

#define T struct rv_cluster_report
static const struct rv_wire_field f_cluster_report[] = {
	WNAME("report_id", report_id, RV_WIRE_OMIT,
	      "the sender's id (1..64 of [A-Za-z0-9._-]): a report resent with it is stored once"),
	WARRAY("nodes", nodes, n, REQ | RV_WIRE_ALLOC | RV_WIRE_NONEMPTY, RV_MAX_CLUSTER_NODES,
	       &rv_wire_cluster_node_msg, "ClusterNode", "1..4096 nodes"),
};
const struct rv_wire_message rv_wire_cluster_report_msg =
	RV_WIRE_MSG("ClusterReport", "node capacity and usage from the cluster monitor",
		    f_cluster_report, "cluster report", NULL);
#undef T

cJSON *rv_cluster_jobs_to_json(const struct rv_cluster_node *n)
{
	RV_CLEANUP_CJSON cJSON *arr = cJSON_CreateArray();
	for (int k = 0; arr && k < n->njobs; k++) {
		cJSON *jo = rv_wire_encode(&rv_wire_cluster_job_msg, &n->jobs[k]);
		if (!jo || !cJSON_AddItemToArray(arr, jo)) {
			cJSON_Delete(jo);
			return NULL;
		}
	}
	return RV_TAKE_PTR(arr);
}

void rv_cluster_report_release(struct rv_cluster_report *r)
{
	if (!r)
		return;
	rv_wire_release(&rv_wire_cluster_report_msg, r);
	r->report_id[0] = '\0';
}

RV_WIRE_CODEC(metrics_batch, rv_wire_metrics_batch_msg, struct rv_metrics_batch)
RV_WIRE_CODEC(event, rv_wire_event_msg, struct rv_event)
RV_WIRE_CODEC(cluster_report, rv_wire_cluster_report_msg, struct rv_cluster_report)
