/*
 * flags.c: torchrun's command line (flags.h).  flags_table[] lists every
 * flag once: its long name (with dashes; an underscore spelling matches it
 * too), its short letter, the kind of its value with its field and bounds
 * (or the parser of a value no kind covers) and its help.  Parsing and
 * --help read the same table.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "flags.h"
#include "parse.h"

typedef int flags_parse_fn(struct flags *f, const char *v, struct rv_err *err, const char *name);

/* What a flag's value is; the field at off in struct flags receives it. */
enum flags_kind {
	FLAGS_SWITCH, /* bool, no value (an optional =true/false) */
	FLAGS_INT,    /* int within [min, max] */
	FLAGS_DOUBLE, /* double within [min, max] */
	FLAGS_STR,    /* char[size], not empty */
	FLAGS_CHOICE, /* char[size], one of choices */
	FLAGS_STD,    /* struct flags_std: a mask or LOCAL_RANK:MASK pairs */
	FLAGS_FN,     /* fn parses it */
};

struct flags_opt {
	const char *name; /* long, with dashes */
	char letter;      /* short (-m), or 0 */
	enum flags_kind kind;
	size_t off, size;
	double min, max;
	const char *const *choices; /* NULL-terminated */
	flags_parse_fn *fn;
	const char *metavar;
	const char *help;
};

static int bad(struct rv_err *err, const char *name, const char *fmt, const char *v)
{
	char field[64];
	snprintf(field, sizeof(field), "--%s", name);
	return rv_err_set(err, -EINVAL, field, "--%s \"%s\": %s", name, v, fmt);
}

static int copy_str(char *dst, size_t size, const char *v, struct rv_err *err, const char *name)
{
	if (!v[0])
		return bad(err, name, "must not be empty", v);
	if (strlen(v) >= size)
		return bad(err, name, "is too long", v);
	snprintf(dst, size, "%s", v);
	return 0;
}

static int p_nnodes(struct flags *f, const char *v, struct rv_err *err, const char *name)
{
	const char *msg = "must be N or MIN:MAX with 1 <= MIN <= MAX <= 1024";
	const char *colon = strchr(v, ':');
	int64_t lo, hi;
	if (!colon) {
		if (rv_parse_i64(v, 1, 1024, &lo) < 0)
			return bad(err, name, msg, v);
		f->nnodes_min = f->nnodes_max = (int)lo;
		return 0;
	}
	char a[16];
	size_t n = (size_t)(colon - v);
	if (n == 0 || n >= sizeof(a))
		return bad(err, name, msg, v);
	memcpy(a, v, n);
	a[n] = 0;
	if (rv_parse_i64(a, 1, 1024, &lo) < 0 || rv_parse_i64(colon + 1, 1, 1024, &hi) < 0 ||
	    lo > hi)
		return bad(err, name, msg, v);
	f->nnodes_min = (int)lo;
	f->nnodes_max = (int)hi;
	return 0;
}

static int p_nproc(struct flags *f, const char *v, struct rv_err *err, const char *name)
{
	int64_t n;
	f->nproc_given = true;
	if (!strcmp(v, "auto"))
		f->nproc_kind = FLAGS_NPROC_AUTO;
	else if (!strcmp(v, "cpu"))
		f->nproc_kind = FLAGS_NPROC_CPU;
	else if (!strcmp(v, "gpu"))
		f->nproc_kind = FLAGS_NPROC_GPU;
	else if (rv_parse_i64(v, 1, FLAGS_MAX_NPROC, &n) == 0) {
		f->nproc_kind = FLAGS_NPROC_N;
		f->nproc = (int)n;
	} else
		return bad(err, name, "must be auto, cpu, gpu or a number from 1 to 1024", v);
	return 0;
}

/* host:port with a port from 1 to 65535 (an IPv6 host in brackets). */
static int check_hostport(const char *v)
{
	const char *colon = strrchr(v, ':');
	int64_t port;
	if (!colon || colon == v || rv_parse_i64(colon + 1, 1, 65535, &port) < 0)
		return -EINVAL;
	return 0;
}

