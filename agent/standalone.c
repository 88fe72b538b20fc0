/*
 * standalone.c: the private rover-master (standalone.h).
 */
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "parse.h"
#include "standalone.h"

/* build/bin/rover-master beside /proc/self/exe, or "rover-master" from PATH. */
static void master_exe(char *out, size_t size)
{
	static const char *const rel[] = { "rover-master", NULL };
	if (rv_proc_exe_relative(out, size, rel, X_OK) < 0)
		snprintf(out, size, "rover-master");
}

static int write_spec(const char *path, const struct flags *f)
{
	FILE *o = fopen(path, "w");
	if (!o)
		return -errno;
	/* The rendezvous is all rover-run asks of it; the one dataset the
	 * master requires stands for the script's own data, unless
	 * ROVER_STANDALONE_DATASET=SIZE[:SHARD_SIZE[:EPOCHS]] describes the
	 * samples a script takes through the trainer library's shards. */
	int64_t v[3] = { 1, 1, 1 }; /* size, shard size, epochs */
	const char *ds = getenv("ROVER_STANDALONE_DATASET");
	if (ds && ds[0]) {
		char copy[96], *save = NULL;
		snprintf(copy, sizeof(copy), "%s", ds);
		static const int64_t hi[3] = { (int64_t)1 << 40, (int64_t)1 << 40, 1000 };
		int k = 0;
		for (char *p = strtok_r(copy, ":", &save); p && k < 3;
		     p = strtok_r(NULL, ":", &save))
			if (rv_parse_i64(p, 1, hi[k], &v[k]) == 0)
				k++;
			else
				break;
		if (k < 2)
			v[1] = v[0] < 32 ? v[0] : 32;
		if (v[1] > v[0])
			v[1] = v[0];
	}
	long size = (long)v[0], shard = (long)v[1], epochs = (long)v[2];
	fprintf(o,
		"{\"apiVersion\":\"elastic.rover.dev/v1alpha1\",\"kind\":\"ElasticJob\","
		"\"metadata\":{\"name\":\"rover-run\"},"
		"\"spec\":{\"distributionStrategy\":\"AllreduceStrategy\","
		"\"replicaSpecs\":{\"worker\":{\"replicas\":%d,\"minReplicas\":%d,"
		"\"maxReplicas\":%d}},"
		"\"datasets\":[{\"name\":\"train\",\"size\":%ld,\"shardSize\":%ld,"
		"\"epochs\":%ld}]}}\n",
		f->nnodes_min, f->nnodes_min, f->nnodes_max, size, shard, epochs);
	return fclose(o) == 0 ? 0 : -EIO;
}

int standalone_start(struct standalone *s, const struct flags *f, struct rv_err *err)
{
	memset(s, 0, sizeof(*s));
	s->proc.pidfd = -1;
	const char *tmp = getenv("TMPDIR");
	snprintf(s->dir, sizeof(s->dir), "%s/rover-run-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
	if (!mkdtemp(s->dir)) {
		int rc = -errno;
		s->dir[0] = 0;
		return rv_err_set(err, rc, "", "could not create a folder for the master: %s",
				  strerror(-rc));
	}
	char spec[320], state[320], log[320], exe[PATH_MAX], nnodes[32], unit[16];
	snprintf(spec, sizeof(spec), "%s/job.json", s->dir);
	snprintf(state, sizeof(state), "%s/state", s->dir);
	snprintf(log, sizeof(log), "%s/master.log", s->dir);
	snprintf(nnodes, sizeof(nnodes), "%d:%d", f->nnodes_min, f->nnodes_max);
	snprintf(unit, sizeof(unit), "%d", f->node_unit);
	master_exe(exe, sizeof(exe));
	int rc = write_spec(spec, f);
	if (rc < 0)
		return rv_err_set(err, rc, "", "could not write \"%s\": %s", spec, strerror(-rc));
	int lfd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (lfd < 0)
		return rv_err_set(err, -errno, "", "could not create \"%s\": %s", log,
				  strerror(errno));
	const char *argv[] = { exe,           "--job",       spec,          "--state-dir",
			       state,         "--listen",    "127.0.0.1:0", "--nnodes",
			       nnodes,        "--node-unit", unit,          "--journal-nosync",
			       "--log-level", "warn",        NULL };
	struct rv_proc_opts o = {
		.argv = argv,
		.io = { { RV_PROC_NULL, 0 }, { RV_PROC_PIPE, 0 }, { RV_PROC_FD, lfd } },
		.pdeathsig = SIGKILL,
	};
	rc = rv_proc_spawn(&s->proc, &o);
	close(lfd);
	if (rc < 0)
		return rv_err_set(err, rc, "", "could not run \"%s\": %s", exe, strerror(-rc));
	char buf[512];
	size_t len = 0;
	int64_t until = rv_mono_ms() + 30000;
	while (rv_mono_ms() < until) {
		struct pollfd p = { .fd = s->proc.fd[1], .events = POLLIN };
		if (poll(&p, 1, 100) > 0) {
			ssize_t k = read(s->proc.fd[1], buf + len, sizeof(buf) - len - 1);
			if (k > 0) {
				len += (size_t)k;
				buf[len] = 0;
				const char *at = strstr(buf, "listening on http://");
				if (at && strchr(at, '\n')) {
					at += strlen("listening on http://");
					snprintf(s->addr, sizeof(s->addr), "%.*s",
						 (int)strcspn(at, "\n"), at);
					snprintf(s->url, sizeof(s->url), "http://%s", s->addr);
					rv_proc_close_fd(&s->proc, 1);
					return 0;
				}
			}
		}
		if (rv_proc_wait(&s->proc, 0, NULL) != -ETIMEDOUT)
			return rv_err_set(err, -ECHILD, "",
					  "the private rover-master exited; see %s", log);
	}
	return rv_err_set(err, -ETIMEDOUT, "", "the private rover-master did not listen; see %s",
			  log);
}

void standalone_stop(struct standalone *s)
{
	if (s->proc.pid > 0)
		rv_proc_stop(&s->proc, 2000, NULL);
	rv_proc_release(&s->proc);
	if (s->dir[0]) {
		const char *argv[] = { "rm", "-rf", "--", s->dir, NULL };
		struct rv_proc_opts o = { .argv = argv, .io = { { RV_PROC_NULL, 0 } } };
		rv_proc_run(&o, 10000, NULL, NULL);
		s->dir[0] = 0;
	}
}
