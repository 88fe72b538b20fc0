/*
 * check_json.c: rv_json_parse (offsets, trailing data, depth limit) and the
 * validated getters (types, bounds, lengths, field paths) of common/json.c.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "json.h"
#include "testutil.h"

static cJSON *parse_str(const char *s, struct rv_err *err)
{
	return rv_json_parse(s, strlen(s), err);
}

/* Parse s, which must be valid. */
static cJSON *must_parse(const char *s)
{
	struct rv_err err = { 0 };
	cJSON *root = parse_str(s, &err);
	ck_assert_msg(root != NULL, "could not parse %s: %s", s, err.msg);
	return root;
}

START_TEST(test_parse_valid)
{
	struct rv_err err = { 0 };
	cJSON *root = parse_str(" {\"a\": [1, 2, {\"b\": \"c\"}]}\n\t ", &err);
	ck_assert_ptr_nonnull(root);
	const cJSON *a = cJSON_GetObjectItem(root, "a");
	ck_assert_int_eq(cJSON_GetArraySize(a), 3);
	ck_assert_int_eq(err.code, 0);
	cJSON_Delete(root);
}
END_TEST

START_TEST(test_parse_not_nul_terminated)
{
	/* Only len bytes count; what follows in memory is ignored. */
	const char buf[] = "[1,2]garbage";
	struct rv_err err = { 0 };
	cJSON *root = rv_json_parse(buf, 5, &err);
	ck_assert_ptr_nonnull(root);
	ck_assert_int_eq(cJSON_GetArraySize(root), 2);
	cJSON_Delete(root);

	/* And a document cut short by len is an error, not a read past it. */
	root = rv_json_parse(buf, 4, &err);
	ck_assert_ptr_null(root);
	ck_assert_int_eq(err.code, -EINVAL);
}
END_TEST

START_TEST(test_parse_syntax_error_offset)
{
	struct rv_err err = { 0 };
	cJSON *root = parse_str("{\"a\":1,\"b\":tru}", &err);
	ck_assert_ptr_null(root);
	ck_assert_int_eq(err.code, -EINVAL);
	ck_assert_str_eq(err.field, "");
	ck_assert_msg(strstr(err.msg, "at byte 11") != NULL, "msg: %s", err.msg);

	root = parse_str("{\"a\" 1}", &err);
	ck_assert_ptr_null(root);
	ck_assert_msg(strstr(err.msg, "at byte 5") != NULL, "msg: %s", err.msg);
}
END_TEST

START_TEST(test_parse_trailing_data)
{
	struct rv_err err = { 0 };
	cJSON *root = parse_str("{\"a\":1} x", &err);
	ck_assert_ptr_null(root);
	ck_assert_int_eq(err.code, -EINVAL);
	ck_assert_msg(strstr(err.msg, "at byte 8") != NULL, "msg: %s", err.msg);

	root = parse_str("{} {}", &err);
	ck_assert_ptr_null(root);
}
END_TEST

START_TEST(test_parse_empty)
{
	struct rv_err err = { 0 };
	ck_assert_ptr_null(rv_json_parse("", 0, &err));
	ck_assert_int_eq(err.code, -EINVAL);
	ck_assert_ptr_null(rv_json_parse(NULL, 0, &err));
	ck_assert_ptr_null(parse_str("   ", &err));
	ck_assert_int_eq(err.code, -EINVAL);
	/* err is optional */
	ck_assert_ptr_null(parse_str("{", NULL));
}
END_TEST

static char *nested(int depth, char open, char close)
{
	char *s = malloc((size_t)depth * 2 + 1);
	ck_assert_ptr_nonnull(s);
	memset(s, open, (size_t)depth);
	memset(s + depth, close, (size_t)depth);
	s[depth * 2] = '\0';
	return s;
}

START_TEST(test_parse_depth_limit)
{
	struct rv_err err = { 0 };
	char *ok = nested(64, '[', ']');
	cJSON *root = parse_str(ok, &err);
	ck_assert_ptr_nonnull(root);
	cJSON_Delete(root);
	free(ok);

	char *deep = nested(65, '[', ']');
	root = parse_str(deep, &err);
	ck_assert_ptr_null(root);
	ck_assert_int_eq(err.code, -EINVAL);
	ck_assert_msg(strstr(err.msg, "nesting") && strstr(err.msg, "at byte 64"), "msg: %s",
		      err.msg);
	free(deep);
}
END_TEST

