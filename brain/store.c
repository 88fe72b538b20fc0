/*
 * store.c: every SQL statement rover-brain runs, over PQexecParams
 * (rv_db_exec; the ingest's pipelines prepare theirs once per connection)
 * and COPY FROM STDIN (rv_db_copy_in).  Callers pass a PGconn they borrowed from the pool; nothing
 * here keeps state.  JSON documents served by the API are built by
 * PostgreSQL (json_build_object) and parsed into cJSON for the caller.
 * Time series go in with one INSERT ... SELECT FROM unnest(arrays) per
 * table for a whole group of batches (many node samples with one COPY; a
 * constant statement either way: the rows are data, never SQL), and the
 * per-node summary the same way, all inside one transaction, so a batch is
 * stored whole or not at all.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "brain.h"
#include "buf.h"
#include "cleanup.h"
#include "json.h"
#include "parse.h"

int store_pg_int(const char *text)
{
	int64_t v;
	return rv_parse_i64(text, INT32_MIN, INT32_MAX, &v) == 0 ? (int)v : 0;
}

static void i64s(char *buf, size_t size, int64_t v)
{
	snprintf(buf, size, "%" PRId64, v);
}

static int fill_job(PGresult *r, int row, struct store_job *out, struct rv_err *err)
{
	memset(out, 0, sizeof(*out));
	out->id = strtoll(PQgetvalue(r, row, 0), NULL, 10);
	snprintf(out->uid, sizeof(out->uid), "%s", PQgetvalue(r, row, 1));
	snprintf(out->namespace_, sizeof(out->namespace_), "%s", PQgetvalue(r, row, 2));
	snprintf(out->name, sizeof(out->name), "%s", PQgetvalue(r, row, 3));
	snprintf(out->user, sizeof(out->user), "%s", PQgetvalue(r, row, 4));
	int s = rv_strategy_parse(PQgetvalue(r, row, 5));
	int m = rv_optimize_mode_parse(PQgetvalue(r, row, 6));
	if (s < 0 || m < 0)
		return rv_err_set(err, -EIO, "", "job %s has a bad strategy \"%s\" or mode \"%s\"",
				  out->uid, PQgetvalue(r, row, 5), PQgetvalue(r, row, 6));
	out->strategy = (enum rv_strategy)s;
	out->optimize_mode = (enum rv_optimize_mode)m;
	snprintf(out->status, sizeof(out->status), "%s", PQgetvalue(r, row, 7));
	out->last_sample_ms = strtoll(PQgetvalue(r, row, 8), NULL, 10);
	return 0;
}

#define JOB_COLS "id, uid, namespace, name, user_name, strategy, optimize_mode, status, last_sample_ms"

static int dataset_total(const struct rv_job_spec *spec, int64_t *out)
{
	int64_t total = 0;
	for (int i = 0; i < spec->ndatasets; i++)
		total += spec->datasets[i].size;
	*out = total;
	return 0;
}

int store_job_insert(PGconn *c, const struct rv_job_spec *spec, const char *spec_json,
		     struct store_job *out, struct rv_err *err)
{
	uint8_t rnd[8];
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		return rv_err_set(err, -EIO, "", "could not generate a job uid");
	char uid[40];
	snprintf(uid, sizeof(uid), "j-%02x%02x%02x%02x%02x%02x%02x%02x", rnd[0], rnd[1], rnd[2],
		 rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
	char params_s[24], batch_s[24], data_s[24];
	int64_t dsize;
	dataset_total(spec, &dsize);
	i64s(params_s, sizeof(params_s), spec->model_parameters);
	i64s(batch_s, sizeof(batch_s), spec->batch_size);
	i64s(data_s, sizeof(data_s), dsize);
	char nodes_s[24];
	i64s(nodes_s, sizeof(nodes_s), store_spec_nodes(spec));
	const char *p[] = { uid,
			    spec->namespace_,
			    spec->name,
			    spec->user,
			    rv_strategy_name(spec->strategy),
			    rv_optimize_mode_name(spec->optimize_mode),
			    spec_json,
			    params_s,
			    batch_s,
			    data_s,
			    nodes_s };
	RV_CLEANUP_PGRESULT PGresult *r = NULL;
	int rc = rv_db_exec(
		c,
		"INSERT INTO jobs (uid, namespace, name, user_name, strategy, optimize_mode,"
		" spec, model_parameters, batch_size, dataset_size, max_nodes)"
		" VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8, $9, $10, $11) RETURNING " JOB_COLS,
		11, p, &r, err);
	if (rc == -EEXIST)
		return rv_err_set(err, -EEXIST, "metadata.name",
				  "a running job named \"%s\" already exists in namespace \"%s\"",
				  spec->name, spec->namespace_);
	if (rc < 0)
		return rc;
	return fill_job(r, 0, out, err);
}

/* A uid from the URL: bytes PostgreSQL would refuse as text are ours to
 * name (400 "uid"), not its raw error. */
static int uid_check(const char *uid, struct rv_err *err)
{
	if (!rv_utf8_valid(uid, strlen(uid)))
		return rv_err_set(err, -EINVAL, "uid", "uid is not valid UTF-8");
	return 0;
}

static int job_find(PGconn *c, const char *sql, const char *key, struct store_job *out,
		    struct rv_err *err)
{
	int rc = uid_check(key, err);
	if (rc < 0)
		return rc;
	const char *p[] = { key };
	RV_CLEANUP_PGRESULT PGresult *r = NULL;
	rc = rv_db_exec(c, sql, 1, p, &r, err);
	if (rc < 0)
		return rc;
	if (rc == 0)
		return rv_err_set(err, -ENOENT, "uid", "no job with uid \"%s\"", key);
	return fill_job(r, 0, out, err);
}

int store_job_find(PGconn *c, const char *uid, struct store_job *out, struct rv_err *err)
{
	return job_find(c, "SELECT " JOB_COLS " FROM jobs WHERE uid = $1", uid, out, err);
}

void store_jobs_find_stmt(struct rv_db_stmt *st, const char *const *uids)
{
	*st = (struct rv_db_stmt){ .sql = "SELECT " JOB_COLS
					  " FROM jobs WHERE uid = ANY($1::text[])",
				   .nparams = 1,
				   .params = uids,
				   .want_res = true,
				   .prepare = true };
}

int store_jobs_from_stmt(const struct rv_db_stmt *st, const char *uid, struct store_job *out,
			 struct rv_err *err)
{
	for (int i = 0; st->res && i < st->rows; i++)
		if (strcmp(PQgetvalue(st->res, i, 1), uid) == 0)
			return fill_job(st->res, i, out, err);
	return rv_err_set(err, -ENOENT, "uid", "no job with uid \"%s\"", uid);
}

int store_job_find_id(PGconn *c, int64_t id, struct store_job *out, struct rv_err *err)
{
	char ids[24];
	i64s(ids, sizeof(ids), id);
	return job_find(c, "SELECT " JOB_COLS " FROM jobs WHERE id = $1", ids, out, err);
}

/* Run a statement returning one text column holding JSON; parse it. */
static int query_json(PGconn *c, const char *sql, int n, const char *const *p, cJSON **out,
		      struct rv_err *err)
{
	*out = NULL;
	RV_CLEANUP_PGRESULT PGresult *r = NULL;
	int rc = rv_db_exec(c, sql, n, p, &r, err);
	if (rc < 0)
		return rc;
	if (rc == 0 || PQgetisnull(r, 0, 0))
		return 0;
	const char *txt = PQgetvalue(r, 0, 0);
	*out = rv_json_parse(txt, strlen(txt), err);
	return *out ? 1 : -EIO;
}

#define JOB_JSON                                                                                   \
	"json_build_object('uid', j.uid, 'namespace', j.namespace, 'name', j.name,"                \
	" 'user', j.user_name, 'strategy', j.strategy, 'optimize_mode', j.optimize_mode,"          \
	" 'status', j.status, 'created_at', j.created_at, 'finished_at', j.finished_at,"           \
	" 'last_sample_ts', j.last_sample_ms,"                                                     \
	" 'planned_ts', COALESCE((SELECT p.planned_ts_ms FROM job_planned p"                       \
	"   WHERE p.job_id = j.id), 0),"                                                           \
	" 'model_parameters', j.model_parameters,"                                                 \
	" 'batch_size', j.batch_size, 'dataset_size', j.dataset_size,"                             \
	" 'speed', (SELECT s.speed FROM job_speed s WHERE s.job_id = j.id"                         \
	"   ORDER BY s.ts_ms DESC LIMIT 1),"                                                       \
	" 'workers', (SELECT s.workers FROM job_speed s WHERE s.job_id = j.id"                     \
	"   ORDER BY s.ts_ms DESC LIMIT 1)"

int store_job_get_json(PGconn *c, const char *uid, cJSON **out, struct rv_err *err)
{
	if (uid_check(uid, err) < 0)
		return -EINVAL;
	const char *p[] = { uid };
	int rc = query_json(
		c,
		"SELECT (" JOB_JSON ", 'spec', j.spec,"
		" 'nodes', COALESCE((SELECT json_agg(json_build_object('name', n.name, 'role', "
		"n.role,"
		"   'rank', n.rank, 'cpu', n.cpu, 'memory_mb', n.memory_mb, 'gpu', n.gpu,"
		"   'status', n.status, 'exit_reason', n.exit_reason, 'relaunches', n.relaunches,"
		"   'oom_count', n.oom_count, 'peak_memory_mb', n.peak_memory_mb,"
		"   'peak_cpu', n.peak_cpu) ORDER BY n.role, n.rank, n.name)"
		"   FROM job_nodes n WHERE n.job_id = j.id), '[]'::json),"
		" 'speed_samples', (SELECT count(*) FROM job_speed s WHERE s.job_id = j.id),"
		" 'node_samples', (SELECT count(*) FROM node_usage u WHERE u.job_id = j.id),"
		" 'latest_plan_id', (SELECT max(id) FROM scale_plans s WHERE s.job_id = j.id),"
		" 'latest_speed', (SELECT json_build_object('ts', s.ts_ms, 'speed', s.speed,"
		"   'step', s.step, 'workers', s.workers, 'ps', s.ps) FROM job_speed s"
		"   WHERE s.job_id = j.id ORDER BY s.ts_ms DESC LIMIT 1),"
		" 'progress', COALESCE((SELECT json_agg(json_build_object('dataset', p.dataset,"
		"   'ts', p.ts_ms, 'epoch', p.epoch, 'samples_total', p.samples_total,"
		"   'samples_done', p.samples_done, 'shards_total', p.shards_total,"
		"   'shards_done', p.shards_done, 'shards_doing', p.shards_doing,"
		"   'shards_left', CASE WHEN p.shards_total > 0 THEN"
		"     greatest(p.shards_total - p.shards_done - p.shards_doing, 0) END,"
		"   'finished', p.finished) ORDER BY p.dataset)"
		"   FROM job_progress p WHERE p.job_id = j.id), '[]'::json),"
		" 'shards', (SELECT json_build_object('total', sum(p.shards_total),"
		"   'done', sum(p.shards_done), 'doing', sum(p.shards_doing),"
		"   'left', sum(greatest(p.shards_total - p.shards_done - p.shards_doing, 0)),"
		"   'samples_total', sum(p.samples_total), 'samples_done', sum(p.samples_done),"
		"   'ts', max(p.ts_ms))"
		"   FROM job_progress p WHERE p.job_id = j.id AND p.shards_total > 0"
		"   HAVING count(*) > 0)))::text"
		" FROM jobs j WHERE j.uid = $1",
		1, p, out, err);
	if (rc == 0)
		return rv_err_set(err, -ENOENT, "uid", "no job with uid \"%s\"", uid);
	return rc < 0 ? rc : 0;
}

int store_job_list_json(PGconn *c, const char *namespace_, const char *status, int limit,
			int offset, cJSON **out, struct rv_err *err)
{
	char lim[16], off[16];
	snprintf(lim, sizeof(lim), "%d", limit);
	snprintf(off, sizeof(off), "%d", offset);
	const char *p[] = { namespace_ ? namespace_ : "", status ? status : "", lim, off };
	int rc = query_json(c,
			    "SELECT json_build_object('jobs', COALESCE(json_agg(x.doc ORDER BY x.id DESC),"
			    " '[]'::json), 'total', (SELECT count(*) FROM jobs WHERE ($1 = '' OR namespace = $1)"
			    " AND ($2 = '' OR status = $2)))::text"
			    " FROM (SELECT j.id, " JOB_JSON ") AS doc FROM jobs j"
			    " WHERE ($1 = '' OR j.namespace = $1) AND ($2 = '' OR j.status = $2)"
			    " ORDER BY j.id DESC LIMIT $3::int OFFSET $4::int) x",
			    4, p, out, err);
	return rc < 0 ? rc : 0;
}

/* ---- metrics ---- */

/* A node sample with its job, for the per-node summary. */
struct node_ref {
	int64_t job_id;
	const struct rv_sample *s;
};

static int cmp_node_ref(const void *a, const void *b)
{
	const struct node_ref *x = a, *y = b;
	if (x->job_id != y->job_id)
		return x->job_id < y->job_id ? -1 : 1;
	int c = strcmp(x->s->node, y->s->node);
	if (c)
		return c;
	return x->s->ts_ms < y->s->ts_ms ? -1 : x->s->ts_ms > y->s->ts_ms;
}

static int cmp_batch_in(const void *a, const void *b)
{
	const struct store_batch_in *x = a, *y = b;
	return (x->job_id > y->job_id) - (x->job_id < y->job_id);
}

/* Append one element to a PostgreSQL array literal under construction
 * ("{" before the first). */
static void arr_sep(struct rv_buf *b)
{
	rv_buf_puts(b, b->len ? "," : "{");
}

static void arr_i64(struct rv_buf *b, int64_t v)
{
	arr_sep(b);
	rv_buf_printf(b, "%" PRId64, v);
}

/* Doubles print with 15 significant digits: exact for every decimal input
 * of up to 15 digits (all metrics). */
