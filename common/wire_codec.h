/*
 * wire_codec.h: the engine behind wire.h's messages, for common/wire_*.c
 * and the master's snapshot tables.  A message is its table (struct
 * rv_wire_message): rv_wire_decode reads a JSON object into the message's
 * struct field by field, naming the first bad field, and rv_wire_encode
 * writes the struct back in table order.
 * The W* macros below write table rows; each expects T defined as the
 * message's struct type.  Also the checks and getters the hand-written hooks
 * share.  Pure and thread-safe.
 */
#ifndef RV_WIRE_CODEC_H
#define RV_WIRE_CODEC_H

#include <stddef.h>

#include "buf.h"
#include "cleanup.h"
#include "wire.h"

typedef char rv_wire_path[128];

/* A new zeroed *out read from root (a JSON object, "<what> must be a json
 * object" otherwise); on failure *out is released and zeroed. */
int rv_wire_decode(const struct rv_wire_message *msg, const cJSON *root, void *out,
		   struct rv_err *err);
/* The fields of msg from object o (at path) into m, then msg->check. */
int rv_wire_decode_fields(const struct rv_wire_message *msg, const cJSON *o, const char *path,
			  void *m, struct rv_err *err);
/* Again the fields of msg named in keys (NULL-terminated), each now
 * required: the rule "required when" of a check. */
int rv_wire_decode_required(const struct rv_wire_message *msg, const cJSON *o, const char *path,
			    void *m, const char *const *keys, struct rv_err *err);
/* Row f of o into m as the codec reads it, its default and parse hook
 * aside (for a hook that adds a rule to the row's reading): 1 read, 0
 * absent and not required, or a negative errno naming the field. */
int rv_wire_decode_row(const cJSON *o, const char *path, const struct rv_wire_field *f, void *m,
		       struct rv_err *err);
/* Items of array arr (its key at path: "members") into n structs of msg at
 * base, each an object; *count gets how many were read. */
int rv_wire_decode_items(const struct rv_wire_message *msg, const cJSON *arr, const char *path,
			 void *base, int *count, struct rv_err *err);
/* The objects of map (at path) keyed by role name into the RV_ROLE_COUNT
 * structs of msg at base, setting each one's bool at present_off: another
 * key is "unknown <what>", a role twice "given twice"; the key skip (NULL:
 * none) is passed over. */
int rv_wire_decode_role_map(const struct rv_wire_message *msg, const cJSON *map, const char *path,
			    void *base, size_t present_off, const char *what, const char *skip,
			    struct rv_err *err);
/* Those of the structs whose bool at present_off is set, as the object key
 * of o keyed by role name.  false when out of memory. */
bool rv_wire_encode_role_map(const struct rv_wire_message *msg, cJSON *o, const char *key,
			     const void *base, size_t present_off);
/* A new object of m's fields, NULL when out of memory. */
cJSON *rv_wire_encode(const struct rv_wire_message *msg, const void *m);
bool rv_wire_encode_fields(const struct rv_wire_message *msg, cJSON *o, const void *m);
/* Row f of m as the codec writes it, its emit hook aside (for a hook that
 * writes it only sometimes). */
bool rv_wire_encode_row(cJSON *o, const struct rv_wire_field *f, const void *m);
/* Entry it of an array (p: its path, "doing[3]") of message msg, whose
 * rows are all RV_WIRE_INT: an object read by the codec, or an array of
 * nfields integers in row order (the positional form snapshots held
 * before their entries were named).  lo and hi (nfields each) narrow the
 * rows' bounds to what the caller knows (a dataset count), in either form.
 * 0, or -EINVAL naming the bad field. */
int rv_wire_decode_entry(const struct rv_wire_message *msg, const cJSON *it, const char *p,
			 const int64_t *lo, const int64_t *hi, void *m, struct rv_err *err);
/* m's object as JSON text appended to out, after a comma when comma; -ENOMEM
 * when out of memory (out is then failed, as rv_buf_failed says). */
