/*
 * check_wire_master.c: the master's control messages in common/wire.c:
 * documents parse to the right values and round-trip through JSON text, bad
 * input is refused naming the field, and rv_wire_master_messages() matches
 * the code key by key, both ways (what the master's OpenAPI document is
 * generated from).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "brainfix.h"
#include "testutil.h"
#include "wire.h"
#include "wirefix.h"

enum mkind {
	K_JOIN,
	K_JOINED,
	K_WORLD,
	K_HB,
	K_HB_REPLY,
	K_FAILURE,
	K_NEXT,
	K_TASK,
	K_DONE,
	K_DONE_REPLY,
	K_CKPT_REPORT,
	K_DATA_CKPT,
	K_STEP,
	K_JOB,
	K_STREAM_END,
	K_STREAM_STATUS,
	K_NC_JOIN,
	K_NC_JOINED,
	K_NC_GROUP,
	K_NC_REPORT,
	K_NC_STATUS,
	K_USAGE,
	K_COUNT
};

static const char *const docs[K_COUNT] = {
	[K_JOIN] = "{\"node\":\"n-0\",\"addr\":\"10.0.0.1:29500\",\"local_world_size\":2}",
	[K_JOINED] = "{\"round\":3}",
	[K_WORLD] =
		"{\"status\":\"complete\",\"round\":4,\"group_rank\":1,\"nnodes\":2,"
		"\"world_size\":3,\"waiting\":0,\"members\":[{\"node\":\"n-0\",\"addr\":\"a:1\","
		"\"local_world_size\":2,\"group_rank\":0,\"rank_offset\":0},{\"node\":\"n-1\","
		"\"addr\":\"b:1\",\"local_world_size\":1,\"group_rank\":1,\"rank_offset\":2}]}",
	[K_HB] = "{\"node\":\"n-0\",\"done\":true}",
	[K_HB_REPLY] = "{\"round\":2,\"waiting\":1,\"rejoin\":true}",
	[K_FAILURE] = "{\"node\":\"n-0\",\"reason\":\"oom\",\"exit_code\":-9}",
	[K_NEXT] = "{\"node\":\"n-0\",\"worker\":3,\"dataset\":\"train\",\"req\":77}",
	[K_TASK] = "{\"status\":\"task\",\"id\":5,\"dataset\":\"train\",\"epoch\":1,\"start\":600,"
		   "\"end\":1200,\"partition\":\"p-3\"}",
	[K_DONE] = "{\"node\":\"n-0\",\"worker\":3,\"id\":5}",
	[K_DONE_REPLY] = "{\"counted\":true}",
	[K_CKPT_REPORT] = "{\"step\":100,\"worker\":3,\"task_id\":5,\"consumed\":64}",
	[K_DATA_CKPT] = "{\"step\":100,\"checkpoint\":{\"datasets\":[{\"cursor\":3}]}}",
	[K_STEP] = "{\"node\":\"n-0\",\"step\":100,\"speed\":512.5,\"ts\":1700000000000,\"compute_"
		   "time\":0.25}",
	[K_USAGE] = "{\"node\":\"n-0\",\"rank\":1,\"cpu\":1.5,\"cpu_limit\":2,\"memory_mb\":900,"
		    "\"throttled\":0.25,\"nr_periods\":40,\"nr_throttled\":10,\"throttled_us\":"
		    "25000,\"gpus\":2,\"gpu_memory_mb\":3000,\"gpu_memory_total_mb\":160000,"
		    "\"ts\":1700000000000}",
	[K_JOB] = "{\"job\":\"mnist\",\"state\":\"complete\",\"round\":2,\"nnodes\":2,"
		  "\"world_size\":4,\"waiting\":0,\"step\":10,\"speed\":3.5,\"finished\":false,"
		  "\"datasets\":[{\"name\":\"train\",\"samples_total\":120000,\"samples_done\":600,"
		  "\"epoch\":0,\"finished\":false}],"
		  "\"brain\":{\"mode\":\"cluster\",\"uid\":\"j-7\",\"reachable\":true,\"queued\":2,"
		  "\"sent\":40,\"dropped\":1,\"last_error\":\"\"},"
		  "\"plan\":{\"id\":9,\"stage\":\"running\",\"reason\":\"more workers\","
		  "\"applied\":true,\"proposed\":false,\"groups\":{\"worker\":{\"count\":4,"
		  "\"cpu\":2,\"memory_mb\":4096,\"gpu\":0}},"
		  "\"not_applied\":\"migrate ps-0: the PS data handover\"},"
		  "\"desired\":{\"worker\":{\"count\":4,\"cpu\":2,\"memory_mb\":4096,\"gpu\":0}},"
		  "\"netcheck\":\"done\",\"faulty\":[\"n-3\"],\"stragglers\":[\"n-1\",\"n-2\"],"
		  "\"job_state\":\"failed\","
		  "\"job_reason\":\"node worker-1 (worker rank 1): exited with code 3\","
		  "\"nodes\":[{\"name\":\"worker-0\",\"instance\":\"worker-0.2\","
		  "\"role\":\"worker\",\"rank\":0,\"host\":\"\",\"state\":\"running\","
		  "\"pid\":123,\"restarts\":1,\"oom_relaunches\":1,\"memory_limit_mb\":96,"
		  "\"cpu_seconds\":1.5,\"memory_mb\":40,\"throttled_usec\":-1}]}",
	[K_STREAM_END] = "{\"partition\":\"p-0\",\"end_offset\":5000}",
	[K_STREAM_STATUS] = "{\"dataset\":\"clicks\",\"partitions\":[{\"name\":\"p-0\","
			    "\"start_offset\":0,\"committed_offset\":300,\"end_offset\":-1,"
			    "\"doing\":2}]}",
	[K_NC_JOIN] = "{\"node\":\"n-0\"}",
	[K_NC_JOINED] = "{\"check\":2,\"world\":5,\"nodes\":4}",
	[K_NC_GROUP] = "{\"check\":2,\"round\":1,\"status\":\"ready\",\"peers\":[{\"node\":\"n-0\","
		       "\"addr\":\"a:1\"},{\"node\":\"n-3\",\"addr\":\"b:1\"}]}",
	[K_NC_REPORT] = "{\"node\":\"n-0\",\"check\":2,\"round\":0,\"ok\":true,\"time_s\":0.25,"
			"\"compute_s\":0.2}",
	[K_NC_STATUS] = "{\"check\":2,\"world\":5,\"state\":\"done\",\"round\":1,\"nodes\":[{"
			"\"node\":\"n-0\",\"verdict\":\"straggler\",\"silent\":false,\"ok0\":true,"
			"\"ok1\":false,\"time0_s\":1.5,\"time1_s\":0}]}",
};

/* Parse a document of kind k (and when back is not NULL, write it again). */
static int parse_kind(enum mkind k, const cJSON *doc, cJSON **back, struct rv_err *err)
{
	int rc = -EINVAL;
	cJSON *out = NULL;
#define CASE(kind, type, from, to)                                                                 \
	case kind: {                                                                               \
		type v;                                                                            \
		if ((rc = from(doc, &v, err)) == 0 && back)                                        \
			out = to(&v);                                                              \
		break;                                                                             \
	}
	switch (k) {
		CASE(K_JOIN, struct rv_rdzv_join, rv_rdzv_join_from_json, rv_rdzv_join_to_json)
		CASE(K_JOINED, struct rv_rdzv_joined, rv_rdzv_joined_from_json,
		     rv_rdzv_joined_to_json)
		CASE(K_HB, struct rv_heartbeat, rv_heartbeat_from_json, rv_heartbeat_to_json)
		CASE(K_HB_REPLY, struct rv_heartbeat_reply, rv_heartbeat_reply_from_json,
		     rv_heartbeat_reply_to_json)
		CASE(K_FAILURE, struct rv_failure_report, rv_failure_report_from_json,
		     rv_failure_report_to_json)
		CASE(K_NEXT, struct rv_shard_next, rv_shard_next_from_json, rv_shard_next_to_json)
		CASE(K_TASK, struct rv_shard_task, rv_shard_task_from_json, rv_shard_task_to_json)
		CASE(K_DONE, struct rv_shard_done, rv_shard_done_from_json, rv_shard_done_to_json)
		CASE(K_DONE_REPLY, struct rv_shard_done_reply, rv_shard_done_reply_from_json,
		     rv_shard_done_reply_to_json)
		CASE(K_CKPT_REPORT, struct rv_ckpt_report, rv_ckpt_report_from_json,
		     rv_ckpt_report_to_json)
		CASE(K_STEP, struct rv_step_report, rv_step_report_from_json,
		     rv_step_report_to_json)
		CASE(K_USAGE, struct rv_node_usage, rv_node_usage_from_json, rv_node_usage_to_json)
		CASE(K_JOB, struct rv_job_status, rv_job_status_from_json, rv_job_status_to_json)
		CASE(K_STREAM_END, struct rv_stream_end, rv_stream_end_from_json,
		     rv_stream_end_to_json)
		CASE(K_STREAM_STATUS, struct rv_stream_status, rv_stream_status_from_json,
		     rv_stream_status_to_json)
		CASE(K_NC_JOIN, struct rv_netcheck_join, rv_netcheck_join_from_json,
		     rv_netcheck_join_to_json)
		CASE(K_NC_JOINED, struct rv_netcheck_joined, rv_netcheck_joined_from_json,
		     rv_netcheck_joined_to_json)
		CASE(K_NC_GROUP, struct rv_netcheck_group_reply, rv_netcheck_group_reply_from_json,
		     rv_netcheck_group_reply_to_json)
		CASE(K_NC_REPORT, struct rv_netcheck_report, rv_netcheck_report_from_json,
		     rv_netcheck_report_to_json)
	case K_NC_STATUS: {
		struct rv_netcheck_status v;
		if ((rc = rv_netcheck_status_from_json(doc, &v, err)) == 0 && back)
			out = rv_netcheck_status_to_json(&v);
		rv_netcheck_status_release(&v);
		break;
	}
	case K_WORLD: {
		struct rv_rdzv_world_reply v;
		if ((rc = rv_rdzv_world_reply_from_json(doc, &v, err)) == 0 && back)
			out = rv_rdzv_world_reply_to_json(&v);
		rv_rdzv_world_reply_release(&v);
		break;
	}
	case K_DATA_CKPT: {
		struct rv_data_ckpt v;
		if ((rc = rv_data_ckpt_from_json(doc, &v, err)) == 0 && back)
			out = rv_data_ckpt_to_json(&v);
		rv_data_ckpt_release(&v);
		break;
	}
	case K_COUNT:
		break;
	}
#undef CASE
	if (back)
		*back = out;
	return rc;
}

