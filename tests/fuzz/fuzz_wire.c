/*
 * fuzz_wire.c: libFuzzer harness for every JSON body parser of common/wire.c.
 *
 * The first byte picks the message (modulo the table's size), the rest is
 * the body as a daemon receives it: rv_json_parse, then the message's
 * from_json.  What an accepted message must satisfy: to_json prints, the
 * printed text parses again, its from_json accepts it and printing that
 * gives the same text (a round trip is stable).  Every error message and
 * field must be UTF-8 (they go out in JSON).  A failure aborts, which
 * libFuzzer reports with the input.  Built by `make fuzz` with clang
 * -fsanitize=fuzzer,address,undefined; seeds in tests/fuzz/corpus/wire/
 * (each file: the selector byte, then a valid body).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void must(int cond, const char *what, const char *name, const char *detail)
{
	if (cond)
		return;
	fprintf(stderr, "fuzz_wire: %s: %s: %s\n", name, what, detail ? detail : "");
	abort();
}

static void check_err(const struct rv_err *err, const char *name)
{
	must(err->code < 0, "a refusal without a negative errno", name, err->msg);
	must(rv_utf8_valid(err->msg, strlen(err->msg)), "error message is not UTF-8", name,
	     err->msg);
	must(rv_utf8_valid(err->field, strlen(err->field)), "error field is not UTF-8", name,
	     err->field);
}

/* The printed text of a tree to_json made (NULL tree: out of memory only). */
static char *print_tree(cJSON *t, const char *name)
{
	must(t != NULL, "to_json failed", name, NULL);
	char *txt = rv_json_print(t);
	cJSON_Delete(t);
	must(txt != NULL, "print failed", name, NULL);
	return txt;
}

/*
 * One function per message: parse, and for an accepted one the round trip
 * above.  REL releases what from_json allocated (a no-op for flat structs).
 */
#define NOREL(m) ((void)(m))
#define FUZZ_MSG(T, fn, REL)                                                                       \
	static void fuzz_##fn(const cJSON *root)                                                   \
	{                                                                                          \
		struct T a, b;                                                                     \
		struct rv_err err = { 0 };                                                         \
		memset(&a, 0, sizeof(a));                                                          \
		if (rv_##fn##_from_json(root, &a, &err) < 0) {                                     \
			check_err(&err, #fn);                                                      \
			return;                                                                    \
		}                                                                                  \
		char *t1 = print_tree(rv_##fn##_to_json(&a), #fn);                                 \
		REL(&a);                                                                           \
		cJSON *back = rv_json_parse(t1, strlen(t1), &err);                                 \
		must(back != NULL, "printed text does not parse", #fn, err.msg);                   \
		memset(&b, 0, sizeof(b));                                                          \
		int rc = rv_##fn##_from_json(back, &b, &err);                                      \
		cJSON_Delete(back);                                                                \
		must(rc == 0, "printed message is refused", #fn, err.msg);                         \
		char *t2 = print_tree(rv_##fn##_to_json(&b), #fn);                                 \
		REL(&b);                                                                           \
		must(!strcmp(t1, t2), "round trip changed the message", #fn, t1);                  \
		free(t1);                                                                          \
		free(t2);                                                                          \
	}

FUZZ_MSG(rv_job_spec, job_spec, rv_job_spec_release)
FUZZ_MSG(rv_metrics_batch, metrics_batch, rv_metrics_batch_release)
FUZZ_MSG(rv_event, event, NOREL)
FUZZ_MSG(rv_scale_plan, scale_plan, NOREL)
FUZZ_MSG(rv_cluster_report, cluster_report, rv_cluster_report_release)
FUZZ_MSG(rv_rdzv_join, rdzv_join, NOREL)
FUZZ_MSG(rv_rdzv_joined, rdzv_joined, NOREL)
FUZZ_MSG(rv_rdzv_world_reply, rdzv_world_reply, rv_rdzv_world_reply_release)
FUZZ_MSG(rv_heartbeat, heartbeat, NOREL)
FUZZ_MSG(rv_heartbeat_reply, heartbeat_reply, NOREL)
FUZZ_MSG(rv_failure_report, failure_report, NOREL)
FUZZ_MSG(rv_shard_next, shard_next, NOREL)
FUZZ_MSG(rv_shard_task, shard_task, NOREL)
FUZZ_MSG(rv_shard_done, shard_done, NOREL)
FUZZ_MSG(rv_shard_done_reply, shard_done_reply, NOREL)
FUZZ_MSG(rv_ckpt_report, ckpt_report, NOREL)
FUZZ_MSG(rv_data_ckpt, data_ckpt, rv_data_ckpt_release)
FUZZ_MSG(rv_step_report, step_report, NOREL)
FUZZ_MSG(rv_job_status, job_status, NOREL)
FUZZ_MSG(rv_stream_end, stream_end, NOREL)
FUZZ_MSG(rv_stream_status, stream_status, NOREL)
FUZZ_MSG(rv_netcheck_join, netcheck_join, NOREL)
FUZZ_MSG(rv_netcheck_joined, netcheck_joined, NOREL)
FUZZ_MSG(rv_netcheck_group_reply, netcheck_group_reply, NOREL)
FUZZ_MSG(rv_netcheck_report, netcheck_report, NOREL)
FUZZ_MSG(rv_netcheck_status, netcheck_status, rv_netcheck_status_release)

/* The selector byte's meaning: keep the order (the seed files depend on it). */
static void (*const parsers[])(const cJSON *) = {
	fuzz_job_spec,        fuzz_metrics_batch,    fuzz_event,
	fuzz_scale_plan,      fuzz_cluster_report,   fuzz_rdzv_join,
	fuzz_rdzv_joined,     fuzz_rdzv_world_reply, fuzz_heartbeat,
	fuzz_heartbeat_reply, fuzz_failure_report,   fuzz_shard_next,
	fuzz_shard_task,      fuzz_shard_done,       fuzz_shard_done_reply,
	fuzz_ckpt_report,     fuzz_data_ckpt,        fuzz_step_report,
	fuzz_job_status,      fuzz_stream_end,       fuzz_stream_status,
	fuzz_netcheck_join,   fuzz_netcheck_joined,  fuzz_netcheck_group_reply,
	fuzz_netcheck_report, fuzz_netcheck_status,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	size_t n = sizeof(parsers) / sizeof(parsers[0]);
	struct rv_err err = { 0 };
	cJSON *root = rv_json_parse((const char *)data + 1, size - 1, &err);
	if (!root) {
		check_err(&err, "rv_json_parse");
		return 0;
	}
	parsers[data[0] % n](root);
	cJSON_Delete(root);
	return 0;
}