static int p_endpoint(struct flags *f, const char *v, struct rv_err *err, const char *name)
{
	if (check_hostport(v) < 0)
		return bad(err, name, "must be HOST:PORT with a port from 1 to 65535", v);
	return copy_str(f->rdzv_endpoint, sizeof(f->rdzv_endpoint), v, err, name);
}

static int p_rdzv_id(struct flags *f, const char *v, struct rv_err *err, const char *name)
{
	for (const char *c = v; *c; c++)
		if (*c == '=' || *c == '\n' || *c == ' ')
			return bad(err, name, "must not hold blanks or '='", v);
	return copy_str(f->rdzv_id, sizeof(f->rdzv_id), v, err, name);
}

static int p_int(const char *v, int64_t lo, int64_t hi, int *out)
{
	int64_t n;
	if (rv_parse_i64(v, lo, hi, &n) < 0)
		return -EINVAL;
	*out = (int)n;
	return 0;
}

static int p_rdzv_conf(struct flags *f, const char *v, struct rv_err *err, const char *name)
{
	const char *msg = "must be KEY=VALUE pairs separated by commas";
	if (strlen(v) >= sizeof(f->rdzv_conf))
		return bad(err, name, "is too long", v);
	const char *p = v;
	while (*p) {
		const char *end = strchr(p, ',');
		size_t n = end ? (size_t)(end - p) : strlen(p);
		const char *eq = memchr(p, '=', n);
		if (!eq || eq == p || eq == p + n - 1)
			return bad(err, name, msg, v);
		p += n + (end ? 1 : 0);
		if (end && !*p)
			return bad(err, name, msg, v);
	}
	snprintf(f->rdzv_conf, sizeof(f->rdzv_conf), "%s", v);
	char t[32];
	if (flags_rdzv_conf_get(f, "join_timeout", t, sizeof(t))) {
		int64_t s;
		if (rv_parse_i64(t, 1, 604800, &s) < 0)
			return bad(err, name, "join_timeout must be seconds from 1 to 604800", v);
		f->rdzv_join_timeout_s = (int)s;
	}
	if (flags_rdzv_conf_get(f, "master_timeout", t, sizeof(t))) {
		int64_t s;
		if (rv_parse_i64(t, 1, 86400, &s) < 0)
			return bad(err, name, "master_timeout must be seconds from 1 to 86400", v);
		f->rdzv_master_timeout_s = (int)s;
	}
	if (flags_rdzv_conf_get(f, "netcheck_mb", t, sizeof(t))) {
		int64_t mb;
		if (rv_parse_i64(t, 1, 1024, &mb) < 0)
			return bad(err, name, "netcheck_mb must be MiB from 1 to 1024", v);
		f->netcheck_mb = (int)mb;
	}
	if (flags_rdzv_conf_get(f, "netcheck_timeout", t, sizeof(t)) &&
	    p_int(t, 1, 86400, &f->netcheck_timeout_s) < 0)
		return bad(err, name, "netcheck_timeout must be seconds from 1 to 86400", v);
	if (flags_rdzv_conf_get(f, "netcheck_round_timeout", t, sizeof(t)) &&
	    p_int(t, 1, 3600, &f->netcheck_round_timeout_s) < 0)
		return bad(err, name, "netcheck_round_timeout must be seconds from 1 to 3600", v);
	return 0;
}

/* "3" or "0:1,1:2". */
static int parse_std(struct flags_std *s, const char *v)
{
	int m;
	memset(s, 0, sizeof(*s));
	if (!strchr(v, ':'))
		return p_int(v, 0, 3, &s->all);
	const char *p = v;
	while (*p) {
		char item[32];
		const char *end = strchr(p, ',');
		size_t n = end ? (size_t)(end - p) : strlen(p);
		if (n == 0 || n >= sizeof(item) || s->nper == FLAGS_MAX_STD_RANKS)
			return -EINVAL;
		memcpy(item, p, n);
		item[n] = 0;
		char *colon = strchr(item, ':');
		if (!colon)
			return -EINVAL;
		*colon = 0;
		int r;
		if (p_int(item, 0, FLAGS_MAX_NPROC - 1, &r) < 0 || p_int(colon + 1, 0, 3, &m) < 0)
			return -EINVAL;
		for (int i = 0; i < s->nper; i++)
			if (s->per_rank[i] == r)
				return -EINVAL;
		s->per_rank[s->nper] = r;
		s->per_mask[s->nper++] = m;
		p += n + (end ? 1 : 0);
		if (end && !*p)
			return -EINVAL;
	}
	return 0;
}