/* The item at a dotted path of a document the test may change. */
static cJSON *at(cJSON *root, const char *path)
{
	return (cJSON *)rv_test_json_at(root, path);
}

static int parse_from(const void *kind, const cJSON *doc, struct rv_err *err)
{
	return parse_kind(*(const enum mkind *)kind, doc, NULL, err);
}

/* Where each message sits in its kind's document ("" the root). */
static const struct {
	const char *name;
	enum mkind kind;
	const char *at;
} cases[] = {
	{ "RdzvJoin", K_JOIN, "" },
	{ "RdzvJoined", K_JOINED, "" },
	{ "RdzvWorld", K_WORLD, "" },
	{ "Heartbeat", K_HB, "" },
	{ "HeartbeatReply", K_HB_REPLY, "" },
	{ "FailureReport", K_FAILURE, "" },
	{ "ShardNext", K_NEXT, "" },
	{ "ShardTask", K_TASK, "" },
	{ "ShardDone", K_DONE, "" },
	{ "ShardDoneReply", K_DONE_REPLY, "" },
	{ "CkptReport", K_CKPT_REPORT, "" },
	{ "DataCheckpoint", K_DATA_CKPT, "" },
	{ "StepReport", K_STEP, "" },
	{ "NodeUsage", K_USAGE, "" },
	{ "JobStatus", K_JOB, "" },
	{ "RdzvMember", K_WORLD, "members.1" },
	{ "DatasetStatus", K_JOB, "datasets.0" },
	{ "BrainLink", K_JOB, "brain" },
	{ "PlanState", K_JOB, "plan" },
	{ "RoleTarget", K_JOB, "desired.worker" },
	{ "StreamEnd", K_STREAM_END, "" },
	{ "StreamStatus", K_STREAM_STATUS, "" },
	{ "StreamPartition", K_STREAM_STATUS, "partitions.0" },
	{ "NetcheckJoin", K_NC_JOIN, "" },
	{ "NetcheckJoined", K_NC_JOINED, "" },
	{ "NetcheckGroup", K_NC_GROUP, "" },
	{ "NetcheckPeer", K_NC_GROUP, "peers.1" },
	{ "NetcheckReport", K_NC_REPORT, "" },
	{ "NetcheckStatus", K_NC_STATUS, "" },
	{ "NetcheckResult", K_NC_STATUS, "nodes.0" },
	{ "NodeStatus", K_JOB, "nodes.0" },
};