static void arr_f64(struct rv_buf *b, double v)
{
	arr_sep(b);
	rv_buf_printf(b, "%.15g", v);
}

static void arr_null(struct rv_buf *b)
{
	arr_sep(b);
	rv_buf_puts(b, "NULL");
}

static void arr_str(struct rv_buf *b, const char *v)
{
	arr_sep(b);
	rv_buf_pg_array_str(b, v);
}

/* Close the arrays and point the parameters at them ("{}" when empty). */
static void arr_close(struct rv_buf *cols, int n, const char **params)
{
	for (int k = 0; k < n; k++) {
		if (!cols[k].len)
			rv_buf_puts(&cols[k], "{");
		rv_buf_puts(&cols[k], "}");
		params[k] = cols[k].data;
	}
}

/* sql: a string constant (prepared once per pool connection). */
static void ss_add(struct store_samples *ss, const char *sql, int nparams, const char **params,
		   int want)
{
	ss->st[ss->n] = (struct rv_db_stmt){
		.sql = sql, .nparams = nparams, .params = params, .prepare = true
	};
	ss->want[ss->n++] = want;
}

/* COPY's binary format (network byte order, each field's length first):
 * no number is printed here or parsed by the server. */
static void bin_i64(struct rv_buf *b, int64_t v)
{
	uint64_t u = (uint64_t)v;
	unsigned char x[12] = { 0, 0, 0, 8 };
	for (int k = 0; k < 8; k++)
		x[4 + k] = (unsigned char)(u >> (56 - 8 * k));
	rv_buf_append(b, (const char *)x, sizeof(x));
}

static void bin_i32(struct rv_buf *b, int32_t v)
{
	uint32_t u = (uint32_t)v;
	unsigned char x[8] = { 0, 0, 0, 4 };
	for (int k = 0; k < 4; k++)
		x[4 + k] = (unsigned char)(u >> (24 - 8 * k));
	rv_buf_append(b, (const char *)x, sizeof(x));
}

static void bin_f64(struct rv_buf *b, double v)
{
	int64_t i;
	memcpy(&i, &v, sizeof(i));
	bin_i64(b, i);
}

static void bin_text(struct rv_buf *b, const char *v)
{
	uint32_t n = (uint32_t)strlen(v);
	unsigned char x[4] = { (unsigned char)(n >> 24), (unsigned char)(n >> 16),
			       (unsigned char)(n >> 8), (unsigned char)n };
	rv_buf_append(b, (const char *)x, sizeof(x));
	rv_buf_append(b, v, n);
}

/* One node_usage row, the columns of the INSERT's unnest (NULL throttling
 * counters and compute time when the sample had none); the first row starts the stream with
 * the format's header, store_samples_build ends it. */
static void copy_node(struct rv_buf *b, int64_t job, const struct rv_sample *s)
{
	static const char header[19] = "PGCOPY\n\377\r\n\0\0\0\0\0\0\0\0\0";
	static const char nulls[12] = "\377\377\377\377\377\377\377\377\377\377\377\377";
	if (!b->len)
		rv_buf_append(b, header, sizeof(header));
	rv_buf_append(b, "\0\16", 2); /* 14 fields */
	bin_i64(b, job);
	bin_i64(b, s->ts_ms);
	bin_text(b, s->node);
	bin_text(b, rv_role_name(s->role));
	bin_i32(b, s->rank);
	bin_f64(b, s->cpu);
	bin_i64(b, s->memory_mb);
	bin_f64(b, s->cpu_limit);
	bin_i64(b, s->memory_limit_mb);
	bin_f64(b, s->step_time);
	if (s->nr_periods > 0) {
		bin_i64(b, s->nr_periods);
		bin_i64(b, s->nr_throttled);
		bin_i64(b, s->throttled_usec);
	} else {
		rv_buf_append(b, nulls, sizeof(nulls));
	}
	if (s->compute_time > 0)
		bin_f64(b, s->compute_time);
	else
		rv_buf_append(b, nulls, 4);
}

/*
 * Every sample of every batch goes in with one statement per table, for
 * all the jobs of a group at once: each column is an array parameter
 * unnested by the server, so the statements are constant, the rows are
 * data, the statement count does not grow with the jobs, and unlike COPY
 * they can share a round trip (rv_db_exec_pipeline).  The sample tables
 * have no foreign key (sql/009_sample_keys.sql): the first statement
 * (jobs_keep) locks the jobs' rows against deletion, or fails as the
 * foreign key would when one is gone (a statement after a failed one in
 * a pipeline does not run).  The jobs' rows are updated last, locked in id order (two
 * transactions wait for each other but never deadlock): from there to the
 * commit a second transaction storing samples of a job waits.
 */
int store_samples_build(struct store_samples *ss, struct store_batch_in *in, int n,
			struct rv_err *err)
{
	memset(ss, 0, sizeof(*ss));
	qsort(in, (size_t)n, sizeof(*in), cmp_batch_in);
	int nnode = 0, nspeed = 0, njobs = 0;
	for (int i = 0; i < n; i++)
		for (int k = 0; k < in[i].batch->n; k++)
			nnode += in[i].batch->samples[k].kind == RV_SAMPLE_NODE;
	struct node_ref *nodes = nnode ? calloc((size_t)nnode, sizeof(*nodes)) : NULL;
	if (nnode && !nodes)
		return rv_err_set(err, -ENOMEM, "", "out of memory");
	ss->copy_rows = nnode >= STORE_COPY_MIN_ROWS ? nnode : 0;
	nnode = 0;
	struct rv_buf *sp = ss->speed, *nu = ss->node, *jb = ss->job;
	for (int i = 0; i < n;) {
		/* One job: its batches are next to each other. */
		int64_t job = in[i].job_id, max_ts = 0, params = 0, batch = 0;
		for (; i < n && in[i].job_id == job; i++) {
			const struct rv_metrics_batch *b = in[i].batch;
			for (int k = 0; k < b->n; k++) {
				const struct rv_sample *s = &b->samples[k];
				if (s->kind == RV_SAMPLE_PROGRESS)
					continue; /* its own tables: insert_progress */
				if (s->ts_ms > max_ts)
					max_ts = s->ts_ms;
				if (s->kind == RV_SAMPLE_SPEED) {
					arr_i64(&sp[0], job);
					arr_i64(&sp[1], s->ts_ms);
					arr_f64(&sp[2], s->speed);
					arr_i64(&sp[3], s->step);
					arr_i64(&sp[4], s->workers);
					arr_i64(&sp[5], s->ps);
					nspeed++;
				} else if (s->kind == RV_SAMPLE_NODE) {
					nodes[nnode++] = (struct node_ref){ job, s };
					if (ss->copy_rows) {
						copy_node(&ss->copy, job, s);
						continue;
					}
					arr_i64(&nu[0], job);
					arr_i64(&nu[1], s->ts_ms);
					arr_str(&nu[2], s->node);
					arr_str(&nu[3], rv_role_name(s->role));
					arr_i64(&nu[4], s->rank);
					arr_f64(&nu[5], s->cpu);
					arr_i64(&nu[6], s->memory_mb);
					arr_f64(&nu[7], s->cpu_limit);
					arr_i64(&nu[8], s->memory_limit_mb);
					arr_f64(&nu[9], s->step_time);
					/* Throttling counters: NULL when the sample had none. */
					for (int c = 10; c < 13; c++)
						arr_sep(&nu[c]);
					if (s->nr_periods > 0) {
						rv_buf_printf(&nu[10], "%" PRId64, s->nr_periods);
						rv_buf_printf(&nu[11], "%" PRId64, s->nr_throttled);
						rv_buf_printf(&nu[12], "%" PRId64,
							      s->throttled_usec);
					} else {
						for (int c = 10; c < 13; c++)
							rv_buf_puts(&nu[c], "NULL");
					}
					if (s->compute_time > 0)
						arr_f64(&nu[13], s->compute_time);
					else
						arr_null(&nu[13]);
				} else {
					params = s->parameters;
					batch = s->batch_size;
				}
			}
		}
		arr_i64(&jb[0], job);
		arr_i64(&jb[1], max_ts);
		arr_i64(&jb[2], params);
		arr_i64(&jb[3], batch);
		njobs++;
	}

	/* One row per (job, node) in job_nodes: latest limits, peaks so far.
	 * Grouped here because one INSERT .. ON CONFLICT may not touch a row
	 * twice; in (job, node) order, the same in every transaction. */
	struct rv_buf *ag = ss->agg;
	if (nnode)
		qsort(nodes, (size_t)nnode, sizeof(*nodes), cmp_node_ref);
	for (int i = 0; i < nnode;) {
		const struct node_ref *first = &nodes[i];
		int64_t peak_mem = 0;
		double peak_cpu = 0;
		const struct rv_sample *last = first->s; /* the loop takes first too */
		for (; i < nnode && nodes[i].job_id == first->job_id &&
		       strcmp(nodes[i].s->node, first->s->node) == 0;
		     i++) {
			last = nodes[i].s;
			if (last->memory_mb > peak_mem)
				peak_mem = last->memory_mb;
			if (last->cpu > peak_cpu)
				peak_cpu = last->cpu;
		}
		arr_i64(&ag[0], first->job_id);
		arr_str(&ag[1], last->node);
		arr_str(&ag[2], rv_role_name(last->role));
		arr_i64(&ag[3], last->rank);
		arr_f64(&ag[4], last->cpu_limit);
		arr_i64(&ag[5], last->memory_limit_mb);
		arr_i64(&ag[6], peak_mem);
		arr_f64(&ag[7], peak_cpu);
	}
	free(nodes);
	arr_close(sp, SS_SPEED_COLS, ss->p_speed);
	arr_close(nu, SS_NODE_COLS, ss->p_node);
	arr_close(ag, SS_AGG_COLS, ss->p_agg);
	arr_close(jb, SS_JOB_COLS, ss->p_job);
	for (size_t k = 0; k < sizeof(ss->bufs) / sizeof(ss->bufs[0]); k++)
		if (rv_buf_failed(&ss->bufs[k]))
			return rv_err_set(err, -ENOMEM, "", "out of memory");
	if (ss->copy_rows)
		rv_buf_append(&ss->copy, "\377\377", 2); /* the trailer */
	if (rv_buf_failed(&ss->copy))
		return rv_err_set(err, -ENOMEM, "", "out of memory");

	ss_add(ss, "SELECT jobs_keep($1::bigint[])", 1, ss->p_job, 1);
	if (nspeed)
		ss_add(ss,
		       "INSERT INTO job_speed (job_id, ts_ms, speed, step, workers, ps)"
		       " SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::float8[], "
		       "$4::bigint[],"
		       " $5::int[], $6::int[])",
		       SS_SPEED_COLS, ss->p_speed, nspeed);
	ss->copy_at = ss->n; /* after jobs_keep and the speed samples */
	if (nnode && !ss->copy_rows)
		ss_add(ss,
		       "INSERT INTO node_usage (job_id, ts_ms, node, role, rank, cpu,"
		       " memory_mb, cpu_limit, memory_limit_mb, step_time,"
		       " nr_periods, nr_throttled, throttled_usec, compute_time)"
		       " SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[],"
		       " $5::int[], $6::float8[], $7::bigint[], $8::float8[], $9::bigint[],"
		       " $10::float8[], $11::bigint[], $12::bigint[], $13::bigint[],"
		       " $14::float8[])",
		       SS_NODE_COLS, ss->p_node, nnode);
	if (nnode)
		ss_add(ss,
		       "INSERT INTO job_nodes AS n (job_id, name, role, rank, cpu, memory_mb,"
		       " peak_memory_mb, peak_cpu)"
		       " SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::int[],"
		       " $5::float8[], $6::bigint[], $7::bigint[], $8::float8[])"
		       " ON CONFLICT (job_id, name) DO UPDATE SET role = EXCLUDED.role,"
		       " rank = EXCLUDED.rank,"
		       " cpu = CASE WHEN EXCLUDED.cpu > 0 THEN EXCLUDED.cpu ELSE n.cpu END,"
		       " memory_mb = CASE WHEN EXCLUDED.memory_mb > 0 THEN EXCLUDED.memory_mb"
		       "   ELSE n.memory_mb END,"
		       " peak_memory_mb = greatest(n.peak_memory_mb, EXCLUDED.peak_memory_mb),"
		       " peak_cpu = greatest(n.peak_cpu, EXCLUDED.peak_cpu), updated_at = now()",
		       SS_AGG_COLS, ss->p_agg, -1);
	ss_add(ss, "SELECT 1 FROM jobs WHERE id = ANY($1::bigint[]) ORDER BY id FOR NO KEY UPDATE",
	       1, ss->p_job, -1);
	ss_add(ss,
	       "UPDATE jobs j SET last_sample_ms = greatest(j.last_sample_ms, u.ts),"
	       " model_parameters = CASE WHEN u.params > 0 THEN u.params ELSE j.model_parameters "
	       "END,"
	       " batch_size = CASE WHEN u.batch > 0 THEN u.batch ELSE j.batch_size END"
	       " FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::int[])"
	       "   AS u (id, ts, params, batch)"
	       " WHERE j.id = u.id",
	       SS_JOB_COLS, ss->p_job, njobs);
	return 0;
}

int store_samples_exec(PGconn *c, const struct store_samples *ss, struct rv_db_stmt *st, int n,
		       int first, struct rv_err *err)
{
	if (!ss->copy_rows)
		return rv_db_exec_pipeline(c, st, n, NULL, err);
	int at = first + ss->copy_at, rc = 0;
	if (at > 0)
		rc = rv_db_exec_pipeline(c, st, at, NULL, err);
	if (rc == 0) {
		rc = rv_db_copy_in(
			c,
			"COPY node_usage (job_id, ts_ms, node, role, rank, cpu, memory_mb,"
			" cpu_limit, memory_limit_mb, step_time, nr_periods, nr_throttled,"
			" throttled_usec, compute_time) FROM STDIN (FORMAT binary)",
			ss->copy.data, ss->copy.len, err);
		if (rc >= 0 && rc != ss->copy_rows)
			rc = rv_err_set(err, -EIO, "", "stored %d of %d rows", rc, ss->copy_rows);
		else if (rc > 0)
			rc = 0;
	}
	if (rc == 0 && at < n)
		rc = rv_db_exec_pipeline(c, st + at, n - at, NULL, err);
	return rc;
}

