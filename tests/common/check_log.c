/*
 * check_log.c: logfmt output of common/log.c: the line shape, quoting with
 * rv_log_q, level filtering, long lines, and one write(2) per line (checked
 * by reading stderr through a pipe, and with several threads at once).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "testutil.h"

static int saved_stderr = -1;
static int pipe_rd = -1;

/* Point stderr at a pipe; capture_end() returns what was written. */
static void capture_begin(void)
{
	int p[2];
	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	/* Room for everything the tests write, so write(2) never blocks. */
	fcntl(p[1], F_SETPIPE_SZ, 1 << 20);
	saved_stderr = dup(STDERR_FILENO);
	dup2(p[1], STDERR_FILENO);
	close(p[1]);
	pipe_rd = p[0];
}

static char *capture_end(void)
{
	dup2(saved_stderr, STDERR_FILENO);
	close(saved_stderr);
	size_t cap = 1 << 16, len = 0;
	char *out = malloc(cap);
	ssize_t n;
	while ((n = read(pipe_rd, out + len, cap - len - 1)) > 0) {
		len += (size_t)n;
		if (cap - len < 2) {
			cap *= 2;
			out = realloc(out, cap);
		}
	}
	close(pipe_rd);
	out[len] = 0;
	return out;
}

static void assert_matches(const char *s, const char *re)
{
	regex_t rx;
	ck_assert_int_eq(regcomp(&rx, re, REG_EXTENDED | REG_NOSUB), 0);
	int r = regexec(&rx, s, 0, NULL, 0);
	regfree(&rx);
	ck_assert_msg(r == 0, "\"%s\" does not match /%s/", s, re);
}

START_TEST(test_line_shape)
{
	rv_log_setup("agent", RV_LOG_DEBUG);
	capture_begin();
	rv_log_warn("worker exited", "rank=%d exit=%d signal=%d", 3, 137, 9);
	char *out = capture_end();
	assert_matches(out, "^ts=[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z "
			    "level=warn comp=agent msg=\"worker exited\" rank=3 exit=137 "
			    "signal=9\n$");
	free(out);
}
END_TEST

START_TEST(test_no_keys)
{
	rv_log_setup("brain", RV_LOG_INFO);
	capture_begin();
	rv_log_info("ready", "%s", "");
	rv_log(RV_LOG_ERROR, "stopped", NULL);
	char *out = capture_end();
	assert_matches(out, "^ts=[^ ]+ level=info comp=brain msg=\"ready\"\nts=[^ ]+ level=error "
			    "comp=brain msg=\"stopped\"\n$");
	free(out);
}
END_TEST

START_TEST(test_level_filter)
{
	rv_log_setup("brain", RV_LOG_WARN);
	ck_assert_int_eq(rv_log_get_level(), RV_LOG_WARN);
	capture_begin();
	rv_log_debug("d", "k=%d", 1);
	rv_log_info("i", "k=%d", 2);
	rv_log_warn("w", "k=%d", 3);
	rv_log_error("e", "k=%d", 4);
	char *out = capture_end();
	ck_assert_ptr_null(strstr(out, "msg=\"d\""));
	ck_assert_ptr_null(strstr(out, "msg=\"i\""));
	ck_assert_ptr_nonnull(strstr(out, "level=warn comp=brain msg=\"w\" k=3\n"));
	ck_assert_ptr_nonnull(strstr(out, "level=error comp=brain msg=\"e\" k=4\n"));
	free(out);
}
END_TEST

START_TEST(test_level_parse)
{
	enum rv_log_level l = RV_LOG_ERROR;
	ck_assert_int_eq(rv_log_level_parse("debug", &l), 0);
	ck_assert_int_eq(l, RV_LOG_DEBUG);
	ck_assert_int_eq(rv_log_level_parse("info", &l), 0);
	ck_assert_int_eq(l, RV_LOG_INFO);
	ck_assert_int_eq(rv_log_level_parse("warn", &l), 0);
	ck_assert_int_eq(l, RV_LOG_WARN);
	ck_assert_int_eq(rv_log_level_parse("error", &l), 0);
	ck_assert_int_eq(l, RV_LOG_ERROR);
	ck_assert_int_eq(rv_log_level_parse("warning", &l), -EINVAL);
	ck_assert_int_eq(rv_log_level_parse("", &l), -EINVAL);
	ck_assert_int_eq(rv_log_level_parse("INFO", &l), -EINVAL);
	ck_assert_int_eq(l, RV_LOG_ERROR);
}
END_TEST

START_TEST(test_quote)
{
	char q[64];
	ck_assert_str_eq(rv_log_q(q, sizeof(q), "plain"), "\"plain\"");
	ck_assert_str_eq(rv_log_q(q, sizeof(q), "two words"), "\"two words\"");
	ck_assert_str_eq(rv_log_q(q, sizeof(q), "say \"hi\""), "\"say \\\"hi\\\"\"");
	ck_assert_str_eq(rv_log_q(q, sizeof(q), "a\\b"), "\"a\\\\b\"");
	/* Control characters (a newline would split the line) are dropped. */
	ck_assert_str_eq(rv_log_q(q, sizeof(q), "line1\nline2\r\t"), "\"line1line2\"");
	ck_assert_str_eq(rv_log_q(q, sizeof(q), ""), "\"\"");
	ck_assert_str_eq(rv_log_q(q, sizeof(q), NULL), "\"\"");
	/* Non-ASCII bytes pass through. */
	ck_assert_str_eq(rv_log_q(q, sizeof(q), "caf\xc3\xa9"), "\"caf\xc3\xa9\"");
}
END_TEST