START_TEST(test_parse_hostile_depth)
{
	/* 10000 '[' with no closers, then a million: rejected by the scan. */
	struct rv_err err = { 0 };
	size_t n = 1000000;
	char *s = malloc(n);
	ck_assert_ptr_nonnull(s);
	memset(s, '[', n);
	ck_assert_ptr_null(rv_json_parse(s, 10000, &err));
	ck_assert_int_eq(err.code, -EINVAL);
	ck_assert_ptr_null(rv_json_parse(s, n, &err));
	ck_assert_int_eq(err.code, -EINVAL);
	memset(s, '{', n);
	ck_assert_ptr_null(rv_json_parse(s, n, &err));
	ck_assert_msg(strstr(err.msg, "nesting") != NULL, "msg: %s", err.msg);
	free(s);

	/* Mixed objects and arrays count together. */
	char *m = malloc(40 * 6);
	ck_assert_ptr_nonnull(m);
	size_t len = 0;
	for (int i = 0; i < 40; i++) {
		memcpy(m + len, "{\"a\":[", 6);
		len += 6;
	}
	ck_assert_ptr_null(rv_json_parse(m, len, &err));
	ck_assert_msg(strstr(err.msg, "nesting") != NULL, "msg: %s", err.msg);
	free(m);
}
END_TEST

START_TEST(test_parse_brackets_in_strings)
{
	/* Brackets and escaped quotes inside strings are not nesting. */
	char buf[400];
	char br[201];
	memset(br, '[', 200);
	br[200] = '\0';
	snprintf(buf, sizeof(buf), "{\"s\":\"\\\"%s\\\\\"}", br);
	cJSON *root = must_parse(buf);
	const cJSON *s = cJSON_GetObjectItem(root, "s");
	ck_assert_int_eq(strlen(s->valuestring), 202);
	cJSON_Delete(root);
}
END_TEST

START_TEST(test_parse_nul)
{
	/* NUL would cut a C string short: "worker\u0000;x" must not read as "worker". */
	struct rv_err err = { 0 };
	const char *esc = "{\"node\":\"worker\\u0000;x\"}";
	ck_assert_ptr_null(parse_str(esc, &err));
	ck_assert_msg(strstr(err.msg, "u0000") && strstr(err.msg, "at byte 15"), "msg: %s",
		      err.msg);

	const char raw[] = "{\"node\":\"w\0x\"}";
	ck_assert_ptr_null(rv_json_parse(raw, sizeof(raw) - 1, &err));
	ck_assert_msg(strstr(err.msg, "nul byte at byte 10"), "msg: %s", err.msg);

	const char trailing[] = "{}";
	ck_assert_ptr_null(rv_json_parse(trailing, sizeof(trailing), &err));  /* with the NUL */
	ck_assert_msg(strstr(err.msg, "at byte 2"), "msg: %s", err.msg);

	/* an escaped backslash before u0000 is plain text, and other escapes are fine */
	cJSON *root = must_parse("{\"a\":\"\\\\u0000\",\"b\":\"\\u00e9\\u0001\"}");
	ck_assert_str_eq(cJSON_GetObjectItem(root, "a")->valuestring, "\\u0000");
	ck_assert_str_eq(cJSON_GetObjectItem(root, "b")->valuestring, "\xc3\xa9\x01");
	cJSON_Delete(root);
}
END_TEST

START_TEST(test_print)
{
	cJSON *root = must_parse("{ \"a\" : [ 1 , true , \"x\" ] }");
	char *s = rv_json_print(root);
	ck_assert_str_eq(s, "{\"a\":[1,true,\"x\"]}");
	free(s);
	cJSON_Delete(root);
	ck_assert_ptr_null(rv_json_print(NULL));
}
END_TEST