int store_samples_check(const struct store_samples *ss, struct rv_err *err)
{
	for (int i = 0; i < ss->n; i++)
		if (ss->want[i] >= 0 && ss->st[i].rows != ss->want[i])
			return rv_err_set(err, -EIO, "", "stored %d of %d rows", ss->st[i].rows,
					  ss->want[i]);
	return 0;
}

void store_samples_release(struct store_samples *ss)
{
	for (size_t k = 0; k < sizeof(ss->bufs) / sizeof(ss->bufs[0]); k++)
		rv_buf_release(&ss->bufs[k]);
	rv_buf_release(&ss->copy);
	ss->copy_rows = 0;
	for (int i = 0; i < ss->n; i++)
		PQclear(ss->st[i].res);
	ss->n = 0;
}

/* Progress samples: each names a dataset of the job's spec (else the batch
 * is refused, 400 naming the sample); every one goes to the history (a
 * repeated (dataset, ts) once), the newest per dataset replaces the row held
 * unless that is newer; the history keeps the newest `keep` per dataset. */
static int insert_progress(PGconn *c, const char *job_s, const struct rv_metrics_batch *b, int keep,
			   struct rv_err *err)
{
	struct rv_buf col[9];
	for (int k = 0; k < 9; k++)
		rv_buf_init(&col[k]);
	const char *sep = "{";
	for (int i = 0; i < b->n; i++) {
		const struct rv_sample *s = &b->samples[i];
		if (s->kind != RV_SAMPLE_PROGRESS)
			continue;
		rv_buf_puts(&col[0], sep);
		rv_buf_pg_array_str(&col[0], s->dataset);
		rv_buf_printf(&col[1], "%s%" PRId64, sep, s->ts_ms);
		rv_buf_printf(&col[2], "%s%d", sep, s->epoch);
		rv_buf_printf(&col[3], "%s%" PRId64, sep, s->samples_total);
		rv_buf_printf(&col[4], "%s%" PRId64, sep, s->samples_done);
		rv_buf_printf(&col[5], "%s%" PRId64, sep, s->shards_total);
		rv_buf_printf(&col[6], "%s%" PRId64, sep, s->shards_done);
		rv_buf_printf(&col[7], "%s%" PRId64, sep, s->shards_doing);
		rv_buf_printf(&col[8], "%s%s", sep, s->finished ? "t" : "f");
		sep = ",";
	}
	int rc = 0;
	for (int k = 0; k < 9; k++) {
		rv_buf_puts(&col[k], "}");
		if (rv_buf_failed(&col[k]) && rc == 0)
			rc = rv_err_set(err, -ENOMEM, "", "out of memory");
	}
	char keep_s[16];
	snprintf(keep_s, sizeof(keep_s), "%d", keep > 0 ? keep : 1);
	const char *p[] = { job_s,       col[0].data, col[1].data, col[2].data,
			    col[3].data, col[4].data, col[5].data, col[6].data,
			    col[7].data, col[8].data, keep_s };
	RV_CLEANUP_PGRESULT PGresult *r = NULL;
	if (rc == 0)
		rc = rv_db_exec(
			c,
			"SELECT d FROM unnest($2::text[]) d WHERE NOT EXISTS (SELECT 1"
			" FROM jobs j, jsonb_array_elements(CASE WHEN jsonb_typeof("
			"j.spec->'spec'->'datasets') = 'array' THEN j.spec->'spec'->'datasets'"
			" ELSE '[]'::jsonb END) x WHERE j.id = $1::bigint AND x->>'name' = d)"
			" LIMIT 1",
			2, p, &r, err);
	if (rc > 0) {
		const char *bad = PQgetvalue(r, 0, 0);
		int i = 0;
		while (i < b->n && (b->samples[i].kind != RV_SAMPLE_PROGRESS ||
				    strcmp(b->samples[i].dataset, bad) != 0))
			i++;
		char f[48];
		snprintf(f, sizeof(f), "samples[%d].dataset", i);
		rc = rv_err_set(err, -EINVAL, f, "%s: the job has no dataset \"%s\"", f, bad);
	}
	if (rc == 0)
		rc = rv_db_exec(
			c,
			"WITH s AS (SELECT * FROM unnest($2::text[], $3::bigint[], $4::int[],"
			" $5::bigint[], $6::bigint[], $7::bigint[], $8::bigint[], $9::bigint[],"
			" $10::bool[]) AS t(dataset, ts_ms, epoch, samples_total, samples_done,"
			" shards_total, shards_done, shards_doing, finished)),"
			" h AS (INSERT INTO job_progress_history (job_id, dataset, ts_ms, epoch,"
			" samples_done, shards_done, shards_doing)"
			" SELECT $1::bigint, dataset, ts_ms, epoch, samples_done, shards_done,"
			" shards_doing FROM s ON CONFLICT DO NOTHING)"
			" INSERT INTO job_progress AS p (job_id, dataset, ts_ms, epoch,"
			" samples_total, samples_done, shards_total, shards_done, shards_doing,"
			" finished)"
			" SELECT DISTINCT ON (dataset) $1::bigint, * FROM s"
			" ORDER BY dataset, ts_ms DESC"
			" ON CONFLICT (job_id, dataset) DO UPDATE SET ts_ms = EXCLUDED.ts_ms,"
			" epoch = EXCLUDED.epoch, samples_total = EXCLUDED.samples_total,"
			" samples_done = EXCLUDED.samples_done,"
			" shards_total = EXCLUDED.shards_total,"
			" shards_done = EXCLUDED.shards_done,"
			" shards_doing = EXCLUDED.shards_doing, finished = EXCLUDED.finished"
			" WHERE EXCLUDED.ts_ms >= p.ts_ms",
			10, p, NULL, err);
	/* The history's bound: what lies beyond the newest `keep` of a dataset
	 * (an index range scan per dataset reported). */
	const char *pt[] = { job_s, col[0].data, keep_s };
	if (rc >= 0)
		rc = rv_db_exec(
			c,
			"DELETE FROM job_progress_history h USING (SELECT DISTINCT d FROM"
			" unnest($2::text[]) d) s WHERE h.job_id = $1::bigint"
			" AND h.dataset = s.d AND h.ts_ms < (SELECT x.ts_ms FROM"
			" job_progress_history x WHERE x.job_id = $1::bigint AND x.dataset = s.d"
			" ORDER BY x.ts_ms DESC OFFSET $3::int - 1 LIMIT 1)",
			3, pt, NULL, err);
	for (int k = 0; k < 9; k++)
		rv_buf_release(&col[k]);
	return rc < 0 ? rc : 0;
}

/* A batch with an id claims it first: 1 claimed (store the batch), 0 the id
 * was stored before (*accepted gets that batch's count). */
static int claim_batch_id(PGconn *c, const char *job_s, const struct rv_metrics_batch *b,
			  int *accepted, struct rv_err *err)
{
	char n_s[16];
	snprintf(n_s, sizeof(n_s), "%d", b->n);
	const char *p[] = { job_s, b->batch_id, n_s };
	int rc = rv_db_exec(c,
			    "INSERT INTO metrics_batches (job_id, batch_id, samples)"
			    " VALUES ($1::bigint, $2, $3::int) ON CONFLICT DO NOTHING",
			    3, p, NULL, err);
	if (rc != 0)
		return rc < 0 ? rc : 1;
	RV_CLEANUP_PGRESULT PGresult *r = NULL;
	rc = rv_db_exec(
		c,
		"SELECT samples FROM metrics_batches WHERE job_id = $1::bigint AND batch_id = $2",
		2, p, &r, err);
	if (rc < 0)
		return rc;
	if (rc != 1)
		return rv_err_set(err, -EIO, "batch_id", "batch id \"%s\" neither new nor stored",
				  b->batch_id);
	*accepted = store_pg_int(PQgetvalue(r, 0, 0));
	return 0;
}

void store_metrics_claims_stmt(struct rv_db_stmt *st, const char *const *p)
{
	/* Only for running jobs: a finished one takes no data, and its
	 * batches get the refusal, not a claim. */
	*st = (struct rv_db_stmt){
		.sql = "INSERT INTO metrics_batches (job_id, batch_id, samples)"
		       " SELECT j.id, c.batch_id, c.n"
		       " FROM unnest($1::text[], $2::text[], $3::int[]) AS c (uid, batch_id, n)"
		       " JOIN jobs j ON j.uid = c.uid AND j.status = 'running'"
		       " ON CONFLICT DO NOTHING RETURNING job_id, batch_id",
		.nparams = 3,
		.params = p,
		.want_res = true,
		.prepare = true,
	};
}

bool store_metrics_claimed(const struct rv_db_stmt *st, int64_t job_id, const char *batch_id)
{
	for (int i = 0; st->res && i < st->rows; i++)
		if (strtoll(PQgetvalue(st->res, i, 0), NULL, 10) == job_id &&
		    strcmp(PQgetvalue(st->res, i, 1), batch_id) == 0)
			return true;
	return false;
}

void store_metrics_seen_stmt(struct rv_db_stmt *st, const char *const *p)
{
	*st = (struct rv_db_stmt){
		.sql = "SELECT m.job_id, m.batch_id, m.samples FROM metrics_batches m"
		       " JOIN unnest($1::bigint[], $2::text[]) AS u (job_id, batch_id)"
		       " ON m.job_id = u.job_id AND m.batch_id = u.batch_id",
		.nparams = 2,
		.params = p,
		.want_res = true,
		.prepare = true,
	};
}

int store_metrics_seen_from_stmt(const struct rv_db_stmt *st, int64_t job_id, const char *batch_id,
				 int *accepted, struct rv_err *err)
{
	for (int i = 0; st->res && i < st->rows; i++)
		if (strtoll(PQgetvalue(st->res, i, 0), NULL, 10) == job_id &&
		    strcmp(PQgetvalue(st->res, i, 1), batch_id) == 0) {
			*accepted = store_pg_int(PQgetvalue(st->res, i, 2));
			return 0;
		}
	return rv_err_set(err, -EIO, "batch_id", "batch id \"%s\" neither new nor stored",
			  batch_id);
}

int store_metrics_claim(PGconn *c, int64_t job_id, const struct rv_metrics_batch *b, int *accepted,
			struct rv_err *err)
{
	char job_s[24];
	i64s(job_s, sizeof(job_s), job_id);
	*accepted = b->n;
	return claim_batch_id(c, job_s, b, accepted, err);
}

int store_metrics_insert(PGconn *c, int64_t job_id, const struct rv_metrics_batch *b,
			 int progress_keep, int *accepted, struct rv_err *err)
{
	char job_s[24];
	i64s(job_s, sizeof(job_s), job_id);
	*accepted = b->n;
	int rc;
	if (b->batch_id[0] && (rc = claim_batch_id(c, job_s, b, accepted, err)) <= 0)
		return rc < 0 ? rc : 1;
	/* Data progress is no measurement the planner considers: it goes to
	 * its own tables and leaves last_sample_ms alone (store_samples_build
	 * skips it). */
	int nprogress = 0;
	for (int i = 0; i < b->n; i++)
		nprogress += b->samples[i].kind == RV_SAMPLE_PROGRESS;
	if (nprogress && (rc = insert_progress(c, job_s, b, progress_keep, err)) < 0)
		return rc;
	struct store_samples ss;
	struct store_batch_in in = { job_id, b };
	rc = store_samples_build(&ss, &in, 1, err);
	if (rc == 0)
		rc = store_samples_exec(c, &ss, ss.st, ss.n, 0, err);
	if (rc == 0)
		rc = store_samples_check(&ss, err);
	store_samples_release(&ss);
	return rc < 0 ? rc : 0;
}

/* ---- events ---- */

/* An event whose id was stored before: its row id and the plan it made. */
static int event_seen(PGconn *c, const char *job_s, const struct rv_event *ev, int64_t *id_out,
		      int64_t *plan_out, struct rv_err *err)
{
	const char *p[] = { job_s, ev->event_id };
	RV_CLEANUP_PGRESULT PGresult *r = NULL;
	int rc = rv_db_exec(c,
			    "SELECT id, coalesce(result_plan_id, 0) FROM events"
			    " WHERE job_id = $1::bigint AND event_id = $2",
			    2, p, &r, err);
	if (rc < 0)
		return rc;
	if (rc != 1)
		return rv_err_set(err, -EIO, "event_id", "event id \"%s\" neither new nor stored",
				  ev->event_id);
	*id_out = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
	*plan_out = strtoll(PQgetvalue(r, 0, 1), NULL, 10);
	return 0;
}

/*
 * What stays true once job job_s has ended (status "finished" or "failed"):
 * nodes still "running" ended with it ("finished", or "stopped" when the job
 * failed), and a plan still "pending" can never be judged ("unjudged").
 */
static int job_end_settle(PGconn *c, const char *job_s, const char *status, struct rv_err *err)
{
	const char *p[] = { job_s, status };
	int rc =
		rv_db_exec(c,
			   "UPDATE job_nodes SET status = CASE WHEN $2 = 'finished' THEN 'finished'"
			   " ELSE 'stopped' END, updated_at = now()"
			   " WHERE job_id = $1::bigint AND status = 'running'",
			   2, p, NULL, err);
	if (rc >= 0)
		rc = rv_db_exec(c,
				"UPDATE scale_plans SET outcome = 'unjudged'"
				" WHERE job_id = $1::bigint AND outcome = 'pending'",
				1, p, NULL, err);
	return rc < 0 ? rc : 0;
}

