/*
 * check_parse.c: checked number parsing of common/parse.c: integers, doubles,
 * booleans and Kubernetes-style memory quantities, with their bounds, edge
 * cases and garbage; and the two clocks.
 */
#include <errno.h>
#include <stdint.h>
#include <time.h>

#include "parse.h"
#include "cleanup.h"
#include "testutil.h"

START_TEST(test_i64_valid)
{
	int64_t v = 0;
	ck_assert_int_eq(rv_parse_i64("0", 0, 10, &v), 0);
	ck_assert_int_eq(v, 0);
	ck_assert_int_eq(rv_parse_i64("-42", -100, 100, &v), 0);
	ck_assert_int_eq(v, -42);
	ck_assert_int_eq(rv_parse_i64("+7", 0, 10, &v), 0);
	ck_assert_int_eq(v, 7);
	ck_assert_int_eq(rv_parse_i64("9223372036854775807", 0, INT64_MAX, &v), 0);
	ck_assert_int_eq(v, INT64_MAX);
	ck_assert_int_eq(rv_parse_i64("-9223372036854775808", INT64_MIN, 0, &v), 0);
	ck_assert_int_eq(v, INT64_MIN);
	/* Base 10 only: a leading zero is not octal. */
	ck_assert_int_eq(rv_parse_i64("010", 0, 100, &v), 0);
	ck_assert_int_eq(v, 10);
}
END_TEST

START_TEST(test_i64_bounds)
{
	int64_t v = 99;
	ck_assert_int_eq(rv_parse_i64("10", 0, 10, &v), 0);
	ck_assert_int_eq(v, 10);
	ck_assert_int_eq(rv_parse_i64("11", 0, 10, &v), -ERANGE);
	ck_assert_int_eq(rv_parse_i64("-1", 0, 10, &v), -ERANGE);
	ck_assert_int_eq(rv_parse_i64("9223372036854775808", 0, INT64_MAX, &v), -ERANGE);
	ck_assert_int_eq(rv_parse_i64("-9223372036854775809", INT64_MIN, 0, &v), -ERANGE);
	ck_assert_int_eq(rv_parse_i64("99999999999999999999999", 0, INT64_MAX, &v), -ERANGE);
	/* A failed parse leaves the output alone. */
	ck_assert_int_eq(v, 10);
}
END_TEST

START_TEST(test_i64_garbage)
{
	int64_t v = 5;
	static const char *const bad[] = { "",    "abc",  "12abc", "1.5", "1e3", "0x10", "12 ",
					   " 12", "\t12", "-",     "+",   "--1", "1_000" };
	for (size_t i = 0; i < RV_ARRAY_SIZE(bad); i++)
		ck_assert_msg(rv_parse_i64(bad[i], INT64_MIN, INT64_MAX, &v) == -EINVAL,
			      "\"%s\" was accepted", bad[i]);
	ck_assert_int_eq(rv_parse_i64(NULL, 0, 10, &v), -EINVAL);
	ck_assert_int_eq(v, 5);
}
END_TEST

START_TEST(test_double_valid)
{
	double v = 0;
	ck_assert_int_eq(rv_parse_double("0.85", 0, 1, &v), 0);
	ck_assert_double_eq_tol(v, 0.85, 1e-12);
	ck_assert_int_eq(rv_parse_double("-2.5", -10, 10, &v), 0);
	ck_assert_double_eq(v, -2.5);
	ck_assert_int_eq(rv_parse_double("1e3", 0, 1e6, &v), 0);
	ck_assert_double_eq(v, 1000);
	ck_assert_int_eq(rv_parse_double("7", 0, 10, &v), 0);
	ck_assert_double_eq(v, 7);
	ck_assert_int_eq(rv_parse_double(".5", 0, 1, &v), 0);
	ck_assert_double_eq(v, 0.5);
}
END_TEST

START_TEST(test_double_bounds_and_garbage)
{
	double v = 3;
	ck_assert_int_eq(rv_parse_double("1.0000001", 0, 1, &v), -ERANGE);
	ck_assert_int_eq(rv_parse_double("-0.1", 0, 1, &v), -ERANGE);
	ck_assert_int_eq(rv_parse_double("1e400", 0, 1e300, &v), -ERANGE);
	static const char *const bad[] = { "",         "abc",  "1.5x", "nan", "NaN", "inf", "-inf",
					   "infinity", "1.5 ", " 1.5", "\n1", "1,5", "." };
	for (size_t i = 0; i < RV_ARRAY_SIZE(bad); i++)
		ck_assert_msg(rv_parse_double(bad[i], -1e300, 1e300, &v) == -EINVAL,
			      "\"%s\" was accepted", bad[i]);
	ck_assert_int_eq(rv_parse_double(NULL, 0, 1, &v), -EINVAL);
	ck_assert_double_eq(v, 3);
}
END_TEST

