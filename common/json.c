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
#include <string.h>

#define RV_JSON_MAX_DEPTH 64

/*
 * cJSON parses recursively; a body of a million '[' would recurse that deep
 * before failing (its own limit is 1000, still far more than any message we
 * accept).  Count depth outside strings first so hostile input costs one
 * linear scan.  Returns the offset of the first byte over the limit, or -1.
 */
static long depth_prescan(const char *buf, size_t len)
{
	int depth = 0;
	bool in_string = false;

	for (size_t i = 0; i < len; i++) {
		char c = buf[i];
		if (in_string) {
			if (c == '\\')
				i++;  /* skip the escaped byte, whatever it is */
			else if (c == '"')
				in_string = false;
			continue;
		}
		switch (c) {
		case '"':
			in_string = true;
			break;
		case '[':
		case '{':
			if (++depth > RV_JSON_MAX_DEPTH)
				return (long)i;
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
	return -1;
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
	long deep = depth_prescan(buf, len);
	if (deep >= 0) {
		rv_err_set(err, -EINVAL, "",
			   "could not parse json: nesting deeper than %d at byte %ld",
			   RV_JSON_MAX_DEPTH, deep);
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

char *rv_json_print(const cJSON *item)
{
	return item ? cJSON_PrintUnformatted(item) : NULL;
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
static const cJSON *lookup(const cJSON *obj, const char *key, const char *path, bool required,
			   int *rc, char *field, size_t fsize, struct rv_err *err)
{
	rv_json_path(field, fsize, path, key);
	const cJSON *it = cJSON_IsObject(obj) ? cJSON_GetObjectItemCaseSensitive(obj, key) : NULL;
	if (it && cJSON_IsNull(it))
		it = NULL;
	if (!it) {
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
		return rv_err_set(err, -EINVAL, field, "%s must be a string", field);
	size_t n = strlen(it->valuestring);
	if (size == 0 || n >= size)
		return rv_err_set(err, -EINVAL, field, "%s must be at most %zu characters", field,
				  size ? size - 1 : 0);
	memcpy(out, it->valuestring, n + 1);
	return 1;
}

/* 2^63 exactly; every double below it converts to int64_t without overflow. */
#define TWO_63 9223372036854775808.0

int rv_json_get_int(const cJSON *obj, const char *key, const char *path, bool required,
		    int64_t min, int64_t max, int64_t *out, struct rv_err *err)
{
	char field[128];
	int rc;
	const cJSON *it = lookup(obj, key, path, required, &rc, field, sizeof(field), err);
	if (!it)
		return rc;
	if (!cJSON_IsNumber(it))
		return rv_err_set(err, -EINVAL, field, "%s must be an integer", field);
	double v = it->valuedouble;
	/* cJSON turns 1e999 into inf; strtod never gives NaN for JSON text, but a
	 * tree built in code might hold one. */
	if (!isfinite(v) || v != floor(v) || v < -TWO_63 || v >= TWO_63)
		return rv_err_set(err, -EINVAL, field, "%s must be an integer", field);
	int64_t i = (int64_t)v;
	if (i < min || i > max)
		return rv_err_set(err, -EINVAL, field,
				  "%s must be between %" PRId64 " and %" PRId64, field, min, max);
	*out = i;
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
		return rv_err_set(err, -EINVAL, field, "%s must be a finite number", field);
	double v = it->valuedouble;
	if (v < min || v > max)
		return rv_err_set(err, -EINVAL, field, "%s must be between %g and %g", field, min,
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
		return rv_err_set(err, -EINVAL, field, "%s must be a boolean", field);
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
		*rc = rv_err_set(err, -EINVAL, field, "%s must be an object", field);
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
		*rc = rv_err_set(err, -EINVAL, field, "%s must be an array", field);
		return NULL;
	}
	return it;
}