int store_event_insert(PGconn *c, int64_t job_id, const struct rv_event *ev, int64_t *id_out,
		       int64_t *plan_out, struct rv_err *err)
{
	char job_s[24], ts_s[24], rank_s[16], exit_s[16], mem_s[24], peak_s[24], plan_s[24];
	i64s(job_s, sizeof(job_s), job_id);
	i64s(ts_s, sizeof(ts_s), ev->ts_ms);
	snprintf(rank_s, sizeof(rank_s), "%d", ev->rank);
	snprintf(exit_s, sizeof(exit_s), "%d", ev->exit_code);
	i64s(mem_s, sizeof(mem_s), ev->memory_mb);
	i64s(peak_s, sizeof(peak_s), ev->peak_memory_mb);
	i64s(plan_s, sizeof(plan_s), ev->plan_id);
	const char *type = rv_event_type_name(ev->type);
	const char *role = rv_role_name(ev->role);
	*id_out = 0;
	*plan_out = 0;
	int rc;
	{
		const char *p[] = { job_s,
				    ts_s,
				    type,
				    ev->node,
				    role,
				    rank_s,
				    exit_s,
				    ev->reason,
				    mem_s,
				    peak_s,
				    ev->plan_id > 0 ? plan_s : NULL,
				    ev->event_id[0] ? ev->event_id : NULL };
		RV_CLEANUP_PGRESULT PGresult *r = NULL;
		/* A concurrent twin waits here on the unique index until the first
		 * commits, then finds nothing to insert and reads the first's row. */
		rc = rv_db_exec(
			c,
			"INSERT INTO events (job_id, ts_ms, type, node, role, rank, exit_code, "
			"reason,"
			" memory_mb, peak_memory_mb, plan_id, event_id) VALUES ($1, $2, $3, $4, $5,"
			" $6, $7, $8, $9, $10, $11, $12)"
			" ON CONFLICT (job_id, event_id) WHERE event_id IS NOT NULL DO NOTHING"
			" RETURNING id",
			12, p, &r, err);
		if (rc < 0)
			return rc;
		if (rc == 0)
			return (rc = event_seen(c, job_s, ev, id_out, plan_out, err)) < 0 ? rc : 1;
		*id_out = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
	}
	switch (ev->type) {
	case RV_EVENT_NODE_FAILED:
	case RV_EVENT_NODE_OOM:
	case RV_EVENT_NODE_RELAUNCHED:
	case RV_EVENT_NODE_FINISHED: {
		const char *status = ev->type == RV_EVENT_NODE_FAILED	? "failed"
				     : ev->type == RV_EVENT_NODE_OOM	? "oom"
				     : ev->type == RV_EVENT_NODE_FINISHED ? "finished"
									  : "running";
		const char *oom = ev->type == RV_EVENT_NODE_OOM ? "1" : "0";
		const char *rel = ev->type == RV_EVENT_NODE_RELAUNCHED ? "1" : "0";
		const char *p[] = { job_s, ev->node, role, rank_s, status, ev->reason, oom, rel,
				    peak_s, mem_s };
		rc = rv_db_exec(c,
				"INSERT INTO job_nodes AS n (job_id, name, role, rank, status, exit_reason,"
				" oom_count, relaunches, peak_memory_mb, memory_mb)"
				" VALUES ($1, $2, $3, $4, $5, $6, $7::int, $8::int, $9, $10)"
				" ON CONFLICT (job_id, name) DO UPDATE SET status = EXCLUDED.status,"
				" exit_reason = CASE WHEN EXCLUDED.exit_reason <> '' THEN EXCLUDED.exit_reason"
				"   ELSE n.exit_reason END,"
				" oom_count = n.oom_count + EXCLUDED.oom_count,"
				" relaunches = n.relaunches + EXCLUDED.relaunches,"
				" peak_memory_mb = greatest(n.peak_memory_mb, EXCLUDED.peak_memory_mb),"
				" memory_mb = CASE WHEN EXCLUDED.memory_mb > 0 THEN EXCLUDED.memory_mb"
				"   ELSE n.memory_mb END, updated_at = now()",
				10, p, NULL, err);
		break;
	}
	case RV_EVENT_JOB_FINISHED:
	case RV_EVENT_JOB_FAILED: {
		const char *p[] = { job_s, ev->type == RV_EVENT_JOB_FINISHED ? "finished" : "failed" };
		rc = rv_db_exec(c,
				"UPDATE jobs SET status = $2, finished_at = now() WHERE id = $1::bigint",
				2, p, NULL, err);
		if (rc >= 0)
			rc = job_end_settle(c, job_s, p[1], err);
		break;
	}
	case RV_EVENT_PLAN_APPLIED: {
		/* a plan applied in part is applied: what the master left undone
		 * is kept beside it */
		const char *p[] = { job_s, plan_s, ts_s, ev->not_applied };
		rc = rv_db_exec(
			c,
			"UPDATE scale_plans SET applied_at = now(), applied_ts_ms = $3::bigint,"
			" not_applied = $4"
			" WHERE job_id = $1::bigint AND id = $2::bigint AND applied_at IS NULL",
			4, p, NULL, err);
		if (rc == 0) {
			RV_CLEANUP_PGRESULT PGresult *r = NULL;
			const char *q[] = { job_s, plan_s };
			rc = rv_db_exec(c, "SELECT 1 FROM scale_plans WHERE job_id = $1::bigint AND id = $2::bigint",
					2, q, &r, err);
			if (rc == 0)
				rc = rv_err_set(err, -ENOENT, "plan_id", "job has no plan %" PRId64,
						ev->plan_id);
		}
		break;
	}
	}
	return rc < 0 ? rc : 0;
}

int store_event_set_result_plan(PGconn *c, int64_t event_id, int64_t plan_id, struct rv_err *err)
{
	char ev_s[24], plan_s[24];
	i64s(ev_s, sizeof(ev_s), event_id);
	i64s(plan_s, sizeof(plan_s), plan_id);
	const char *p[] = { ev_s, plan_s };
	int rc = rv_db_exec(c,
			    "UPDATE events SET result_plan_id = $2::bigint WHERE id = $1::bigint",
			    2, p, NULL, err);
	return rc < 0 ? rc : 0;
}

/* ---- plans ---- */

int store_plan_insert(PGconn *c, int64_t job_id, struct rv_scale_plan *plan, int64_t reverts,
		      struct rv_err *err)
{
	cJSON *doc = rv_scale_plan_to_json(plan);
	RV_CLEANUP_FREE char *json = doc ? rv_json_print(doc) : NULL;
	cJSON_Delete(doc);
	if (!json)
		return rv_err_set(err, -ENOMEM, "", "out of memory");
	char job_s[24], pred_s[40], ts_s[24], rev_s[24];
	i64s(job_s, sizeof(job_s), job_id);
	snprintf(pred_s, sizeof(pred_s), "%.15g", plan->predicted_speed);
	i64s(ts_s, sizeof(ts_s), plan->based_on_ts_ms);
	i64s(rev_s, sizeof(rev_s), reverts);
	const char *p[] = { job_s, plan->stage, plan->algorithm, plan->reason, json, pred_s, ts_s,
			    reverts > 0 ? rev_s : NULL };
	RV_CLEANUP_PGRESULT PGresult *r = NULL;
	int rc = rv_db_exec(c,
			    "INSERT INTO scale_plans (job_id, stage, algorithm, reason, plan,"
			    " predicted_speed, based_on_ts_ms, reverts_plan_id)"
			    " VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7, $8) RETURNING id",
			    8, p, &r, err);
	if (rc < 0)
		return rc;
	plan->id = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
	return 0;
}

#define PLAN_JSON                                                                                  \
	"(p.plan || jsonb_build_object('id', p.id, 'job', j.uid, 'created_at', p.created_at,"      \
	" 'applied_at', p.applied_at, 'outcome', p.outcome, 'speed_before', p.speed_before,"       \
	" 'speed_after', p.speed_after, 'reverts_plan_id', p.reverts_plan_id,"                     \
	" 'not_applied', p.not_applied))"

int store_plan_latest_json(PGconn *c, int64_t job_id, const char *stage, int64_t after,
			   cJSON **out, struct rv_err *err)
{
	char job_s[24], after_s[24];
	i64s(job_s, sizeof(job_s), job_id);
	i64s(after_s, sizeof(after_s), after);
	const char *p[] = { job_s, stage ? stage : "", after_s };
	int rc = query_json(c,
			    "SELECT " PLAN_JSON "::text FROM scale_plans p JOIN jobs j ON j.id = p.job_id"
			    " WHERE p.job_id = $1::bigint AND ($2 = '' OR p.stage = $2)"
			    " AND p.id > $3::bigint ORDER BY p.id DESC LIMIT 1",
			    3, p, out, err);
	return rc < 0 ? rc : 0;
}

int store_plan_latest_text(PGconn *c, const char *uid, const char *stage, int64_t after,
			   char **text, int64_t *job_id, struct rv_err *err)
{
	if (uid_check(uid, err) < 0)
		return -EINVAL;
	char after_s[24];
	i64s(after_s, sizeof(after_s), after);
	const char *p[] = { uid, stage ? stage : "", after_s };
	PGresult *r = NULL;
	*text = NULL;
	/* One round trip: the job (404 when unknown) and its plan, built as
	 * JSON text by PostgreSQL and passed through as it is.  A running
	 * plan older than the job's newest oom plan was made from the
	 * configuration the OOM ended (the event waits for a pass in progress,
	 * so such a plan is always numbered before it): applied after the oom
	 * plan it would undo its memory, so it is not served; the next pass
	 * plans from the oom plan's configuration. */
	int rc = rv_db_exec(
		c,
		"SELECT j.id, x.doc::text FROM jobs j LEFT JOIN LATERAL (SELECT " PLAN_JSON
		" AS doc FROM scale_plans p WHERE p.job_id = j.id AND ($2 = '' OR p.stage = $2)"
		" AND p.id > $3::bigint AND ($2 <> 'running' OR p.id > COALESCE((SELECT max(o.id)"
		" FROM scale_plans o WHERE o.job_id = j.id AND o.stage = 'oom'), 0))"
		" ORDER BY p.id DESC LIMIT 1) x ON true WHERE j.uid = $1",
		3, p, &r, err);
	if (rc == 0)
		rc = rv_err_set(err, -ENOENT, "uid", "no job with uid \"%s\"", uid);
	if (rc > 0) {
		*job_id = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
		if (!PQgetisnull(r, 0, 1) && !(*text = strdup(PQgetvalue(r, 0, 1))))
			rc = rv_err_set(err, -ENOMEM, "", "out of memory");
	}
	if (r)
		PQclear(r);
	return rc < 0 ? rc : 0;
}

int store_plan_history_json(PGconn *c, int64_t job_id, int limit, cJSON **out,
			    struct rv_err *err)
{
	char job_s[24], lim[16];
	i64s(job_s, sizeof(job_s), job_id);
	snprintf(lim, sizeof(lim), "%d", limit);
	const char *p[] = { job_s, lim };
	int rc = query_json(c,
			    "SELECT json_build_object('plans', COALESCE(json_agg(x.doc ORDER BY x.id),"
			    " '[]'::json))::text FROM (SELECT p.id, " PLAN_JSON " AS doc"
			    " FROM scale_plans p JOIN jobs j ON j.id = p.job_id WHERE p.job_id = $1::bigint"
			    " ORDER BY p.id DESC LIMIT $2::int) x",
			    2, p, out, err);
	return rc < 0 ? rc : 0;
}

/* ---- events ---- */

int store_events_json(PGconn *c, int64_t job_id, int limit, cJSON **out, struct rv_err *err)
{
	char job_s[24], lim[16];
	i64s(job_s, sizeof(job_s), job_id);
	snprintf(lim, sizeof(lim), "%d", limit);
	const char *p[] = { job_s, lim };
	int rc = query_json(
		c,
		"SELECT json_build_object('events', COALESCE(json_agg(json_build_object('id', e.id,"
		" 'type', e.type, 'ts', e.ts_ms, 'node', e.node, 'role', e.role, 'rank', e.rank,"
		" 'exit_code', e.exit_code, 'reason', e.reason, 'memory_mb', e.memory_mb,"
		" 'peak_memory_mb', e.peak_memory_mb, 'plan_id', e.plan_id,"
		" 'result_plan_id', e.result_plan_id, 'created_at', e.created_at) ORDER BY e.id),"
		" '[]'::json))::text FROM (SELECT * FROM events WHERE job_id = $1::bigint"
		" ORDER BY id DESC LIMIT $2::int) e",
		2, p, out, err);
	return rc < 0 ? rc : 0;
}

/* ---- data progress ---- */

int store_progress_json(PGconn *c, int64_t job_id, int64_t since_ms, int limit, cJSON **out,
			struct rv_err *err)
{
	*out = NULL;
	char job_s[24], since_s[24], lim[16];
	i64s(job_s, sizeof(job_s), job_id);
	i64s(since_s, sizeof(since_s), since_ms);
	snprintf(lim, sizeof(lim), "%d", limit + 1); /* one more: is there a next page? */
	const char *p[] = { job_s, since_s, lim };
	RV_CLEANUP_PGRESULT PGresult *r = NULL;
	int rc = rv_db_exec(c,
			    "SELECT dataset, ts_ms, epoch, samples_done, shards_done, shards_doing"
			    " FROM job_progress_history WHERE job_id = $1::bigint"
			    " AND ts_ms > $2::bigint ORDER BY ts_ms, dataset LIMIT $3::int",
			    3, p, &r, err);
	if (rc < 0)
		return rc;
	int n = PQntuples(r);
	bool more = n > limit;
	if (more) {
		/* The page ends between two report times, never inside one: the
		 * next page starts after the last time it holds (since_ms is
		 * exclusive), so a report cut off here would never be served.
		 * A single time with more datasets than limit is served cut. */
		n = limit;
		const char *next = PQgetvalue(r, limit, 1);
		int k = n;
		while (k > 0 && !strcmp(PQgetvalue(r, k - 1, 1), next))
			k--;
		if (k > 0)
			n = k;
	}
	cJSON *doc = cJSON_CreateObject();
	cJSON *arr = cJSON_AddArrayToObject(doc, "progress");
	if (!doc || !arr) {
		cJSON_Delete(doc);
		return rv_err_set(err, -ENOMEM, "", "could not build the progress: out of memory");
	}
	for (int i = 0; i < n; i++) {
		cJSON *e = cJSON_CreateObject();
		if (!e) {
			cJSON_Delete(doc);
			return rv_err_set(err, -ENOMEM, "",
					  "could not build the progress: out of memory");
		}
		cJSON_AddItemToArray(arr, e);
		cJSON_AddStringToObject(e, "dataset", PQgetvalue(r, i, 0));
		cJSON_AddNumberToObject(e, "ts", (double)strtoll(PQgetvalue(r, i, 1), NULL, 10));
		cJSON_AddNumberToObject(e, "epoch", (double)strtoll(PQgetvalue(r, i, 2), NULL, 10));
		for (int k = 3; k < 6; k++)
			cJSON_AddNumberToObject(e, PQfname(r, k),
						(double)strtoll(PQgetvalue(r, i, k), NULL, 10));
	}
	cJSON_AddBoolToObject(doc, "more", more);
	if (more)
		cJSON_AddNumberToObject(doc, "next_since_ms",
					(double)strtoll(PQgetvalue(r, n - 1, 1), NULL, 10));
	else
		cJSON_AddNullToObject(doc, "next_since_ms");
	*out = doc;
	return 0;
}

