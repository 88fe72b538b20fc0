/*
 * check_wire_codec.c: the table-driven codec behind the wire messages
 * (common/wire_codec.c) on a table of its own: bounds, required rows,
 * defaults, unknown keys, wrong types, variants, rows written only when
 * set, arrays (in place and allocated, their limits) and release.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "json.h"
#include "testutil.h"
#include "wire_codec.h"

struct item {
	char name[8];
	int64_t n;
};

struct msg {
	int kind; /* 0 "a", 1 "b" */
	char name[8];
	int small;
	int64_t big;
	double ratio;
	bool flag;
	int only_a;   /* kind a only */
	int64_t seen; /* omitted when 0 */
	struct item fixed[2];
	int nfixed;
	struct item *items;
	int nitems;
};

static const char *const kinds[] = { "a", "b" };

#define T struct item
static const struct rv_wire_field f_item[] = {
	WNAME("name", name, RV_WIRE_REQ, "a name"),
	WINT("n", n, 0, 0, 9, "0..9"),
};
static const struct rv_wire_message m_item = RV_WIRE_MSG("Item", "one item", f_item, NULL, NULL);
#undef T

#define T struct msg
static const struct rv_wire_field f_msg[] = {
	WENUM("kind", kind, RV_WIRE_REQ, kinds, "a|b", "which"),
	WNAME("name", name, RV_WIRE_REQ, "1..7 of [A-Za-z0-9._-]"),
	WINTD("small", small, 0, 5, -3, 100, "-3..100, default 5"),
	WINT("big", big, 0, 0, INT64_MAX, "anything >= 0"),
	WNUMD("ratio", ratio, RV_WIRE_OMIT_NEG, -1, 0, 1, "0..1, -1 when absent"),
	WBOOL("flag", flag, RV_WIRE_OMIT, "written when true"),
	WINT("only_a", only_a, RV_WIRE_REQ_VARIANT, 1, 2, "kind a: required", .variant = 1),
	WINT("seen", seen, RV_WIRE_OMIT, 0, 100, "written when > 0"),
	WARRAY("fixed", fixed, nfixed, 0, 2, &m_item, "Item", "at most 2, in place"),
	WARRAY("items", items, nitems, RV_WIRE_ALLOC | RV_WIRE_OMIT, 3, &m_item, "Item",
	       "at most 3, allocated"),
};
static const struct rv_wire_message m_msg =
	RV_WIRE_MSG("Msg", "the test message", f_msg, "test message", NULL);
#undef T

/* An array of the variant message: its rows are worked out once per array. */
struct outer {
	struct msg *msgs;
	int nmsgs;
};

#define T struct outer
static const struct rv_wire_field f_outer[] = {
	WARRAY("msgs", msgs, nmsgs, RV_WIRE_REQ | RV_WIRE_ALLOC, 4, &m_msg, "Msg", "1..4"),
};
static const struct rv_wire_message m_outer =
	RV_WIRE_MSG("Outer", "messages of both kinds", f_outer, "outer", NULL);
#undef T

/* Decode text; on success *out holds it. */
static int decode(const char *text, struct msg *out, struct rv_err *err)
{
	cJSON *doc = cJSON_Parse(text);
	ck_assert_msg(doc, "bad test json %s", text);
	int rc = rv_wire_decode(&m_msg, doc, out, err);
	cJSON_Delete(doc);
	return rc;
}

static void refused(const char *text, const char *field, const char *msg, int code)
{
	struct msg m;
	struct rv_err err = { 0 };
	ck_assert_int_eq(decode(text, &m, &err), code);
	ck_assert_str_eq(err.field, field);
	if (msg)
		ck_assert_str_eq(err.msg, msg);
	ck_assert_ptr_null(m.items); /* released and zeroed */
	ck_assert_int_eq(m.nitems, 0);
}

START_TEST(test_values_and_defaults)
{
	struct msg m;
	struct rv_err err = { 0 };
	ck_assert_int_eq(decode("{\"kind\":\"b\",\"name\":\"x.y\",\"unknown\":[1,{}]}", &m, &err),
			 0);
	ck_assert_int_eq(m.kind, 1);
	ck_assert_str_eq(m.name, "x.y");
	ck_assert_int_eq(m.small, 5);
	ck_assert_double_eq(m.ratio, -1);
	ck_assert(!m.flag);
	ck_assert_ptr_null(m.items);
	/* defaults, omitted rows and the other variant's row stay out */
	cJSON *o = rv_wire_encode(&m_msg, &m);
	char *text = cJSON_PrintUnformatted(o);
	ck_assert_str_eq(text,
			 "{\"kind\":\"b\",\"name\":\"x.y\",\"small\":5,\"big\":0,\"fixed\":[]}");
	free(text);
	cJSON_Delete(o);
	rv_wire_release(&m_msg, &m);
}
END_TEST

