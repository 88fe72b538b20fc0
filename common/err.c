/*
 * err.c: struct rv_err helpers and the errno -> HTTP status mapping.
 * Used by every component; no shared state.
 */
#include "err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void rv_utf8_trim_cut(char *s)
{
	size_t end = strlen(s), i = end;
	while (i > 0 && end - i < 4 && ((unsigned char)s[i - 1] & 0xc0) == 0x80)
		i--;
	unsigned char lead = i > 0 ? (unsigned char)s[i - 1] : 0;
	size_t need = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1;
	if (lead >= 0xc0 && end - (i - 1) < need)
		s[i - 1] = '\0';
}

int rv_err_set(struct rv_err *e, int code, const char *field, const char *fmt, ...)
{
	if (!e)
		return code;
	e->code = code;
	/* A cut field or message must stay UTF-8 (both go out in JSON). */
	if (snprintf(e->field, sizeof(e->field), "%s", field ? field : "") >= (int)sizeof(e->field))
		rv_utf8_trim_cut(e->field);
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
	if (n >= (int)sizeof(e->msg))
		rv_utf8_trim_cut(e->msg);
	return code;
}

void rv_err_clear(struct rv_err *e)
{
	if (e)
		memset(e, 0, sizeof(*e));
}

int rv_errno_to_http(int neg_errno)
{
	switch (neg_errno) {
	case -EINVAL:
		return 400;
	case -EACCES:
	case -EPERM:
		return 401;
	case -EDQUOT:
		return 403;
	case -ENOENT:
		return 404;
	case -EEXIST:
	case -EBUSY:
		return 409;
	case -EMSGSIZE:
	case -E2BIG:
		return 413;
	case -EDOM:
		return 422;
	case -ECONNREFUSED:
	case -ECONNRESET:
	case -EAGAIN:
	case -ENOTCONN:
	case -EHOSTUNREACH:
	case -EROFS:
	case -ENOSPC:
		return 503;
	case -ETIMEDOUT:
		return 504;
	default:
		return 500;
	}
}

const char *rv_errno_name(int neg_errno)
{
	switch (rv_errno_to_http(neg_errno)) {
	case 400:
		return "invalid_argument";
	case 401:
		return "unauthorized";
	case 403:
		return "quota_exceeded";
	case 404:
		return "not_found";
	case 409:
		return "conflict";
	case 413:
		return "too_large";
	case 422:
		return "unprocessable";
	case 503:
		return "unavailable";
	case 504:
		return "timeout";
	default:
		return "internal";
	}
}