START_TEST(test_print_numbers)
{
	/* Numbers survive text exactly; cJSON's own printer rounds 2^53 to 15 digits. */
	static const double vals[] = {
		0, -5, 42, 1700000000000.0, 9007199254740992.0, -9007199254740992.0,
		0.1, 0.25, 1.0 / 3.0, 1.5000000000000002, 1e-300, 1e300, 1e20, -2.5e-7,
		4194304.0 * 1048576.0,
	};
	cJSON *arr = cJSON_CreateArray();
	for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++)
		cJSON_AddItemToArray(arr, cJSON_CreateNumber(vals[i]));
	cJSON_AddItemToArray(arr, cJSON_CreateNumber(NAN));
	char *txt = rv_json_print(arr);
	ck_assert_ptr_nonnull(txt);
	/* Integers past 2^53 - 1 go out in exponent form: as integer literals
	 * rv_json_parse would refuse them. */
	static const char head[] = "[0,-5,42,1700000000000,9.007199254740992e+15,"
				   "-9.007199254740992e+15,0.1,0.25,0.3333333333333333,"
				   "1.5000000000000002,";
	ck_assert_msg(strncmp(txt, head, strlen(head)) == 0, "%s", txt);
	ck_assert_msg(strstr(txt, ",null]") != NULL, "NaN prints as null: %s", txt);

	cJSON *back = must_parse(txt);
	int i = 0;
	for (const cJSON *it = back->child; it && i < (int)(sizeof(vals) / sizeof(vals[0]));
	     it = it->next, i++)
		ck_assert_msg(it->valuedouble == vals[i], "value %d: %.17g != %.17g", i,
			      it->valuedouble, vals[i]);
	ck_assert_int_eq(i, (int)(sizeof(vals) / sizeof(vals[0])));
	free(txt);
	cJSON_Delete(back);
	cJSON_Delete(arr);
}
END_TEST

START_TEST(test_print_strings)
{
	const char *v = "q\"b\\s/ n\n r\r t\t b\b f\f c\x01\x1f \xc3\xa9 '; DROP TABLE x;--";
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "k\"ey\n", v);
	cJSON_AddNullToObject(o, "n");
	cJSON_AddTrueToObject(o, "t");
	cJSON_AddFalseToObject(o, "f");
	cJSON_AddItemToObject(o, "e", cJSON_CreateObject());
	cJSON_AddItemToObject(o, "a", cJSON_CreateArray());
	char *txt = rv_json_print(o);
	ck_assert_ptr_nonnull(txt);
	ck_assert_msg(strstr(txt, "\\u0001\\u001f") != NULL, "%s", txt);
	ck_assert_msg(strstr(txt, "\"n\":null,\"t\":true,\"f\":false,\"e\":{},\"a\":[]") != NULL,
		      "%s", txt);
	for (const char *c = txt; *c; c++)
		ck_assert_msg((unsigned char)*c >= 0x20, "raw control byte in %s", txt);

	cJSON *back = must_parse(txt);
	ck_assert_str_eq(cJSON_GetObjectItem(back, "k\"ey\n")->valuestring, v);
	ck_assert(cJSON_Compare(o, back, 1));
	free(txt);
	cJSON_Delete(back);
	cJSON_Delete(o);
}
END_TEST

START_TEST(test_path)
{
	char buf[64];
	ck_assert_str_eq(rv_json_path(buf, sizeof(buf), "", "kind"), "kind");
	ck_assert_str_eq(rv_json_path(buf, sizeof(buf), NULL, "kind"), "kind");
	ck_assert_str_eq(rv_json_path(buf, sizeof(buf), "spec.model", "batchSize"),
			 "spec.model.batchSize");
	ck_assert_str_eq(rv_json_path_index(buf, sizeof(buf), "samples", 3), "samples[3]");
	ck_assert_str_eq(rv_json_path(buf, 8, "spec.model", "batchSize"), "spec.mo");
}
END_TEST

