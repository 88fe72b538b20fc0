/*
 * wire_rdzv.c: the master's rendezvous and liveness messages (wire.h):
 * join, world, heartbeat, failure, step and usage reports.  Each is its
 * table; wire_codec.c reads and writes it.
 */
#include <stdint.h>

#include "cleanup.h"
#include "wire_codec.h"

const char *const rv_wire_rdzv_status_names[6] = {
	[RV_RDZV_COMPLETE] = "complete", [RV_RDZV_GATHERING] = "gathering",
	[RV_RDZV_STALE] = "stale",       [RV_RDZV_SPARE] = "spare",
	[RV_RDZV_FAILED] = "failed",     [RV_RDZV_UNKNOWN] = "unknown",
};

const char *rv_rdzv_status_name(enum rv_rdzv_status s)
{
	return rv_wire_name_of(rv_wire_rdzv_status_names, RV_ARRAY_SIZE(rv_wire_rdzv_status_names),
			       (int)s);
}

int rv_rdzv_status_parse(const char *s)
{
	return rv_wire_parse_of(rv_wire_rdzv_status_names, RV_ARRAY_SIZE(rv_wire_rdzv_status_names),
				s);
}

#define REQ         RV_WIRE_REQ
#define LOCAL_WORLD RV_WIRE_MAX_LOCAL_WORLD

#define T struct rv_rdzv_join
static const struct rv_wire_field f_rdzv_join[] = {
	WNAME("node", node, REQ, "node name, 1..63 of [A-Za-z0-9._-], unique in the job"),
	WSTR("addr", addr, 0, "host:port the node is reached at"),
	WINTD("local_world_size", local_world_size, 0, 1, 1, LOCAL_WORLD,
	      "workers on the node, 1..1024, default 1"),
};
const struct rv_wire_message rv_wire_rdzv_join_msg =
	RV_WIRE_MSG("RdzvJoin", "a node joins the rendezvous", f_rdzv_join, "rendezvous join",
		    NULL);
#undef T

#define T struct rv_rdzv_joined
static const struct rv_wire_field f_rdzv_joined[] = {
	WINT("round", round, REQ, 1, INT64_MAX, "the round the node waits for"),
};
const struct rv_wire_message rv_wire_rdzv_joined_msg =
	RV_WIRE_MSG("RdzvJoined", "the round a joined node waits for", f_rdzv_joined,
		    "rendezvous join reply", NULL);
#undef T

#define T struct rv_rdzv_member
static const struct rv_wire_field f_rdzv_member[] = {
	WNAME("node", node, REQ, "node name"),
	WSTR("addr", addr, 0, "host:port it joined with"),
	WINT("local_world_size", local_world_size, REQ, 1, LOCAL_WORLD, "its workers"),
	WINT("group_rank", group_rank, REQ, 0, RV_MAX_WORLD_NODES - 1, "its rank among the nodes"),
	WINT("rank_offset", rank_offset, REQ, 0, RV_MAX_WORLD_NODES *LOCAL_WORLD,
	     "global rank of its local rank 0: the sum of local_world_size below it"),
};
const struct rv_wire_message rv_wire_rdzv_member_msg =
	RV_WIRE_MSG("RdzvMember", "one node of a world", f_rdzv_member, NULL, NULL);
#undef T

#define T struct rv_rdzv_world_reply
static const struct rv_wire_field f_rdzv_world[] = {
	WENUM("status", status, REQ, rv_wire_rdzv_status_names,
	      "complete|gathering|stale|spare|failed|unknown",
	      "complete: the world is in members; gathering: not yet (ask again); stale or "
	      "unknown: join again; spare: complete without this node; failed: min nodes not "
	      "reached within the max wait"),
	WINT("round", round, REQ, 0, INT64_MAX, "the round asked about"),
	WINTD("group_rank", group_rank, 0, -1, -1, RV_MAX_WORLD_NODES - 1,
	      "this node's rank, -1 unless complete"),
	WINT("nnodes", nnodes, 0, 0, RV_MAX_WORLD_NODES, "nodes in the world"),
	WINT("world_size", world_size, 0, 0, RV_MAX_WORLD_NODES *LOCAL_WORLD,
	     "workers in the world"),
	WINT("waiting", waiting, 0, 0, INT32_MAX, "nodes waiting that would change the world"),
	WARRAY("members", members, nmembers, RV_WIRE_ALLOC, RV_MAX_WORLD_NODES,
	       &rv_wire_rdzv_member_msg, "RdzvMember", "the world, by group rank"),
};
const struct rv_wire_message rv_wire_rdzv_world_msg =
	RV_WIRE_MSG("RdzvWorld", "a round's world as one node sees it", f_rdzv_world,
		    "rendezvous world", NULL);
#undef T

#define T struct rv_heartbeat
static const struct rv_wire_field f_heartbeat[] = {
	WNAME("node", node, REQ, "node name as joined"),
	WBOOL("done", done, RV_WIRE_OMIT,
	      "every worker of the node finished: its silence from now on is no death"),
};
const struct rv_wire_message rv_wire_heartbeat_msg =
	RV_WIRE_MSG("Heartbeat", "a node is alive", f_heartbeat, "heartbeat", NULL);
