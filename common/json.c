/*
 * json.c: parsing with a depth limit, and validated field getters over cJSON.
 *
 * Used by wire.c and by every REST handler that reads a body.  Every getter
 * names the field ("<path>.<key>") in err->field and says what was expected in
 * err->msg.  A JSON null counts as absent, as Kubernetes treats it.  Pure and
 * thread-safe; cJSON trees are borrowed, never kept.
 */
#include "json.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"

#define RV_JSON_MAX_DEPTH 64
#define RV_STR_(x) #x
#define RV_STR(x) RV_STR_(x)
/* 2^63 exactly; every double strictly inside +-2^63 converts to int64_t. */
#define TWO_63 9223372036854775808.0

/*
 * cJSON parses recursively; a body of a million '[' would recurse that deep
 * before failing (its own limit is 1000, still far more than any message we
 * accept).  Count depth outside strings first so hostile input costs one
 * linear scan.  The same scan refuses NUL, raw or as \u0000: cJSON keeps
 * C strings, so "worker\u0000; rm -rf /" would silently read as "worker".
 * Returns NULL, or why the document is refused with *at set to the offset.
 */
static const char *prescan(const char *buf, size_t len, size_t *at)
{
	int depth = 0;
	bool in_string = false;

	for (size_t i = 0; i < len; i++) {
		char c = buf[i];
		*at = i;
		if (c == '\0')
			return "nul byte";
		if (in_string) {
			if (c == '\\') {
				if (len - i >= 6 && memcmp(buf + i + 1, "u0000", 5) == 0)
					return "\\u0000 in a string";
				i++;  /* skip the escaped byte, whatever it is */
				if (i < len && buf[i] == '\0') {
					*at = i;
					return "nul byte";
				}
			} else if (c == '"') {
				in_string = false;
			}
			continue;
		}
		switch (c) {
		case '"':
			in_string = true;
			break;
		case '[':
		case '{':
			if (++depth > RV_JSON_MAX_DEPTH)
				return "nesting deeper than " RV_STR(RV_JSON_MAX_DEPTH);
			break;
		case ']':
		case '}':
			/* Unbalanced closers are cJSON's to report. */
			if (depth > 0)
				depth--;
			break;
		default:
			break;
		}
	}
	return NULL;
}

static bool is_json_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

cJSON *rv_json_parse(const char *buf, size_t len, struct rv_err *err)
{
	if (!buf || len == 0) {
		rv_err_set(err, -EINVAL, "", "could not parse json: empty document at byte 0");
		return NULL;
	}
	size_t at = 0;
	const char *why = prescan(buf, len, &at);
	if (why) {
		rv_err_set(err, -EINVAL, "", "could not parse json: %s at byte %zu", why, at);
		return NULL;
	}

	/*
	 * require_null_terminated would demand a NUL inside len bytes, so check
	 * for trailing garbage ourselves.  return_parse_end is per call, unlike
	 * cJSON_GetErrorPtr().
	 */
	const char *end = NULL;
	cJSON *root = cJSON_ParseWithLengthOpts(buf, len, &end, 0);
	if (!root) {
		size_t off = end && end >= buf ? (size_t)(end - buf) : 0;
		if (off > len)
			off = len;
		rv_err_set(err, -EINVAL, "", "could not parse json: syntax error at byte %zu", off);
		return NULL;
	}
	size_t off = (size_t)(end - buf);
	while (off < len && is_json_space(buf[off]))
		off++;
	if (off < len) {
		cJSON_Delete(root);
		rv_err_set(err, -EINVAL, "",
			   "could not parse json: unexpected data after the document at byte %zu",
			   off);
		return NULL;
	}
	return root;
}

/*
 * Our own compact printer: cJSON prints numbers with "%1.15g" and accepts the
 * result when it reads back within DBL_EPSILON, so 9007199254740992 goes out
 * as 9.00719925474099e+15 and a value does not survive a round trip through
 * text.  Here integral values print as integers and others with the fewest
 * digits that read back exactly.
 */
