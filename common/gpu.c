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
#include "proc.h"

static int parse_line(const char *line, struct rv_gpu_info *out, int *declared)
{
	struct rv_gpu_dev d = { 0 };
	long long total, free_mb;
	int name_at = 0;

	if (sscanf(line, "count %d", declared) == 1)
		return *declared >= 0 ? 0 : -EPROTO;
	if (strncmp(line, "why ", 4) == 0) {
		snprintf(out->why, sizeof(out->why), "%.159s", line + 4);
		return 0;
	}
	if (sscanf(line, "gpu %d %lld %lld %d %d %n", &d.index, &total, &free_mb, &d.cc_major,
		   &d.cc_minor, &name_at) == 5 &&
	    name_at > 0) {
		if (d.index < 0 || total < 0 || free_mb < 0)
			return -EPROTO;
		if (out->count >= RV_GPU_MAX)
			return 0; /* more than we keep: the first RV_GPU_MAX */
		d.total_mb = total;
		d.free_mb = free_mb;
		snprintf(d.name, sizeof(d.name), "%.95s", line + name_at);
		out->dev[out->count++] = d;
		return 0;
	}
	return -EPROTO;
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
