/*
 * trace.c: read trace files (JSON Lines, one job per line, '#' comments;
 * format in tests/sim/README.md) into struct sim_job.  A directory loads
 * every *.trace file in it, sorted by name.  Single-threaded, at start.
 */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sim.h"

static double num(const cJSON *o, const char *key, double dflt)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
	return cJSON_IsNumber(it) ? it->valuedouble : dflt;
}

static int job_parse(const cJSON *o, struct sim_job *j, char *msg, size_t msize)
{
	memset(j, 0, sizeof(*j));
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(o, "name");
	const cJSON *strat = cJSON_GetObjectItemCaseSensitive(o, "strategy");
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "t");
	const cJSON *user = cJSON_GetObjectItemCaseSensitive(o, "user");
	if (!cJSON_IsString(name) || strlen(name->valuestring) >= SIM_NAME_MAX - 8) {
		snprintf(msg, msize, "name: a string of at most %d characters", SIM_NAME_MAX - 9);
		return -EINVAL;
	}
	snprintf(j->name, sizeof(j->name), "%s", name->valuestring);
	if (!cJSON_IsString(strat) ||
	    (strcmp(strat->valuestring, "allreduce") && strcmp(strat->valuestring, "ps"))) {
		snprintf(msg, msize, "%s: strategy must be \"allreduce\" or \"ps\"", j->name);
		return -EINVAL;
	}
	j->strategy = strcmp(strat->valuestring, "ps") ? SIM_ALLREDUCE : SIM_PS;
	int nt = j->strategy == SIM_PS ? 4 : 3;
	if (!cJSON_IsArray(t) || cJSON_GetArraySize(t) != nt) {
		snprintf(msg, msize, "%s: t must hold %d numbers", j->name, nt);
		return -EINVAL;
	}
	for (int i = 0; i < nt; i++) {
		const cJSON *x = cJSON_GetArrayItem(t, i);
		if (!cJSON_IsNumber(x) || x->valuedouble < 0) {
			snprintf(msg, msize, "%s: t[%d] must be a number >= 0", j->name, i);
			return -EINVAL;
		}
		j->t[i] = x->valuedouble;
	}
	j->worker_cpu_need = num(o, "worker_cpu", 2);
	j->worker_mem_need_mb = (int64_t)num(o, "worker_mem_mb", 4096);
	j->ps_cpu_per_worker = num(o, "ps_cpu_per_worker", 0.5);
	j->ps_mem_total_mb = (int64_t)num(o, "ps_mem_mb", 4096);
	j->noise = num(o, "noise", 0.02);
	j->warmup_s = num(o, "warmup_s", 30);
	j->min_workers = (int)num(o, "min_workers", 1);
	j->max_workers = (int)num(o, "max_workers", 16);
	j->min_ps = j->strategy == SIM_PS ? (int)num(o, "min_ps", 1) : 0;
	j->max_ps = j->strategy == SIM_PS ? (int)num(o, "max_ps", 4) : 0;
	j->parameters = (int64_t)num(o, "parameters", 1e7);
	j->batch_size = (int)num(o, "batch", 64);
	j->zero_config = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "zero_config"));
	j->arrival_s = num(o, "arrival_s", 0);
	j->work = num(o, "work", 1e6);
	if (!cJSON_IsObject(user)) {
		snprintf(msg, msize, "%s: user (the user's request) is required", j->name);
		return -EINVAL;
	}
	j->user.workers = (int)num(user, "workers", 0);
	j->user.worker_cpu = num(user, "cpu", 0);
	j->user.worker_mem_mb = (int64_t)num(user, "memory_mb", 0);
	j->user.ps = j->strategy == SIM_PS ? (int)num(user, "ps", 0) : 0;
	j->user.ps_cpu = num(user, "ps_cpu", 0);
	j->user.ps_mem_mb = (int64_t)num(user, "ps_memory_mb", 0);
	if (j->t[0] <= 0 || j->worker_cpu_need <= 0 || j->worker_mem_need_mb <= 0 ||
	    j->noise < 0 || j->noise > 0.5 || j->min_workers < 1 ||
	    j->max_workers < j->min_workers || j->max_workers > 256 || j->work <= 0 ||
	    j->user.workers < j->min_workers || j->user.workers > j->max_workers ||
	    j->user.worker_cpu <= 0 || j->user.worker_mem_mb <= 0 ||
	    (j->strategy == SIM_PS &&
	     (j->min_ps < 1 || j->max_ps < j->min_ps || j->max_ps > 64 || j->user.ps < j->min_ps ||
	      j->user.ps > j->max_ps || j->user.ps_cpu <= 0 || j->user.ps_mem_mb <= 0))) {
		snprintf(msg, msize,
			 "%s: out of range (t0 > 0, needs > 0, noise <= 0.5, 1 <= min <= user <= max "
			 "workers <= 256, ps likewise <= 64, user resources > 0, work > 0)",
			 j->name);
		return -EINVAL;
	}
	return 0;
}