/* ---- cluster ---- */

/* How many of the report's names are not stored yet (ids: its name array). */
static int cluster_new_names(PGconn *c, const char *names, int64_t *n, struct rv_err *err)
{
	const char *p[] = { names };
	RV_CLEANUP_PGRESULT PGresult *r = NULL;
	int rc = rv_db_exec(
		c,
		"SELECT count(DISTINCT u.name) FROM unnest($1::text[]) AS u(name)"
		" WHERE NOT EXISTS (SELECT 1 FROM cluster_nodes c WHERE c.name = u.name)",
		1, p, &r, err);
	if (rc < 0)
		return rc;
	*n = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
	return 0;
}

/* Claim report_id: 0 new, 1 already stored (a resend), negative errno. */
static int claim_report_id(PGconn *c, const struct rv_cluster_report *r, struct rv_err *err)
{
	char n_s[16];
	snprintf(n_s, sizeof(n_s), "%d", r->n);
	const char *p[] = { r->report_id, n_s };
	int rc = rv_db_exec(c,
			    "INSERT INTO cluster_reports (report_id, nodes) VALUES ($1, $2::int)"
			    " ON CONFLICT DO NOTHING",
			    2, p, NULL, err);
	if (rc < 0)
		return rc;
	return rc == 0 ? 1 : 0;
}

static void pg_array_opt(struct rv_buf *b, const char *sep, double v)
{
	if (v < 0)
		rv_buf_printf(b, "%sNULL", sep);
	else
		rv_buf_printf(b, "%s%.15g", sep, v);
}

#define CLUSTER_COLS 14

int store_cluster_upsert(PGconn *c, const struct rv_cluster_report *r, int64_t max_nodes,
			 struct rv_err *err)
{
	int rc, dup = 0;
	struct rv_buf col[CLUSTER_COLS];
	for (int k = 0; k < CLUSTER_COLS; k++)
		rv_buf_init(&col[k]);
	const char *sep = "{";
	rc = 0;
	for (int i = 0; i < r->n && rc == 0; i++) {
		const struct rv_cluster_node *n = &r->nodes[i];
		rv_buf_puts(&col[0], sep);
		rv_buf_pg_array_str(&col[0], n->name);
		rv_buf_printf(&col[1], "%s%" PRId64, sep, n->ts_ms);
		rv_buf_printf(&col[2], "%s%.15g", sep, n->cpu);
		rv_buf_printf(&col[3], "%s%" PRId64, sep, n->memory_mb);
		rv_buf_printf(&col[4], "%s%d", sep, n->gpu);
		rv_buf_printf(&col[5], "%s%.15g", sep, n->cpu_used);
		rv_buf_printf(&col[6], "%s%" PRId64, sep, n->memory_used_mb);
		rv_buf_printf(&col[7], "%s%s", sep, n->ready ? "t" : "f");
		pg_array_opt(&col[8], sep, n->cpu_pressure);
		pg_array_opt(&col[9], sep, n->memory_pressure);
		pg_array_opt(&col[10], sep, n->io_pressure);
		pg_array_opt(&col[11], sep, (double)n->gpu_memory_used_mb);
		pg_array_opt(&col[12], sep, n->gpu_util_pct);
		RV_CLEANUP_CJSON cJSON *jobs = rv_cluster_jobs_to_json(n);
		RV_CLEANUP_FREE char *jt = jobs ? cJSON_PrintUnformatted(jobs) : NULL;
		if (!jt)
			rc = rv_err_set(err, -ENOMEM, "", "out of memory");
		rv_buf_puts(&col[13], sep);
		rv_buf_pg_array_str(&col[13], jt ? jt : "[]");
		sep = ",";
	}
	for (int k = 0; k < CLUSTER_COLS; k++) {
		rv_buf_puts(&col[k], "}");
		if (rv_buf_failed(&col[k]))
			rc = rv_err_set(err, -ENOMEM, "", "out of memory");
	}
	RV_CLEANUP_PGRESULT PGresult *tot = NULL;
	bool began = false;
	if (rc == 0) {
		rc = rv_db_begin(c, err);
		began = rc == 0;
	}
	/* A resent report_id: nothing more is written (the reply says
	 * "duplicate"). */
	if (rc == 0 && r->report_id[0] && (rc = claim_report_id(c, r, err)) == 1) {
		dup = 1;
		rc = 0;
	}
	/* The totals row first, locked: reports (and the expiry, which takes
	 * it first too) are serialised, so the node limit holds and two
	 * writers never wait on each other's rows in opposite order. */
	if (rc == 0 && !dup)
		rc = rv_db_exec(c, "SELECT nodes FROM cluster_totals FOR UPDATE", 0, NULL, &tot,
				err);
	if (rc >= 0 && !dup) {
		int64_t have = rc > 0 ? strtoll(PQgetvalue(tot, 0, 0), NULL, 10) : 0, add = 0;
		rc = cluster_new_names(c, col[0].data, &add, err);
		if (rc == 0 && have + add > max_nodes)
			rc = rv_err_set(err, -EDQUOT, "nodes",
					"the cluster has %" PRId64
					" nodes and this report adds %" PRId64
					": more than cluster.max_nodes (%" PRId64 ")",
					have, add, max_nodes);
	}
	const char *p[CLUSTER_COLS];
	for (int k = 0; k < CLUSTER_COLS; k++)
		p[k] = col[k].data;
#define CLUSTER_UNNEST                                                                             \
	" FROM unnest($1::text[], $2::bigint[], $3::float8[], $4::bigint[], $5::int[],"            \
	" $6::float8[], $7::bigint[], $8::bool[], $9::float8[], $10::float8[], $11::float8[],"     \
	" $12::bigint[], $13::float8[], $14::jsonb[]) AS u(name, ts_ms, cpu, memory_mb, gpu,"      \
	" cpu_used, memory_used_mb, ready, cpu_pressure, memory_pressure, io_pressure,"            \
	" gpu_memory_used_mb, gpu_util_pct, jobs)"
	/* Every sample into the history, once per (node, ts): a resend without
	 * a report_id adds nothing either. */
	if (rc >= 0 && !dup)
		rc = rv_db_exec(
			c,
			"INSERT INTO cluster_node_samples (name, ts_ms, cpu, memory_mb, gpu,"
			" cpu_used, memory_used_mb, ready, cpu_pressure, memory_pressure,"
			" io_pressure, gpu_memory_used_mb, gpu_util_pct, jobs)"
			" SELECT *" CLUSTER_UNNEST " ON CONFLICT DO NOTHING",
			CLUSTER_COLS, p, NULL, err);
	/* The newest sample per node for capacity; a report may name a node
	 * twice (a monitor catching up), the newest wins. */
	if (rc >= 0 && !dup)
		rc = rv_db_exec(
			c,
			"INSERT INTO cluster_nodes AS c (name, ts_ms, cpu, memory_mb, gpu, "
			"cpu_used,"
			" memory_used_mb, ready, cpu_pressure, memory_pressure, io_pressure,"
			" gpu_memory_used_mb, gpu_util_pct, jobs)"
			" SELECT DISTINCT ON (name) *" CLUSTER_UNNEST " ORDER BY name, ts_ms DESC"
			" ON CONFLICT (name) DO UPDATE SET ts_ms = EXCLUDED.ts_ms, cpu = "
			"EXCLUDED.cpu,"
			" memory_mb = EXCLUDED.memory_mb, gpu = EXCLUDED.gpu,"
			" cpu_used = EXCLUDED.cpu_used, memory_used_mb = EXCLUDED.memory_used_mb,"
			" ready = EXCLUDED.ready, cpu_pressure = EXCLUDED.cpu_pressure,"
			" memory_pressure = EXCLUDED.memory_pressure, io_pressure = "
			"EXCLUDED.io_pressure,"
			" gpu_memory_used_mb = EXCLUDED.gpu_memory_used_mb,"
			" gpu_util_pct = EXCLUDED.gpu_util_pct, jobs = EXCLUDED.jobs,"
			" updated_at = now()"
			" WHERE c.ts_ms <= EXCLUDED.ts_ms",
			CLUSTER_COLS, p, NULL, err);
#undef CLUSTER_UNNEST
	if (began && rc >= 0)
		rc = rv_db_commit(c, err);
	else if (began)
		rv_db_rollback(c);
	for (int k = 0; k < CLUSTER_COLS; k++)
		rv_buf_release(&col[k]);
	return rc < 0 ? rc : dup;
}

/* A node is stale when its monitor has not spoken for
 * STORE_CLUSTER_FRESH_S (shown in the listing); it still counts in the
 * totals until the expiry (cluster.node_ttl_s) deletes it. */
#define FRESH "(ready AND updated_at > now() - interval '" STORE_CLUSTER_FRESH_S " seconds')"

int store_cluster_expire(PGconn *c, int ttl_s, struct rv_err *err)
{
	char ttl[16], lim[16];
	snprintf(ttl, sizeof(ttl), "%d", ttl_s);
	snprintf(lim, sizeof(lim), "%d", STORE_EXPIRE_BATCH);
	const char *p[] = { ttl, lim };
	int rc = rv_db_begin(c, err);
	if (rc == 0)
		rc = rv_db_exec(c, "SELECT 1 FROM cluster_totals FOR UPDATE", 0, NULL, NULL, err);
	int n = 0;
	if (rc >= 0)
		rc = n =
			rv_db_exec(c,
				   "DELETE FROM cluster_nodes WHERE name IN (SELECT name FROM"
				   " cluster_nodes WHERE updated_at < now() - make_interval(secs =>"
				   " $1::int) ORDER BY updated_at LIMIT $2::int)",
				   2, p, NULL, err);
	if (rc >= 0)
		rc = rv_db_commit(c, err);
	else
		rv_db_rollback(c);
	return rc < 0 ? rc : n;
}

/* One retention delete, repeated while it fills its batch (at most 100
 * times a call: the next tick goes on).  The rows deleted or a negative
 * errno. */
static int64_t retention_delete(PGconn *c, const char *sql, const char *cutoff, struct rv_err *err)
{
	char lim[16];
	snprintf(lim, sizeof(lim), "%d", STORE_EXPIRE_BATCH);
	const char *p[] = { cutoff, lim };
	int64_t total = 0;
	for (int i = 0; i < 100; i++) {
		int rc = rv_db_exec(c, sql, 2, p, NULL, err);
		if (rc < 0)
			return rc;
		total += rc;
		if (rc < STORE_EXPIRE_BATCH)
			break;
	}
	return total;
}

int store_retention(PGconn *c, int64_t now_ms, int64_t samples_s, int64_t report_ids_s,
		    int64_t batch_ids_s, struct rv_err *err)
{
	char ts[24], rep[24], bat[24];
	i64s(ts, sizeof(ts), now_ms - samples_s * 1000);
	i64s(rep, sizeof(rep), report_ids_s);
	i64s(bat, sizeof(bat), batch_ids_s);
	int64_t a = retention_delete(c,
				     "DELETE FROM cluster_node_samples WHERE ctid IN (SELECT ctid"
				     " FROM cluster_node_samples WHERE ts_ms < $1::bigint"
				     " LIMIT $2::int)",
				     ts, err);
	if (a < 0)
		return (int)a;
	int64_t b = retention_delete(c,
				     "DELETE FROM cluster_reports WHERE ctid IN (SELECT ctid FROM"
				     " cluster_reports WHERE created_at < now() - make_interval("
				     "secs => $1::float8) LIMIT $2::int)",
				     rep, err);
	if (b < 0)
		return (int)b;
	int64_t d = retention_delete(c,
				     "DELETE FROM metrics_batches WHERE ctid IN (SELECT ctid FROM"
				     " metrics_batches WHERE created_at < now() - make_interval("
				     "secs => $1::float8) LIMIT $2::int)",
				     bat, err);
	if (d < 0)
		return (int)d;
	int64_t n = a + b + d;
	return n > INT32_MAX ? INT32_MAX : (int)n;
}

