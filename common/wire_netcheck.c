/*
 * wire_netcheck.c: the network check's messages (wire.h, master/README.md
 * "Network check"): join, group, report, status.  Each is its table;
 * wire_codec.c reads and writes it, hooks only for the rules on a group's
 * peers and an ok report's time.
 */
#include <stdint.h>

#include "json.h"
#include "wire_codec.h"

#define REQ RV_WIRE_REQ

const char *const rv_wire_netcheck_state_names[3] = {
	[RV_NETCHECK_NONE] = "none",
	[RV_NETCHECK_RUNNING] = "running",
	[RV_NETCHECK_DONE] = "done",
};
static const char *const verdict_names[] = {
	[RV_VERDICT_PENDING] = "pending",
	[RV_VERDICT_OK] = "ok",
	[RV_VERDICT_FAULTY] = "faulty",
	[RV_VERDICT_STRAGGLER] = "straggler",
};
static const char *const group_status_names[] = {
	[RV_NETCHECK_READY] = "ready",
	[RV_NETCHECK_WAIT] = "wait",
};

const char *rv_netcheck_state_name(enum rv_netcheck_state s)
{
	return rv_wire_name_of(rv_wire_netcheck_state_names,
			       RV_ARRAY_SIZE(rv_wire_netcheck_state_names), (int)s);
}

const char *rv_netcheck_verdict_name(enum rv_netcheck_verdict v)
{
	return rv_wire_name_of(verdict_names, RV_ARRAY_SIZE(verdict_names), (int)v);
}

const char *rv_netcheck_group_status_name(enum rv_netcheck_group_status s)
{
	return rv_wire_name_of(group_status_names, RV_ARRAY_SIZE(group_status_names), (int)s);
}

int rv_netcheck_group_status_parse(const char *s)
{
	return rv_wire_parse_of(group_status_names, RV_ARRAY_SIZE(group_status_names), s);
}

#define T struct rv_netcheck_join
static const struct rv_wire_field f_netcheck_join[] = {
	WNAME("node", node, REQ, "node name as joined to the rendezvous"),
};
const struct rv_wire_message rv_wire_netcheck_join_msg =
	RV_WIRE_MSG("NetcheckJoin", "a node is ready for the network check", f_netcheck_join,
		    "network check join", NULL);
#undef T

#define T struct rv_netcheck_joined
static const struct rv_wire_field f_netcheck_joined[] = {
	WINT("check", check, REQ, 1, INT64_MAX, "check id: report with it"),
	WINT("world", world, REQ, 0, INT64_MAX, "the rendezvous round being checked"),
	WINT("nodes", nodes, REQ, 2, RV_MAX_WORLD_NODES, "members of the check"),
};
const struct rv_wire_message rv_wire_netcheck_joined_msg =
	RV_WIRE_MSG("NetcheckJoined", "the check a node takes part in", f_netcheck_joined,
		    "network check joined", NULL);
#undef T

#define T struct rv_netcheck_peer
static const struct rv_wire_field f_netcheck_peer[] = {
	WNAME("node", node, REQ, "node name"),
	WSTR("addr", addr, 0, "host:port it joined the rendezvous with"),
};
const struct rv_wire_message rv_wire_netcheck_peer_msg =
	RV_WIRE_MSG("NetcheckPeer", "one member of a check group", f_netcheck_peer, NULL, NULL);
#undef T

/* A ready group has 1 to 3 peers (one: a node alone in a round of an odd
 * count); one that waits has none to list. */
static int peers_parse(const cJSON *o, const char *path, const struct rv_wire_field *f, void *mp,
		       struct rv_err *err)
{
	struct rv_netcheck_group_reply *m = mp;
	bool ready = m->status == RV_NETCHECK_READY;
	rv_wire_path p;
	int rc;
	const cJSON *arr = rv_json_get_array(o, f->name, path, ready, &rc, err);
	if (!arr)
		return rc;
	rv_json_path(p, sizeof(p), path, f->name);
	int n = rv_wire_count(arr, 3);
	if (n > 3 || (ready && n < 1))
		return rv_err_set(err, -EINVAL, p, "%s must have 1 to 3 entries", p);
	rc = rv_wire_decode_items(f->elem, arr, p, m->peers, &m->npeers, err);
	return rc < 0 ? rc : 1;
}

