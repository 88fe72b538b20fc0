/*
 * wire_shard.c: the master's data messages (wire.h): shard requests, tasks
 * and dones, data checkpoints, streams.  Each is its table; wire_codec.c
 * reads and writes it, hooks only for the task's rules and the opaque
 * checkpoint document.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "wire_codec.h"

#define REQ    RV_WIRE_REQ
#define WORKER RV_WIRE_MAX_WORKER_ID

static const char *const shard_status_names[] = {
	[RV_SHARD_TASK] = "task",
	[RV_SHARD_WAIT] = "wait",
	[RV_SHARD_FINISHED] = "finished",
};

const char *rv_shard_status_name(enum rv_shard_status s)
{
	return rv_wire_name_of(shard_status_names, RV_ARRAY_SIZE(shard_status_names), (int)s);
}

int rv_shard_status_parse(const char *s)
{
	return rv_wire_parse_of(shard_status_names, RV_ARRAY_SIZE(shard_status_names), s);
}

#define T struct rv_shard_next
static const struct rv_wire_field f_shard_next[] = {
	WNAME("node", node, REQ, "the worker's node"),
	WINT("worker", worker, REQ, 0, WORKER, "worker id (global rank), >= 0"),
	WINT("req", req, 0, 0, WORKER,
	     "request id chosen by the sender (> 0): the worker's last req repeated gets the "
	     "same task again"),
	WNAME("dataset", dataset, RV_WIRE_OMIT, "dataset name; default the first"),
};
const struct rv_wire_message rv_wire_shard_next_msg =
	RV_WIRE_MSG("ShardNext", "a worker asks for its next shard", f_shard_next, "shard request",
		    NULL);
#undef T

/* A task names its shard in full, with an id from 1, and end >= start. */
static int shard_task_check(const cJSON *o, const char *path, void *mp, struct rv_err *err)
{
	static const char *const task_keys[] = { "id", "dataset", "epoch", "start", "end", NULL };
	struct rv_shard_task *m = mp;
	if (m->status == RV_SHARD_TASK) {
		int rc = rv_wire_decode_required(&rv_wire_shard_task_msg, o, path, m, task_keys,
						 err);
		if (rc < 0)
			return rc;
		if (m->id < 1)
			return rv_err_set(err, -EINVAL, "id", "id must be between 1 and %" PRId64,
					  (INT64_C(1) << 53) - 1);
	}
	if (m->end < m->start)
		return rv_err_set(err, -EINVAL, "end", "end must not be below start");
	return 0;
}

#define T struct rv_shard_task
static const struct rv_wire_field f_shard_task[] = {
	WENUM("status", status, REQ, shard_status_names, "task|wait|finished",
	      "task: process samples [start,end); wait: everything is in flight, ask again; "
	      "finished: every epoch is done"),
	WINT("id", id, 0, 0, INT64_MAX, "task id (required for task)"),
	WSTR("dataset", dataset, 0, "dataset (required for task)"),
	WINT("epoch", epoch, 0, 0, RV_WIRE_MAX_EPOCHS, "epoch, from 0 (required for task)"),
	WINT("start", start, 0, 0, RV_WIRE_MAX_SAMPLE_INDEX,
	     "first sample index (required for task)"),
	WINT("end", end, 0, 0, RV_WIRE_MAX_SAMPLE_INDEX, "one past the last (required for task)"),
	WSTR("partition", partition, RV_WIRE_OMIT,
	     "streaming datasets: the partition; start and end are its offsets"),
};
const struct rv_wire_message rv_wire_shard_task_msg =
	RV_WIRE_MSG("ShardTask", "a shard to process, or why there is none", f_shard_task,
		    "shard task", shard_task_check);
#undef T

#define T struct rv_shard_done
static const struct rv_wire_field f_shard_done[] = {
	WNAME("node", node, REQ, "the worker's node"),
	WINT("worker", worker, REQ, 0, WORKER, "worker id the task was handed to"),
	WINT("id", id, REQ, 1, INT64_MAX, "task id"),
};
const struct rv_wire_message rv_wire_shard_done_msg =
	RV_WIRE_MSG("ShardDone", "a worker finished a shard", f_shard_done, "shard done", NULL);
#undef T

#define T struct rv_shard_done_reply
static const struct rv_wire_field f_shard_done_reply[] = {
	WBOOL("counted", counted, REQ,
	      "false: already counted or unknown (a late or repeated done)"),
};
const struct rv_wire_message rv_wire_shard_done_reply_msg =
	RV_WIRE_MSG("ShardDoneReply", "whether the done counted", f_shard_done_reply,
		    "shard done reply", NULL);
#undef T

#define T struct rv_ckpt_report
static const struct rv_wire_field f_ckpt_report[] = {
	WINT("step", step, REQ, 0, INT64_MAX, "model step being checkpointed"),
	WINT("worker", worker, REQ, 0, WORKER, "worker id"),
	WINT("task_id", task_id, 0, 0, INT64_MAX, "task the worker was in at step, 0: none"),
	WINT("consumed", consumed, 0, 0, RV_WIRE_MAX_SAMPLE_INDEX,
	     "samples of that task consumed at step"),
};
const struct rv_wire_message rv_wire_ckpt_report_msg =
	RV_WIRE_MSG("CkptReport", "where a worker was in its data at a model step", f_ckpt_report,
		    "checkpoint report", NULL);