START_TEST(test_round_trip)
{
	for (int k = 0; k < K_COUNT; k++) {
		cJSON *doc = rv_test_json_must_parse(docs[k]);
		cJSON *back = NULL;
		struct rv_err err = { 0 };
		ck_assert_msg(parse_kind((enum mkind)k, doc, &back, &err) == 0, "%s: %s", docs[k],
			      err.msg);
		ck_assert_ptr_nonnull(back);
		/* every key and value of the document comes back as it was */
		ck_assert_msg(cJSON_Compare(doc, back, 1), "%s came back as %s", docs[k],
			      cJSON_PrintUnformatted(back));
		cJSON_Delete(back);
		cJSON_Delete(doc);
	}
}
END_TEST

START_TEST(test_values)
{
	struct rv_err err = { 0 };
	cJSON *doc = rv_test_json_must_parse(docs[K_WORLD]);
	struct rv_rdzv_world_reply w;
	ck_assert_int_eq(rv_rdzv_world_reply_from_json(doc, &w, &err), 0);
	ck_assert_int_eq(w.status, RV_RDZV_COMPLETE);
	ck_assert_int_eq(w.round, 4);
	ck_assert_int_eq(w.nmembers, 2);
	ck_assert_str_eq(w.members[1].node, "n-1");
	ck_assert_int_eq(w.members[1].rank_offset, 2);
	rv_rdzv_world_reply_release(&w);
	cJSON_Delete(doc);

	doc = rv_test_json_must_parse("{\"node\":\"n-0\"}");
	struct rv_rdzv_join j;
	ck_assert_int_eq(rv_rdzv_join_from_json(doc, &j, &err), 0);
	ck_assert_int_eq(j.local_world_size, 1); /* the default */
	ck_assert_str_eq(j.addr, "");
	cJSON_Delete(doc);

	doc = rv_test_json_must_parse("{\"status\":\"finished\"}");
	struct rv_shard_task t;
	ck_assert_int_eq(rv_shard_task_from_json(doc, &t, &err), 0);
	ck_assert_int_eq(t.status, RV_SHARD_FINISHED);
	cJSON_Delete(doc);

	doc = rv_test_json_must_parse(docs[K_DATA_CKPT]);
	struct rv_data_ckpt ck;
	ck_assert_int_eq(rv_data_ckpt_from_json(doc, &ck, &err), 0);
	ck_assert_int_eq(ck.step, 100);
	ck_assert_str_eq(ck.checkpoint, "{\"datasets\":[{\"cursor\":3}]}");
	ck_assert_uint_eq(ck.len, strlen(ck.checkpoint));
	rv_data_ckpt_release(&ck);
	cJSON_Delete(doc);
}
END_TEST