static void print_string(struct rv_buf *b, const char *s)
{
	rv_buf_append(b, "\"", 1);
	const char *run = s;
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c >= 0x20 && c != '"' && c != '\\')
			continue;
		rv_buf_append(b, run, (size_t)(s - run));
		run = s + 1;
		char esc[8];
		switch (c) {
		case '"':
			rv_buf_puts(b, "\\\"");
			break;
		case '\\':
			rv_buf_puts(b, "\\\\");
			break;
		case '\n':
			rv_buf_puts(b, "\\n");
			break;
		case '\r':
			rv_buf_puts(b, "\\r");
			break;
		case '\t':
			rv_buf_puts(b, "\\t");
			break;
		case '\b':
			rv_buf_puts(b, "\\b");
			break;
		case '\f':
			rv_buf_puts(b, "\\f");
			break;
		default:
			snprintf(esc, sizeof(esc), "\\u%04x", c);
			rv_buf_puts(b, esc);
			break;
		}
	}
	rv_buf_append(b, run, (size_t)(s - run));
	rv_buf_append(b, "\"", 1);
}

static void print_number(struct rv_buf *b, double v)
{
	char num[40];
	if (!isfinite(v)) {
		rv_buf_puts(b, "null"); /* as cJSON does: JSON has no NaN or inf */
		return;
	}
	if (v == floor(v) && v > -TWO_63 && v < TWO_63) {
		snprintf(num, sizeof(num), "%" PRId64, (int64_t)v);
	} else {
		for (int prec = 15; prec <= 17; prec++) {
			snprintf(num, sizeof(num), "%.*g", prec, v);
			if (strtod(num, NULL) == v)
				break;
		}
	}
	rv_buf_puts(b, num);
}

static void print_item(struct rv_buf *b, const cJSON *it)
{
	const cJSON *c;
	switch (it->type & 0xff) {
	case cJSON_False:
		rv_buf_puts(b, "false");
		break;
	case cJSON_True:
		rv_buf_puts(b, "true");
		break;
	case cJSON_NULL:
		rv_buf_puts(b, "null");
		break;
	case cJSON_Number:
		print_number(b, it->valuedouble);
		break;
	case cJSON_String:
		print_string(b, it->valuestring ? it->valuestring : "");
		break;
	case cJSON_Raw:
		rv_buf_puts(b, it->valuestring ? it->valuestring : "null");
		break;
	case cJSON_Array:
		rv_buf_append(b, "[", 1);
		for (c = it->child; c; c = c->next) {
			print_item(b, c);
			if (c->next)
				rv_buf_append(b, ",", 1);
		}
		rv_buf_append(b, "]", 1);
		break;
	case cJSON_Object:
		rv_buf_append(b, "{", 1);
		for (c = it->child; c; c = c->next) {
			print_string(b, c->string ? c->string : "");
			rv_buf_append(b, ":", 1);
			print_item(b, c);
			if (c->next)
				rv_buf_append(b, ",", 1);
		}
		rv_buf_append(b, "}", 1);
		break;
	default:
		b->failed = true; /* cJSON_Invalid: nothing sensible to print */
		break;
	}
}

char *rv_json_print(const cJSON *item)
{
	if (!item)
		return NULL;
	struct rv_buf b;
	rv_buf_init(&b);
	print_item(&b, item);
	return rv_buf_steal(&b);
}

const char *rv_json_path(char *buf, size_t size, const char *path, const char *key)
{
	if (!path || !*path)
		snprintf(buf, size, "%s", key ? key : "");
	else if (!key || !*key)
		snprintf(buf, size, "%s", path);
	else
		snprintf(buf, size, "%s.%s", path, key);
	return buf;
}

const char *rv_json_path_index(char *buf, size_t size, const char *path, int index)
{
	snprintf(buf, size, "%s[%d]", path ? path : "", index);
	return buf;
}

/*
 * Look key up in obj.  Returns the item, or NULL when absent (or null); for an
 * absent required key *rc is -EINVAL with err set, else 0.
 */
/* Error naming "<path>.<key>", built only when needed; uses the getter's
 * locals field, path, key and err. */