START_TEST(test_get_string)
{
	cJSON *root = must_parse("{\"s\":\"abc\",\"n\":5,\"z\":null}");
	struct rv_err err = { 0 };
	char out[8] = "keep";

	ck_assert_int_eq(rv_json_get_string(root, "s", "", true, out, sizeof(out), &err), 1);
	ck_assert_str_eq(out, "abc");

	strcpy(out, "keep");
	ck_assert_int_eq(rv_json_get_string(root, "missing", "", false, out, sizeof(out), &err),
			 0);
	ck_assert_str_eq(out, "keep");
	/* null is absent */
	ck_assert_int_eq(rv_json_get_string(root, "z", "", false, out, sizeof(out), &err), 0);
	ck_assert_str_eq(out, "keep");

	ck_assert_int_eq(rv_json_get_string(root, "missing", "meta", true, out, sizeof(out), &err),
			 -EINVAL);
	ck_assert_str_eq(err.field, "meta.missing");
	ck_assert_msg(strstr(err.msg, "required") != NULL, "msg: %s", err.msg);

	ck_assert_int_eq(rv_json_get_string(root, "n", "meta", true, out, sizeof(out), &err),
			 -EINVAL);
	ck_assert_str_eq(err.field, "meta.n");
	ck_assert_str_eq(err.msg, "meta.n must be a string");
	ck_assert_str_eq(out, "keep");

	/* exactly size - 1 fits; size does not */
	ck_assert_int_eq(rv_json_get_string(root, "s", "", true, out, 4, &err), 1);
	ck_assert_int_eq(rv_json_get_string(root, "s", "", true, out, 3, &err), -EINVAL);
	ck_assert_str_eq(err.field, "s");
	ck_assert_str_eq(err.msg, "s must be at most 2 characters");
	cJSON_Delete(root);
}
END_TEST

START_TEST(test_get_int)
{
	cJSON *root = must_parse("{\"i\":42,\"f\":1.5,\"neg\":-7,\"s\":\"5\",\"big\":1e999,"
				 "\"b\":true,\"e\":1e3,\"huge\":1e16,"
				 "\"min\":-9007199254740991}");
	struct rv_err err = { 0 };
	int64_t v = 99;

	ck_assert_int_eq(rv_json_get_int(root, "i", "", true, 0, 1024, &v, &err), 1);
	ck_assert_int_eq(v, 42);
	ck_assert_int_eq(rv_json_get_int(root, "e", "", true, 0, 1024, &v, &err), 1);
	ck_assert_int_eq(v, 1000);

	v = 99;
	ck_assert_int_eq(rv_json_get_int(root, "f", "x", true, 0, 1024, &v, &err), -EINVAL);
	ck_assert_str_eq(err.field, "x.f");
	ck_assert_str_eq(err.msg, "x.f must be an integer");
	ck_assert_int_eq(v, 99);

	ck_assert_int_eq(rv_json_get_int(root, "neg", "", true, 0, 1024, &v, &err), -EINVAL);
	ck_assert_str_eq(err.field, "neg");
	ck_assert_str_eq(err.msg, "neg must be between 0 and 1024");

	ck_assert_int_eq(rv_json_get_int(root, "i", "", true, 0, 10, &v, &err), -EINVAL);
	ck_assert_str_eq(err.msg, "i must be between 0 and 10");

	ck_assert_int_eq(rv_json_get_int(root, "s", "", true, 0, 10, &v, &err), -EINVAL);
	ck_assert_str_eq(err.msg, "s must be an integer");
	ck_assert_int_eq(rv_json_get_int(root, "b", "", true, 0, 10, &v, &err), -EINVAL);
	ck_assert_int_eq(rv_json_get_int(root, "big", "", true, INT64_MIN, INT64_MAX, &v, &err),
			 -EINVAL);
	ck_assert_int_eq(rv_json_get_int(root, "huge", "", true, INT64_MIN, INT64_MAX, &v, &err),
			 -EINVAL);
	ck_assert_msg(strstr(err.msg, "must be between"), "msg: %s", err.msg);
	ck_assert_int_eq(rv_json_get_int(root, "min", "", true, INT64_MIN, INT64_MAX, &v, &err),
			 1);
	ck_assert(v == -9007199254740991);

	ck_assert_int_eq(rv_json_get_int(root, "none", "", false, 0, 1, &v, &err), 0);
	ck_assert_int_eq(rv_json_get_int(root, "none", "", true, 0, 1, &v, &err), -EINVAL);
	ck_assert_str_eq(err.field, "none");
	cJSON_Delete(root);
}
END_TEST

