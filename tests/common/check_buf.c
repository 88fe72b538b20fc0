/*
 * check_buf.c: the growable text buffer of common/buf.c: growth across many
 * appends and large printf output, PostgreSQL array element escaping, and
 * handing the string over with rv_buf_steal, cutting back to a mark, room
 * reserved ahead.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "cleanup.h"
#include "testutil.h"

START_TEST(test_init_empty)
{
	struct rv_buf b;
	rv_buf_init(&b);
	ck_assert_ptr_null(b.data);
	ck_assert_uint_eq(b.len, 0);
	ck_assert(!rv_buf_failed(&b));
	/* Releasing an empty buffer is fine, twice too. */
	rv_buf_release(&b);
	rv_buf_release(&b);
}
END_TEST

START_TEST(test_append_growth)
{
	struct rv_buf b;
	rv_buf_init(&b);
	/* 10,000 appends of 7 bytes: every byte kept, always NUL-terminated. */
	for (int i = 0; i < 10000; i++) {
		rv_buf_append(&b, "abcdefgXXX", 7);
		ck_assert_uint_eq(b.len, (size_t)(i + 1) * 7);
		ck_assert_int_eq(b.data[b.len], 0);
		ck_assert_uint_gt(b.cap, b.len);
	}
	for (size_t i = 0; i < b.len; i += 7)
		ck_assert_int_eq(memcmp(b.data + i, "abcdefg", 7), 0);
	ck_assert(!rv_buf_failed(&b));
	rv_buf_release(&b);
	ck_assert_ptr_null(b.data);
}
END_TEST

START_TEST(test_append_binary_and_empty)
{
	struct rv_buf b;
	rv_buf_init(&b);
	rv_buf_append(&b, "", 0);
	ck_assert_uint_eq(b.len, 0);
	ck_assert_str_eq(b.data, "");
	rv_buf_puts(&b, "ab");
	rv_buf_append(&b, "c\0d", 3);
	ck_assert_uint_eq(b.len, 5);
	ck_assert_int_eq(memcmp(b.data, "abc\0d", 6), 0);
	rv_buf_release(&b);
}
END_TEST

START_TEST(test_printf)
{
	struct rv_buf b;
	rv_buf_init(&b);
	rv_buf_printf(&b, "%s=%d", "workers", 6);
	rv_buf_printf(&b, " %.2f", 0.125);
	ck_assert_str_eq(b.data, "workers=6 0.12");
	ck_assert_uint_eq(b.len, strlen("workers=6 0.12"));
	rv_buf_printf(&b, "%s", "");
	ck_assert_uint_eq(b.len, strlen("workers=6 0.12"));
	rv_buf_release(&b);
}
END_TEST

START_TEST(test_printf_large)
{
	/* Output far larger than the spare room must be formatted in full. */
	char *big = malloc(100001);
	memset(big, 'x', 100000);
	big[100000] = 0;
	struct rv_buf b;
	rv_buf_init(&b);
	rv_buf_puts(&b, "head:");
	rv_buf_printf(&b, "[%s]", big);
	ck_assert_uint_eq(b.len, 5 + 100002);
	ck_assert_int_eq(memcmp(b.data, "head:[x", 7), 0);
	ck_assert_int_eq(b.data[b.len - 1], ']');
	ck_assert_int_eq(b.data[b.len], 0);
	/* Many printfs each just under and over the spare room. */
	rv_buf_release(&b);
	for (int i = 0; i < 2000; i++)
		rv_buf_printf(&b, "%0*d", i % 97 + 1, 7);
	size_t want = 0;
	for (int i = 0; i < 2000; i++)
		want += (size_t)(i % 97 + 1);
	ck_assert_uint_eq(b.len, want);
	ck_assert_uint_eq(strlen(b.data), want);
	rv_buf_release(&b);
	free(big);
}
END_TEST

START_TEST(test_pg_array_escaping)
{
	struct rv_buf b;
	rv_buf_init(&b);
	static const char *const words[] = { "plain",       "a \"quoted\" word",
					     "back\\slash", "",
					     "NULL",        "{a,b}" };
	rv_buf_puts(&b, "{");
	for (size_t i = 0; i < RV_ARRAY_SIZE(words); i++) {
		if (i > 0)
			rv_buf_puts(&b, ",");
		rv_buf_pg_array_str(&b, words[i]);
	}
	rv_buf_puts(&b, "}");
	/* "NULL" and braces stay literal text because every element is quoted. */
	ck_assert_str_eq(b.data, "{\"plain\",\"a \\\"quoted\\\" word\",\"back\\\\slash\",\"\","
				 "\"NULL\",\"{a,b}\"}");
	rv_buf_release(&b);
}
END_TEST