int store_cluster_json(PGconn *c, const char *cursor, int limit, cJSON **out, struct rv_err *err)
{
	char lim[16];
	snprintf(lim, sizeof(lim), "%d", limit);
	const char *p[] = { cursor, lim };
	/* One page plus one row: the extra row only says whether more follow. */
	int rc = query_json(
		c,
		"WITH page AS (SELECT n.*, row_number() OVER (ORDER BY name) AS rn FROM"
		" (SELECT * FROM cluster_nodes WHERE name > $1 ORDER BY name LIMIT $2::int + 1) n)"
		" SELECT json_build_object("
		" 'nodes', COALESCE((SELECT json_agg(json_build_object('name', name, 'ts', ts_ms,"
		"   'cpu', cpu, 'memory_mb', memory_mb, 'gpu', gpu, 'cpu_used', cpu_used,"
		"   'memory_used_mb', memory_used_mb, 'ready', ready, 'updated_at', updated_at,"
		"   'stale', NOT " FRESH " AND ready, 'cpu_pressure', cpu_pressure,"
		"   'memory_pressure', memory_pressure, 'io_pressure', io_pressure,"
		"   'gpu_memory_used_mb', gpu_memory_used_mb, 'gpu_util_pct', gpu_util_pct,"
		"   'jobs', jobs)"
		"   ORDER BY name) FROM page WHERE rn <= $2::int), '[]'::json),"
		" 'next_cursor', (SELECT name FROM page WHERE rn = $2::int"
		"   AND EXISTS (SELECT 1 FROM page WHERE rn = $2::int + 1)),"
		" 'total_nodes', t.nodes,"
		" 'capacity', json_build_object('nodes', t.ready_nodes, 'cpu', t.cpu::float8,"
		"   'memory_mb', t.memory_mb::bigint, 'gpu', t.gpu::bigint),"
		" 'used', json_build_object('cpu', t.cpu_used::float8,"
		"   'memory_mb', t.memory_used_mb::bigint),"
		" 'free', json_build_object('cpu', t.free_cpu::float8,"
		"   'memory_mb', t.free_memory_mb::bigint))::text FROM cluster_totals t",
		2, p, out, err);
	return rc < 0 ? rc : 0;
}

int store_cluster_free(PGconn *c, double *cpu, int64_t *memory_mb, struct rv_err *err)
{
	RV_CLEANUP_PGRESULT PGresult *r = NULL;
	/* No ready node: capacity unknown (-1, anything fits).  A node whose
	 * monitor went silent counts until the expiry deletes it. */
	int rc = rv_db_exec(c,
			    "SELECT ready_nodes, free_cpu::float8, free_memory_mb::bigint"
			    " FROM cluster_totals",
			    0, NULL, &r, err);
	if (rc < 0)
		return rc;
	if (rc == 0 || strtoll(PQgetvalue(r, 0, 0), NULL, 10) == 0) {
		*cpu = -1;
		*memory_mb = -1;
		return 0;
	}
	*cpu = strtod(PQgetvalue(r, 0, 1), NULL);
	*memory_mb = strtoll(PQgetvalue(r, 0, 2), NULL, 10);
	return 0;
}

int store_cluster_largest(PGconn *c, double *cpu, int64_t *memory_mb, struct rv_err *err)
{
	RV_CLEANUP_PGRESULT PGresult *r = NULL;
	int rc = rv_db_exec(c,
			    "SELECT count(*), COALESCE(max(cpu), 0), COALESCE(max(memory_mb), 0)"
			    " FROM cluster_nodes WHERE ready",
			    0, NULL, &r, err);
	if (rc < 0)
		return rc;
	if (strtoll(PQgetvalue(r, 0, 0), NULL, 10) == 0) {
		*cpu = -1;
		*memory_mb = -1;
		return 0;
	}
	*cpu = strtod(PQgetvalue(r, 0, 1), NULL);
	*memory_mb = strtoll(PQgetvalue(r, 0, 2), NULL, 10);
	return 0;
}
#undef FRESH

int64_t store_spec_nodes(const struct rv_job_spec *spec)
{
	int64_t n = 0;
	for (int i = 0; i < RV_ROLE_COUNT; i++) {
		const struct rv_replica_spec *r = &spec->replicas[i];
		if (r->present)
			n += r->max_replicas > r->replicas ? r->max_replicas : r->replicas;
	}
	return n;
}

int store_quota_check(PGconn *c, const char *namespace_, int64_t nodes, int64_t max_jobs,
		      int64_t max_nodes, struct rv_err *err)
{
	const char *p[] = { namespace_ };
	/* Two registrations in one namespace must not both pass on the same
	 * count: a transaction-level lock per namespace (released at commit). */
	int rc = rv_db_exec(c,
			    "SELECT pg_advisory_xact_lock(hashtextextended('rover-ns:' || $1, 0))",
			    1, p, NULL, err);
	if (rc < 0)
		return rc;
	RV_CLEANUP_PGRESULT PGresult *r = NULL;
	rc = rv_db_exec(c,
			"SELECT count(*), COALESCE(sum(max_nodes), 0) FROM jobs"
			" WHERE namespace = $1 AND status = 'running'",
			1, p, &r, err);
	if (rc < 0)
		return rc;
	int64_t jobs = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
	int64_t used = strtoll(PQgetvalue(r, 0, 1), NULL, 10);
	if (jobs + 1 > max_jobs)
		return rv_err_set(err, -EDQUOT, "metadata.namespace",
				  "namespace \"%s\" has %" PRId64 " running jobs: "
				  "quota.jobs_per_namespace is %" PRId64,
				  namespace_, jobs, max_jobs);
	if (used + nodes > max_nodes)
		return rv_err_set(err, -EDQUOT, "spec.replicaSpecs",
				  "namespace \"%s\" runs jobs of up to %" PRId64
				  " nodes and this one "
				  "adds %" PRId64 ": quota.nodes_per_namespace is %" PRId64,
				  namespace_, used, nodes, max_nodes);
	return 0;
}

int store_ping(PGconn *c, struct rv_err *err)
{
	int rc = rv_db_exec(c, "SELECT 1", 0, NULL, NULL, err);
	return rc < 0 ? rc : 0;
}

/* ---- planner inputs ---- */

int store_job_spec(PGconn *c, int64_t job_id, struct rv_job_spec *spec, struct rv_err *err)
{
	char job_s[24];
	i64s(job_s, sizeof(job_s), job_id);
	const char *p[] = { job_s };
	cJSON *doc = NULL;
	int rc = query_json(c, "SELECT spec::text FROM jobs WHERE id = $1::bigint", 1, p, &doc, err);
	if (rc <= 0)
		return rc < 0 ? rc : rv_err_set(err, -ENOENT, "", "no job %" PRId64, job_id);
	memset(spec, 0, sizeof(*spec));
	rc = rv_job_spec_from_json(doc, spec, err);
	cJSON_Delete(doc);
	return rc;
}

static int plan_from_row(PGresult *r, int row, struct rv_scale_plan *plan, struct rv_err *err)
{
	const char *txt = PQgetvalue(r, row, 1);
	cJSON *doc = rv_json_parse(txt, strlen(txt), err);
	if (!doc)
		return -EIO;
	int rc = rv_scale_plan_from_json(doc, plan, err);
	cJSON_Delete(doc);
	plan->id = strtoll(PQgetvalue(r, row, 0), NULL, 10);
	return rc;
}

#define PLAN_ROW_COLS                                                                      \
	"p.id, p.plan::text, p.stage, p.algorithm, COALESCE(p.applied_ts_ms, 0), p.outcome," \
	" p.predicted_speed, COALESCE(p.reverts_plan_id, 0)"

static int stage_parse(const char *s)
{
	if (!strcmp(s, "create"))
		return RV_ALG_STAGE_CREATE;
	if (!strcmp(s, "running"))
		return RV_ALG_STAGE_RUNNING;
	if (!strcmp(s, "oom"))
		return RV_ALG_STAGE_OOM;
	return -EINVAL;
}

/* A row of PLAN_ROW_COLS; a plan or column that does not parse is an
 * error (the planner must not decide on half a history). */
static int fill_plan_row(PGresult *r, int row, struct store_plan_row *out, struct rv_err *err)
{
	memset(out, 0, sizeof(*out));
	struct rv_err why = { 0 };
	if (plan_from_row(r, row, &out->plan, &why) < 0)
		return rv_err_set(err, -EIO, "", "could not parse stored plan %s: %s",
				  PQgetvalue(r, row, 0), why.msg);
	int stage = stage_parse(PQgetvalue(r, row, 2));
	int outcome = rv_alg_outcome_parse(PQgetvalue(r, row, 5));
	if (stage < 0 || outcome < 0)
		return rv_err_set(err, -EIO, "", "plan %s has a bad stage \"%s\" or outcome \"%s\"",
				  PQgetvalue(r, row, 0), PQgetvalue(r, row, 2),
				  PQgetvalue(r, row, 5));
	out->stage = (enum rv_alg_stage)stage;
	snprintf(out->algorithm, sizeof(out->algorithm), "%s", PQgetvalue(r, row, 3));
	out->applied_ts_ms = strtoll(PQgetvalue(r, row, 4), NULL, 10);
	out->outcome = (enum rv_alg_outcome)outcome;
	out->predicted_speed = strtod(PQgetvalue(r, row, 6), NULL);
	out->reverts = strtoll(PQgetvalue(r, row, 7), NULL, 10);
	return 0;
}

int store_plans_applied(PGconn *c, int64_t job_id, struct store_plan_row *rows, int max,
			struct rv_err *err)
{
	char job_s[24], lim[16];
	i64s(job_s, sizeof(job_s), job_id);
	snprintf(lim, sizeof(lim), "%d", max);
	const char *p[] = { job_s, lim };
	RV_CLEANUP_PGRESULT PGresult *r = NULL;
	/* Newest first; the create plan counts as applied at registration. */
	int rc = rv_db_exec(c,
			    "SELECT " PLAN_ROW_COLS
			    " FROM scale_plans p WHERE p.job_id = $1::bigint"
			    " AND (p.applied_at IS NOT NULL OR p.stage = 'create')"
			    " ORDER BY (p.applied_at IS NOT NULL) DESC, p.applied_ts_ms DESC NULLS "
			    "LAST, p.id DESC"
			    " LIMIT $2::int",
			    2, p, &r, err);
	for (int i = 0; i < rc; i++) {
		int frc = fill_plan_row(r, i, &rows[i], err);
		if (frc < 0)
			return frc;
	}
	return rc;
}

int store_plan_latest_row(PGconn *c, int64_t job_id, const char *stage,
			  struct store_plan_row *out, struct rv_err *err)
{
	char job_s[24];
	i64s(job_s, sizeof(job_s), job_id);
	const char *p[] = { job_s, stage ? stage : "" };
	RV_CLEANUP_PGRESULT PGresult *r = NULL;
	int rc = rv_db_exec(c,
			    "SELECT " PLAN_ROW_COLS
			    " FROM scale_plans p WHERE p.job_id = $1::bigint"
			    " AND (p.stage = $2 OR ($2 = '' AND p.stage IN ('running', 'oom')))"
			    " ORDER BY p.id DESC LIMIT 1",
			    2, p, &r, err);
	if (rc <= 0)
		return rc;
	rc = fill_plan_row(r, 0, out, err);
	return rc < 0 ? rc : 1;
}

int store_speed_obs(PGconn *c, int64_t job_id, int limit, struct rv_alg_speed_obs **out,
		    size_t *n, struct rv_err *err)
{
	char job_s[24], lim[16];
	i64s(job_s, sizeof(job_s), job_id);
	snprintf(lim, sizeof(lim), "%d", limit);
	const char *p[] = { job_s, lim };
	PGresult *r = NULL;
	int rc = rv_db_exec(c,
			    "SELECT workers, ps, speed, ts_ms FROM job_speed WHERE job_id = $1::bigint"
			    " ORDER BY ts_ms DESC LIMIT $2::int",
			    2, p, &r, err);
	*out = NULL;
	*n = 0;
	if (rc > 0) {
		*out = calloc((size_t)rc, sizeof(**out));
		if (!*out) {
			PQclear(r);
			return rv_err_set(err, -ENOMEM, "", "out of memory");
		}
		for (int i = 0; i < rc; i++) {
			struct rv_alg_speed_obs *o = &(*out)[rc - 1 - i]; /* oldest first */
			o->workers = store_pg_int(PQgetvalue(r, i, 0));
			o->ps = store_pg_int(PQgetvalue(r, i, 1));
			o->speed = strtod(PQgetvalue(r, i, 2), NULL);
			o->t_ms = strtoll(PQgetvalue(r, i, 3), NULL, 10);
		}
		*n = (size_t)rc;
	}
	if (r)
		PQclear(r);
	return rc < 0 ? rc : 0;
}

int store_usage(PGconn *c, int64_t job_id, int64_t since_ts, int limit,
		struct rv_alg_usage **usage, size_t *nusage, struct rv_alg_step **steps,
		size_t *nsteps, struct rv_err *err)
{
	char job_s[24], since_s[24], lim[16];
	i64s(job_s, sizeof(job_s), job_id);
	i64s(since_s, sizeof(since_s), since_ts);
	snprintf(lim, sizeof(lim), "%d", limit);
	const char *p[] = { job_s, since_s, lim };
	PGresult *r = NULL;
	int rc = rv_db_exec(
		c,
		"SELECT role, rank, ts_ms, cpu, memory_mb, step_time,"
		" dense_rank() OVER (PARTITION BY role ORDER BY node) - 1,"
		/* The change of the node's CPU counters since its previous
			     * sample (NULL without counters on both); the share
			     * and the cores held back follow from it
			     * (rv_alg_usage_throttling, which drops a counter
			     * reset: a relaunched node). */
		" nr_periods - d_periods, nr_throttled - d_throttled,"
		" throttled_usec - d_usec, ts_ms - d_ts, coalesce(compute_time, 0)"
		" FROM (SELECT *, lag(nr_periods) OVER w AS d_periods,"
		"  lag(nr_throttled) OVER w AS d_throttled,"
		"  lag(throttled_usec) OVER w AS d_usec, lag(ts_ms) OVER w AS d_ts"
		"  FROM (SELECT * FROM node_usage WHERE job_id = $1::bigint AND ts_ms >= $2::bigint"
		"   ORDER BY ts_ms DESC LIMIT $3::int) l"
		"  WINDOW w AS (PARTITION BY node ORDER BY ts_ms)) u",
		3, p, &r, err);
	*usage = NULL;
	*steps = NULL;
	*nusage = *nsteps = 0;
	if (rc > 0) {
		*usage = calloc((size_t)rc, sizeof(**usage));
		*steps = calloc((size_t)rc, sizeof(**steps));
		if (!*usage || !*steps) {
			free(*usage);
			free(*steps);
			*usage = NULL;
			*steps = NULL;
			PQclear(r);
			return rv_err_set(err, -ENOMEM, "", "out of memory");
		}
		for (int i = 0; i < rc; i++) {
			struct rv_alg_usage *u = &(*usage)[(*nusage)++];
			bool ps = !strcmp(PQgetvalue(r, i, 0), "ps");
			int rank = store_pg_int(PQgetvalue(r, i, 1));
			u->role = ps ? RV_ALG_PS_ROLE : RV_ALG_WORKER;
			u->node = rank >= 0 ? rank : store_pg_int(PQgetvalue(r, i, 6));
			u->t_ms = strtoll(PQgetvalue(r, i, 2), NULL, 10);
			u->cpu = strtod(PQgetvalue(r, i, 3), NULL);
			u->memory_mb = strtoll(PQgetvalue(r, i, 4), NULL, 10);
			/* counter changes, -1 (unknown) where NULL */
			int64_t d[4];
			for (int k = 0; k < 4; k++)
				d[k] = PQgetisnull(r, i, 7 + k)
					       ? -1
					       : strtoll(PQgetvalue(r, i, 7 + k), NULL, 10);
			rv_alg_usage_throttling(u, d[0], d[1], d[2], d[3]);
			double st = strtod(PQgetvalue(r, i, 5), NULL);
			double ct = strtod(PQgetvalue(r, i, 11), NULL);
			if (!ps && (st >= 0 || ct > 0)) {
				struct rv_alg_step *s = &(*steps)[(*nsteps)++];
				s->node = u->node;
				s->t_ms = u->t_ms;
				s->step_s = st;
				s->compute_s = ct;
			}
		}
	}
	if (r)
		PQclear(r);
	return rc < 0 ? rc : 0;
}

