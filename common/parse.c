/*
 * parse.c: checked number parsing.  Pure, thread-safe.
 */
#include "parse.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* strtoll/strtod skip leading white space; trailing text is refused, so
 * refuse leading text too. */
static bool starts_blank(const char *s)
{
	return isspace((unsigned char)*s);
}

int rv_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out)
{
	if (!s || !*s || starts_blank(s))
		return -EINVAL;
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno == ERANGE)
		return -ERANGE;
	if (*end || end == s)
		return -EINVAL;
	if (v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

int rv_parse_double(const char *s, double min, double max, double *out)
{
	if (!s || !*s || starts_blank(s))
		return -EINVAL;
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno == ERANGE)
		return -ERANGE;
	if (*end || end == s || !isfinite(v))
		return -EINVAL;
	if (v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

int rv_parse_bool(const char *s, bool *out)
{
	if (!s)
		return -EINVAL;
	if (!strcasecmp(s, "1") || !strcasecmp(s, "true") || !strcasecmp(s, "yes") ||
	    !strcasecmp(s, "on")) {
		*out = true;
		return 0;
	}
	if (!strcasecmp(s, "0") || !strcasecmp(s, "false") || !strcasecmp(s, "no") ||
	    !strcasecmp(s, "off")) {
		*out = false;
		return 0;
	}
	return -EINVAL;
}

int rv_parse_memory_mb(const char *s, int64_t *out_mb)
{
	/* A quantity starts with a digit or '.': no blank, sign, hex or "inf". */
	if (!s || !(isdigit((unsigned char)*s) || *s == '.'))
		return -EINVAL;
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (end == s || (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')))
		return -EINVAL;
	if (errno == ERANGE && v != 0)
		return -ERANGE;
	if (!isfinite(v) || v < 0)
		return -EINVAL;
	static const struct {
		const char *suffix;
		double mb;
	} units[] = {
		{ "", 1.0 / (1024.0 * 1024.0) }, { "Ki", 1.0 / 1024.0 }, { "Mi", 1.0 },
		{ "Gi", 1024.0 }, { "Ti", 1024.0 * 1024.0 }, { "K", 1e3 / 1048576.0 },
		{ "M", 1e6 / 1048576.0 }, { "G", 1e9 / 1048576.0 }, { "T", 1e12 / 1048576.0 },
	};
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(end, units[i].suffix) == 0) {
			double mb = v * units[i].mb;
			if (mb > 1e12)
				return -ERANGE;
			*out_mb = (int64_t)ceil(mb);
			return 0;
		}
	}
	return -EINVAL;
}