int rv_wire_encode_text(const struct rv_wire_message *msg, const void *m, bool comma,
			struct rv_buf *out);
/* Frees what decode allocated (RV_WIRE_ALLOC arrays, nested too). */
void rv_wire_release(const struct rv_wire_message *msg, void *m);

/* Checks and getters shared with the hooks. */
int rv_wire_check_dns_label(const char *s, const char *field, struct rv_err *err);
int rv_wire_check_name(const char *s, size_t max, const char *field, struct rv_err *err);
int rv_wire_get_int32(const cJSON *o, const char *key, const char *path, bool required, int64_t min,
		      int64_t max, int *out, struct rv_err *err);
/* One of names ("<key> must be <expect>", by default "one of a, b, c"). */
int rv_wire_get_enum(const cJSON *o, const char *key, const char *path, bool required,
		     const char *const *names, int n, const char *expect, int *out,
		     struct rv_err *err);
int rv_wire_count(const cJSON *arr, int limit);
const char *rv_wire_name_of(const char *const *names, size_t n, int v);
int rv_wire_parse_of(const char *const *names, size_t n, const char *s);
bool rv_wire_add_num(cJSON *o, const char *k, double v);
bool rv_wire_add_str(cJSON *o, const char *k, const char *v);
bool rv_wire_add_bool(cJSON *o, const char *k, bool v);

extern const char *const rv_wire_role_names[RV_ROLE_COUNT];

/* ---- table rows; T is the message's struct ----
 * Each row macro takes trailing designators for the rarer members
 * (.variant = RV_SAMPLE_NODE + 1, .parse = hook). */
#define RV_WIRE_MEMBER_(mem) .off = offsetof(T, mem), .size = sizeof(((T *)0)->mem)
#define RV_WIRE_DOC_(key, ty, fl, desc)                                                            \
	.name = (key), .type = (ty), .required = ((fl)&RV_WIRE_REQ) != 0, .description = (desc),   \
	.flags = (fl)
/* A string, or a name checked like a node's. */
#define WSTR(key, mem, fl, desc, ...)                                                              \
	{                                                                                          \
		RV_WIRE_DOC_(key, "string", fl, desc), .kind = RV_WIRE_STRING,                     \
						       RV_WIRE_MEMBER_(mem), __VA_ARGS__           \
	}
#define WNAME(key, mem, fl, desc, ...)                                                             \
	{                                                                                          \
		RV_WIRE_DOC_(key, "string", fl, desc), .kind = RV_WIRE_NAME, RV_WIRE_MEMBER_(mem), \
						       __VA_ARGS__                                 \
	}
/* An integer in lo..hi (int or int64_t member); WINTD: d when absent. */
#define WINT(key, mem, fl, lo, hi, desc, ...)                                                      \
	{                                                                                          \
		RV_WIRE_DOC_(key, "integer", fl, desc), .kind = RV_WIRE_INT, RV_WIRE_MEMBER_(mem), \
							.min = (lo), .max = (hi), __VA_ARGS__      \
	}
#define WINTD(key, mem, fl, d, lo, hi, desc, ...)                                                  \
	{                                                                                          \
		RV_WIRE_DOC_(key, "integer", RV_WIRE_DEF | (fl), desc),                            \
			.kind = RV_WIRE_INT, RV_WIRE_MEMBER_(mem), .min = (lo), .max = (hi),       \
			.def = (d), __VA_ARGS__                                                    \
	}
#define WNUM(key, mem, fl, lo, hi, desc, ...)                                                      \
	{                                                                                          \
		RV_WIRE_DOC_(key, "number", fl, desc),                                             \
			.kind = RV_WIRE_NUMBER, RV_WIRE_MEMBER_(mem), .dmin = (lo), .dmax = (hi),  \
			__VA_ARGS__                                                                \
	}