#undef T

#define T struct rv_heartbeat_reply
static const struct rv_wire_field f_heartbeat_reply[] = {
	WINT("round", round, REQ, 0, INT64_MAX, "the current round"),
	WINT("waiting", waiting, 0, 0, INT32_MAX, "nodes waiting that would change the world"),
	WBOOL("rejoin", rejoin, 0, "true: rendezvous again (the world changed or can grow)"),
};
const struct rv_wire_message rv_wire_heartbeat_reply_msg =
	RV_WIRE_MSG("HeartbeatReply", "whether the node should rendezvous again", f_heartbeat_reply,
		    "heartbeat reply", NULL);
#undef T

#define T struct rv_failure_report
static const struct rv_wire_field f_failure[] = {
	WNAME("node", node, REQ, "the node that failed or left"),
	WSTR("reason", reason, 0, "free text"),
	WINTD("exit_code", exit_code, 0, -1, -255, 255, "-255..255, negative: signal; -1 none"),
};
const struct rv_wire_message rv_wire_failure_msg =
	RV_WIRE_MSG("FailureReport", "a node failed or left", f_failure, "failure report", NULL);
#undef T

#define T struct rv_step_report
static const struct rv_wire_field f_step_report[] = {
	WNAME("node", node, REQ, "reporting node"),
	WINT("step", step, REQ, 0, INT64_MAX, "global step"),
	WNUM("speed", speed, 0, 0, RV_WIRE_MAX_SPEED, "samples/s"),
	WINT("ts", ts_ms, RV_WIRE_OMIT, 1, INT64_MAX, "ms since the epoch; default now"),
	WNUM("compute_time", compute_time, RV_WIRE_OMIT, 0, 1e7,
	     "seconds of the node's own work in the step, without the wait for its peers; "
	     "0 or absent: unknown"),
};
const struct rv_wire_message rv_wire_step_report_msg =
	RV_WIRE_MSG("StepReport", "training progress", f_step_report, "step report", NULL);
#undef T

#define T struct rv_node_usage
static const struct rv_wire_field f_node_usage[] = {
	WNAME("node", node, REQ, "reporting node"),
	WINTD("rank", rank, 0, -1, -1, 1 << 20, "the node's group rank, -1 unknown"),
	WNUM("cpu", cpu, REQ, 0, 1e6, "cores used by the node's workers since the previous report"),
	WNUM("cpu_limit", cpu_limit, 0, 0, 1e6, "the node's CPU quota in cores, 0 none"),
	WINT("memory_mb", memory_mb, REQ, 0, INT64_MAX / 2,
	     "resident memory of the node's workers"),
	WNUM("throttled", throttled, 0, 0, 1,
	     "share of CPU quota periods throttled since the previous report, 0..1"),
	WINT("nr_periods", nr_periods, 0, 0, INT64_MAX, "quota periods (cgroup cpu.stat)"),
	WINT("nr_throttled", nr_throttled, 0, 0, INT64_MAX, "periods throttled"),
	WINT("throttled_us", throttled_us, 0, 0, INT64_MAX, "time held by the quota, us"),
	WINT("gpus", gpus, 0, 0, 1024, "GPUs on the node"),
	WINT("gpu_memory_mb", gpu_memory_mb, 0, 0, INT64_MAX / 2, "GPU memory in use"),
	WINT("gpu_memory_total_mb", gpu_memory_total_mb, 0, 0, INT64_MAX / 2, "GPU memory in all"),
	WINT("ts", ts_ms, RV_WIRE_OMIT, 1, INT64_MAX, "ms since the epoch; default now"),
};
const struct rv_wire_message rv_wire_node_usage_msg =
	RV_WIRE_MSG("NodeUsage", "a node's resource usage", f_node_usage, "usage report", NULL);
#undef T

RV_WIRE_CODEC(rdzv_join, rv_wire_rdzv_join_msg, struct rv_rdzv_join)
RV_WIRE_CODEC(rdzv_joined, rv_wire_rdzv_joined_msg, struct rv_rdzv_joined)
RV_WIRE_CODEC(rdzv_world_reply, rv_wire_rdzv_world_msg, struct rv_rdzv_world_reply)
RV_WIRE_CODEC(heartbeat, rv_wire_heartbeat_msg, struct rv_heartbeat)
RV_WIRE_CODEC(heartbeat_reply, rv_wire_heartbeat_reply_msg, struct rv_heartbeat_reply)
RV_WIRE_CODEC(failure_report, rv_wire_failure_msg, struct rv_failure_report)
RV_WIRE_CODEC(step_report, rv_wire_step_report_msg, struct rv_step_report)
RV_WIRE_CODEC(node_usage, rv_wire_node_usage_msg, struct rv_node_usage)

void rv_rdzv_world_reply_release(struct rv_rdzv_world_reply *m)
{
	rv_wire_release(&rv_wire_rdzv_world_msg, m);
}