START_TEST(test_round_trip)
{
	const char *doc = "{\"kind\":\"a\",\"name\":\"n\",\"small\":-3,\"big\":123456789,"
			  "\"ratio\":0.5,\"flag\":true,\"only_a\":2,\"seen\":7,"
			  "\"fixed\":[{\"name\":\"f\",\"n\":1}],"
			  "\"items\":[{\"name\":\"i\",\"n\":0},{\"name\":\"j\",\"n\":9}]}";
	struct msg m;
	struct rv_err err = { 0 };
	ck_assert_int_eq(decode(doc, &m, &err), 0);
	ck_assert_int_eq(m.nitems, 2);
	ck_assert_str_eq(m.items[1].name, "j");
	cJSON *o = rv_wire_encode(&m_msg, &m);
	char *text = cJSON_PrintUnformatted(o);
	ck_assert_str_eq(text, doc); /* table order is the JSON's */
	free(text);
	cJSON_Delete(o);
	rv_wire_release(&m_msg, &m);
	ck_assert_ptr_null(m.items);
	ck_assert_int_eq(m.nitems, 0);
}
END_TEST

START_TEST(test_refused)
{
	refused("[1]", "", "test message must be a json object", -EINVAL);
	refused("{\"name\":\"n\"}", "kind", "kind is required", -EINVAL);
	refused("{\"kind\":\"c\",\"name\":\"n\"}", "kind", "kind must be one of a, b", -EINVAL);
	refused("{\"kind\":1,\"name\":\"n\"}", "kind", "kind must be a string", -EINVAL);
	refused("{\"kind\":\"b\",\"name\":\"a b\"}", "name", NULL, -EINVAL);
	refused("{\"kind\":\"b\",\"name\":\"12345678\"}", "name",
		"name must be at most 7 characters", -EINVAL);
	refused("{\"kind\":\"b\",\"name\":\"n\",\"small\":101}", "small",
		"small must be between -3 and 100", -EINVAL);
	refused("{\"kind\":\"b\",\"name\":\"n\",\"small\":1.5}", "small",
		"small must be an integer", -EINVAL);
	refused("{\"kind\":\"b\",\"name\":\"n\",\"ratio\":\"1\"}", "ratio",
		"ratio must be a finite number", -EINVAL);
	refused("{\"kind\":\"b\",\"name\":\"n\",\"flag\":1}", "flag", NULL, -EINVAL);
	/* a variant's required row is required in it only */
	refused("{\"kind\":\"a\",\"name\":\"n\"}", "only_a", "only_a is required", -EINVAL);
	refused("{\"kind\":\"b\",\"name\":\"n\",\"fixed\":[{\"name\":\"a\"},{\"name\":\"b\"},"
		"{\"name\":\"c\"}]}",
		"fixed", "fixed must have at most 2 entries", -E2BIG);
	refused("{\"kind\":\"b\",\"name\":\"n\",\"fixed\":[1]}", "fixed[0]",
		"fixed[0] must be an object", -EINVAL);
	refused("{\"kind\":\"b\",\"name\":\"n\",\"fixed\":{}}", "fixed", "fixed must be an array",
		-EINVAL);
	/* an allocated array is released when a later item is bad */
	refused("{\"kind\":\"b\",\"name\":\"n\",\"items\":[{\"name\":\"i\"},{\"name\":\"j\","
		"\"n\":10}]}",
		"items[1].n", "items[1].n must be between 0 and 9", -EINVAL);
	refused("{\"kind\":\"b\",\"name\":\"n\",\"items\":[{},{},{},{}]}", "items", NULL, -E2BIG);
}
END_TEST

/* Items of either kind in one array: each gets its own kind's rows, in
 * table order, read and written alike; an item's errors name it. */