#define WNUMD(key, mem, fl, d, lo, hi, desc, ...)                                                  \
	{                                                                                          \
		RV_WIRE_DOC_(key, "number", RV_WIRE_DEF | (fl), desc),                             \
			.kind = RV_WIRE_NUMBER, RV_WIRE_MEMBER_(mem), .dmin = (lo), .dmax = (hi),  \
			.def = (d), __VA_ARGS__                                                    \
	}
#define WBOOL(key, mem, fl, desc, ...)                                                             \
	{                                                                                          \
		RV_WIRE_DOC_(key, "boolean", fl, desc), .kind = RV_WIRE_BOOL,                      \
							RV_WIRE_MEMBER_(mem), __VA_ARGS__          \
	}
/* One of nm (a names array; en its "a|b|c" for the documents). */
#define WENUM(key, mem, fl, nm, en, desc, ...)                                                     \
	{                                                                                          \
		RV_WIRE_DOC_(key, "string", fl, desc),                                             \
			.kind = RV_WIRE_ENUM, RV_WIRE_MEMBER_(mem), .enums = (en), .names = (nm),  \
			.nnames = (int)RV_ARRAY_SIZE(nm), __VA_ARGS__                              \
	}
/* At most hi objects of message el (schema name rf) in array member mem,
 * their count in member cnt. */
#define WARRAY(key, mem, cnt, fl, hi, el, rf, desc, ...)                                           \
	{                                                                                          \
		RV_WIRE_DOC_(key, "array", fl, desc), .kind = RV_WIRE_ARRAY, RV_WIRE_MEMBER_(mem), \
						      .ref = (rf), .max = (hi), .elem = (el),      \
						      .count_off = offsetof(T, cnt), __VA_ARGS__   \
	}
/* Up to hi entries at member mem, their count in cnt, read and written by
 * hooks p and e. */
#define WLIST(key, ty, mem, cnt, fl, hi, rf, p, e, desc, ...)                                      \
	{                                                                                          \
		RV_WIRE_DOC_(key, ty, fl, desc),                                                   \
			.kind = RV_WIRE_HOOK, RV_WIRE_MEMBER_(mem), .ref = (rf), .max = (hi),      \
			.count_off = offsetof(T, cnt), .parse = (p), .emit = (e), __VA_ARGS__      \
	}
/* An object of message el in member mem; bool member given says it was. */
#define WOBJ(key, mem, given, fl, el, rf, desc, ...)                                               \
	{                                                                                          \
		RV_WIRE_DOC_(key, "object", fl, desc),                                             \
			.kind = RV_WIRE_OBJECT, RV_WIRE_MEMBER_(mem), .ref = (rf), .elem = (el),   \
			.count_off = offsetof(T, given), __VA_ARGS__                               \
	}
/* The same without the bool: always written. */
#define WOBJ0(key, mem, fl, el, rf, desc, ...)                                                     \
	{                                                                                          \
		RV_WIRE_DOC_(key, "object", fl, desc),                                             \
			.kind = RV_WIRE_OBJECT, RV_WIRE_MEMBER_(mem), .ref = (rf), .elem = (el),   \
			__VA_ARGS__                                                                \
	}
/* An object whose keys are members of T itself (a nested JSON object over
 * a flat struct: ElasticJob's metadata); el's T is this T too. */
#define WFLAT(key, fl, el, rf, desc)                                                               \
	{                                                                                          \
		RV_WIRE_DOC_(key, "object", fl, desc), .kind = RV_WIRE_OBJECT, .off = 0,           \
						       .size = sizeof(T), .ref = (rf),             \
						       .elem = (el)                                \
	}
/* Read and written by hooks p and e (a row of another kind may name
 * either, in place of the codec's own). */
#define WHOOK(key, ty, fl, p, e, desc, ...)                                                        \
	{                                                                                          \
		RV_WIRE_DOC_(key, ty, fl, desc), .kind = RV_WIRE_HOOK, .parse = (p), .emit = (e),  \
						 __VA_ARGS__                                       \
	}