/* Python module names, comma-separated: what the warm interpreter imports
 * (handed to it as one argument, never to a shell). */
static int p_warm_import(struct flags *f, const char *v, struct rv_err *err, const char *name)
{
	bool start = true;
	for (const char *c = v; *c; c++) {
		bool ident = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || *c == '_' ||
			     (!start && *c >= '0' && *c <= '9');
		if (ident)
			start = false;
		else if ((*c == ',' || *c == '.') && !start)
			start = true;
		else
			return bad(err, name, "must be module names separated by commas (a,b.c)",
				   v);
	}
	if (start || strlen(v) >= sizeof(f->warm_import))
		return bad(err, name, "must be module names separated by commas (a,b.c)", v);
	snprintf(f->warm_import, sizeof(f->warm_import), "%s", v);
	return 0;
}

/* torch >= 2.2: "0,2", the local ranks whose output reaches the console. */
static int p_ranks_filter(struct flags *f, const char *v, struct rv_err *err, const char *name)
{
	const char *msg = "must be local ranks separated by commas, e.g. 0,1,2";
	unsigned char seen[FLAGS_MAX_NPROC] = { 0 };
	const char *p = v;
	if (!*p)
		return bad(err, name, msg, v);
	while (*p) {
		char item[16];
		const char *end = strchr(p, ',');
		size_t n = end ? (size_t)(end - p) : strlen(p);
		int r;
		if (n == 0 || n >= sizeof(item))
			return bad(err, name, msg, v);
		memcpy(item, p, n);
		item[n] = 0;
		if (p_int(item, 0, FLAGS_MAX_NPROC - 1, &r) < 0)
			return bad(err, name, msg, v);
		seen[r] = 1;
		p += n + (end ? 1 : 0);
		if (end && !*p)
			return bad(err, name, msg, v);
	}
	memcpy(f->console_rank, seen, sizeof(seen));
	f->console_filter = true;
	return 0;
}

static int p_hang(struct flags *f, const char *v, struct rv_err *err, const char *name)
{
	double s;
	if (rv_parse_double(v, 0, 604800, &s) < 0 || (s > 0 && s < 1))
		return bad(err, name, "must be 0 (off) or seconds from 1 to 604800", v);
	f->hang_timeout_s = s;
	return 0;
}

#define OFF(field)                   offsetof(struct flags, field), sizeof(((struct flags *)0)->field)
#define SWITCH(field)                FLAGS_SWITCH, OFF(field), 0, 0, NULL, NULL, NULL
#define INT(field, lo, hi, metavar)  FLAGS_INT, OFF(field), lo, hi, NULL, NULL, metavar
#define DOUBLE(field, lo, hi)        FLAGS_DOUBLE, OFF(field), lo, hi, NULL, NULL, "SECONDS"
#define STR(field, metavar)          FLAGS_STR, OFF(field), 0, 0, NULL, NULL, metavar
#define CHOICE(field, list, metavar) FLAGS_CHOICE, OFF(field), 0, 0, list, NULL, metavar
#define STD(field)                   FLAGS_STD, OFF(field), 0, 0, NULL, NULL, "MASK|R:MASK,..."
#define FN(fn, metavar)              FLAGS_FN, 0, 0, 0, 0, NULL, fn, metavar

static const char *const backends[] = { "static",         "c10d",  "etcd", "etcd-v2",
					"dlrover-master", "rover", NULL };
