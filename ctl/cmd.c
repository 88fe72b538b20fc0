/*
 * cmd.c: roverctl's commands.  Each reads the brain's REST API (ctl_call)
 * and prints a table (out.c) or, with --json, the brain's document.  A
 * command's own options follow its name; --json and --no-color may be given
 * there too.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "ctl.h"
#include "parse.h"
#include "wire.h"

#define SPEC_MAX (1 << 20)

/* ---- argument parsing shared by the commands ---- */

struct args {
	const char *pos[2];
	int npos;
	const char *limit, *status, *ns, *interval, *kubeconfig;
	bool help;
};

/* known: "limit status namespace interval" subset this command takes. */
static int parse_args(struct ctl *c, int argc, char **argv, const char *known, int want_pos,
		      struct args *a)
{
	memset(a, 0, sizeof(*a));
	for (int i = 1; i < argc; i++) {
		const char *s = argv[i];
		const char **slot = NULL;
		if (!strcmp(s, "--help") || !strcmp(s, "-h")) {
			a->help = true;
			return 0;
		}
		if (!strcmp(s, "--json")) {
			c->json = true;
			c->color = false;
			continue;
		}
		if (!strcmp(s, "--no-color")) {
			c->color = false;
			continue;
		}
		if (!strcmp(s, "--limit") && strstr(known, "limit"))
			slot = &a->limit;
		else if (!strcmp(s, "--status") && strstr(known, "status"))
			slot = &a->status;
		else if (!strcmp(s, "--namespace") && strstr(known, "namespace"))
			slot = &a->ns;
		else if (!strcmp(s, "--interval") && strstr(known, "interval"))
			slot = &a->interval;
		else if (!strcmp(s, "--kubeconfig") && strstr(known, "kubeconfig"))
			slot = &a->kubeconfig;
		else if (s[0] == '-' && s[1]) {
			fprintf(stderr, "roverctl %s: unknown option %s (see roverctl %s --help)\n",
				argv[0], s, argv[0]);
			return CTL_USAGE;
		} else if (a->npos < 2) {
			a->pos[a->npos++] = s;
			continue;
		} else {
			fprintf(stderr, "roverctl %s: too many arguments\n", argv[0]);
			return CTL_USAGE;
		}
		if (i + 1 >= argc) {
			fprintf(stderr, "roverctl %s: option %s needs a value\n", argv[0], s);
			return CTL_USAGE;
		}
		*slot = argv[++i];
	}
	if (a->npos != want_pos) {
		fprintf(stderr, "roverctl %s: %s (see roverctl %s --help)\n", argv[0],
			want_pos ? "needs one argument" : "takes no argument", argv[0]);
		return CTL_USAGE;
	}
	int64_t v;
	if (a->limit && rv_parse_i64(a->limit, 1, 1000, &v) < 0) {
		fprintf(stderr, "roverctl %s: --limit must be between 1 and 1000\n", argv[0]);
		return CTL_USAGE;
	}
	return 0;
}

static const char *str(const cJSON *o, const char *k)
{
	const char *s = cJSON_GetStringValue(cJSON_GetObjectItem(o, k));
	return s ? s : "";
}