#define FIELD_ERR(fmt, ...) \
	rv_err_set(err, -EINVAL, rv_json_path(field, sizeof(field), path, key), fmt, field, ##__VA_ARGS__)

static const cJSON *lookup(const cJSON *obj, const char *key, const char *path, bool required,
			   int *rc, char *field, size_t fsize, struct rv_err *err)
{
	const cJSON *it = cJSON_IsObject(obj) ? cJSON_GetObjectItemCaseSensitive(obj, key) : NULL;
	if (it && cJSON_IsNull(it))
		it = NULL;
	if (!it) {
		/* The field path is only built for an error: getters run for every
		 * field of every sample, so formatting it each time costs. */
		if (required)
			rv_json_path(field, fsize, path, key);
		*rc = required ? rv_err_set(err, -EINVAL, field, "%s is required", field) : 0;
		return NULL;
	}
	*rc = 1;
	return it;
}

int rv_json_get_string(const cJSON *obj, const char *key, const char *path, bool required,
		       char *out, size_t size, struct rv_err *err)
{
	char field[128];
	int rc;
	const cJSON *it = lookup(obj, key, path, required, &rc, field, sizeof(field), err);
	if (!it)
		return rc;
	if (!cJSON_IsString(it) || !it->valuestring)
		return FIELD_ERR("%s must be a string");
	size_t n = strlen(it->valuestring);
	if (size == 0 || n >= size)
		return FIELD_ERR("%s must be at most %zu characters",
				  size ? size - 1 : 0);
	memcpy(out, it->valuestring, n + 1);
	return 1;
}

int rv_json_get_int(const cJSON *obj, const char *key, const char *path, bool required,
		    int64_t min, int64_t max, int64_t *out, struct rv_err *err)
{
	char field[128];
	int rc;
	const cJSON *it = lookup(obj, key, path, required, &rc, field, sizeof(field), err);
	if (!it)
		return rc;
	if (!cJSON_IsNumber(it))
		return FIELD_ERR("%s must be an integer");
	double v = it->valuedouble;
	/* cJSON turns 1e999 into inf; strtod never gives NaN for JSON text, but a
	 * tree built in code might hold one. */
	if (!isfinite(v) || v != floor(v))
		return FIELD_ERR("%s must be an integer");
	if (v < -TWO_63 || v >= TWO_63 || (int64_t)v < min || (int64_t)v > max)
		return FIELD_ERR("%s must be between %" PRId64 " and %" PRId64, min, max);
	*out = (int64_t)v;
	return 1;
}

int rv_json_get_double(const cJSON *obj, const char *key, const char *path, bool required,
		       double min, double max, double *out, struct rv_err *err)
{
	char field[128];
	int rc;
	const cJSON *it = lookup(obj, key, path, required, &rc, field, sizeof(field), err);
	if (!it)
		return rc;
	if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble))
		return FIELD_ERR("%s must be a finite number");
	double v = it->valuedouble;
	if (v < min || v > max)
		return FIELD_ERR("%s must be between %g and %g", min,
				  max);
	*out = v;
	return 1;
}

int rv_json_get_bool(const cJSON *obj, const char *key, const char *path, bool required,
		     bool *out, struct rv_err *err)
{
	char field[128];
	int rc;
	const cJSON *it = lookup(obj, key, path, required, &rc, field, sizeof(field), err);
	if (!it)
		return rc;
	if (!cJSON_IsBool(it))
		return FIELD_ERR("%s must be a boolean");
	*out = cJSON_IsTrue(it);
	return 1;
}

const cJSON *rv_json_get_object(const cJSON *obj, const char *key, const char *path,
				bool required, int *rc, struct rv_err *err)
{
	char field[128];
	int dummy;
	if (!rc)
		rc = &dummy;
	const cJSON *it = lookup(obj, key, path, required, rc, field, sizeof(field), err);
	if (!it)
		return NULL;
	if (!cJSON_IsObject(it)) {
		*rc = FIELD_ERR("%s must be an object");
		return NULL;
	}
	return it;
}

const cJSON *rv_json_get_array(const cJSON *obj, const char *key, const char *path,
			       bool required, int *rc, struct rv_err *err)
{
	char field[128];
	int dummy;
	if (!rc)
		rc = &dummy;
	const cJSON *it = lookup(obj, key, path, required, rc, field, sizeof(field), err);
	if (!it)
		return NULL;
	if (!cJSON_IsArray(it)) {
		*rc = FIELD_ERR("%s must be an array");
		return NULL;
	}
	return it;
}