static const char *const start_methods[] = { "spawn", "fork", "forkserver", NULL };
static const char *const accelerators[] = { "nvidia.com/gpu", "ascend-npu", "cpu", NULL };

static const struct flags_opt flags_table[] = {
	{ "nnodes", 0, FN(p_nnodes, "N|MIN:MAX"),
	  "nodes in the job: a fixed count, or a range the world may shrink and grow in "
	  "(default 1)" },
	{ "nproc-per-node", 0, FN(p_nproc, "auto|cpu|gpu|N"),
	  "workers on this node: a number, one per GPU (gpu), one per CPU (cpu), or gpu when "
	  "there are GPUs else cpu (auto); default 1" },
	{ "rdzv-backend", 0,
	  CHOICE(rdzv_backend, backends, "static|c10d|etcd|etcd-v2|dlrover-master|rover"),
	  "accepted for torchrun's and DLRover's scripts: the rendezvous is always "
	  "rover-master's" },
	{ "rdzv-endpoint", 0, FN(p_endpoint, "HOST:PORT"),
	  "the rover-master to rendezvous with (default: $ROVER_MASTER_ADDR, else a private "
	  "one with --standalone or one node)" },
	{ "rdzv-id", 0, FN(p_rdzv_id, "ID"),
	  "the job's id, given to workers as TORCHELASTIC_RUN_ID (default none)" },
	{ "rdzv-conf", 0, FN(p_rdzv_conf, "K=V,..."),
	  "rendezvous settings; join_timeout=SECONDS bounds the wait for a world (default 600); "
	  "master_timeout=SECONDS: heartbeats unanswered this long mean the master has declared "
	  "this node dead (a network cut): stop the workers and rendezvous again (default 30); "
	  "netcheck_mb=MIB: what --network-check sends each peer per round (default 4); "
	  "netcheck_round_timeout=SECONDS: one round's collective, its connects included "
	  "(default 30); netcheck_timeout=SECONDS: the whole check, the verdicts included "
	  "(default 120)" },
	{ "standalone", 0, SWITCH(standalone),
	  "one node: start a private rover-master on a free loopback port (a "
	  "--rdzv-endpoint given too is ignored, with a warning, as torchrun does)" },
	{ "max-restarts", 0, INT(max_restarts, 0, 1000000, "N"),
	  "restarts of the local worker group before the job fails (default 0)" },
	{ "monitor-interval", 0, DOUBLE(monitor_interval, 0, 3600),
	  "seconds between reports of this node's resource usage (CPU, memory, CPU "
	  "throttling, GPU memory) to the master (default 5, at least 1 in effect); deaths are "
	  "seen at once "
	  "through pidfds, nothing polls for them" },
	{ "start-method", 0, CHOICE(start_method, start_methods, "spawn|fork|forkserver"),
	  "accepted: workers are always started as new processes" },
	{ "role", 0, STR(role, "NAME"), "the workers' ROLE_NAME (default \"default\")" },
	{ "module", 'm', SWITCH(module), "the script is a Python module, run as python -m MODULE" },
	{ "no-python", 0, SWITCH(no_python),
	  "the script is a program to run as is, not a Python file" },
	{ "no-warm", 0, SWITCH(no_warm),
	  "start every worker cold (python -u SCRIPT), as ROVER_WARM=0 does; by default a "
	  "warm interpreter that imported torch forks Python workers in milliseconds once it "
	  "is ready (the first start may be cold)" },
	{ "warm-import", 0, FN(p_warm_import, "MODULE,..."),
	  "more modules the warm interpreter imports after torch (e.g. transformers,numpy), "
	  "so that a restarted worker skips their import too; one that fails to import, "
	  "leaves a thread running or initialises CUDA turns the warm start off (logged); "
	  "default $ROVER_WARM_IMPORT, else none" },
	{ "run-path", 0, SWITCH(run_path),
	  "accepted: the script runs as a Python file either way" },
	{ "log-dir", 0, STR(log_dir, "DIR"),
	  "write each worker's stdout and stderr under DIR/attempt_N/LOCAL_RANK/" },
	{ "redirects", 'r', STD(redirects),
	  "streams that go to the log files only, not the console: 0 none, 1 stdout, "
	  "2 stderr, 3 both; or per local rank (0:1,1:2); without --log-dir the files go "
	  "to a new folder in $TMPDIR (logged)" },
	{ "tee", 't', STD(tee),
	  "streams that go to the console and the log files (masks as --redirects); every "
	  "console line carries a [rankN]: prefix" },
	{ "local-ranks-filter", 0, FN(p_ranks_filter, "R,..."),
	  "torchrun's (torch >= 2.2): only these local ranks' output reaches the console; "
	  "--log-dir still gets every rank's (default: every rank)" },
	{ "node-rank", 0, INT(node_rank, 0, 1023, "N"),
	  "torchrun's static rendezvous: this node's GROUP_RANK, fixed (RANK = N x "
	  "nproc-per-node + LOCAL_RANK; every node the same nproc-per-node); the workers' "
	  "store is then at --master-addr:--master-port (default 127.0.0.1:29500). Without "
	  "it the master ranks the nodes in join order" },
	{ "master-addr", 0, STR(master_addr, "HOST"),
	  "the workers' MASTER_ADDR, as torchrun's static rendezvous (the node of group rank "
	  "0 must have it); default: node 0's address from the rendezvous" },
	{ "master-port", 0, INT(master_port, 1, 65535, "PORT"),
	  "the workers' MASTER_PORT, fixed for every round (default: a free port node 0 "
	  "picks for each round; 29500 with --node-rank or --master-addr)" },
	{ "local-addr", 0, STR(local_addr, "HOST"),
	  "this node's address as the other nodes reach it (default: 127.0.0.1 with a "
	  "loopback master, else the host name)" },
	{ "network-check", 0, SWITCH(network_check),
	  "DLRover's: before training, every node of the world checks its links with its "
	  "peers through the master (/v1/netcheck); a node found faulty reports itself and "
	  "leaves the job (exit 1)" },
	{ "node-unit", 0, INT(node_unit, 1, 1024, "N"),
	  "DLRover's: the world's node count is a multiple of N (default 1)" },
	{ "auto-config", 0, SWITCH(auto_config),
	  "DLRover's: nproc-per-node from the host (the master's job spec's GPUs per node, "
	  "else this node's GPUs, else its CPUs) unless given, and the node count from the "
	  "master's job spec" },
	{ "exclude-straggler", 0, SWITCH(exclude_straggler),
	  "DLRover's, with --network-check: a node the check finds much slower than the "
	  "others (netcheck.straggler_ratio x the median) leaves the job as a faulty one "
	  "does" },
	{ "save-at-breakpoint", 0, SWITCH(save_at_breakpoint),
	  "persist the newest in-memory checkpoint to --ckpt-dir when a worker fails, before "
	  "the restart (also ROVER_SAVE_AT_BREAKPOINT=1)" },
	{ "ckpt-dir", 0, STR(ckpt_dir, "DIR"),
	  "persist the workers' flash checkpoints (shared memory) here as soon as every local "
	  "rank saved a step: DIR/step-S/, DIR/manifest.json; workers load from it "
	  "(ROVER_CKPT_DIR) when memory has none (default: memory only)" },
	{ "ckpt-keep", 0, INT(ckpt_keep, 1, 64, "N"),
	  "complete checkpoint steps kept in --ckpt-dir, older ones removed (default 3)" },
	{ "accelerator", 0, CHOICE(accelerator, accelerators, "nvidia.com/gpu|ascend-npu|cpu"),
	  "DLRover's: the kind of device; nvidia.com/gpu (default) asks the CUDA runtime, "
	  "in a child (rover-gpuinfo), for this node's GPUs; anything else counts none" },
	{ "hang-timeout", 0, FN(p_hang, "SECONDS"),
	  "no output from any worker this long is a hang: each rank's Python stack is logged "
	  "and the group restarts; with several nodes group rank 0's node alone judges "
	  "(default 300, 0 off)" },
};