static double num(const cJSON *o, const char *k, double dflt)
{
	const cJSON *v = cJSON_GetObjectItem(o, k);
	return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

/* The item at a dotted path ("groups.worker.count"), or NULL. */
static const cJSON *at(const cJSON *o, const char *dotted)
{
	char key[64];
	while (o && *dotted) {
		size_t n = strcspn(dotted, ".");
		snprintf(key, sizeof(key), "%.*s", (int)(n < 63 ? n : 63), dotted);
		o = cJSON_GetObjectItem(o, key);
		dotted += n + (dotted[n] == '.');
	}
	return o;
}

static double at_num(const cJSON *o, const char *dotted, double dflt)
{
	const cJSON *v = at(o, dotted);
	return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

/* "2026-11-23T05:12:03.1+00:00" -> "2026-11-23 05:12:03" */
static void short_time(char *buf, size_t size, const char *iso)
{
	snprintf(buf, size, "%.19s", iso && *iso ? iso : "-");
	if (strlen(buf) > 10 && buf[10] == 'T')
		buf[10] = ' ';
}

/* ---- job lookup ---- */

/* The uid of JOB (a uid, or a name: its running job, else the newest). */
static int resolve(struct ctl *c, const char *job, char *uid, size_t size)
{
	char path[512];
	if (strlen(job) > 200) {
		fprintf(stderr, "roverctl: no job %.40s...\n", job);
		return CTL_NOT_FOUND;
	}
	for (const char *p = job; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' || *p == '.')) {
			fprintf(stderr, "roverctl: no job %s (not a uid or a name)\n", job);
			return CTL_NOT_FOUND;
		}
	snprintf(path, sizeof(path), "/v1/jobs?limit=1000");
	cJSON *doc = NULL;
	int rc = ctl_call(c, "GET", path, NULL, &doc);
	if (rc)
		return rc;
	const cJSON *it, *pick = NULL;
	cJSON_ArrayForEach(it, cJSON_GetObjectItem(doc, "jobs"))
	{
		if (!strcmp(str(it, "uid"), job)) {
			pick = it;
			break;
		}
		if (!strcmp(str(it, "name"), job) &&
		    (!pick || (strcmp(str(pick, "status"), "running") != 0 &&
			       !strcmp(str(it, "status"), "running"))))
			pick = it;
	}
	if (pick)
		snprintf(uid, size, "%s", str(pick, "uid"));
	cJSON_Delete(doc);
	if (!pick) {
		fprintf(stderr, "roverctl: no job %s\n", job);
		return CTL_NOT_FOUND;
	}
	return CTL_OK;
}

/* ---- submit ---- */

static char *read_spec(const char *path, size_t *len)
{
	FILE *f = strcmp(path, "-") ? fopen(path, "re") : stdin;
	if (!f)
		return NULL;
	char *buf = malloc(SPEC_MAX + 1);
	size_t n = buf ? fread(buf, 1, SPEC_MAX + 1, f) : 0;
	if (f != stdin)
		fclose(f);
	if (!buf || n > SPEC_MAX) {
		free(buf);
		errno = EFBIG;
		return NULL;
	}
	buf[n] = '\0';
	*len = n;
	return buf;
}

static int do_submit(struct ctl *c, const struct args *a)
{
	int rc;
	size_t len = 0;
	char *text = read_spec(a->pos[0], &len);
	if (!text) {
		fprintf(stderr, "roverctl submit: could not read %s: %s\n", a->pos[0],
			errno == EFBIG ? "larger than 1 MiB" : strerror(errno));
		return CTL_INVALID;
	}
	const char *t = text + strspn(text, " \t\r\n");
	const char *ext = strrchr(a->pos[0], '.');
	bool yaml = (ext && (!strcmp(ext, ".yaml") || !strcmp(ext, ".yml"))) || *t != '{';
	struct rv_err err = { 0 };
	cJSON *doc = yaml ? ctl_yaml_to_json(text, len, &err) : rv_json_parse(text, len, &err);
	free(text);
	if (!doc) {
		fprintf(stderr, "roverctl submit: %s: %s\n", a->pos[0], err.msg);
		return CTL_INVALID;
	}
	struct rv_job_spec spec;
	if (rv_job_spec_from_json(doc, &spec, &err) < 0) {
		fprintf(stderr, "roverctl submit: %s: %s%s%s%s\n", a->pos[0], err.msg,
			err.field[0] ? " (field " : "", err.field, err.field[0] ? ")" : "");
		cJSON_Delete(doc);
		return CTL_INVALID;
	}
	rv_job_spec_release(&spec);
	if (a->kubeconfig) {
		rc = k8s_submit(c, doc, a->kubeconfig, a->ns);
		cJSON_Delete(doc);
		return rc;
	}
	char *body = cJSON_PrintUnformatted(doc);
	cJSON_Delete(doc);
	cJSON *reply = NULL;
	rc = body ? ctl_call(c, "POST", "/v1/jobs", body, &reply) : CTL_FAIL;
	free(body);
	if (rc)
		return rc;
	if (c->json) {
		out_json(c, reply);
	} else {
		const cJSON *job = cJSON_GetObjectItem(reply, "job");
		const cJSON *plan = cJSON_GetObjectItem(reply, "plan");
		fprintf(c->out, "submitted %s as %s\n", str(job, "name"), str(reply, "uid"));
		if (plan) {
			fprintf(c->out, "create plan %.0f (%s): %s\n", num(plan, "id", 0),
				str(plan, "algorithm"), str(plan, "reason"));
		}
	}
	cJSON_Delete(reply);
	return CTL_OK;
}

/* ---- jobs ---- */

static int do_jobs(struct ctl *c, const struct args *a)
{
	int rc;
	if (a->status && strcmp(a->status, "running") != 0 && strcmp(a->status, "finished") != 0 &&
	    strcmp(a->status, "failed") != 0) {
		fprintf(stderr, "roverctl jobs: --status must be running, finished or failed\n");
		return CTL_USAGE;
	}
	if (a->ns && strspn(a->ns, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(a->ns)) {
		fprintf(stderr, "roverctl jobs: --namespace must be a DNS label\n");
		return CTL_USAGE;
	}
	char path[256];
	snprintf(path, sizeof(path), "/v1/jobs?limit=%s%s%s%s%s", a->limit ? a->limit : "100",
		 a->status ? "&status=" : "", a->status ? a->status : "",
		 a->ns ? "&namespace=" : "", a->ns ? a->ns : "");
	cJSON *doc = NULL;
	if ((rc = ctl_call(c, "GET", path, NULL, &doc)))
		return rc;
	if (c->json) {
		out_json(c, doc);
		cJSON_Delete(doc);
		return CTL_OK;
	}
	static const char *const h[] = { "UID",  "NAME",  "NAMESPACE", "STATUS",
					 "MODE", "SPEED", "CREATED" };
	struct out_table *t = out_table_new(7, h);
	const cJSON *it;
	cJSON_ArrayForEach(it, cJSON_GetObjectItem(doc, "jobs"))
	{
		char speed[32], created[32];
		out_num(speed, sizeof(speed), num(it, "speed", -1));
		short_time(created, sizeof(created), str(it, "created_at"));
		const char *cells[] = { str(it, "uid"),
					str(it, "name"),
					str(it, "namespace"),
					str(it, "status"),
					str(it, "optimize_mode"),
					speed,
					created };
		const char *colors[7] = { [3] = out_state_color(str(it, "status")) };
		out_table_row(t, cells, colors);
	}
	if (cJSON_GetArraySize(cJSON_GetObjectItem(doc, "jobs")) == 0)
		fprintf(c->out, "no jobs\n");
	else
		out_table_print(c, t);
	out_table_free(t);
	cJSON_Delete(doc);
	return CTL_OK;
}

/* ---- plans ---- */

static void plan_cells(const cJSON *p, char cols[][64], const char **cells)
{
	snprintf(cols[0], 64, "%.0f", num(p, "id", 0));
	short_time(cols[1], 64, str(p, "created_at"));
	double w = at_num(p, "groups.worker.count", -1);
	double cpu = at_num(p, "groups.worker.resource.cpu", -1);
	double mem = at_num(p, "groups.worker.resource.memory_mb", -1);
	out_num(cols[2], 64, w);
	out_num(cols[3], 64, cpu > 0 ? cpu : -1);
	snprintf(cols[4], 64, "-");
	if (mem > 0)
		snprintf(cols[4], 64, "%.0f", mem);
	double sb = num(p, "speed_before", -1), sa = num(p, "speed_after", -1);
	char b[24], af[24];
	out_num(b, sizeof(b), sb);
	out_num(af, sizeof(af), sa);
	snprintf(cols[5], 64, "%s>%s", b, af);
	if (sb < 0 && sa < 0)
		snprintf(cols[5], 64, "-");
	cells[0] = cols[0];
	cells[1] = cols[1];
	cells[2] = str(p, "stage");
	cells[3] = str(p, "algorithm");
	cells[4] = cols[2];
	cells[5] = cols[3];
	cells[6] = cols[4];
	cells[7] = cJSON_IsString(cJSON_GetObjectItem(p, "applied_at")) ? "yes" : "no";
	cells[8] = *str(p, "outcome") ? str(p, "outcome") : "-";
	cells[9] = cols[5];
	cells[10] = str(p, "reason");
}

static void print_plans(struct ctl *c, const cJSON *plans, int last_n)
{
	static const char *const h[] = { "ID",      "CREATED", "STAGE",  "ALGORITHM",
					 "WORKERS", "CPU",     "MEM_MB", "APPLIED",
					 "OUTCOME", "SPEED",   "REASON" };
	struct out_table *t = out_table_new(11, h);
	int n = cJSON_GetArraySize(plans), i = 0;
	const cJSON *p;
	cJSON_ArrayForEach(p, plans)
	{
		if (last_n > 0 && i++ < n - last_n)
			continue;
		char cols[6][64];
		const char *cells[11];
		plan_cells(p, cols, cells);
		const char *colors[11] = { [8] = out_state_color(cells[8]) };
		out_table_row(t, cells, colors);
	}
	if (n == 0)
		fprintf(c->out, "no plans yet\n");
	else
		out_table_print(c, t);
	out_table_free(t);
}

/* GET /v1/jobs/<the job a->pos[0] names>/<what>?limit=<--limit, 100>:
 * CTL_OK and the document into *doc (the caller's, cJSON_Delete), or the
 * failure's exit code (said already). */
static int get_list(struct ctl *c, const struct args *a, const char *what, cJSON **doc)
{
	int rc;
	char uid[128], path[256];
	if ((rc = resolve(c, a->pos[0], uid, sizeof(uid))))
		return rc;
	snprintf(path, sizeof(path), "/v1/jobs/%s/%s?limit=%s", uid, what,
		 a->limit ? a->limit : "100");
	return ctl_call(c, "GET", path, NULL, doc);
}

static int do_plans(struct ctl *c, const struct args *a)
{
	cJSON *doc = NULL;
	int rc = get_list(c, a, "plans", &doc);
	if (rc)
		return rc;
	if (c->json)
		out_json(c, doc);
	else
		print_plans(c, cJSON_GetObjectItem(doc, "plans"), 0);
	cJSON_Delete(doc);
	return CTL_OK;
}

/* ---- events ---- */

static int do_events(struct ctl *c, const struct args *a)
{
	cJSON *doc = NULL;
	int rc = get_list(c, a, "events", &doc);
	if (rc)
		return rc;
	if (c->json) {
		out_json(c, doc);
		cJSON_Delete(doc);
		return CTL_OK;
	}
	static const char *const h[] = { "ID",   "TIME", "TYPE", "NODE",
					 "RANK", "EXIT", "PLAN", "REASON" };
	struct out_table *t = out_table_new(8, h);
	const cJSON *e;
	const cJSON *evs = cJSON_GetObjectItem(doc, "events");
	cJSON_ArrayForEach(e, evs)
	{
		char id[24], ts[32], rank[16], ex[16], plan[24];
		snprintf(id, sizeof(id), "%.0f", num(e, "id", 0));
		out_time_ms(ts, sizeof(ts), num(e, "ts", 0));
		snprintf(rank, sizeof(rank), "%s", num(e, "rank", -1) >= 0 ? "" : "-");
		if (num(e, "rank", -1) >= 0)
			snprintf(rank, sizeof(rank), "%.0f", num(e, "rank", -1));
		snprintf(ex, sizeof(ex), "-");
		if (num(e, "exit_code", -1) >= 0)
			snprintf(ex, sizeof(ex), "%.0f", num(e, "exit_code", -1));
		double pid = num(e, "plan_id", 0) > 0 ? num(e, "plan_id", 0)
						      : num(e, "result_plan_id", 0);
		snprintf(plan, sizeof(plan), "-");
		if (pid > 0)
			snprintf(plan, sizeof(plan), "%.0f", pid);
		const char *cells[] = {
			id,   ts, str(e, "type"), *str(e, "node") ? str(e, "node") : "-",
			rank, ex, plan,           str(e, "reason")
		};
		const char *colors[8] = { [2] = out_state_color(str(e, "type")) };
		out_table_row(t, cells, colors);
	}
	if (cJSON_GetArraySize(evs) == 0)
		fprintf(c->out, "no events\n");
	else
		out_table_print(c, t);
	out_table_free(t);
	cJSON_Delete(doc);
	return CTL_OK;
}

/* ---- cluster ---- */

static int do_cluster(struct ctl *c, const struct args *a)
{
	(void)a; /* no options of its own */
	int rc;
	cJSON *doc = NULL;
	if ((rc = ctl_call(c, "GET", "/v1/cluster", NULL, &doc)))
		return rc;
	if (c->json) {
		out_json(c, doc);
		cJSON_Delete(doc);
		return CTL_OK;
	}
	static const char *const h[] = { "NODE", "CPU",      "CPU_USED", "MEM_MB", "MEM_USED",
					 "GPU",  "PRESSURE", "STATE",    "JOBS" };
	struct out_table *t = out_table_new(9, h);
	const cJSON *n;
	const cJSON *nodes = cJSON_GetObjectItem(doc, "nodes");
	cJSON_ArrayForEach(n, nodes)
	{
		char cpu[24], cu[24], mem[24], mu[24], gpu[16], psi[48], jobs[256] = "";
		out_num(cpu, sizeof(cpu), num(n, "cpu", -1));
		snprintf(cu, sizeof(cu), "%.2f", num(n, "cpu_used", 0));
		snprintf(mem, sizeof(mem), "%.0f", num(n, "memory_mb", 0));
		snprintf(mu, sizeof(mu), "%.0f", num(n, "memory_used_mb", 0));
		snprintf(gpu, sizeof(gpu), "%.0f", num(n, "gpu", 0));
		snprintf(psi, sizeof(psi), "-");
		if (num(n, "cpu_pressure", -1) >= 0)
			snprintf(psi, sizeof(psi), "%.0f/%.0f/%.0f%%", num(n, "cpu_pressure", 0),
				 num(n, "memory_pressure", 0), num(n, "io_pressure", 0));
		const cJSON *j;
		size_t jl = 0;
		cJSON_ArrayForEach(j, cJSON_GetObjectItem(n, "jobs"))
		{
			int w = snprintf(jobs + jl, sizeof(jobs) - jl, "%s%s(%.0f)", jl ? "," : "",
					 str(j, "name"), num(j, "procs", 0));
			if (w < 0 || (size_t)w >= sizeof(jobs) - jl)
				break;
			jl += (size_t)w;
		}
		bool stale = cJSON_IsTrue(cJSON_GetObjectItem(n, "stale"));
		const char *state = stale                                            ? "stale"
				    : cJSON_IsFalse(cJSON_GetObjectItem(n, "ready")) ? "not-ready"
										     : "ready";
		const char *cells[] = { str(n, "name"), cpu, cu, mem, mu, gpu, psi, state,
					jl ? jobs : "-" };
		const char *colors[9] = { [7] = stale ? out_state_color("stale")
						      : out_state_color("ok") };
		out_table_row(t, cells, colors);
	}
	if (cJSON_GetArraySize(nodes) == 0)
		fprintf(c->out, "no nodes reported yet (is rover-monitor running?)\n");
	else
		out_table_print(c, t);
	out_table_free(t);
	fprintf(c->out, "\ncapacity  %.0f nodes, %.1f cores, %.0f MiB, %.0f GPUs\n",
		at_num(doc, "capacity.nodes", 0), at_num(doc, "capacity.cpu", 0),
		at_num(doc, "capacity.memory_mb", 0), at_num(doc, "capacity.gpu", 0));
	fprintf(c->out, "used      %.1f cores, %.0f MiB\n", at_num(doc, "used.cpu", 0),
		at_num(doc, "used.memory_mb", 0));
	fprintf(c->out, "free      %.1f cores, %.0f MiB\n", at_num(doc, "free.cpu", 0),
		at_num(doc, "free.memory_mb", 0));
	cJSON_Delete(doc);
	return CTL_OK;
}

/* ---- status ---- */

static void print_status(struct ctl *c, const cJSON *job, const cJSON *plans)
{
	out_heading(c, "job %s (%s)", str(job, "name"), str(job, "uid"));
	const char *st = str(job, "status");
	const char *col = c->color ? out_state_color(st) : NULL;
	fprintf(c->out, "status     %s%s%s   namespace %s   mode %s   user %s\n", col ? col : "",
		st, col ? "\033[0m" : "", str(job, "namespace"), str(job, "optimize_mode"),
		*str(job, "user") ? str(job, "user") : "-");
	char created[32];
	short_time(created, sizeof(created), str(job, "created_at"));
	fprintf(c->out, "created    %s\n", created);
	const cJSON *sp = cJSON_GetObjectItem(job, "latest_speed");
	if (cJSON_IsObject(sp)) {
		char t[32];
		out_time_ms(t, sizeof(t), num(sp, "ts", 0));
		fprintf(c->out, "speed      %.1f samples/s at step %.0f, %.0f workers (%s)\n",
			num(sp, "speed", 0), num(sp, "step", 0), num(sp, "workers", 0), t);
	} else {
		fprintf(c->out, "speed      no samples yet\n");
	}
	const cJSON *sh = cJSON_GetObjectItem(job, "shards");
	if (cJSON_IsObject(sh)) {
		double done = num(sh, "done", 0), left = num(sh, "left", 0);
		double total = num(sh, "total", done + left);
		fprintf(c->out, "shards     ");
		out_bar(c, done, total, 30);
		fprintf(c->out, "  %.0f done, %.0f doing, %.0f left of %.0f\n", done,
			num(sh, "doing", 0), left, total);
	} else {
		fprintf(c->out, "shards     not reported by the master yet\n");
	}
	/* each dataset when there are several, or a stream (no shard count) */
	const cJSON *prog = cJSON_GetObjectItem(job, "progress");
	const cJSON *d;
	cJSON_ArrayForEach(d, prog)
	{
		if (cJSON_GetArraySize(prog) < 2 && num(d, "shards_total", 0) > 0)
			break;
		fprintf(c->out, "  %-8s ", str(d, "dataset"));
		if (num(d, "shards_total", 0) <= 0) { /* a stream: what is not committed yet */
			fprintf(c->out, "stream, %.0f records committed, lag %.0f\n",
				num(d, "samples_done", 0),
				num(d, "samples_total", 0) - num(d, "samples_done", 0));
			continue;
		}
		out_bar(c, num(d, "samples_done", 0), num(d, "samples_total", 0), 20);
		fprintf(c->out, "  %.0f of %.0f samples, epoch %.0f%s\n", num(d, "samples_done", 0),
			num(d, "samples_total", 0), num(d, "epoch", 0),
			cJSON_IsTrue(cJSON_GetObjectItem(d, "finished")) ? ", finished" : "");
	}
	const cJSON *nodes = cJSON_GetObjectItem(job, "nodes");
	fputc('\n', c->out);
	out_heading(c, "nodes");
	if (cJSON_GetArraySize(nodes) == 0) {
		fprintf(c->out, "none reported yet\n");
	} else {
		static const char *const h[] = { "NODE",   "ROLE",   "RANK",       "CPU",
						 "MEM_MB", "STATUS", "RELAUNCHES", "REASON" };
		struct out_table *t = out_table_new(8, h);
		const cJSON *n;
		cJSON_ArrayForEach(n, nodes)
		{
			char rank[16], cpu[24], mem[24], rel[16];
			snprintf(rank, sizeof(rank), "%.0f", num(n, "rank", -1));
			out_num(cpu, sizeof(cpu), num(n, "cpu", -1));
			snprintf(mem, sizeof(mem), "%.0f", num(n, "memory_mb", 0));
			snprintf(rel, sizeof(rel), "%.0f", num(n, "relaunches", 0));
			const char *cells[] = { str(n, "name"),
						str(n, "role"),
						rank,
						cpu,
						mem,
						str(n, "status"),
						rel,
						*str(n, "exit_reason") ? str(n, "exit_reason")
								       : "-" };
			const char *colors[8] = { [5] = out_state_color(str(n, "status")) };
			out_table_row(t, cells, colors);
		}
		out_table_print(c, t);
		out_table_free(t);
	}
	fputc('\n', c->out);
	out_heading(c, "last plans");
	print_plans(c, plans, 5);
}

/* GET the job and its plans (the newest 5). */
static int fetch_job(struct ctl *c, const char *uid, cJSON **job, cJSON **plans)
{
	char path[256];
	snprintf(path, sizeof(path), "/v1/jobs/%s", uid);
	int rc = ctl_call(c, "GET", path, NULL, job);
	if (rc)
		return rc;
	snprintf(path, sizeof(path), "/v1/jobs/%s/plans?limit=5", uid);
	if ((rc = ctl_call(c, "GET", path, NULL, plans))) {
		cJSON_Delete(*job);
		*job = NULL;
	}
	return rc;
}

static int do_status(struct ctl *c, const struct args *a)
{
	int rc;
	char uid[128];
	if ((rc = resolve(c, a->pos[0], uid, sizeof(uid))))
		return rc;
	cJSON *job = NULL, *plans = NULL;
	if ((rc = fetch_job(c, uid, &job, &plans)))
		return rc;
	if (c->json) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddItemToObject(o, "job", job);
		cJSON_AddItemToObject(o, "plans", cJSON_DetachItemFromObject(plans, "plans"));
		out_json(c, o);
		cJSON_Delete(o);
	} else {
		print_status(c, job, cJSON_GetObjectItem(plans, "plans"));
		cJSON_Delete(job);
	}
	cJSON_Delete(plans);
	return CTL_OK;
}

/* ---- watch ---- */

static volatile sig_atomic_t stop_watch;
static void on_int(int sig)
{
	(void)sig;
	stop_watch = 1;
}

/* A sparkline of the speeds seen so far, ASCII so any terminal shows it. */
static void sparkline(struct ctl *c, const double *v, int n)
{
	static const char lv[] = " .:-=+*#%@";
	double max = 0;
	for (int i = 0; i < n; i++)
		if (v[i] > max)
			max = v[i];
	fputc('|', c->out);
	for (int i = 0; i < n; i++)
		fputc(lv[max > 0 ? (int)(v[i] / max * 9 + 0.5) : 0], c->out);
	fprintf(c->out, "| max %.1f\n", max);
}

/* Until interval seconds passed or a plan newer than after came: the
 * brain's plan long-poll (GET .../plan?after=&wait=), held in waits of
 * whole seconds (its unit) up to WATCH_WAIT_MAX_S each, so a plan shows
 * the moment it is made and the speed every interval.  An interval under a
 * second sleeps instead: each refresh reads the plans anyway.  0, or a
 * CTL_* code when the brain failed. */
#define WATCH_WAIT_MAX_S 2 /* a Ctrl-C is seen within it (curl waits on through EINTR) */
static int wait_plan(struct ctl *c, const char *uid, int64_t after, double interval)
{
	int64_t until = rv_mono_ms() + (int64_t)(interval * 1000);
	if (interval < 1) {
		/* below the long-poll's unit: each refresh reads the plans */
		while (!stop_watch && rv_mono_ms() < until)
			usleep(20 * 1000);
		return 0;
	}
	do {
		int64_t left = until - rv_mono_ms();
		int w = (int)((left + 999) / 1000);
		if (w < 1)
			w = 1;
		if (w > WATCH_WAIT_MAX_S)
			w = WATCH_WAIT_MAX_S;
		char path[256];
		snprintf(path, sizeof(path), "/v1/jobs/%s/plan?after=%" PRId64 "&wait=%d", uid,
			 after, w);
		cJSON *plan = NULL;
		int rc = ctl_call_wait(c, path, w, &plan);
		if (rc)
			return rc;
		bool came = plan != NULL; /* 200: a newer plan; 204: the wait ended */
		cJSON_Delete(plan);
		if (came)
			return 0;
	} while (!stop_watch && rv_mono_ms() < until);
	return 0;
}

/* One line of watch --json: {"kind":kind,"<kind>":<a copy of item>}. */
static void watch_json_line(struct ctl *c, const char *kind, const cJSON *item)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "kind", kind);
	cJSON_AddItemToObject(o, kind, cJSON_Duplicate(item, 1));
	char *s = cJSON_PrintUnformatted(o);
	fprintf(c->out, "%s\n", s ? s : "{}");
	free(s);
	cJSON_Delete(o);
}