START_TEST(test_get_nan_inf)
{
	/* Trees built in code can hold NaN and inf; the getters refuse them. */
	cJSON *root = cJSON_CreateObject();
	cJSON_AddNumberToObject(root, "nan", NAN);
	cJSON_AddNumberToObject(root, "inf", INFINITY);
	cJSON_AddNumberToObject(root, "ninf", -INFINITY);
	struct rv_err err = { 0 };
	int64_t i;
	double d;
	ck_assert_int_eq(rv_json_get_int(root, "nan", "", true, INT64_MIN, INT64_MAX, &i, &err),
			 -EINVAL);
	ck_assert_int_eq(rv_json_get_int(root, "inf", "", true, INT64_MIN, INT64_MAX, &i, &err),
			 -EINVAL);
	ck_assert_int_eq(rv_json_get_double(root, "nan", "", true, -1e300, 1e300, &d, &err),
			 -EINVAL);
	ck_assert_str_eq(err.msg, "nan must be a finite number");
	ck_assert_int_eq(rv_json_get_double(root, "inf", "", true, -INFINITY, INFINITY, &d, &err),
			 -EINVAL);
	ck_assert_int_eq(rv_json_get_double(root, "ninf", "", true, -INFINITY, INFINITY, &d,
					    &err),
			 -EINVAL);
	cJSON_Delete(root);
}
END_TEST

START_TEST(test_get_double)
{
	cJSON *root = must_parse("{\"d\":0.25,\"neg\":-1,\"s\":\"1\",\"big\":1e999}");
	struct rv_err err = { 0 };
	double d = 7;
	ck_assert_int_eq(rv_json_get_double(root, "d", "", true, 0, 1024, &d, &err), 1);
	ck_assert(d == 0.25);
	ck_assert_int_eq(rv_json_get_double(root, "neg", "r", true, 0, 1024, &d, &err), -EINVAL);
	ck_assert_str_eq(err.field, "r.neg");
	ck_assert_str_eq(err.msg, "r.neg must be between 0 and 1024");
	ck_assert(d == 0.25);
	ck_assert_int_eq(rv_json_get_double(root, "s", "", true, 0, 1024, &d, &err), -EINVAL);
	ck_assert_int_eq(rv_json_get_double(root, "big", "", true, 0, 1e308, &d, &err), -EINVAL);
	ck_assert_int_eq(rv_json_get_double(root, "none", "", false, 0, 1, &d, &err), 0);
	cJSON_Delete(root);
}
END_TEST

START_TEST(test_get_bool)
{
	cJSON *root = must_parse("{\"t\":true,\"f\":false,\"n\":1,\"s\":\"true\"}");
	struct rv_err err = { 0 };
	bool b = false;
	ck_assert_int_eq(rv_json_get_bool(root, "t", "", true, &b, &err), 1);
	ck_assert(b);
	ck_assert_int_eq(rv_json_get_bool(root, "f", "", true, &b, &err), 1);
	ck_assert(!b);
	ck_assert_int_eq(rv_json_get_bool(root, "n", "", true, &b, &err), -EINVAL);
	ck_assert_str_eq(err.msg, "n must be a boolean");
	ck_assert_int_eq(rv_json_get_bool(root, "s", "", true, &b, &err), -EINVAL);
	ck_assert_int_eq(rv_json_get_bool(root, "none", "", false, &b, &err), 0);
	cJSON_Delete(root);
}
END_TEST

START_TEST(test_get_object_array)
{
	cJSON *root = must_parse("{\"o\":{\"k\":1},\"a\":[1],\"s\":\"x\"}");
	struct rv_err err = { 0 };
	int rc = 99;
	ck_assert_ptr_nonnull(rv_json_get_object(root, "o", "", true, &rc, &err));
	ck_assert_int_eq(rc, 1);
	ck_assert_ptr_null(rv_json_get_object(root, "a", "p", true, &rc, &err));
	ck_assert_int_eq(rc, -EINVAL);
	ck_assert_str_eq(err.field, "p.a");
	ck_assert_str_eq(err.msg, "p.a must be an object");
	ck_assert_ptr_null(rv_json_get_object(root, "none", "", false, &rc, &err));
	ck_assert_int_eq(rc, 0);
	ck_assert_ptr_null(rv_json_get_object(root, "none", "", true, &rc, &err));
	ck_assert_int_eq(rc, -EINVAL);

	ck_assert_ptr_nonnull(rv_json_get_array(root, "a", "", true, &rc, &err));
	ck_assert_int_eq(rc, 1);
	ck_assert_ptr_null(rv_json_get_array(root, "s", "", true, &rc, &err));
	ck_assert_int_eq(rc, -EINVAL);
	ck_assert_str_eq(err.msg, "s must be an array");
	ck_assert_ptr_null(rv_json_get_array(root, "o", "", false, NULL, NULL));
	/* A non-object parent has no keys. */
	int64_t v;
	const cJSON *arr = cJSON_GetObjectItem(root, "a");
	ck_assert_int_eq(rv_json_get_int(arr, "k", "", false, 0, 1, &v, &err), 0);
	cJSON_Delete(root);
}
END_TEST