#define NOPTS (sizeof(flags_table) / sizeof(flags_table[0]))

void flags_init(struct flags *f)
{
	memset(f, 0, sizeof(*f));
	f->nnodes_min = f->nnodes_max = 1;
	f->nproc = 1;
	f->pid = getpid();
	snprintf(f->rdzv_backend, sizeof(f->rdzv_backend), "static");
	snprintf(f->rdzv_id, sizeof(f->rdzv_id), "none");
	f->rdzv_join_timeout_s = 600;
	f->rdzv_master_timeout_s = 30;
	f->netcheck_mb = 4;
	f->netcheck_timeout_s = 120;
	f->netcheck_round_timeout_s = 30;
	f->monitor_interval = 5;
	snprintf(f->start_method, sizeof(f->start_method), "spawn");
	snprintf(f->role, sizeof(f->role), "default");
	f->node_rank = -1;
	f->node_unit = 1;
	snprintf(f->accelerator, sizeof(f->accelerator), "nvidia.com/gpu");
	f->hang_timeout_s = 300;
	f->ckpt_keep = 3;
}

static bool long_matches(const char *name, const char *s, size_t n)
{
	size_t k = 0;
	while (k < n && name[k] && (s[k] == name[k] || (s[k] == '_' && name[k] == '-')))
		k++;
	return k == n;
}