static int do_watch(struct ctl *c, const struct args *a)
{
	int rc;
	double interval = 2;
	if (a->interval && rv_parse_double(a->interval, 0.1, 3600, &interval) < 0) {
		fprintf(stderr,
			"roverctl watch: --interval must be between 0.1 and 3600 seconds\n");
		return CTL_USAGE;
	}
	char uid[128];
	if ((rc = resolve(c, a->pos[0], uid, sizeof(uid))))
		return rc;
	struct sigaction sa = { .sa_handler = on_int };
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	bool redraw = c->tty && !c->json;
	double hist[60];
	int nhist = 0;
	double last_ts = -1, last_plan = 0;
	rc = CTL_OK;
	while (!stop_watch) {
		cJSON *job = NULL, *plans = NULL;
		if ((rc = fetch_job(c, uid, &job, &plans)))
			break;
		const cJSON *sp = cJSON_GetObjectItem(job, "latest_speed");
		double ts = num(sp, "ts", -1);
		bool new_speed = cJSON_IsObject(sp) && ts != last_ts;
		if (new_speed) {
			if (nhist == 60) {
				memmove(hist, hist + 1, sizeof(hist[0]) * 59);
				nhist--;
			}
			hist[nhist++] = num(sp, "speed", 0);
			last_ts = ts;
		}
		const cJSON *pl = cJSON_GetObjectItem(plans, "plans");
		const char *status = str(job, "status");
		if (redraw) {
			fputs("\033[H\033[2J", c->out);
			print_status(c, job, pl);
			fputc('\n', c->out);
			out_heading(c, "speed, samples/s (last %d samples)", nhist);
			sparkline(c, hist, nhist);
			fprintf(c->out, "\nwatching %s every %.1f s; Ctrl-C to stop\n", uid,
				interval);
		} else {
			if (new_speed) {
				if (c->json) {
					watch_json_line(c, "speed", sp);
				} else {
					char t[32];
					out_time_ms(t, sizeof(t), ts);
					fprintf(c->out,
						"%s  speed %.1f samples/s  step %.0f  workers "
						"%.0f\n",
						t, num(sp, "speed", 0), num(sp, "step", 0),
						num(sp, "workers", 0));
				}
			}
			const cJSON *p;
			cJSON_ArrayForEach(p, pl)
			{
				if (num(p, "id", 0) <= last_plan)
					continue;
				if (c->json) {
					watch_json_line(c, "plan", p);
				} else {
					char t[32];
					short_time(t, sizeof(t), str(p, "created_at"));
					fprintf(c->out, "%s  plan %.0f %s %s: workers %.0f: %s\n",
						t, num(p, "id", 0), str(p, "stage"),
						str(p, "algorithm"),
						at_num(p, "groups.worker.count", 0),
						str(p, "reason"));
				}
			}
		}
		const cJSON *p;
		cJSON_ArrayForEach(p, pl)
		{
			if (num(p, "id", 0) > last_plan)
				last_plan = num(p, "id", 0);
		}
		fflush(c->out);
		bool ended = strcmp(status, "running") != 0;
		if (ended) {
			if (!c->json)
				fprintf(c->out, "job %s %s\n", uid, status);
			rc = !strcmp(status, "failed") ? CTL_JOB_FAILED : CTL_OK;
		}
		cJSON_Delete(job);
		cJSON_Delete(plans);
		if (ended)
			break;
		if ((rc = wait_plan(c, uid, (int64_t)last_plan, interval)))
			break;
	}
	fflush(c->out);
	return rc;
}