START_TEST(test_quote_truncates)
{
	/* Whatever the size, the result is closed by a quote and NUL-terminated,
	 * and an escape is never split from the character it escapes. */
	const char *v = "\"\"\"\"\"\"\"\"\"\"abcdefghij\\\\\\\\";
	for (size_t size = 3; size < 40; size++) {
		char q[40];
		memset(q, 'Z', sizeof(q));
		rv_log_q(q, size, v);
		size_t n = strlen(q);
		ck_assert_uint_lt(n, size);
		ck_assert_int_eq(q[0], '"');
		ck_assert_int_eq(q[n - 1], '"');
		ck_assert_uint_ge(n, 2);
		/* The inside is whole escape pairs or plain characters. */
		for (size_t i = 1; i < n - 1; i++) {
			if (q[i] == '\\') {
				ck_assert_msg(i + 1 < n - 1 &&
						      (q[i + 1] == '"' || q[i + 1] == '\\'),
					      "size %zu: split escape in %s", size, q);
				i++;
			} else {
				ck_assert_msg(q[i] != '"', "size %zu: bare quote in %s", size, q);
			}
		}
	}
	char tiny[2] = { 'Z', 'Z' };
	rv_log_q(tiny, 2, "x");
	ck_assert_int_eq(tiny[0], 0);
}
END_TEST

START_TEST(test_quoted_value_in_line)
{
	rv_log_setup("brain", RV_LOG_INFO);
	char q[128];
	capture_begin();
	rv_log_warn("could not open the database", "reason=%s",
		    rv_log_q(q, sizeof(q), "connection refused\n\"is it running?\""));
	char *out = capture_end();
	ck_assert_ptr_nonnull(
		strstr(out, " reason=\"connection refused\\\"is it running?\\\"\"\n"));
	ck_assert_ptr_eq(strchr(out, '\n'), out + strlen(out) - 1);
	free(out);
}
END_TEST

START_TEST(test_long_line)
{
	/* A value longer than the line buffer is cut, and the line still ends
	 * with one newline. */
	char *big = malloc(10000);
	memset(big, 'v', 9999);
	big[9999] = 0;
	rv_log_setup("brain", RV_LOG_INFO);
	capture_begin();
	rv_log_info("big", "v=%s", big);
	rv_log_info("next", "k=%d", 1);
	char *out = capture_end();
	char *nl = strchr(out, '\n');
	ck_assert_ptr_nonnull(nl);
	ck_assert_uint_le((size_t)(nl - out + 1), 2048);
	ck_assert_int_eq(nl[-1], 'v');
	assert_matches(nl + 1, "^ts=[^ ]+ level=info comp=brain msg=\"next\" k=1\n$");
	free(out);
	free(big);
}
END_TEST

#define THREADS 8
#define LINES   200

static void *log_thread(void *arg)
{
	int id = (int)(long)arg;
	char pad[300];
	memset(pad, 'a' + id, sizeof(pad) - 1);
	pad[sizeof(pad) - 1] = 0;
	for (int i = 0; i < LINES; i++)
		rv_log_info("tick", "thread=%d i=%d pad=%s", id, i, pad);
	return NULL;
}

START_TEST(test_one_write_per_line)
{
	/* Lines from several threads never interleave: each is whole. */
	rv_log_setup("brain", RV_LOG_INFO);
	capture_begin();
	pthread_t th[THREADS];
	for (long i = 0; i < THREADS; i++)
		pthread_create(&th[i], NULL, log_thread, (void *)i);
	for (int i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	char *out = capture_end();
	int lines = 0;
	regex_t rx;
	ck_assert_int_eq(regcomp(&rx,
				 "^ts=[^ ]+ level=info comp=brain msg=\"tick\" thread=([0-7]) "
				 "i=[0-9]+ pad=([a-h])+$",
				 REG_EXTENDED),
			 0);
	char *save = NULL;
	for (char *l = strtok_r(out, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		regmatch_t m[3];
		ck_assert_msg(regexec(&rx, l, 3, m, 0) == 0, "torn line: %.200s", l);
		int id = l[m[1].rm_so] - '0';
		/* The pad letters belong to the same thread as the thread= key. */
		ck_assert_int_eq(l[m[2].rm_so], 'a' + id);
		ck_assert_uint_eq(strspn(strstr(l, "pad=") + 4, "abcdefgh"), 299);
		lines++;
	}
	regfree(&rx);
	ck_assert_int_eq(lines, THREADS * LINES);
	free(out);
}
END_TEST

RV_TEST_MAIN_TCASE("log", "log", 20, test_line_shape, test_no_keys, test_level_filter,
		   test_level_parse, test_quote, test_quote_truncates, test_quoted_value_in_line,
		   test_long_line, test_one_write_per_line)