static int load_file(const char *path, struct sim_trace *t, char *msg, size_t msize)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		snprintf(msg, msize, "could not open \"%s\": %s", path, strerror(errno));
		return -errno;
	}
	char *line = NULL;
	size_t cap = 0;
	int lineno = 0, rc = 0;
	while (getline(&line, &cap, f) >= 0) {
		lineno++;
		char *p = line + strspn(line, " \t\r\n");
		if (!*p || *p == '#')
			continue;
		cJSON *o = cJSON_Parse(p);
		if (!o) {
			snprintf(msg, msize, "%s:%d: not a JSON object", path, lineno);
			rc = -EINVAL;
			break;
		}
		struct sim_job *nj = realloc(t->jobs, (size_t)(t->n + 1) * sizeof(*nj));
		if (!nj) {
			cJSON_Delete(o);
			rc = -ENOMEM;
			break;
		}
		t->jobs = nj;
		char m[256];
		rc = job_parse(o, &t->jobs[t->n], m, sizeof(m));
		cJSON_Delete(o);
		if (rc < 0) {
			snprintf(msg, msize, "%s:%d: %s", path, lineno, m);
			break;
		}
		for (int i = 0; i < t->n; i++)
			if (!strcmp(t->jobs[i].name, t->jobs[t->n].name)) {
				snprintf(msg, msize, "%s:%d: duplicate job name \"%s\"", path, lineno,
					 t->jobs[i].name);
				rc = -EEXIST;
			}
		if (rc < 0)
			break;
		t->n++;
	}
	free(line);
	fclose(f);
	return rc;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int trace_load(const char *path, struct sim_trace *t, char *msg, size_t msize)
{
	memset(t, 0, sizeof(*t));
	struct stat st;
	if (stat(path, &st) < 0) {
		snprintf(msg, msize, "could not read \"%s\": %s", path, strerror(errno));
		return -errno;
	}
	int rc = 0;
	if (!S_ISDIR(st.st_mode)) {
		rc = load_file(path, t, msg, msize);
	} else {
		DIR *d = opendir(path);
		if (!d) {
			snprintf(msg, msize, "could not open \"%s\": %s", path, strerror(errno));
			return -errno;
		}
		char *names[512];
		int n = 0;
		struct dirent *e;
		while ((e = readdir(d)) && n < 512) {
			size_t l = strlen(e->d_name);
			if (l > 6 && !strcmp(e->d_name + l - 6, ".trace"))
				names[n++] = strdup(e->d_name);
		}
		closedir(d);
		qsort(names, (size_t)n, sizeof(names[0]), cmp_str);
		for (int i = 0; i < n; i++) {
			char full[4096];
			snprintf(full, sizeof(full), "%s/%s", path, names[i]);
			if (rc == 0)
				rc = load_file(full, t, msg, msize);
			free(names[i]);
		}
	}
	if (rc == 0 && t->n == 0) {
		snprintf(msg, msize, "\"%s\" holds no jobs", path);
		rc = -EINVAL;
	}
	if (rc < 0)
		trace_release(t);
	return rc;
}

void trace_release(struct sim_trace *t)
{
	free(t->jobs);
	t->jobs = NULL;
	t->n = 0;
}
