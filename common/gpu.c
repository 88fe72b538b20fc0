/* gpu.c: see gpu.h. */
#include "gpu.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "buf.h"
#include "parse.h"
#include "proc.h"

/* The next space-separated word of *line as an integer in min..max; *line
 * moves past it. */
static int next_int(char **line, int64_t min, int64_t max, int64_t *out)
{
	char *save = NULL;
	char *w = strtok_r(*line, " ", &save);
	if (!w)
		return -EPROTO;
	*line = save;
	return rv_parse_i64(w, min, max, out) < 0 ? -EPROTO : 0;
}

static int parse_line(char *line, struct rv_gpu_info *out, int *declared)
{
	int64_t v[5];

	if (strncmp(line, "count ", 6) == 0) {
		char *at = line + 6;
		if (next_int(&at, 0, INT32_MAX, &v[0]) < 0 || (at && *at))
			return -EPROTO;
		*declared = (int)v[0];
		return 0;
	}
	if (strncmp(line, "why ", 4) == 0) {
		snprintf(out->why, sizeof(out->why), "%.159s", line + 4);
		return 0;
	}
	if (strncmp(line, "util ", 5) == 0) {
		char *at = line + 5;
		for (int i = 0; i < 3; i++)
			if (!at || next_int(&at, 0, i ? 100 : INT32_MAX, &v[i]) < 0)
				return -EPROTO;
		if (at && *at)
			return -EPROTO;
		/* the device it names must have been described */
		for (int i = 0; i < out->count; i++)
			if (out->dev[i].index == v[0]) {
				out->dev[i].util_pct = (int)v[1];
				out->dev[i].mem_util_pct = (int)v[2];
				return 0;
			}
		return out->count >= RV_GPU_MAX ? 0 : -EPROTO;
	}
	if (strncmp(line, "gpu ", 4) != 0)
		return -EPROTO;
	char *at = line + 4;
	static const int64_t max[5] = { INT32_MAX, INT64_MAX >> 20, INT64_MAX >> 20, 1000, 1000 };
	for (int i = 0; i < 5; i++)
		if (!at || next_int(&at, 0, max[i], &v[i]) < 0)
			return -EPROTO;
	if (!at || !*at)
		return -EPROTO; /* the name is required */
	if (out->count >= RV_GPU_MAX)
		return 0; /* more than we keep: the first RV_GPU_MAX */
	struct rv_gpu_dev *d = &out->dev[out->count++];
	d->index = (int)v[0];
	d->total_mb = v[1];
	d->free_mb = v[2];
	d->cc_major = (int)v[3];
	d->cc_minor = (int)v[4];
	snprintf(d->name, sizeof(d->name), "%.95s", at);
	d->util_pct = d->mem_util_pct = -1;
	return 0;
}

int rv_gpu_parse(const char *text, size_t len, struct rv_gpu_info *out, struct rv_err *err)
{
	int declared = -1;
	size_t at = 0;
	int lineno = 0;

	memset(out, 0, sizeof(*out));
	while (at < len) {
		const char *nl = memchr(text + at, '\n', len - at);
		size_t n = nl ? (size_t)(nl - (text + at)) : len - at;
		char line[256];
		lineno++;
		if (n >= sizeof(line))
			return rv_err_set(err, -EPROTO, "", "rover-gpuinfo line %d is too long",
					  lineno);
		memcpy(line, text + at, n);
		line[n] = '\0';
		at += n + (nl ? 1 : 0);
		if (n == 0)
			continue;
		if (parse_line(line, out, &declared) < 0)
			return rv_err_set(err, -EPROTO, "",
					  "rover-gpuinfo line %d not understood: %.80s", lineno,
					  line);
	}
	if (declared < 0)
		return rv_err_set(err, -EPROTO, "", "rover-gpuinfo printed no count");
	if (declared != out->count && out->count < RV_GPU_MAX)
		return rv_err_set(err, -EPROTO, "",
				  "rover-gpuinfo counted %d devices but described %d", declared,
				  out->count);
	if (out->count == 0 && !out->why[0])
		snprintf(out->why, sizeof(out->why), "no GPU");
	return 0;
}

int rv_gpu_probe(struct rv_gpu_info *out, int timeout_ms, struct rv_err *err)
{
	static const char *const rel[] = { "rover-gpuinfo", NULL };
	char path[PATH_MAX];
	const char *argv[] = { path, NULL };
	struct rv_proc_opts o = { .argv = argv, .io[0] = { RV_PROC_NULL } };
	struct rv_buf text;
	int status = 0, rc;

	memset(out, 0, sizeof(*out));
	rv_buf_init(&text);
	if (rv_proc_exe_relative(path, sizeof(path), rel, X_OK) < 0)
		snprintf(path, sizeof(path), "rover-gpuinfo"); /* PATH */
	rc = rv_proc_run(&o, timeout_ms, &status, &text);
	if (rc == -ETIMEDOUT) {
		rv_buf_release(&text);
		return rv_err_set(err, rc, "", "rover-gpuinfo did not answer within %d ms (killed)",
				  timeout_ms);
	}
	if (rc < 0) {
		rv_buf_release(&text);
		return rv_err_set(err, rc == -ENOENT ? -ENOENT : rc, "",
				  "cannot run rover-gpuinfo: %s", strerror(-rc));
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		rv_buf_release(&text);
		return rv_err_set(err, -EPROTO, "", "rover-gpuinfo failed (wait status 0x%x)",
				  status);
	}
	rc = rv_gpu_parse(text.data ? text.data : "", text.len, out, err);
	rv_buf_release(&text);
	return rc;
}