/* Bad input: rejected with the field named. */
START_TEST(test_bad)
{
	static const struct {
		enum mkind kind;
		const char *doc, *field;
	} bad[] = {
		{ K_JOIN, "{\"node\":\"a b\"}", "node" },
		{ K_JOIN, "{\"node\":\"\"}", "node" },
		{ K_JOIN, "{\"node\":\"n\",\"local_world_size\":0}", "local_world_size" },
		{ K_JOIN, "[]", "" },
		{ K_NEXT, "{\"node\":\"n\",\"worker\":-1}", "worker" },
		{ K_NEXT, "{\"node\":\"n\",\"worker\":1,\"dataset\":\"a/b\"}", "dataset" },
		{ K_NEXT, "{\"node\":\"n\",\"worker\":1.5}", "worker" },
		{ K_DONE, "{\"node\":\"n\",\"worker\":1,\"id\":0}", "id" },
		{ K_TASK,
		  "{\"status\":\"task\",\"id\":1,\"dataset\":\"d\",\"epoch\":0,\"start\":5,"
		  "\"end\":4}",
		  "end" },
		{ K_TASK, "{\"status\":\"maybe\"}", "status" },
		{ K_CKPT_REPORT, "{\"step\":-1,\"worker\":0}", "step" },
		{ K_DATA_CKPT, "{\"step\":1,\"checkpoint\":\"x\"}", "checkpoint" },
		{ K_WORLD, "{\"status\":\"complete\",\"round\":1,\"members\":[{\"node\":\"n\"}]}",
		  "members[0].local_world_size" },
		{ K_FAILURE, "{\"node\":\"n\",\"exit_code\":300}", "exit_code" },
		{ K_STEP, "{\"node\":\"n\",\"step\":1,\"speed\":-2}", "speed" },
		{ K_USAGE, "{\"node\":\"n\",\"cpu\":-1,\"memory_mb\":1}", "cpu" },
		{ K_USAGE, "{\"node\":\"n\",\"cpu\":1,\"memory_mb\":1,\"throttled\":1.5}",
		  "throttled" },
		{ K_USAGE, "{\"cpu\":1,\"memory_mb\":1}", "node" },
		{ K_JOB, "{\"job\":\"j\",\"state\":\"complete\",\"datasets\":[{\"name\":\"d\"}]}",
		  "datasets[0].samples_total" },
		{ K_STREAM_END, "{\"partition\":\"p\",\"end_offset\":-1}", "end_offset" },
		{ K_STREAM_END, "{\"end_offset\":1}", "partition" },
		{ K_NC_REPORT, "{\"node\":\"n\",\"check\":1,\"round\":2,\"ok\":false}", "round" },
		{ K_NC_REPORT, "{\"node\":\"n\",\"check\":1,\"round\":0,\"ok\":true}", "time_s" },
		{ K_NC_REPORT,
		  "{\"node\":\"n\",\"check\":1,\"round\":0,\"ok\":true,\"time_s\":1,\"compute_s\":-"
		  "1}",
		  "compute_s" },
		{ K_NC_GROUP, "{\"check\":1,\"round\":0,\"status\":\"ready\"}", "peers" },
		{ K_NC_GROUP, "{\"check\":1,\"round\":0,\"status\":\"ready\",\"peers\":[]}",
		  "peers" },
		{ K_JOB, "{\"job\":\"j\",\"state\":\"complete\",\"faulty\":[\"a b\"]}",
		  "faulty[0]" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cJSON *doc = rv_test_json_must_parse(bad[i].doc);
		struct rv_err err = { 0 };
		int rc = parse_kind(bad[i].kind, doc, NULL, &err);
		ck_assert_msg(rc == -EINVAL, "%s: rc %d", bad[i].doc, rc);
		ck_assert_msg(!strcmp(err.field, bad[i].field),
			      "%s: field \"%s\", want \"%s\" (%s)", bad[i].doc, err.field,
			      bad[i].field, err.msg);
		cJSON_Delete(doc);
	}
}
END_TEST

/* A node alone in a round (an odd count) is a ready group of one. */
START_TEST(test_netcheck_group_of_one)
{
	cJSON *doc = rv_test_json_must_parse("{\"check\":1,\"round\":1,\"status\":\"ready\","
					     "\"peers\":[{\"node\":\"n2\",\"addr\":\"a:1\"}]}");
	struct rv_netcheck_group_reply g;
	struct rv_err err = { 0 };
	ck_assert_msg(rv_netcheck_group_reply_from_json(doc, &g, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(g.npeers, 1);
	ck_assert_str_eq(g.peers[0].node, "n2");
	cJSON_Delete(doc);
}
END_TEST

/* Table -> code: every field is read (a wrong type is refused naming it), a
 * required one is required, an optional one is not (unless its description
 * says when it is). */
START_TEST(test_table_fields_are_parsed)
{
	int n;
	(void)rv_wire_master_messages(&n);
	ck_assert_int_eq(n, (int)(sizeof(cases) / sizeof(cases[0])));
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		const struct rv_wire_message *msg = rv_wire_master_message(cases[c].name);
		ck_assert_msg(msg, "no table for %s", cases[c].name);
		for (int f = 0; f < msg->nfields; f++) {
			const struct rv_wire_field *fd = &msg->fields[f];
			cJSON *doc = rv_test_json_must_parse(docs[cases[c].kind]);
			cJSON *obj = at(doc, cases[c].at);
			ck_assert_msg(cJSON_GetObjectItemCaseSensitive(obj, fd->name),
				      "%s.%s: not in the test document", msg->name, fd->name);
			rv_test_wire_field_is_parsed(msg, fd, doc, obj, parse_from, &cases[c].kind);
			cJSON_Delete(doc);
		}
	}
}
END_TEST

/* Code -> table: to_json writes every field of the table and none besides. */
START_TEST(test_table_fields_are_written)
{
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		const struct rv_wire_message *msg = rv_wire_master_message(cases[c].name);
		ck_assert_ptr_nonnull(msg);
		cJSON *doc = rv_test_json_must_parse(docs[cases[c].kind]);
		cJSON *back = NULL;
		struct rv_err err = { 0 };
		ck_assert_int_eq(parse_kind(cases[c].kind, doc, &back, &err), 0);
		const cJSON *o = at(back, cases[c].at);
		ck_assert_msg(cJSON_IsObject(o), "%s: no object at \"%s\"", msg->name, cases[c].at);
		bool seen[32] = { false };
		ck_assert_int_le(msg->nfields, 32);
		rv_test_wire_keys_in_table(msg, o, seen);
		rv_test_wire_all_written(msg, seen);
		cJSON_Delete(back);
		cJSON_Delete(doc);
	}
}
END_TEST

/* Every ref names a message of the master's table set. */
START_TEST(test_table_refs_resolve)
{
	int n;
	const struct rv_wire_message *m = rv_wire_master_messages(&n);
	for (int i = 0; i < n; i++)
		for (int f = 0; f < m[i].nfields; f++)
			if (m[i].fields[f].ref && strcmp(m[i].fields[f].ref, "string"))
				ck_assert_msg(rv_wire_master_message(m[i].fields[f].ref),
					      "%s.%s: ref %s unknown", m[i].name,
					      m[i].fields[f].name, m[i].fields[f].ref);
	ck_assert_ptr_null(rv_wire_master_message("ElasticJob"));
	ck_assert_int_eq(rv_rdzv_status_parse("spare"), RV_RDZV_SPARE);
	ck_assert_int_eq(rv_shard_status_parse("wait"), RV_SHARD_WAIT);
	ck_assert_int_eq(rv_shard_status_parse("nope"), -EINVAL);
}
END_TEST

static Suite *wire_master_suite(void)
{
	TCase *tc_messages = RV_TEST_TCASE("messages", 0, test_round_trip, test_values, test_bad,
					   test_netcheck_group_of_one);
	TCase *tc_tables = RV_TEST_TCASE("tables", 0, test_table_fields_are_parsed,
					 test_table_fields_are_written, test_table_refs_resolve);
	return RV_TEST_SUITE("wire_master", tc_messages, tc_tables);
}

RV_TEST_MAIN(wire_master_suite)
