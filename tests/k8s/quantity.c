/*
 * quantity.c: Kubernetes resource quantities ("500m", "2", "1.5", "3Gi",
 * "512Mi", "1G", "1e3") and a pod's requests and limits.  Pure.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "standin.h"

static const struct {
	const char *suffix;
	double mult;
} quantity_suffixes[] = {
	{ "Ki", 1024.0 },
	{ "Mi", 1048576.0 },
	{ "Gi", 1073741824.0 },
	{ "Ti", 1099511627776.0 },
	{ "Pi", 1125899906842624.0 },
	{ "Ei", 1152921504606846976.0 },
	{ "n", 1e-9 },
	{ "u", 1e-6 },
	{ "m", 1e-3 },
	{ "", 1.0 },
	{ "k", 1e3 },
	{ "M", 1e6 },
	{ "G", 1e9 },
	{ "T", 1e12 },
	{ "P", 1e15 },
	{ "E", 1e18 },
};

int quantity_parse(const char *s, bool milli, int64_t *out)
{
	char *end;
	if (!s || !*s)
		return -EINVAL;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || v < 0 || !isfinite(v))
		return -EINVAL;
	for (size_t i = 0; i < sizeof(quantity_suffixes) / sizeof(quantity_suffixes[0]); i++) {
		if (strcmp(end, quantity_suffixes[i].suffix) != 0)
			continue;
		double r = v * quantity_suffixes[i].mult * (milli ? 1000.0 : 1.0);
		if (r > 9.2e18)
			return -EINVAL;
		*out = (int64_t)ceil(r - 1e-9);
		return 0;
	}
	return -EINVAL;
}

/* A quantity given as a string or a bare number. */
static int64_t quantity_item(const cJSON *q, bool milli)
{
	int64_t v = 0;
	if (cJSON_IsNumber(q))
		return (int64_t)(q->valuedouble * (milli ? 1000.0 : 1.0));
	if (quantity_parse(cJSON_GetStringValue(q), milli, &v) < 0)
		return 0;
	return v;
}

static int64_t quantity_container(const cJSON *c, const char *res, bool milli)
{
	const cJSON *r = cJSON_GetObjectItem(c, "resources");
	const cJSON *q = cJSON_GetObjectItem(cJSON_GetObjectItem(r, "requests"), res);
	if (!q)
		q = cJSON_GetObjectItem(cJSON_GetObjectItem(r, "limits"), res);
	return q ? quantity_item(q, milli) : 0;
}

void quantity_pod_requests(const cJSON *pod, int64_t *cpu_m, int64_t *mem_b)
{
	const cJSON *c;
	*cpu_m = *mem_b = 0;
	cJSON_ArrayForEach(c, cJSON_GetObjectItem(cJSON_GetObjectItem(pod, "spec"), "containers"))
	{
		*cpu_m += quantity_container(c, "cpu", true);
		*mem_b += quantity_container(c, "memory", false);
	}
}

int64_t quantity_pod_mem_limit(const cJSON *pod)
{
	const cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(pod, "spec"),
								"containers"),
					    0);
	const cJSON *l = cJSON_GetObjectItem(cJSON_GetObjectItem(c, "resources"), "limits");
	const cJSON *q = cJSON_GetObjectItem(l, "memory");
	return q ? quantity_item(q, false) : 0;
}