START_TEST(test_bool)
{
	static const char *const yes[] = { "1", "true", "TRUE", "True", "yes", "on", "ON" };
	static const char *const no[] = { "0", "false", "FALSE", "no", "off", "Off" };
	static const char *const bad[] = { "", "2", "y", "n", "truee", " true", "true ", "enable" };
	bool v;
	for (size_t i = 0; i < RV_ARRAY_SIZE(yes); i++) {
		v = false;
		ck_assert_msg(rv_parse_bool(yes[i], &v) == 0 && v, "\"%s\" is not true", yes[i]);
	}
	for (size_t i = 0; i < RV_ARRAY_SIZE(no); i++) {
		v = true;
		ck_assert_msg(rv_parse_bool(no[i], &v) == 0 && !v, "\"%s\" is not false", no[i]);
	}
	for (size_t i = 0; i < RV_ARRAY_SIZE(bad); i++) {
		v = true;
		ck_assert_msg(rv_parse_bool(bad[i], &v) == -EINVAL, "\"%s\" was accepted", bad[i]);
		ck_assert(v);
	}
	ck_assert_int_eq(rv_parse_bool(NULL, &v), -EINVAL);
}
END_TEST

START_TEST(test_memory_units)
{
	/* clang-format off */
	static const struct {
		const char *s;
		int64_t mb;
	} cases[] = {
		{ "512Mi", 512 },
		{ "8Gi", 8192 },
		{ "1Ti", 1048576 },
		{ "1024Ki", 1 },
		{ "1048576", 1 },        /* bytes */
		{ "1", 1 },              /* one byte rounds up to 1 MiB */
		{ "0", 0 },
		{ "0Gi", 0 },
		{ "1G", 954 },           /* 1e9 bytes = 953.67 MiB, rounded up */
		{ "1M", 1 },             /* 1e6 bytes = 0.95 MiB */
		{ "100M", 96 },
		{ "1T", 953675 },
		{ "1000K", 1 },
		{ "1.5Gi", 1536 },
		{ "0.5Mi", 1 },
		{ "2e3Mi", 2000 },
	};
	/* clang-format on */
	for (size_t i = 0; i < RV_ARRAY_SIZE(cases); i++) {
		int64_t mb = -1;
		ck_assert_msg(rv_parse_memory_mb(cases[i].s, &mb) == 0, "\"%s\" rejected",
			      cases[i].s);
		ck_assert_msg(mb == cases[i].mb, "\"%s\": %lld MiB, want %lld", cases[i].s,
			      (long long)mb, (long long)cases[i].mb);
	}
}
END_TEST

START_TEST(test_memory_garbage)
{
	static const char *const bad[] = { "",     "Gi",    "8gi",    "8GB",  "8 Gi",  "8Gi ",
					   " 8Gi", "-1Gi",  "-1",     "8Ei",  "8Gii",  "abc",
					   "nan",  "infGi", "0x10Mi", "+8Gi", "8.Gi.", "Mi8" };
	for (size_t i = 0; i < RV_ARRAY_SIZE(bad); i++) {
		int64_t mb = 77;
		ck_assert_msg(rv_parse_memory_mb(bad[i], &mb) == -EINVAL, "\"%s\" was accepted",
			      bad[i]);
		ck_assert_int_eq(mb, 77);
	}
	int64_t mb = 77;
	ck_assert_int_eq(rv_parse_memory_mb(NULL, &mb), -EINVAL);
	/* Beyond 1e12 MiB, and beyond what a double holds. */
	ck_assert_int_eq(rv_parse_memory_mb("2000000Ti", &mb), -ERANGE);
	ck_assert_int_eq(rv_parse_memory_mb("1e400", &mb), -ERANGE);
	ck_assert_int_eq(mb, 77);
}
END_TEST

START_TEST(test_clocks)
{
	int64_t m1 = rv_mono_ms();
	int64_t w = rv_now_ms();
	/* After 2020-01-01 and before 2100-01-01. */
	ck_assert_int_gt(w, 1577836800000LL);
	ck_assert_int_lt(w, 4102444800000LL);
	struct timespec ts = { 0, 30 * 1000 * 1000 };
	nanosleep(&ts, NULL);
	int64_t m2 = rv_mono_ms();
	ck_assert_int_ge(m2 - m1, 29);
	ck_assert_int_lt(m2 - m1, 5000);
}
END_TEST

static Suite *parse_suite(void)
{
	TCase *tc_numbers = RV_TEST_TCASE("numbers", 10, test_i64_valid, test_i64_bounds,
					  test_i64_garbage, test_double_valid,
					  test_double_bounds_and_garbage, test_bool);
	TCase *tc_memory = RV_TEST_TCASE("memory", 10, test_memory_units, test_memory_garbage);
	TCase *tc_clocks = RV_TEST_TCASE("clocks", 10, test_clocks);
	return RV_TEST_SUITE("parse", tc_numbers, tc_memory, tc_clocks);
}

RV_TEST_MAIN(parse_suite)
