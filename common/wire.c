/*
 * wire.c: the lists of the wire messages (wire.h): the brain's and the
 * master's, in the order their OpenAPI documents give them.  Each message
 * is its table, in the file of its family (wire_job.c, wire_metrics.c,
 * wire_plan.c, wire_rdzv.c, wire_shard.c, wire_status.c, wire_netcheck.c);
 * wire_codec.c reads and writes them all.
 */
#include "wire.h"

#include <pthread.h>
#include <string.h>

#include "wire_codec.h"

static const struct rv_wire_message *const brain_list[] = {
	&rv_wire_elastic_job_msg,   &rv_wire_metrics_batch_msg,  &rv_wire_event_msg,
	&rv_wire_scale_plan_msg,    &rv_wire_cluster_report_msg, &rv_wire_job_metadata_msg,
	&rv_wire_job_spec_msg,      &rv_wire_replica_spec_msg,   &rv_wire_resources_msg,
	&rv_wire_dataset_msg,       &rv_wire_partition_msg,      &rv_wire_model_msg,
	&rv_wire_sample_msg,        &rv_wire_plan_group_msg,     &rv_wire_plan_node_msg,
	&rv_wire_plan_resource_msg, &rv_wire_cluster_node_msg,   &rv_wire_cluster_job_msg,
};
#undef M

static const struct rv_wire_message *const master_list[] = {
	&rv_wire_rdzv_join_msg,        &rv_wire_rdzv_joined_msg,      &rv_wire_rdzv_world_msg,
	&rv_wire_heartbeat_msg,        &rv_wire_heartbeat_reply_msg,  &rv_wire_failure_msg,
	&rv_wire_shard_next_msg,       &rv_wire_shard_task_msg,       &rv_wire_shard_done_msg,
	&rv_wire_shard_done_reply_msg, &rv_wire_ckpt_report_msg,      &rv_wire_data_ckpt_msg,
	&rv_wire_step_report_msg,      &rv_wire_node_usage_msg,       &rv_wire_job_status_msg,
	&rv_wire_rdzv_member_msg,      &rv_wire_dataset_status_msg,   &rv_wire_brain_link_msg,
	&rv_wire_plan_state_msg,       &rv_wire_role_target_msg,      &rv_wire_stream_end_msg,
	&rv_wire_stream_status_msg,    &rv_wire_stream_partition_msg, &rv_wire_netcheck_join_msg,
	&rv_wire_netcheck_joined_msg,  &rv_wire_netcheck_group_msg,   &rv_wire_netcheck_peer_msg,
	&rv_wire_netcheck_report_msg,  &rv_wire_netcheck_status_msg,  &rv_wire_netcheck_result_msg,
	&rv_wire_node_status_msg,
};

/* The lists as arrays, made once: the tables live with their families. */
static struct rv_wire_message brain_messages[RV_ARRAY_SIZE(brain_list)];
static struct rv_wire_message master_messages[RV_ARRAY_SIZE(master_list)];
static pthread_once_t lists_once = PTHREAD_ONCE_INIT;

static void lists_fill(void)
{
	for (size_t i = 0; i < RV_ARRAY_SIZE(brain_list); i++)
		brain_messages[i] = *brain_list[i];
	for (size_t i = 0; i < RV_ARRAY_SIZE(master_list); i++)
		master_messages[i] = *master_list[i];
}

static const struct rv_wire_message *find(const struct rv_wire_message *m, int n, const char *name)
{
	for (int i = 0; name && i < n; i++)
		if (strcmp(m[i].name, name) == 0)
			return &m[i];
	return NULL;
}

const struct rv_wire_message *rv_wire_messages(int *n)
{
	pthread_once(&lists_once, lists_fill);
	*n = (int)RV_ARRAY_SIZE(brain_messages);
	return brain_messages;
}

const struct rv_wire_message *rv_wire_message(const char *name)
{
	int n;
	const struct rv_wire_message *m = rv_wire_messages(&n);
	return find(m, n, name);
}

const struct rv_wire_message *rv_wire_master_messages(int *n)
{
	pthread_once(&lists_once, lists_fill);
	*n = (int)RV_ARRAY_SIZE(master_messages);
	return master_messages;
}

const struct rv_wire_message *rv_wire_master_message(const char *name)
{
	int n;
	const struct rv_wire_message *m = rv_wire_master_messages(&n);
	return find(m, n, name);
}