/* The field a parse failure names, and that the message says why. */
static void refused(const char *doc, const char *field, const char *why)
{
	struct rv_err err = { 0 };
	cJSON *root = parse_str(doc, &err);
	ck_assert_msg(root == NULL, "accepted %s", doc);
	ck_assert_int_eq(err.code, -EINVAL);
	ck_assert_str_eq(err.field, field);
	ck_assert_msg(strstr(err.msg, why) != NULL, "msg: %s", err.msg);
	ck_assert_msg(rv_utf8_valid(err.msg, strlen(err.msg)), "msg not UTF-8: %s", err.msg);
}

START_TEST(test_parse_duplicate_keys)
{
	/* The getters read the first, PostgreSQL's jsonb keeps the last: refused. */
	refused("{\"metadata\":{\"name\":\"a\",\"name\":\"b\"}}", "metadata.name",
		"duplicate key \"name\" in metadata");
	refused("{\"a\":1,\"a\":1}", "a", "duplicate key \"a\" in the document");
	refused("{\"s\":[{\"k\":1},{\"k\":1,\"x\":2,\"k\":3}]}", "s[1].k", "duplicate key");
	/* A large object is checked as well (sorted, not n^2). */
	struct rv_buf b;
	rv_buf_init(&b);
	rv_buf_puts(&b, "{");
	for (int i = 0; i < 5000; i++)
		rv_buf_printf(&b, "\"k%d\":%d,", i, i);
	rv_buf_puts(&b, "\"k4711\":0}");
	refused(b.data, "k4711", "duplicate key");
	rv_buf_release(&b);
	/* Same letters, different case or escapes that differ: not duplicates. */
	cJSON_Delete(must_parse("{\"a\":1,\"A\":2,\"b\":{\"a\":3}}"));
	/* An escaped spelling of the same key is the same key. */
	refused("{\"ab\":1,\"\\u0061b\":2}", "ab", "duplicate key");
}
END_TEST

START_TEST(test_parse_big_integers)
{
	/* 2^53 + 1 reads back as 2^53: refused, naming the field, not rounded. */
	refused("{\"spec\":{\"model\":{\"parameters\":9007199254740993}}}", "spec.model.parameters",
		"beyond 2^53");
	refused("{\"a\":[1,2,-9007199254740992]}", "a[2]", "beyond 2^53");
	refused("{\"a\":12345678901234567890123}", "a", "beyond 2^53");
	refused("9007199254740992", "", "the document is an integer beyond");
	/* The largest safe integers, numbers with a fraction or exponent, and
	 * digits inside strings are fine. */
	cJSON *root = must_parse("{\"a\":9007199254740991,\"b\":-9007199254740991,"
				 "\"c\":1e300,\"d\":12345678901234567890.5,"
				 "\"e\":\"99999999999999999999\",\"f\":00000000000000000001}");
	int64_t v = 0;
	struct rv_err err = { 0 };
	ck_assert_int_eq(rv_json_get_int(root, "a", "", true, INT64_MIN, INT64_MAX, &v, &err), 1);
	ck_assert(v == 9007199254740991);
	/* A non-literal integer past the bound is refused by the getter. */
	ck_assert_int_eq(rv_json_get_int(root, "c", "", true, INT64_MIN, INT64_MAX, &v, &err),
			 -EINVAL);
	ck_assert_str_eq(err.field, "c");
	cJSON_Delete(root);
}
END_TEST