/* Run a query answering one row (count, mean, sample standard deviation). */
static int query_count_mean(PGconn *c, const char *sql, int n, const char *const *p, double *mean,
			    int *count, double *sd, struct rv_err *err)
{
	PGresult *r = NULL;
	int rc = rv_db_exec(c, sql, n, p, &r, err);
	if (rc > 0) {
		*count = store_pg_int(PQgetvalue(r, 0, 0));
		*mean = strtod(PQgetvalue(r, 0, 1), NULL);
		if (sd)
			*sd = strtod(PQgetvalue(r, 0, 2), NULL);
	}
	if (r)
		PQclear(r);
	return rc < 0 ? rc : 0;
}

int store_speed_summary(PGconn *c, int64_t job_id, int64_t from_ts, int64_t to_ts, int workers,
			int ps, double *mean, int *count, double *sd, struct rv_err *err)
{
	char job_s[24], from_s[24], to_s[24], w_s[16], p_s[16];
	i64s(job_s, sizeof(job_s), job_id);
	i64s(from_s, sizeof(from_s), from_ts);
	i64s(to_s, sizeof(to_s), to_ts);
	snprintf(w_s, sizeof(w_s), "%d", workers);
	snprintf(p_s, sizeof(p_s), "%d", ps);
	const char *p[] = { job_s, from_s, to_s, w_s, p_s };
	/* workers/ps < 0 match any configuration. */
	return query_count_mean(c,
				"SELECT count(*), COALESCE(avg(speed), 0), COALESCE(stddev_samp(speed), 0)"
				" FROM job_speed"
				" WHERE job_id = $1::bigint AND ts_ms >= $2::bigint AND ts_ms < $3::bigint"
				" AND ($4::int < 0 OR workers = $4::int) AND ($5::int < 0 OR ps = $5::int)",
				5, p, mean, count, sd, err);
}

int store_speed_before(PGconn *c, int64_t job_id, int64_t since_ts, int64_t before_ts, int last_n,
		       double *mean, int *count, double *sd, struct rv_err *err)
{
	char job_s[24], since_s[24], ts_s[24], n_s[16];
	i64s(job_s, sizeof(job_s), job_id);
	i64s(since_s, sizeof(since_s), since_ts);
	i64s(ts_s, sizeof(ts_s), before_ts);
	snprintf(n_s, sizeof(n_s), "%d", last_n);
	const char *p[] = { job_s, since_s, ts_s, n_s };
	return query_count_mean(c,
				"SELECT count(*), COALESCE(avg(speed), 0), COALESCE(stddev_samp(speed), 0)"
				" FROM (SELECT speed FROM job_speed"
				" WHERE job_id = $1::bigint AND ts_ms >= $2::bigint AND ts_ms < $3::bigint"
				" ORDER BY ts_ms DESC LIMIT $4::int) x",
				4, p, mean, count, sd, err);
}

int store_plan_set_outcome(PGconn *c, int64_t plan_id, const char *outcome, double before,
			   double after, struct rv_err *err)
{
	char id_s[24], b_s[40], a_s[40];
	i64s(id_s, sizeof(id_s), plan_id);
	snprintf(b_s, sizeof(b_s), "%.15g", before);
	snprintf(a_s, sizeof(a_s), "%.15g", after);
	const char *p[] = { id_s, outcome, b_s, a_s };
	int rc = rv_db_exec(c,
			    "UPDATE scale_plans SET outcome = $2, speed_before = $3, speed_after = $4"
			    " WHERE id = $1::bigint",
			    4, p, NULL, err);
	return rc < 0 ? rc : 0;
}

int store_job_set_planned(PGconn *c, int64_t job_id, int64_t ts_ms, struct rv_err *err)
{
	char job_s[24], ts_s[24];
	i64s(job_s, sizeof(job_s), job_id);
	i64s(ts_s, sizeof(ts_s), ts_ms);
	const char *p[] = { job_s, ts_s };
	int rc =
		rv_db_exec(c,
			   "INSERT INTO job_planned AS p (job_id, planned_ts_ms)"
			   " VALUES ($1::bigint, $2::bigint) ON CONFLICT (job_id) DO UPDATE"
			   " SET planned_ts_ms = greatest(p.planned_ts_ms, EXCLUDED.planned_ts_ms)",
			   2, p, NULL, err);
	return rc < 0 ? rc : 0;
}

int store_history(PGconn *c, enum rv_strategy strategy, int limit, struct store_history_row *rows,
		  struct rv_err *err)
{
	char lim[16];
	snprintf(lim, sizeof(lim), "%d", limit);
	const char *p[] = { rv_strategy_name(strategy), lim };
	PGresult *r = NULL;
	/* The configuration each finished job last ran with and did not regret,
	 * and what its nodes used (p80 of CPU, peak memory, per role); a job
	 * that never reported usage says nothing of what a job needs. */
	int rc = rv_db_exec(
		c,
		"SELECT j.uid, j.name, j.user_name, j.model_parameters, j.batch_size,"
		" j.dataset_size, (SELECT p.plan::text FROM scale_plans p WHERE p.job_id = j.id"
		"   AND p.outcome <> 'worse' AND (p.applied_at IS NOT NULL OR p.stage = 'create')"
		"   ORDER BY (p.applied_at IS NOT NULL) DESC, p.id DESC LIMIT 1),"
		" u.w_cpu, u.w_mem, u.p_cpu, u.p_mem"
		" FROM jobs j CROSS JOIN LATERAL (SELECT"
		"   percentile_cont(0.8) WITHIN GROUP (ORDER BY cpu) FILTER (WHERE role <> 'ps')"
		"   AS w_cpu, max(memory_mb) FILTER (WHERE role <> 'ps') AS w_mem,"
		"   percentile_cont(0.8) WITHIN GROUP (ORDER BY cpu) FILTER (WHERE role = 'ps')"
		"   AS p_cpu, max(memory_mb) FILTER (WHERE role = 'ps') AS p_mem"
		"   FROM node_usage WHERE job_id = j.id) u"
		" WHERE j.status = 'finished' AND j.strategy = $1"
		" AND EXISTS (SELECT 1 FROM node_usage n WHERE n.job_id = j.id)"
		" ORDER BY j.finished_at DESC LIMIT $2::int",
		2, p, &r, err);
	int n = 0;
	for (int i = 0; i < rc; i++) {
		if (PQgetisnull(r, i, 6))
			continue;
		struct store_history_row *h = &rows[n];
		memset(h, 0, sizeof(*h));
		const char *txt = PQgetvalue(r, i, 6);
		struct rv_err why = { 0 };
		cJSON *doc = rv_json_parse(txt, strlen(txt), &why);
		int prc = doc ? rv_scale_plan_from_json(doc, &h->plan, &why) : -EIO;
		cJSON_Delete(doc);
		if (prc < 0) {
			rv_err_set(err, -EIO, "", "could not parse the plan of finished job %s: %s",
				   PQgetvalue(r, i, 0), why.msg);
			PQclear(r);
			return -EIO;
		}
		snprintf(h->uid, sizeof(h->uid), "%s", PQgetvalue(r, i, 0));
		snprintf(h->name, sizeof(h->name), "%s", PQgetvalue(r, i, 1));
		snprintf(h->user, sizeof(h->user), "%s", PQgetvalue(r, i, 2));
		h->parameters = strtod(PQgetvalue(r, i, 3), NULL);
		h->batch_size = strtod(PQgetvalue(r, i, 4), NULL);
		h->dataset_size = strtod(PQgetvalue(r, i, 5), NULL);
		h->used_cpu[0] = PQgetisnull(r, i, 7) ? -1 : strtod(PQgetvalue(r, i, 7), NULL);
		h->used_mem_mb[0] = PQgetisnull(r, i, 8) ? -1
							 : strtoll(PQgetvalue(r, i, 8), NULL, 10);
		h->used_cpu[1] = PQgetisnull(r, i, 9) ? -1 : strtod(PQgetvalue(r, i, 9), NULL);
		h->used_mem_mb[1] = PQgetisnull(r, i, 10) ? -1
							  : strtoll(PQgetvalue(r, i, 10), NULL, 10);
		n++;
	}
	if (r)
		PQclear(r);
	return rc < 0 ? rc : n;
}

/* ---- the planner's pass: lock, snapshot, what to revisit ---- */

/* Every brain on one database uses this first key for its per-job planner
 * locks (the second key is the job id). */
#define PLAN_LOCK_CLASS "7411"

/* SELECT fn(PLAN_LOCK_CLASS, job_id): 1 when it answered true, else 0, or
 * negative errno. */
static int plan_lock_call(PGconn *c, const char *fn, int64_t job_id, struct rv_err *err)
{
	char id_s[24], sql[96];
	i64s(id_s, sizeof(id_s), job_id);
	snprintf(sql, sizeof(sql), "SELECT %s(" PLAN_LOCK_CLASS ", $1::int)::text", fn);
	const char *p[] = { id_s };
	RV_CLEANUP_PGRESULT PGresult *r = NULL;
	int rc = rv_db_exec(c, sql, 1, p, &r, err);
	if (rc < 0)
		return rc;
	return rc > 0 && !strcmp(PQgetvalue(r, 0, 0), "true");
}

int store_plan_lock(PGconn *c, int64_t job_id, struct rv_err *err)
{
	return plan_lock_call(c, "pg_try_advisory_lock", job_id, err);
}

int store_plan_unlock(PGconn *c, int64_t job_id, struct rv_err *err)
{
	int rc = plan_lock_call(c, "pg_advisory_unlock", job_id, err);
	return rc < 0 ? rc : 0;
}

int store_plan_lock_xact(PGconn *c, int64_t job_id, struct rv_err *err)
{
	int rc = plan_lock_call(c, "pg_advisory_xact_lock", job_id, err);
	return rc < 0 ? rc : 0;
}

int store_begin_snapshot(PGconn *c, struct rv_err *err)
{
	int rc = rv_db_exec(c, "BEGIN ISOLATION LEVEL REPEATABLE READ", 0, NULL, NULL, err);
	return rc < 0 ? rc : 0;
}

int store_jobs_unplanned(PGconn *c, int64_t *ids, int max, struct rv_err *err)
{
	char lim[16];
	snprintf(lim, sizeof(lim), "%d", max);
	const char *p[] = { lim };
	RV_CLEANUP_PGRESULT PGresult *r = NULL;
	int rc = rv_db_exec(c,
			    "SELECT j.id FROM jobs j LEFT JOIN job_planned p ON p.job_id = j.id"
			    " WHERE j.status = 'running'"
			    " AND j.last_sample_ms > COALESCE(p.planned_ts_ms, 0) ORDER BY j.id"
			    " LIMIT $1::int",
			    1, p, &r, err);
	for (int i = 0; i < rc; i++)
		ids[i] = strtoll(PQgetvalue(r, i, 0), NULL, 10);
	return rc;
}

int store_node_oom_count(PGconn *c, int64_t job_id, const char *node, int *count,
			 struct rv_err *err)
{
	char id_s[24];
	i64s(id_s, sizeof(id_s), job_id);
	const char *p[] = { id_s, node };
	RV_CLEANUP_PGRESULT PGresult *r = NULL;
	int rc = rv_db_exec(c,
			    "SELECT oom_count FROM job_nodes WHERE job_id = $1::bigint"
			    " AND name = $2",
			    2, p, &r, err);
	if (rc < 0)
		return rc;
	*count = rc > 0 ? store_pg_int(PQgetvalue(r, 0, 0)) : 0;
	return 0;
}

int store_outcome_speeds(PGconn *c, int64_t job_id, const struct rv_alg_outcome_window *w,
			 int min_before, struct rv_alg_outcome_speeds *out, struct rv_err *err)
{
	memset(out, 0, sizeof(*out));
	struct rv_alg_speed_summary *a = &out->after, *b = &out->before, *ba = &out->before_all;
	int rc = store_speed_summary(c, job_id, w->after_from_ms, INT64_MAX, w->workers, w->ps,
				     &a->mean, &a->n, &a->sd, err);
	if (rc == 0)
		rc = store_speed_before(c, job_id, w->before_from_ms, w->before_to_ms,
					w->before_last_n, &b->mean, &b->n, &b->sd, err);
	/* the fallback is read only when it can matter */
	if (rc == 0 && b->n < min_before && w->before_all_from_ms >= 0)
		rc = store_speed_before(c, job_id, w->before_all_from_ms, w->before_to_ms,
					w->before_last_n, &ba->mean, &ba->n, &ba->sd, err);
	return rc;
}

