/*
 * log.c: logfmt logging to stderr.  One write(2) per line so lines from
 * several threads never interleave.  Global state: component name and level,
 * set once at start before threads exist.
 */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static char log_comp[32] = "rover";
static enum rv_log_level log_level = RV_LOG_INFO;
static const char *const level_names[] = { "debug", "info", "warn", "error" };

void rv_log_setup(const char *comp, enum rv_log_level level)
{
	snprintf(log_comp, sizeof(log_comp), "%s", comp);
	log_level = level;
}

enum rv_log_level rv_log_get_level(void)
{
	return log_level;
}

int rv_log_level_parse(const char *s, enum rv_log_level *out)
{
	for (int i = 0; i < 4; i++) {
		if (strcmp(s, level_names[i]) == 0) {
			*out = (enum rv_log_level)i;
			return 0;
		}
	}
	return -EINVAL;
}

const char *rv_log_q(char *buf, size_t size, const char *value)
{
	size_t o = 0;
	if (size < 3) {
		if (size)
			buf[0] = 0;
		return buf;
	}
	buf[o++] = '"';
	for (const char *p = value ? value : ""; *p && o + 3 < size; p++) {
		unsigned char c = (unsigned char)*p;
		if (c < 0x20)
			continue;
		if (c == '"' || c == '\\')
			buf[o++] = '\\';
		buf[o++] = (char)c;
	}
	buf[o++] = '"';
	buf[o] = 0;
	return buf;
}

void rv_log(enum rv_log_level level, const char *msg, const char *kvfmt, ...)
{
	if (level < log_level)
		return;
	char line[2048];
	struct timeval tv;
	struct tm tm;
	gettimeofday(&tv, NULL);
	gmtime_r(&tv.tv_sec, &tm);
	int n = snprintf(line, sizeof(line),
			 "ts=%04d-%02d-%02dT%02d:%02d:%02d.%03dZ level=%s comp=%s msg=\"%s\"",
			 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
			 tm.tm_sec, (int)(tv.tv_usec / 1000), level_names[level], log_comp, msg);
	if (n < 0)
		return;
	if ((size_t)n > sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	if (kvfmt && *kvfmt) {
		line[n++] = ' ';
		va_list ap;
		va_start(ap, kvfmt);
		int m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, kvfmt, ap);
		va_end(ap);
		if (m > 0)
			n += m;
		else
			n--; /* nothing formatted: no trailing blank */
		if ((size_t)n > sizeof(line) - 2)
			n = (int)sizeof(line) - 2;
	}
	line[n++] = '\n';
	ssize_t w = write(STDERR_FILENO, line, (size_t)n);
	(void)w;
}