START_TEST(test_parse_invalid_utf8)
{
	refused("{\"metadata\":{\"name\":\"ab\xff\"}}", "metadata.name", "not valid UTF-8");
	refused("{\"a\":[\"ok\",\"\xc0\xaf\"]}", "a[1]", "not valid UTF-8"); /* overlong '/' */
	refused("{\"a\":\"\xed\xa0\x80\"}", "a", "not valid UTF-8");         /* a surrogate */
	refused("{\"a\":\"\xf4\x90\x80\x80\"}", "a", "not valid UTF-8");     /* past U+10FFFF */
	refused("{\"a\":\"\xe2\x82\"}", "a", "not valid UTF-8");             /* cut short */
	refused("{\"o\":{\"k\xfe\":1}}", "o", "a key of o is not valid UTF-8");
	/* Escapes cannot smuggle a lone surrogate in either (cJSON refuses them). */
	struct rv_err e2 = { 0 };
	ck_assert_ptr_null(parse_str("[\"\\ud800\"]", &e2));
	ck_assert_ptr_null(parse_str("[\"\\udc00x\"]", &e2));
	ck_assert_ptr_null(parse_str("[\"\\ud800\\u0041\"]", &e2));
	cJSON *root = must_parse("{\"name\":\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"}");
	cJSON_Delete(root);
	ck_assert(rv_utf8_valid("caf\xc3\xa9", 5));
	ck_assert(!rv_utf8_valid("caf\xc3", 4));
	/* Cutting never splits a character. */
	ck_assert_uint_eq(rv_utf8_cut("a\xe2\x82\xac", 3), 1);
	ck_assert_uint_eq(rv_utf8_cut("a\xe2\x82\xac", 4), 4);
	/* An error message cut at its size stays UTF-8. */
	struct rv_err err = { 0 };
	char longkey[600];
	memset(longkey, 'x', sizeof(longkey));
	for (size_t i = 1; i + 3 < sizeof(longkey); i += 3)
		memcpy(longkey + i, "\xe2\x82\xac", 3);
	longkey[sizeof(longkey) - 1] = '\0';
	for (int shift = 0; shift < 3; shift++) {
		rv_err_set(&err, -EINVAL, "", "%.*s%s", shift, "xx", longkey);
		ck_assert_msg(rv_utf8_valid(err.msg, strlen(err.msg)), "shift %d", shift);
	}
}
END_TEST

/* A path longer than the field's buffer is cut between characters: the
 * field and the message that quotes it stay UTF-8 wherever the cut falls. */
START_TEST(test_parse_long_path_utf8)
{
	for (int pad = 0; pad < 4; pad++) {
		char doc[512];
		char outer[140];
		memset(outer, 's', sizeof(outer));
		for (size_t i = pad; i + 2 < sizeof(outer); i += 2)
			memcpy(outer + i, "\xc3\xa9", 2);
		outer[sizeof(outer) - 1] = '\0';
		/* a bad key inside, then a bad value inside */
		for (int bad_value = 0; bad_value < 2; bad_value++) {
			snprintf(doc, sizeof(doc),
				 bad_value ? "{\"%s\":{\"k\":\"v\xff\"}}"
					   : "{\"%s\":{\"k\xff\":1}}",
				 outer);
			struct rv_err err = { 0 };
			ck_assert_ptr_null(parse_str(doc, &err));
			ck_assert_msg(strstr(err.msg, "not valid UTF-8"), "%s", err.msg);
			ck_assert_msg(rv_utf8_valid(err.msg, strlen(err.msg)),
				      "pad %d value %d: msg", pad, bad_value);
			ck_assert_msg(rv_utf8_valid(err.field, strlen(err.field)),
				      "pad %d value %d: field", pad, bad_value);
		}
	}
	/* rv_json_path cuts between characters too */
	char buf[8];
	rv_json_path(buf, sizeof(buf), "ab", "c\xc3\xa9\xc3\xa9");
	ck_assert_str_eq(buf, "ab.c\xc3\xa9");
}
END_TEST

static Suite *json_suite(void)
{
	TCase *tc_parse =
		RV_TEST_TCASE("parse", 10, test_parse_valid, test_parse_not_nul_terminated,
			      test_parse_syntax_error_offset, test_parse_trailing_data,
			      test_parse_empty, test_parse_depth_limit, test_parse_hostile_depth,
			      test_parse_brackets_in_strings, test_parse_nul, test_print,
			      test_print_numbers, test_print_strings, test_parse_duplicate_keys,
			      test_parse_big_integers, test_parse_invalid_utf8,
			      test_parse_long_path_utf8);
	TCase *tc_getters = RV_TEST_TCASE("getters", 10, test_path, test_get_string, test_get_int,
					  test_get_nan_inf, test_get_double, test_get_bool,
					  test_get_object_array);
	return RV_TEST_SUITE("json", tc_parse, tc_getters);
}

RV_TEST_MAIN(json_suite)