START_TEST(test_steal)
{
	struct rv_buf b;
	rv_buf_init(&b);
	rv_buf_puts(&b, "plan reason");
	char *s = rv_buf_steal(&b);
	ck_assert_str_eq(s, "plan reason");
	/* The buffer is empty again and reusable; the string is the caller's. */
	ck_assert_ptr_null(b.data);
	ck_assert_uint_eq(b.len, 0);
	rv_buf_puts(&b, "again");
	ck_assert_str_eq(b.data, "again");
	ck_assert_str_eq(s, "plan reason");
	free(s);
	rv_buf_release(&b);

	/* Nothing appended: an empty string, not NULL. */
	rv_buf_init(&b);
	s = rv_buf_steal(&b);
	ck_assert_ptr_nonnull(s);
	ck_assert_str_eq(s, "");
	free(s);
}
END_TEST

START_TEST(test_failed_buffer)
{
	/* A failed buffer ignores appends and steal returns NULL and frees. */
	struct rv_buf b;
	rv_buf_init(&b);
	rv_buf_puts(&b, "x");
	b.failed = true;
	rv_buf_puts(&b, "more");
	rv_buf_printf(&b, "%d", 42);
	rv_buf_pg_array_str(&b, "y");
	ck_assert_uint_eq(b.len, 1);
	ck_assert_ptr_null(rv_buf_steal(&b));
	ck_assert_ptr_null(b.data);
	ck_assert(!rv_buf_failed(&b));
}
END_TEST

START_TEST(test_truncate_to_mark)
{
	struct rv_buf b = { 0 }; /* zeroed is empty, as after rv_buf_init */
	rv_buf_puts(&b, "{\"a\":[1,2");
	size_t mark = b.len;
	rv_buf_puts(&b, "]}");
	ck_assert_str_eq(b.data, "{\"a\":[1,2]}");
	rv_buf_truncate(&b, mark);
	ck_assert_uint_eq(b.len, mark);
	ck_assert_str_eq(b.data, "{\"a\":[1,2");
	rv_buf_printf(&b, ",%d]}", 3);
	ck_assert_str_eq(b.data, "{\"a\":[1,2,3]}");
	/* Longer than what is there: nothing changes. */
	rv_buf_truncate(&b, 1000);
	ck_assert_str_eq(b.data, "{\"a\":[1,2,3]}");
	rv_buf_truncate(&b, 0);
	ck_assert_str_eq(b.data, "");
	rv_buf_release(&b);
	rv_buf_truncate(&b, 0); /* empty: fine */
	ck_assert_ptr_null(b.data);
}
END_TEST

START_TEST(test_reserve)
{
	struct rv_buf b;
	rv_buf_init(&b);
	ck_assert(rv_buf_reserve(&b, 1000));
	ck_assert_uint_ge(b.cap, 1001);
	char *at = b.data;
	/* Appends within the reserved room do not move the data. */
	for (int i = 0; i < 100; i++)
		rv_buf_append(&b, "0123456789", 10);
	ck_assert_ptr_eq(b.data, at);
	ck_assert_uint_eq(b.len, 1000);
	/* A size that cannot be had fails the buffer instead of wrapping. */
	ck_assert(!rv_buf_reserve(&b, SIZE_MAX - 4));
	ck_assert(rv_buf_failed(&b));
	ck_assert(!rv_buf_reserve(&b, 1));
	rv_buf_release(&b);
	ck_assert(!rv_buf_failed(&b));
}
END_TEST

START_TEST(test_consume_front)
{
	struct rv_buf b = { 0 };
	rv_buf_consume(&b, 4); /* empty: fine */
	ck_assert_ptr_null(b.data);
	rv_buf_append(&b, "ab\0cdef", 7);
	rv_buf_consume(&b, 3);
	ck_assert_uint_eq(b.len, 4);
	ck_assert_str_eq(b.data, "cdef");
	rv_buf_consume(&b, 0);
	ck_assert_str_eq(b.data, "cdef");
	rv_buf_puts(&b, "gh");
	ck_assert_str_eq(b.data, "cdefgh");
	/* More than what is there: all of it goes. */
	rv_buf_consume(&b, 100);
	ck_assert_uint_eq(b.len, 0);
	ck_assert_str_eq(b.data, "");
	rv_buf_release(&b);
}
END_TEST

RV_TEST_MAIN_TCASE("buf", "buf", 10, test_init_empty, test_append_growth,
		   test_append_binary_and_empty, test_printf, test_printf_large,
		   test_pg_array_escaping, test_steal, test_failed_buffer, test_truncate_to_mark,
		   test_reserve, test_consume_front)