/* ---- the command table ---- */

struct cmd_def {
	const char *name;
	const char *known; /* its options, of parse_args' */
	int npos;          /* how many arguments it takes */
	int (*fn)(struct ctl *c, const struct args *a);
	const char *usage; /* --help */
};

static const struct cmd_def cmd_defs[] = {
	{ "submit", "kubeconfig namespace", 1, do_submit,
	  "usage: roverctl submit SPEC [--json] [--kubeconfig FILE [--namespace "
	  "NS]]\n\n"
	  "Register a job with rover-brain from an ElasticJob spec: a JSON or YAML\n"
	  "file (.yaml/.yml, or any text not starting with '{'), or - for stdin.\n"
	  "The spec is checked here first, naming the bad field.  Prints the job's\n"
	  "uid and its create-stage plan; --json prints the brain's reply.\n"
	  "With --kubeconfig the job is created as an ElasticJob in that cluster\n"
	  "instead (elastic.rover.dev/v1alpha1; rover-operator runs it), in\n"
	  "--namespace, else the spec's, else the kubeconfig's, else default.\n"
	  "exit: 0 registered, 5 a running job has that name, 6 invalid spec.\n" },
	{ "jobs", "limit status namespace", 0, do_jobs,
	  "usage: roverctl jobs [--status running|finished|failed] [--namespace NS]\n"
	  "                     [--limit N] [--json]\n\n"
	  "Jobs, newest first: uid, name, namespace, status, mode, latest speed\n"
	  "(samples/s), when registered.\n" },
	{ "plans", "limit", 1, do_plans,
	  "usage: roverctl plans JOB [--limit N] [--json]\n\n"
	  "A job's plans, oldest first: stage (create, running, oom), the algorithm\n"
	  "and its reason, the worker count and resources asked, whether the master\n"
	  "applied it, and its outcome (speed before > after: better, neutral, "
	  "worse;\n"
	  "pending until judged, unjudged when the job ended first).\n" },
	{ "events", "limit", 1, do_events,
	  "usage: roverctl events JOB [--limit N] [--json]\n\n"
	  "A job's newest events, oldest first: node failures, OOMs, relaunches,\n"
	  "plans applied, the job's end.\n" },
	{ "cluster", "", 0, do_cluster,
	  "usage: roverctl cluster [--json]\n\n"
	  "The nodes rover-monitor reports: CPU and memory capacity and use, GPUs,\n"
	  "pressure (PSI some avg10: cpu/memory/io), state (ready; stale when its\n"
	  "monitor went silent: it no longer counts), the jobs on it; then the\n"
	  "cluster's capacity and what is free for plans.\n" },
	{ "status", "", 1, do_status,
	  "usage: roverctl status JOB [--json]\n\n"
	  "A job: its status, latest speed, shards done and left (a progress bar "
	  "once\n"
	  "the master reports them), its nodes, and its last plans with their "
	  "reasons\n"
	  "and outcomes.  --json prints {\"job\":...,\"plans\":[...]}.\n"
	  "exit: 0, or 4 when there is no such job.\n" },
	{ "watch", "interval", 1, do_watch,
	  "usage: roverctl watch JOB [--interval S] [--json]\n\n"
	  "Follow a job live: its speed (with a sparkline of what was seen) and its\n"
	  "plans.  A plan shows the moment the brain makes it (its plan long-poll);\n"
	  "the speed and the rest are refreshed every S seconds (default 2; under\n"
	  "1 s each refresh reads the plans instead).  On a terminal the view is\n"
	  "redrawn; otherwise one line per new speed sample or plan (with --json,\n"
	  "one JSON object per line).  Ends when the job ends or on Ctrl-C.\n"
	  "exit: 0 the job finished (or Ctrl-C), 8 it failed, 4 no such job.\n" },
};

static const struct cmd_def *cmd_def_of(const char *name)
{
	for (size_t k = 0; name && k < RV_ARRAY_SIZE(cmd_defs); k++)
		if (!strcmp(cmd_defs[k].name, name))
			return &cmd_defs[k];
	return NULL;
}

bool cmd_exists(const char *name)
{
	return cmd_def_of(name) != NULL;
}

int cmd_run(struct ctl *c, int argc, char **argv)
{
	const struct cmd_def *d = cmd_def_of(argc > 0 ? argv[0] : NULL);
	if (!d)
		return CTL_USAGE;
	struct args a;
	int rc = parse_args(c, argc, argv, d->known, d->npos, &a);
	if (a.help) {
		fputs(d->usage, stdout);
		return CTL_OK;
	}
	return rc ? rc : d->fn(c, &a);
}