START_TEST(test_variant_items)
{
	const char *doc = "{\"msgs\":[{\"kind\":\"a\",\"name\":\"p\",\"small\":1,\"big\":2,"
			  "\"only_a\":1,\"seen\":3,\"fixed\":[]},"
			  "{\"kind\":\"b\",\"name\":\"q\",\"small\":5,\"big\":0,"
			  "\"seen\":4,\"fixed\":[]},"
			  "{\"kind\":\"a\",\"name\":\"r\",\"small\":5,\"big\":0,"
			  "\"ratio\":1,\"only_a\":2,\"fixed\":[{\"name\":\"f\",\"n\":0}]}]}";
	struct outer m;
	struct rv_err err = { 0 };
	cJSON *in = cJSON_Parse(doc);
	ck_assert_int_eq(rv_wire_decode(&m_outer, in, &m, &err), 0);
	ck_assert_int_eq(m.nmsgs, 3);
	ck_assert_int_eq(m.msgs[0].only_a, 1);
	ck_assert_int_eq(m.msgs[1].only_a, 0);
	ck_assert_int_eq(m.msgs[2].only_a, 2);
	cJSON *o = rv_wire_encode(&m_outer, &m);
	char *text = cJSON_PrintUnformatted(o);
	ck_assert_str_eq(text, doc);
	free(text);
	/* the tree is the caller's to change: keys can go, copies print alike */
	cJSON *copy = cJSON_Duplicate(o, true);
	cJSON *first = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "msgs"), 0);
	cJSON_DeleteItemFromObject(first, "name");
	cJSON_ReplaceItemInObject(first, "kind", cJSON_CreateString("b"));
	text = cJSON_PrintUnformatted(first);
	ck_assert_str_eq(text, "{\"kind\":\"b\",\"small\":1,\"big\":2,\"only_a\":1,\"seen\":3,"
			       "\"fixed\":[]}");
	free(text);
	text = cJSON_PrintUnformatted(copy);
	ck_assert_str_eq(text, doc);
	free(text);
	cJSON_Delete(copy);
	cJSON_Delete(o);
	rv_wire_release(&m_outer, &m);
	ck_assert_ptr_null(m.msgs);

	cJSON_ReplaceItemInObject(cJSON_GetArrayItem(cJSON_GetObjectItem(in, "msgs"), 2), "only_a",
				  cJSON_CreateNull());
	ck_assert_int_eq(rv_wire_decode(&m_outer, in, &m, &err), -EINVAL);
	ck_assert_str_eq(err.msg, "msgs[2].only_a is required");
	ck_assert_ptr_null(m.msgs);
	cJSON_ReplaceItemInObject(cJSON_GetArrayItem(cJSON_GetObjectItem(in, "msgs"), 1), "kind",
				  cJSON_CreateNumber(1));
	ck_assert_int_eq(rv_wire_decode(&m_outer, in, &m, &err), -EINVAL);
	ck_assert_str_eq(err.msg, "msgs[1].kind must be a string");
	ck_assert_str_eq(err.field, "msgs[1].kind");
	cJSON_Delete(in);
}
END_TEST

/* An entry of plain integers: written straight as the tree would print,
 * read back by name or by position, its bounds narrowed by the caller. */
struct entry {
	int64_t id;
	int small;
	int64_t opt;
};
#define T struct entry
static const struct rv_wire_field entry_fields[] = {
	WINT("id", id, RV_WIRE_REQ, -(INT64_C(1) << 53), INT64_C(1) << 53, "id"),
	WINT("small", small, RV_WIRE_REQ, -5, 100, "small"),
	WINT("opt", opt, RV_WIRE_OMIT, 0, 1000, "omitted at 0"),
};
static const struct rv_wire_message entry_msg =
	RV_WIRE_MSG("Entry", "an entry", entry_fields, "entry", NULL);
#undef T

START_TEST(test_entries)
{
	const struct entry es[] = { { (INT64_C(1) << 52) + 3, -5, 0 }, { -7, 100, 9 } };
	struct rv_buf b = { 0 };
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(rv_wire_encode_text(&entry_msg, &es[i], i > 0, &b), 0);
		RV_CLEANUP_CJSON cJSON *o = rv_wire_encode(&entry_msg, &es[i]);
		RV_CLEANUP_FREE char *tree = rv_json_print(o);
		ck_assert_ptr_nonnull(strstr(b.data, tree));
	}
	ck_assert_str_eq(b.data, "{\"id\":4503599627370499,\"small\":-5},"
				 "{\"id\":-7,\"small\":100,\"opt\":9}");
	const int64_t lo[3] = { 0, -5, 0 }, hi[3] = { INT64_C(1) << 53, 10, 1000 };
	struct rv_err err = { 0 };
	struct entry e = { 0 };
	RV_CLEANUP_CJSON cJSON *named = cJSON_Parse("{\"id\":4503599627370499,\"small\":3}");
	ck_assert_int_eq(rv_wire_decode_entry(&entry_msg, named, "e[0]", lo, hi, &e, &err), 0);
	ck_assert(e.id == (INT64_C(1) << 52) + 3 && e.small == 3 && e.opt == 0);
	RV_CLEANUP_CJSON cJSON *pos = cJSON_Parse("[7,4,9]");
	ck_assert_int_eq(rv_wire_decode_entry(&entry_msg, pos, "e[1]", lo, hi, &e, &err), 0);
	ck_assert(e.id == 7 && e.small == 4 && e.opt == 9);
	/* the caller's bound, in either form */
	RV_CLEANUP_CJSON cJSON *big = cJSON_Parse("{\"id\":1,\"small\":11}");
	ck_assert_int_eq(rv_wire_decode_entry(&entry_msg, big, "e[2]", lo, hi, &e, &err), -EINVAL);
	ck_assert_str_eq(err.field, "e[2].small");
	RV_CLEANUP_CJSON cJSON *bigp = cJSON_Parse("[1,11,0]");
	ck_assert_int_eq(rv_wire_decode_entry(&entry_msg, bigp, "e[3]", lo, hi, &e, &err), -EINVAL);
	ck_assert_str_eq(err.field, "e[3][1]");
	RV_CLEANUP_CJSON cJSON *shortp = cJSON_Parse("[1,2]");
	ck_assert_int_eq(rv_wire_decode_entry(&entry_msg, shortp, "e[4]", lo, hi, &e, &err),
			 -EINVAL);
	ck_assert_str_eq(err.field, "e[4]");
	rv_buf_release(&b);
}
END_TEST