/* The table row for a long name given with dashes or underscores, or, as
 * torchrun's argparse allows, a prefix of only one name (--nproc).  NULL
 * with err set when none or several match. */
static const struct flags_opt *find_long(const char *s, size_t n, struct rv_err *err)
{
	const struct flags_opt *found = NULL;
	char names[256] = "";
	size_t used = 0;
	int count = 0;
	for (size_t i = 0; i < NOPTS; i++)
		if (strlen(flags_table[i].name) == n && long_matches(flags_table[i].name, s, n))
			return &flags_table[i];
	for (size_t i = 0; i < NOPTS; i++) {
		if (!long_matches(flags_table[i].name, s, n))
			continue;
		found = &flags_table[i];
		count++;
		int k = snprintf(names + used, sizeof(names) - used, "%s--%s",
				 count > 1 ? ", " : "", found->name);
		if (k > 0 && (size_t)k < sizeof(names) - used)
			used += (size_t)k;
	}
	if (count == 1 && n > 0)
		return found;
	if (count > 1 && n > 0)
		rv_err_set(err, -EINVAL, "", "ambiguous flag \"--%.*s\": could be %s", (int)n, s,
			   names);
	else
		rv_err_set(err, -EINVAL, "", "unknown flag \"--%.*s\" (see --help)", (int)n, s);
	return NULL;
}

static const struct flags_opt *find_short(char c)
{
	for (size_t i = 0; i < NOPTS; i++)
		if (flags_table[i].letter && flags_table[i].letter == c)
			return &flags_table[i];
	return NULL;
}

static int apply(struct flags *f, const struct flags_opt *o, const char *v, struct rv_err *err)
{
	char *field = (char *)f + o->off;
	char msg[160];
	int64_t n;
	int i;
	double d;
	bool b;
	switch (o->kind) {
	case FLAGS_SWITCH:
		b = true;
		if (v && rv_parse_bool(v, &b) < 0)
			return bad(err, o->name, "must be true or false", v);
		memcpy(field, &b, sizeof(b));
		return 0;
	case FLAGS_INT:
		if (rv_parse_i64(v, (int64_t)o->min, (int64_t)o->max, &n) < 0) {
			snprintf(msg, sizeof(msg), "must be a number from %.0f to %.0f", o->min,
				 o->max);
			return bad(err, o->name, msg, v);
		}
		i = (int)n;
		memcpy(field, &i, sizeof(i));
		return 0;
	case FLAGS_DOUBLE:
		if (rv_parse_double(v, o->min, o->max, &d) < 0) {
			snprintf(msg, sizeof(msg), "must be seconds from %g to %g", o->min, o->max);
			return bad(err, o->name, msg, v);
		}
		memcpy(field, &d, sizeof(d));
		return 0;
	case FLAGS_STR:
		return copy_str(field, o->size, v, err, o->name);
	case FLAGS_CHOICE:
		for (const char *const *c = o->choices; *c; c++)
			if (!strcmp(v, *c))
				return copy_str(field, o->size, v, err, o->name);
		snprintf(msg, sizeof(msg), "must be one of %s", o->metavar);
		for (char *p = msg; *p; p++)
			if (*p == '|')
				*p = ',';
		return bad(err, o->name, msg, v);
	case FLAGS_STD:
		if (parse_std((struct flags_std *)field, v) < 0)
			return bad(err, o->name,
				   "must be 0 (none), 1 (stdout), 2 (stderr), 3 (both) or "
				   "LOCAL_RANK:MASK pairs like 0:1,1:2",
				   v);
		return 0;
	case FLAGS_FN:
		break;
	}
	return o->fn(f, v, err, o->name);
}