/* ---- the status page's series and the dashboards ---- */

/*
 * A series of rows (ts_ms, columns...) thinned to at most $2 points: when
 * there are more rows, rows are grouped into $2 equal spans of time and each
 * span becomes its mean.  Fewer rows come back as they are (rows of one
 * timestamp are one point).
 */
#define SERIES_BUCKET(src)                                                                         \
	"(SELECT CASE WHEN r.n <= $2::int THEN s.ts_ms"                                            \
	" ELSE (s.ts_ms - r.lo) * $2::int / (r.hi - r.lo + 1) END AS k, s.*"                       \
	" FROM " src " s, (SELECT count(*) AS n, min(ts_ms) AS lo, max(ts_ms) AS hi FROM " src     \
	") r)"

/*
 * The job's speed: its samples thinned as SERIES_BUCKET says, and a null
 * point after each gap (no sample for over three report intervals, or two
 * buckets once thinned) so that a plot draws the time the job was down as a
 * gap, not as a line across it.
 */
#define SERIES_SPEED                                                                               \
	"sp AS (SELECT ts_ms, speed, workers FROM job_speed WHERE job_id = $1::bigint),"           \
	" g AS (SELECT round(avg(ts_ms))::bigint AS ts, avg(speed) AS speed,"                      \
	"   max(workers) AS workers FROM " SERIES_BUCKET(                                          \
		"sp") " b GROUP BY k),"                                                            \
		      " sw AS (SELECT COALESCE((SELECT percentile_disc(0.5) WITHIN GROUP (ORDER "  \
		      "BY d)"                                                                      \
		      "   FROM (SELECT ts_ms - lag(ts_ms) OVER (ORDER BY ts_ms) AS d FROM sp) x"   \
		      "   WHERE d > 0), 0) AS step,"                                               \
		      "   CASE WHEN count(*) <= $2::int THEN 0"                                    \
		      "   ELSE (max(ts_ms) - min(ts_ms) + 1) / $2::int END AS width FROM sp),"     \
		      " gs AS (SELECT ts, speed, workers FROM g UNION ALL"                         \
		      "   SELECT x.ts + 1, NULL, NULL FROM (SELECT ts, lead(ts) OVER (ORDER BY "   \
		      "ts) AS nx"                                                                  \
		      "   FROM g) x, sw WHERE x.nx - x.ts > GREATEST(3 * sw.step, 2 * sw.width)),"

/*
 * The nodes' use summed in time, not per timestamp: nodes report at
 * moments of their own, so the rows of one timestamp are most often one
 * node's.  Time is cut into buckets of the nodes' report interval (the
 * median gap between a node's samples), wider when that makes more than $2
 * buckets; a node's value in a bucket is the mean of its samples there,
 * or, in a bucket it has no sample in, its last one up to two report
 * intervals back.  The job's use in a bucket is the sum over its nodes.  A
 * bucket no node counts in is one null point (a gap), however many follow.
 */
#define SERIES_USAGE                                                                               \
	" u AS (SELECT node, ts_ms, cpu, cpu_limit, memory_mb, memory_limit_mb"                    \
	"   FROM node_usage WHERE job_id = $1::bigint),"                                           \
	" uw AS (SELECT lo, hi, step, GREATEST(step, (hi - lo) / $2::int + 1) AS width FROM"       \
	"   (SELECT min(ts_ms) AS lo, max(ts_ms) AS hi, COALESCE((SELECT percentile_disc(0.5)"     \
	"   WITHIN GROUP (ORDER BY d) FROM (SELECT ts_ms - lag(ts_ms) OVER (PARTITION BY node"     \
	"   ORDER BY ts_ms) AS d FROM u) x WHERE d > 0), 1000) AS step FROM u) r"                  \
	"   WHERE lo IS NOT NULL),"                                                                \
	" nb AS (SELECT (u.ts_ms - w.lo) / w.width AS k, u.node, avg(u.ts_ms) AS ts,"              \
	"   avg(u.cpu) AS cpu, avg(u.cpu_limit) AS cpu_limit, avg(u.memory_mb) AS mem,"            \
	"   avg(u.memory_limit_mb) AS mem_limit FROM u, uw w GROUP BY 1, 2),"                      \
	" f AS (SELECT g.k, n.node, nb.k AS own, nb.ts, nb.cpu, nb.cpu_limit, nb.mem,"             \
	"   nb.mem_limit, count(nb.k) OVER (PARTITION BY n.node ORDER BY g.k) AS grp"              \
	"   FROM uw w CROSS JOIN generate_series(0::bigint, (w.hi - w.lo) / w.width) AS g(k)"      \
	"   CROSS JOIN (SELECT DISTINCT node FROM u) n"                                            \
	"   LEFT JOIN nb ON nb.k = g.k AND nb.node = n.node),"                                     \
	" c AS (SELECT k, ts, first_value(cpu) OVER v AS cpu,"                                     \
	"   first_value(cpu_limit) OVER v AS cpu_limit, first_value(mem) OVER v AS mem,"           \
	"   first_value(mem_limit) OVER v AS mem_limit,"                                           \
	"   grp > 0 AND (k - min(own) OVER v) * w.width <= 2 * w.step AS ok"                       \
	"   FROM f, uw w WINDOW v AS (PARTITION BY node, grp ORDER BY k)),"                        \
	" a AS (SELECT c.k, COALESCE(round(avg(c.ts))::bigint,"                                    \
	"   min(w.lo) + c.k * min(w.width) + min(w.width) / 2) AS ts,"                             \
	"   sum(cpu) FILTER (WHERE ok) AS cpu, sum(cpu_limit) FILTER (WHERE ok) AS cpu_limit,"     \
	"   round(sum(mem) FILTER (WHERE ok))::bigint AS memory_mb,"                               \
	"   round(sum(mem_limit) FILTER (WHERE ok))::bigint AS memory_limit_mb,"                   \
	"   count(*) FILTER (WHERE ok) AS nodes FROM c, uw w GROUP BY c.k),"                       \
	" ug AS (SELECT ts, cpu, cpu_limit, memory_mb, memory_limit_mb, NULLIF(nodes, 0) AS nodes" \
	"   FROM (SELECT a.*, lag(nodes) OVER (ORDER BY k) AS before FROM a) x"                    \
	"   WHERE nodes > 0 OR before > 0)"

/* A column of a CTE as a JSON array in time order ('[]' when empty). */
#define SERIES_ARRAY(col) "'" col "', COALESCE(json_agg(" col " ORDER BY ts), '[]')"

int store_job_series_json(PGconn *c, int64_t job_id, int max_points, cJSON **out,
			  struct rv_err *err)
{
	char job_s[24], max_s[16];
	i64s(job_s, sizeof(job_s), job_id);
	snprintf(max_s, sizeof(max_s), "%d", max_points);
	const char *p[] = { job_s, max_s };
	int rc = query_json(
		c,
		"WITH " SERIES_SPEED SERIES_USAGE
		" SELECT json_build_object('samples', (SELECT count(*) FROM sp),"
		" 'speed', (SELECT json_build_object(" SERIES_ARRAY("ts") "," SERIES_ARRAY("speed") "," SERIES_ARRAY(
			"workers") ") FROM gs),"
				   " 'usage', (SELECT json_build_object(" SERIES_ARRAY("ts") "," SERIES_ARRAY("cpu") "," SERIES_ARRAY("cpu_limit") "," SERIES_ARRAY(
					   "memory_mb") "," SERIES_ARRAY("memory_limit_mb") "," SERIES_ARRAY("nodes") ") FROM ug),"
														      " 'plans', (SELECT COALESCE(json_agg(json_build_object('id', p.id, 'stage', p.stage,"
														      "   'algorithm', p.algorithm, 'reason', p.reason, 'outcome', p.outcome,"
														      "   'ts', COALESCE(p.applied_ts_ms, NULLIF(p.based_on_ts_ms, 0)),"
														      "   'applied', p.applied_at IS NOT NULL, 'predicted_speed', p.predicted_speed,"
														      "   'speed_before', p.speed_before, 'speed_after', p.speed_after,"
														      "   'reverts_plan_id', p.reverts_plan_id, 'created_at', p.created_at) ORDER BY p.id),"
														      "   '[]') FROM (SELECT * FROM scale_plans WHERE job_id = $1::bigint"
														      "   ORDER BY id DESC LIMIT 500) p))::text",
		2, p, out, err);
	return rc < 0 ? rc : 0;
}

int store_cluster_usage_json(PGconn *c, int64_t window_s, int64_t bucket_s, cJSON **out,
			     struct rv_err *err)
{
	char win_s[24], buck_s[24];
	i64s(win_s, sizeof(win_s), window_s);
	i64s(buck_s, sizeof(buck_s), bucket_s);
	const char *p[] = { win_s, buck_s };
	/* Per node and bucket its mean (nodes report at moments of their
	 * own: a sum per timestamp would count one node here, two there); per
	 * job and bucket the sum over its nodes; per bucket the sum over the
	 * jobs. */
	int rc = query_json(
		c,
		"WITH hi AS (SELECT max(ts_ms) AS hi FROM node_usage),"
		" t AS (SELECT u.ts_ms / ($2::bigint * 1000) AS k, u.job_id, u.node,"
		"   avg(u.cpu) AS cpu, avg(u.cpu_limit) AS cpu_limit, avg(u.memory_mb) AS mem,"
		"   avg(u.memory_limit_mb) AS mem_limit"
		"   FROM node_usage u, hi WHERE u.ts_ms > hi.hi - $1::bigint * 1000"
		"   GROUP BY 1, 2, 3),"
		" j AS (SELECT k, job_id, sum(cpu) AS cpu, sum(cpu_limit) AS cpu_limit,"
		"   sum(mem) AS mem, sum(mem_limit) AS mem_limit FROM t GROUP BY 1, 2),"
		" x AS (SELECT k, sum(cpu) AS cpu, sum(cpu_limit) AS cpu_limit, sum(mem) AS mem,"
		"   sum(mem_limit) AS mem_limit, count(*) AS jobs FROM j GROUP BY k)"
		" SELECT json_build_object('window_s', $1::bigint, 'bucket_s', $2::bigint,"
		" 'ts', COALESCE(json_agg(k * $2::bigint * 1000 ORDER BY k), '[]'),"
		" 'cpu_used', COALESCE(json_agg(round(cpu::numeric, 3) ORDER BY k), '[]'),"
		" 'cpu_alloc', COALESCE(json_agg(round(cpu_limit::numeric, 3) ORDER BY k), '[]'),"
		" 'memory_used_mb', COALESCE(json_agg(round(mem) ORDER BY k), '[]'),"
		" 'memory_alloc_mb', COALESCE(json_agg(round(mem_limit) ORDER BY k), '[]'),"
		" 'jobs', COALESCE(json_agg(jobs ORDER BY k), '[]'),"
		" 'capacity', (SELECT json_build_object('nodes', count(*) FILTER (WHERE ready),"
		"   'cpu', COALESCE(sum(cpu) FILTER (WHERE ready), 0),"
		"   'memory_mb', COALESCE(sum(memory_mb) FILTER (WHERE ready), 0))"
		"   FROM cluster_nodes))::text FROM x",
		2, p, out, err);
	return rc < 0 ? rc : 0;
}

/* The dashboard views (sql/002_dashboards.sql) by name, each in its order. */
static const struct {
	const char *name, *sql;
} dashboards[] = {
	{ "job_utilisation",
	  "SELECT json_agg(v ORDER BY v.cpu_util_pct NULLS LAST, v.name)::text FROM"
	  " (SELECT * FROM v_job_utilisation ORDER BY cpu_util_pct NULLS LAST,"
	  " name LIMIT $1::int) v" },
	{ "user_utilisation",
	  "SELECT json_agg(v ORDER BY v.user_name)::text FROM"
	  " (SELECT * FROM v_user_utilisation ORDER BY user_name LIMIT $1::int) v" },
	{ "overprovisioning",
	  "SELECT json_agg(v ORDER BY v.cpu_wasted DESC, v.mem_wasted_mb DESC)::text"
	  " FROM (SELECT * FROM v_overprovisioning ORDER BY cpu_wasted DESC,"
	  " mem_wasted_mb DESC LIMIT $1::int) v" },
	{ "plan_outcomes",
	  "SELECT json_agg(v ORDER BY v.algorithm, v.stage)::text FROM"
	  " (SELECT * FROM v_plan_outcomes ORDER BY algorithm, stage LIMIT $1::int) v" },
	{ "failures_by_cause",
	  "SELECT json_agg(v ORDER BY v.failures DESC, v.type, v.cause)::text"
	  " FROM (SELECT * FROM v_failures_by_cause ORDER BY failures DESC, type,"
	  " cause LIMIT $1::int) v" },
};

const char *store_dashboard_name(int i)
{
	return i >= 0 && i < (int)RV_ARRAY_SIZE(dashboards) ? dashboards[i].name : NULL;
}

int store_dashboard_json(PGconn *c, const char *view, int limit, cJSON **out, struct rv_err *err)
{
	*out = NULL;
	for (size_t i = 0; i < RV_ARRAY_SIZE(dashboards); i++) {
		if (strcmp(view, dashboards[i].name) != 0)
			continue;
		char lim[16];
		snprintf(lim, sizeof(lim), "%d", limit);
		const char *p[] = { lim };
		int rc = query_json(c, dashboards[i].sql, 1, p, out, err);
		if (rc < 0)
			return rc;
		if (!*out)
			*out = cJSON_CreateArray(); /* no rows: json_agg is NULL */
		return *out ? 0 : rv_err_set(err, -ENOMEM, "", "out of memory");
	}
	return rv_err_set(err, -ENOENT, "view", "no dashboard \"%s\"", view);
}
