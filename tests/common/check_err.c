/*
 * check_err.c: the one errno -> HTTP status mapping and the REST error names
 * of common/err.c, and struct rv_err filling.
 */
#include <errno.h>
#include <string.h>

#include "cleanup.h"
#include "err.h"
#include "testutil.h"

/* One entry per line reads as a table. */
/* clang-format off */
static const struct {
	int err;
	int http;
	const char *name;
} table[] = {
	{ -EINVAL, 400, "invalid_argument" },
	{ -EACCES, 401, "unauthorized" },
	{ -EPERM, 401, "unauthorized" },
	{ -ENOENT, 404, "not_found" },
	{ -EEXIST, 409, "conflict" },
	{ -EBUSY, 409, "conflict" },
	{ -EMSGSIZE, 413, "too_large" },
	{ -E2BIG, 413, "too_large" },
	{ -EDOM, 422, "unprocessable" },
	{ -ECONNREFUSED, 503, "unavailable" },
	{ -ECONNRESET, 503, "unavailable" },
	{ -EAGAIN, 503, "unavailable" },
	{ -ENOTCONN, 503, "unavailable" },
	{ -EHOSTUNREACH, 503, "unavailable" },
	{ -EROFS, 503, "unavailable" },
	{ -ENOSPC, 503, "unavailable" },
	{ -ETIMEDOUT, 504, "timeout" },
	{ -ENOMEM, 500, "internal" },
	{ -EIO, 500, "internal" },
	{ -ERANGE, 500, "internal" },
	{ 0, 500, "internal" },
	{ EINVAL, 500, "internal" }, /* positive errno is a caller bug, not a 400 */
	{ -99999, 500, "internal" },
};

/* clang-format on */
START_TEST(test_errno_to_http)
{
	for (size_t i = 0; i < RV_ARRAY_SIZE(table); i++) {
		ck_assert_msg(rv_errno_to_http(table[i].err) == table[i].http,
			      "errno %d: %d, want %d", table[i].err, rv_errno_to_http(table[i].err),
			      table[i].http);
		ck_assert_str_eq(rv_errno_name(table[i].err), table[i].name);
	}
}
END_TEST

START_TEST(test_err_set)
{
	struct rv_err e;
	memset(&e, 0x55, sizeof(e));
	int rc = rv_err_set(&e, -EINVAL, "samples[3].speed", "must be at least %d", 0);
	ck_assert_int_eq(rc, -EINVAL);
	ck_assert_int_eq(e.code, -EINVAL);
	ck_assert_str_eq(e.field, "samples[3].speed");
	ck_assert_str_eq(e.msg, "must be at least 0");

	rc = rv_err_set(&e, -ENOENT, NULL, "no job \"%s\"", "j-1");
	ck_assert_int_eq(rc, -ENOENT);
	ck_assert_str_eq(e.field, "");
	ck_assert_str_eq(e.msg, "no job \"j-1\"");

	/* NULL detail: only the code comes back. */
	ck_assert_int_eq(rv_err_set(NULL, -EEXIST, "x", "y"), -EEXIST);

	rv_err_clear(&e);
	ck_assert_int_eq(e.code, 0);
	ck_assert_str_eq(e.msg, "");
	rv_err_clear(NULL);
}
END_TEST

START_TEST(test_err_truncates)
{
	struct rv_err e;
	char longf[400], longm[1000];
	memset(longf, 'f', sizeof(longf) - 1);
	longf[sizeof(longf) - 1] = 0;
	memset(longm, 'm', sizeof(longm) - 1);
	longm[sizeof(longm) - 1] = 0;
	rv_err_set(&e, -EINVAL, longf, "%s", longm);
	ck_assert_uint_eq(strlen(e.field), sizeof(e.field) - 1);
	ck_assert_uint_eq(strlen(e.msg), sizeof(e.msg) - 1);
}
END_TEST

RV_TEST_MAIN_TCASE("err", "err", 10, test_errno_to_http, test_err_set, test_err_truncates)