/* torchrun's flags, which it also reads from PET_<NAME> (its argparse
 * actions env and check_env): Kubeflow's PyTorchJob sets them so. */
static const char *const pet_flags[] = {
	"nnodes",
	"nproc-per-node",
	"rdzv-backend",
	"rdzv-endpoint",
	"rdzv-id",
	"rdzv-conf",
	"standalone",
	"max-restarts",
	"monitor-interval",
	"start-method",
	"role",
	"module",
	"no-python",
	"run-path",
	"log-dir",
	"redirects",
	"tee",
	"node-rank",
	"master-addr",
	"master-port",
	"local-addr",
	"local-ranks-filter",
};

static int parse_pet(struct flags *f, struct rv_err *err)
{
	for (size_t i = 0; i < sizeof(pet_flags) / sizeof(pet_flags[0]); i++) {
		char env[64] = "PET_";
		size_t k = 4;
		for (const char *c = pet_flags[i]; *c && k < sizeof(env) - 1; c++)
			env[k++] = *c == '-' ? '_' : (char)(*c - 'a' + 'A');
		env[k] = 0;
		const char *v = getenv(env);
		if (!v || !v[0]) /* unset or empty: the default, as torchrun */
			continue;
		const struct flags_opt *o = find_long(pet_flags[i], strlen(pet_flags[i]), err);
		if (!o)
			return -EINVAL;
		int rc = apply(f, o, v, err);
		if (rc < 0 && err) {
			char msg[sizeof(err->msg)];
			snprintf(msg, sizeof(msg), "%s", err->msg);
			return rv_err_set(err, rc, env, "%s=\"%s\" in the environment: %.400s", env,
					  v, msg);
		}
		if (rc < 0)
			return rc;
	}
	return 0;
}

int flags_parse(struct flags *f, int argc, char *const *argv, struct rv_err *err)
{
	int i = 1;
	int rc = parse_pet(f, err);
	if (rc < 0)
		return rc;
	for (; i < argc; i++) {
		const char *a = argv[i];
		const struct flags_opt *o;
		const char *v = NULL;
		if (!strcmp(a, "--")) {
			i++;
			break;
		}
		if (!strcmp(a, "-h") || !strcmp(a, "--help"))
			return 1;
		if (!strcmp(a, "--version"))
			return 2;
		if (a[0] != '-' || !a[1])
			break;
		if (a[1] == '-') {
			const char *eq = strchr(a + 2, '=');
			size_t n = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
			o = find_long(a + 2, n, err);
			if (!o)
				return err ? err->code : -EINVAL;
			if (eq)
				v = eq + 1;
		} else {
			o = find_short(a[1]);
			if (!o || (o->kind == FLAGS_SWITCH && a[2]))
				return rv_err_set(err, -EINVAL, "",
						  "unknown flag \"%s\" (see --help)", a);
			if (a[2])
				v = a[2] == '=' ? a + 3 : a + 2;
		}
		if (o->kind != FLAGS_SWITCH && !v) {
			if (i + 1 >= argc)
				return rv_err_set(err, -EINVAL, "", "--%s needs a value (%s)",
						  o->name, o->metavar);
			v = argv[++i];
		}
		rc = apply(f, o, v, err);
		if (rc < 0)
			return rc;
	}
	if (i >= argc)
		return rv_err_set(err, -EINVAL, "", "no training script given (see --help)");
	f->script = argv[i];
	f->script_args = argv + i + 1;
	f->nscript_args = argc - i - 1;
	/* torchrun's --standalone replaces the rendezvous flags given with it;
	 * main.c warns */
	if (f->standalone && f->rdzv_endpoint[0]) {
		f->rdzv_endpoint[0] = 0;
		f->standalone_dropped_endpoint = true;
	}
	if (f->standalone && f->nnodes_max > 1)
		return rv_err_set(err, -EINVAL, "--standalone",
				  "--standalone is one node: --nnodes must be 1");
	if (f->exclude_straggler && !f->network_check)
		return rv_err_set(err, -EINVAL, "--exclude-straggler",
				  "--exclude-straggler needs --network-check, which finds them");
	if (f->module && f->no_python)
		return rv_err_set(err, -EINVAL, "--no-python",
				  "-m and --no-python cannot go together");
	return 0;
}

