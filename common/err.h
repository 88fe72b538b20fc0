/*
 * err.h: error detail and the one errno -> HTTP status mapping.
 *
 * Functions return 0 (or a count) on success and a negative errno on failure.
 * Detail the caller cannot rebuild (libpq text, JSON position, the bad field)
 * goes in an optional struct rv_err, filled only on failure.  Thread-safe: no
 * shared state.
 */
#ifndef RV_ERR_H
#define RV_ERR_H

#include <errno.h>
#include <stddef.h>

struct rv_err {
	int code;         /* negative errno */
	char field[128];  /* the offending field ("samples[3].speed"), or "" */
	char msg[512];    /* lowercase, no trailing period */
};

/* Fill *e (when e is not NULL) and return code; code must be negative. */
int rv_err_set(struct rv_err *e, int code, const char *field, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Drop the last character of s when a cut (snprintf into a full buffer)
 * split it, so that s stays UTF-8. */
void rv_utf8_trim_cut(char *s);

/* Clear *e (e may be NULL). */
void rv_err_clear(struct rv_err *e);

/* -EINVAL 400, -EACCES/-EPERM 401, -EDQUOT 403 (a quota), -ENOENT 404, -EEXIST/-EBUSY 409, -EMSGSIZE/-E2BIG 413,
 * -EDOM 422, -ECONNREFUSED/-ECONNRESET/-EAGAIN/-ENOTCONN/-EROFS/-ENOSPC 503, -ETIMEDOUT 504,
 * else 500. */
int rv_errno_to_http(int neg_errno);

/* Short machine-readable name for the "error" key of REST errors
 * ("invalid_argument", "not_found", "conflict", ...). */
const char *rv_errno_name(int neg_errno);

#endif