/* One role's part of a map keyed by role. */
struct per_role {
	int n;
	bool present;
};

#define T struct per_role
static const struct rv_wire_field per_role_fields[] = {
	WINT("n", n, RV_WIRE_REQ, 0, 9, "0..9"),
};
static const struct rv_wire_message per_role_msg =
	RV_WIRE_MSG("PerRole", "one role's part", per_role_fields, NULL, NULL);
#undef T

static int role_map_decode(const char *text, struct per_role *out, struct rv_err *err)
{
	memset(out, 0, RV_ROLE_COUNT * sizeof(*out));
	RV_CLEANUP_CJSON cJSON *map = cJSON_Parse(text);
	ck_assert_ptr_nonnull(map);
	return rv_wire_decode_role_map(&per_role_msg, map, "spec.roles", out,
				       offsetof(struct per_role, present), "role kind", "skipped",
				       err);
}

START_TEST(test_role_map)
{
	struct per_role r[RV_ROLE_COUNT];
	struct rv_err err = { 0 };
	ck_assert_int_eq(role_map_decode("{\"ps\":{\"n\":2},\"skipped\":7,\"worker\":{\"n\":3}}", r,
					 &err),
			 0);
	ck_assert(r[RV_ROLE_WORKER].present && r[RV_ROLE_WORKER].n == 3);
	ck_assert(r[RV_ROLE_PS].present && r[RV_ROLE_PS].n == 2);
	ck_assert(!r[RV_ROLE_CHIEF].present && !r[RV_ROLE_EVALUATOR].present);
	/* written back keyed by role, the absent ones left out */
	RV_CLEANUP_CJSON cJSON *o = cJSON_CreateObject();
	ck_assert(rv_wire_encode_role_map(&per_role_msg, o, "roles", r,
					  offsetof(struct per_role, present)));
	RV_CLEANUP_FREE char *text = rv_json_print(o);
	ck_assert_str_eq(text, "{\"roles\":{\"worker\":{\"n\":3},\"ps\":{\"n\":2}}}");
	/* refused, naming the key */
	ck_assert_int_eq(role_map_decode("{\"boss\":{\"n\":1}}", r, &err), -EINVAL);
	ck_assert_str_eq(err.field, "spec.roles.boss");
	ck_assert_str_eq(err.msg,
			 "unknown role kind \"boss\" (expected worker, ps, chief or evaluator)");
	ck_assert_int_eq(role_map_decode("{\"chief\":1}", r, &err), -EINVAL);
	ck_assert_str_eq(err.msg, "spec.roles.chief must be an object");
	ck_assert_int_eq(role_map_decode("{\"worker\":{\"n\":10}}", r, &err), -EINVAL);
	ck_assert_str_eq(err.field, "spec.roles.worker.n");
	/* a role twice (a tree built by hand: the parser refuses a key twice) */
	RV_CLEANUP_CJSON cJSON *twice = cJSON_CreateObject();
	for (int i = 0; i < 2; i++)
		cJSON_AddNumberToObject(cJSON_AddObjectToObject(twice, "ps"), "n", i);
	memset(r, 0, sizeof(r));
	ck_assert_int_eq(rv_wire_decode_role_map(&per_role_msg, twice, "roles", r,
						 offsetof(struct per_role, present), "role", NULL,
						 &err),
			 -EINVAL);
	ck_assert_str_eq(err.msg, "roles.ps is given twice");
}
END_TEST

RV_TEST_MAIN_TCASE("wire_codec", "codec", 0, test_values_and_defaults, test_round_trip,
		   test_entries, test_refused, test_variant_items, test_role_map)