int flags_std_mask(const struct flags_std *s, int local_rank)
{
	for (int i = 0; i < s->nper; i++)
		if (s->per_rank[i] == local_rank)
			return s->per_mask[i];
	return s->nper ? 0 : s->all;
}

bool flags_std_any(const struct flags_std *s)
{
	for (int i = 0; i < s->nper; i++)
		if (s->per_mask[i])
			return true;
	return s->nper == 0 && s->all;
}

const char *flags_rdzv_conf_get(const struct flags *f, const char *key, char *out, size_t size)
{
	size_t klen = strlen(key);
	const char *p = f->rdzv_conf;
	while (*p) {
		const char *end = strchr(p, ',');
		size_t n = end ? (size_t)(end - p) : strlen(p);
		if (n > klen && !strncmp(p, key, klen) && p[klen] == '=') {
			snprintf(out, size, "%.*s", (int)(n - klen - 1), p + klen + 1);
			return out;
		}
		p += n + (end ? 1 : 0);
	}
	return NULL;
}

void flags_print_help(FILE *out)
{
	fprintf(out,
		"usage: rover-run [FLAGS] SCRIPT [SCRIPT ARGS...]\n"
		"       rover-run [FLAGS] -m MODULE [ARGS...] | --no-python PROGRAM [ARGS...]\n\n"
		"A drop-in for torchrun: starts --nproc-per-node workers with torchrun's\n"
		"environment (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, ...), forms the world "
		"with\n"
		"a rover-master, restarts the workers when one dies (up to --max-restarts) and\n"
		"stops a job whose script fails twice at start with the same traceback.\n"
		"Flags take --flag VALUE or --flag=VALUE; --a-flag and --a_flag are the same,\n"
		"and a long flag may be cut to a prefix only it has (--nproc).  torchrun's\n"
		"flags also come from PET_<NAME> in the environment (PET_NPROC_PER_NODE=4),\n"
		"which the command line overrides.\n"
		"The first argument that is not a flag (or the one after --) is the script.\n"
		"Python is $PYTHON_EXEC, else python3.\n\n");
	for (size_t i = 0; i < NOPTS; i++) {
		const struct flags_opt *o = &flags_table[i];
		char head[128];
		int n = 0;
		if (o->letter)
			n = snprintf(head, sizeof(head), "-%c, ", o->letter);
		snprintf(head + n, sizeof(head) - (size_t)n, "--%s%s%s", o->name,
			 o->kind != FLAGS_SWITCH ? " " : "",
			 o->kind != FLAGS_SWITCH ? o->metavar : "");
		fprintf(out, "  %s\n      %s\n", head, o->help);
	}
	fprintf(out, "  -h, --help\n      this text\n");
	fprintf(out, "  --version\n      rover-run's version\n");
}