#define T struct rv_netcheck_group_reply
static const struct rv_wire_field f_netcheck_group[] = {
	WINT("check", check, REQ, 1, INT64_MAX, "check id"),
	WINT("round", round, REQ, 0, 1, "0 or 1"),
	WENUM("status", status, REQ, group_status_names, "ready|wait",
	      "ready: run the collective with peers; wait: the round is not open yet, ask again"),
	WARRAY("peers", peers, npeers, 0, 3, &rv_wire_netcheck_peer_msg, "NetcheckPeer",
	       "the group, this node included (required for ready)", .parse = peers_parse),
};
const struct rv_wire_message rv_wire_netcheck_group_msg =
	RV_WIRE_MSG("NetcheckGroup", "a node's group in a check round", f_netcheck_group,
		    "network check group", NULL);
#undef T

/* An ok report says how long its collective took. */
static int report_check(const cJSON *o, const char *path, void *mp, struct rv_err *err)
{
	static const char *const ok_keys[] = { "time_s", NULL };
	const struct rv_netcheck_report *m = mp;
	return m->ok ? rv_wire_decode_required(&rv_wire_netcheck_report_msg, o, path, mp, ok_keys,
					       err)
		     : 0;
}

#define T struct rv_netcheck_report
static const struct rv_wire_field f_netcheck_report[] = {
	WNAME("node", node, REQ, "reporting node"),
	WINT("check", check, REQ, 1, INT64_MAX, "check id from join"),
	WINT("round", round, REQ, 0, 1, "0 or 1"),
	WBOOL("ok", ok, REQ, "whether the group's collective succeeded"),
	WNUM("time_s", time_s, 0, 0, 86400,
	     "how long it took, seconds (required for an ok report)"),
	WNUM("compute_s", compute_s, RV_WIRE_OMIT, 0, 86400,
	     "the part of time_s that was the node's own work, seconds (0 or absent: not "
	     "measured)"),
};
const struct rv_wire_message rv_wire_netcheck_report_msg =
	RV_WIRE_MSG("NetcheckReport", "a node's result of a check round", f_netcheck_report,
		    "network check report", report_check);
#undef T

#define T struct rv_netcheck_result
static const struct rv_wire_field f_netcheck_result[] = {
	WNAME("node", node, REQ, "member"),
	WENUM("verdict", verdict, REQ, verdict_names, "pending|ok|faulty|straggler",
	      "faulty: failed both rounds; straggler: slower than the ratio to the median"),
	WBOOL("silent", silent, 0,
	      "missed a round's report deadline (netcheck.timeout_ms): counted as failed"),
	WBOOL("ok0", ok0, 0, "round 0 succeeded"),
	WBOOL("ok1", ok1, 0, "round 1 succeeded"),
	WNUM("time0_s", time0_s, 0, 0, 86400, "round 0 time, seconds"),
	WNUM("time1_s", time1_s, 0, 0, 86400, "round 1 time, seconds"),
};
const struct rv_wire_message rv_wire_netcheck_result_msg =
	RV_WIRE_MSG("NetcheckResult", "one member's results and verdict", f_netcheck_result, NULL,
		    NULL);
#undef T

#define T struct rv_netcheck_status
static const struct rv_wire_field f_netcheck_status[] = {
	WINT("check", check, REQ, 0, INT64_MAX, "check id, 0: none yet"),
	WINT("world", world, 0, 0, INT64_MAX, "the rendezvous round it checks"),
	WENUM("state", state, REQ, rv_wire_netcheck_state_names, "none|running|done",
	      "where the check is"),
	WINT("round", round, 0, 0, 1, "the open round while running"),
	WARRAY("nodes", nodes, nnodes, RV_WIRE_ALLOC, RV_MAX_WORLD_NODES,
	       &rv_wire_netcheck_result_msg, "NetcheckResult", "one entry per member"),
};
const struct rv_wire_message rv_wire_netcheck_status_msg =
	RV_WIRE_MSG("NetcheckStatus", "the last network check and its verdicts", f_netcheck_status,
		    "network check status", NULL);
#undef T

RV_WIRE_CODEC(netcheck_join, rv_wire_netcheck_join_msg, struct rv_netcheck_join)
RV_WIRE_CODEC(netcheck_joined, rv_wire_netcheck_joined_msg, struct rv_netcheck_joined)
RV_WIRE_CODEC(netcheck_group_reply, rv_wire_netcheck_group_msg, struct rv_netcheck_group_reply)
RV_WIRE_CODEC(netcheck_report, rv_wire_netcheck_report_msg, struct rv_netcheck_report)
RV_WIRE_CODEC(netcheck_status, rv_wire_netcheck_status_msg, struct rv_netcheck_status)

void rv_netcheck_status_release(struct rv_netcheck_status *m)
{
	rv_wire_release(&rv_wire_netcheck_status_msg, m);
}