#define RV_WIRE_MSG(nm, desc, f, wh, chk)                                                          \
	{                                                                                          \
		.name = (nm), .description = (desc), .fields = (f),                                \
		.nfields = (int)RV_ARRAY_SIZE(f), .what = (wh), .size = sizeof(T), .check = (chk)  \
	}

/* ---- limits shared by the families ---- */
#define RV_WIRE_MAX_SPEED        1e12
#define RV_WIRE_MAX_EPOCHS       1000000
#define RV_WIRE_MAX_OFFSET       (INT64_C(1) << 52)
#define RV_WIRE_MAX_WORKER_ID    (INT64_C(1) << 52) /* exact in a JSON number */
#define RV_WIRE_MAX_SAMPLE_INDEX (INT64_C(1) << 52)
#define RV_WIRE_MAX_LOCAL_WORLD  1024

/* ---- the messages of each family (wire_<family>.c) ---- */
extern const char *const rv_wire_rdzv_status_names[6];
extern const char *const rv_wire_netcheck_state_names[3];
extern const char *const rv_wire_optimize_names[3];
/* wire_rdzv.c */
extern const struct rv_wire_message rv_wire_rdzv_join_msg, rv_wire_rdzv_joined_msg,
	rv_wire_rdzv_world_msg, rv_wire_rdzv_member_msg, rv_wire_heartbeat_msg,
	rv_wire_heartbeat_reply_msg, rv_wire_failure_msg, rv_wire_step_report_msg,
	rv_wire_node_usage_msg;
/* wire_shard.c */
extern const struct rv_wire_message rv_wire_shard_next_msg, rv_wire_shard_task_msg,
	rv_wire_shard_done_msg, rv_wire_shard_done_reply_msg, rv_wire_ckpt_report_msg,
	rv_wire_data_ckpt_msg, rv_wire_stream_end_msg, rv_wire_stream_status_msg,
	rv_wire_stream_partition_msg;
/* wire_status.c */
extern const struct rv_wire_message rv_wire_job_status_msg, rv_wire_dataset_status_msg,
	rv_wire_brain_link_msg, rv_wire_plan_state_msg, rv_wire_role_target_msg,
	rv_wire_node_status_msg;
/* wire_metrics.c */
extern const struct rv_wire_message rv_wire_metrics_batch_msg, rv_wire_sample_msg,
	rv_wire_event_msg, rv_wire_cluster_report_msg, rv_wire_cluster_node_msg,
	rv_wire_cluster_job_msg;
/* wire_job.c */
extern const struct rv_wire_message rv_wire_elastic_job_msg, rv_wire_job_metadata_msg,
	rv_wire_job_spec_msg, rv_wire_replica_spec_msg, rv_wire_resources_msg, rv_wire_dataset_msg,
	rv_wire_partition_msg, rv_wire_model_msg;
/* wire_plan.c */
extern const struct rv_wire_message rv_wire_scale_plan_msg, rv_wire_plan_group_msg,
	rv_wire_plan_node_msg, rv_wire_plan_resource_msg;
/* wire_netcheck.c */
extern const struct rv_wire_message rv_wire_netcheck_join_msg, rv_wire_netcheck_joined_msg,
	rv_wire_netcheck_group_msg, rv_wire_netcheck_peer_msg, rv_wire_netcheck_report_msg,
	rv_wire_netcheck_status_msg, rv_wire_netcheck_result_msg;

/* rv_<fn>_from_json and rv_<fn>_to_json of a message whose table is msg. */
#define RV_WIRE_CODEC(fn, msg, type)                                                               \
	/* a type name cannot be parenthesised */                                                  \
	int rv_##fn##_from_json(const cJSON *root, type *out, struct rv_err *err) /* NOLINT */     \
	{                                                                                          \
		return rv_wire_decode(&(msg), root, out, err);                                     \
	}                                                                                          \
	cJSON *rv_##fn##_to_json(const type *m) /* NOLINT */                                       \
	{                                                                                          \
		return rv_wire_encode(&(msg), m);                                                  \
	}

#endif
