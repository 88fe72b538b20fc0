/*
 * json.h: helpers over cJSON for reading validated fields.
 *
 * Every getter names the offending field on failure as "<path>.<key>"
 * (path "" -> just key), e.g. "spec.replicaSpecs.worker.resources.cpu", so
 * REST errors can point at it.  Getters return 1 when the key was present and
 * stored, 0 when absent and not required (out untouched), or a negative errno
 * (-EINVAL wrong type/missing, -ERANGE out of bounds reported as -EINVAL with
 * a message saying the bounds).  Pure functions, thread-safe.
 */
#ifndef RV_JSON_H
#define RV_JSON_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* Parse len bytes (need not be NUL-terminated).  NULL on error with *err
 * naming the byte offset.  Depth is limited to 64 by a pre-scan.  Refused
 * with -EINVAL and err->field naming the field: a string (key or value)
 * that is not valid UTF-8, an integer literal beyond +-(2^53 - 1) (a
 * double would round it), an object with a key twice ("duplicate key"). */
cJSON *rv_json_parse(const char *buf, size_t len, struct rv_err *err);

/* Whether len bytes at s are valid UTF-8 (RFC 3629: no overlong forms, no
 * surrogates, nothing beyond U+10FFFF).  NUL counts as valid. */
bool rv_utf8_valid(const char *s, size_t len);
/* The length of s cut to at most max bytes without splitting a character. */
size_t rv_utf8_cut(const char *s, size_t max);

/* Compact print; malloc'd string (free with free()), NULL when out of memory. */
char *rv_json_print(const cJSON *item);

int rv_json_get_string(const cJSON *obj, const char *key, const char *path, bool required,
		       char *out, size_t size, struct rv_err *err);
/* Integers are bounded to +-(2^53 - 1) whatever min and max say. */
int rv_json_get_int(const cJSON *obj, const char *key, const char *path, bool required,
		    int64_t min, int64_t max, int64_t *out, struct rv_err *err);
int rv_json_get_double(const cJSON *obj, const char *key, const char *path, bool required,
		       double min, double max, double *out, struct rv_err *err);
int rv_json_get_bool(const cJSON *obj, const char *key, const char *path, bool required,
		     bool *out, struct rv_err *err);
/* Object/array child of the given type; NULL when absent (and *rc=0 if not
 * required) or wrong type (*rc negative, *err set). */
const cJSON *rv_json_get_object(const cJSON *obj, const char *key, const char *path,
				bool required, int *rc, struct rv_err *err);
const cJSON *rv_json_get_array(const cJSON *obj, const char *key, const char *path,
			       bool required, int *rc, struct rv_err *err);

/* Build "<path>.<key>" / "<path>[i]" into buf; returns buf. */
const char *rv_json_path(char *buf, size_t size, const char *path, const char *key);
const char *rv_json_path_index(char *buf, size_t size, const char *path, int index);

/* Destructor behind RV_CLEANUP_CJSON (cleanup.h); cJSON_Delete accepts NULL. */
static inline void rv_json_deletep(cJSON **p)
{
	cJSON_Delete(*p);
}

#endif