#undef T

/* "checkpoint": an object kept as its compact text, at most RV_MAX_CKPT_DOC. */
static int ckpt_doc_parse(const cJSON *o, const char *path, const struct rv_wire_field *f, void *mp,
			  struct rv_err *err)
{
	struct rv_data_ckpt *m = mp;
	int rc;
	const cJSON *doc = rv_json_get_object(o, f->name, path, true, &rc, err);
	if (!doc)
		return rc;
	m->checkpoint = rv_json_print(doc);
	if (!m->checkpoint)
		return rv_err_set(err, -ENOMEM, "checkpoint", "could not print the checkpoint");
	m->len = strlen(m->checkpoint);
	if (m->len > RV_MAX_CKPT_DOC) {
		rv_data_ckpt_release(m);
		return rv_err_set(err, -E2BIG, "checkpoint", "checkpoint must be at most %d bytes",
				  RV_MAX_CKPT_DOC);
	}
	return 1;
}

static bool ckpt_doc_emit(cJSON *o, const struct rv_wire_field *f, const void *mp)
{
	const struct rv_data_ckpt *m = mp;
	cJSON *doc = m->checkpoint ? rv_json_parse(m->checkpoint, m->len, NULL)
				   : cJSON_CreateObject();
	if (!doc || !cJSON_AddItemToObject(o, f->name, doc)) {
		cJSON_Delete(doc);
		return false;
	}
	return true;
}

#define T struct rv_data_ckpt
static const struct rv_wire_field f_data_ckpt[] = {
	WINT("step", step, 0, 0, INT64_MAX, "model step the position belongs to"),
	WHOOK("checkpoint", "object", REQ, ckpt_doc_parse, ckpt_doc_emit,
	      "the data position: per dataset a cursor and the ranges left (opaque)"),
};
const struct rv_wire_message rv_wire_data_ckpt_msg =
	RV_WIRE_MSG("DataCheckpoint", "the data position at a model step", f_data_ckpt,
		    "data checkpoint", NULL);
#undef T

void rv_data_ckpt_release(struct rv_data_ckpt *m)
{
	if (!m)
		return;
	free(m->checkpoint);
	m->checkpoint = NULL;
	m->len = 0;
}

#define T struct rv_stream_end
static const struct rv_wire_field f_stream_end[] = {
	WNAME("partition", partition, REQ, "partition name"),
	WINT("end_offset", end_offset, REQ, 0, RV_WIRE_MAX_OFFSET,
	     "offsets below it are available; a lower one than known changes nothing"),
};
const struct rv_wire_message rv_wire_stream_end_msg =
	RV_WIRE_MSG("StreamEnd", "a producer says how far a partition's data is available",
		    f_stream_end, "stream end", NULL);
#undef T

#define T struct rv_stream_partition_status
static const struct rv_wire_field f_stream_partition[] = {
	WNAME("name", name, REQ, "partition"),
	WINT("start_offset", start_offset, REQ, 0, RV_WIRE_MAX_OFFSET,
	     "where the job started (or resumed from a checkpoint)"),
	WINT("committed_offset", committed_offset, REQ, 0, RV_WIRE_MAX_OFFSET,
	     "the lowest offset not yet done: resume here"),
	WINT("end_offset", end_offset, REQ, -1, RV_WIRE_MAX_OFFSET,
	     "known available end; -1: unbounded"),
	WINT("doing", doing, 0, 0, INT64_MAX, "tasks in flight"),
};
const struct rv_wire_message rv_wire_stream_partition_msg =
	RV_WIRE_MSG("StreamPartition", "one partition's offsets", f_stream_partition, NULL, NULL);
#undef T

#define T struct rv_stream_status
static const struct rv_wire_field f_stream_status[] = {
	WNAME("dataset", dataset, REQ, "the streaming dataset"),
	WARRAY("partitions", partitions, npartitions, REQ, RV_MAX_PARTITIONS,
	       &rv_wire_stream_partition_msg, "StreamPartition", "its partitions"),
};
const struct rv_wire_message rv_wire_stream_status_msg =
	RV_WIRE_MSG("StreamStatus", "committed and end offsets of a streaming dataset",
		    f_stream_status, "stream status", NULL);
#undef T

RV_WIRE_CODEC(shard_next, rv_wire_shard_next_msg, struct rv_shard_next)
RV_WIRE_CODEC(shard_task, rv_wire_shard_task_msg, struct rv_shard_task)
RV_WIRE_CODEC(shard_done, rv_wire_shard_done_msg, struct rv_shard_done)
RV_WIRE_CODEC(shard_done_reply, rv_wire_shard_done_reply_msg, struct rv_shard_done_reply)
RV_WIRE_CODEC(ckpt_report, rv_wire_ckpt_report_msg, struct rv_ckpt_report)
RV_WIRE_CODEC(data_ckpt, rv_wire_data_ckpt_msg, struct rv_data_ckpt)
RV_WIRE_CODEC(stream_end, rv_wire_stream_end_msg, struct rv_stream_end)
RV_WIRE_CODEC(stream_status, rv_wire_stream_status_msg, struct rv_stream_status)
