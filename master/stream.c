/*
 * stream.c: offset-range shards of streaming datasets (see stream.h).
 *
 * Invariant, per partition: every offset in [start, handed) is in exactly
 * one of: below committed (DONE), a held range (DONE above a gap), a DOING
 * task, a returned range.  Held and returned ranges are sorted, disjoint and
 * merged when they touch; DOING tasks sit in one array sorted by id (ids
 * only grow, so a new task is appended and a done finds its task by binary
 * search).
 */
#include "stream.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "json.h"
#include "wire_codec.h"

#define JSON_INT_MAX       (INT64_C(1) << 53)
#define STREAM_DOC_VERSION 1

struct range {
	int64_t a, b;
};

struct ranges {
	struct range *r;
	int n, cap;
};

struct part {
	char name[STREAM_NAME_MAX];
	int64_t start, committed, handed, end, done;
	int64_t tasks_done; /* tasks DONE since start: the stream's shards done */
	struct ranges returned, held;
};

struct sds {
	char name[STREAM_NAME_MAX];
	int64_t shard_size;
	int nparts;
	int turn; /* the partition whose fresh offsets go out next */
	struct part *parts;
};

struct task {
	int64_t id, worker, deadline;
	int ds, part;
	int64_t a, b;
};

struct stream_mgr {
	struct stream_conf conf;
	int nds;
	struct sds *ds;
	struct task *tasks; /* sorted by id */
	int ntasks, captasks;
	int64_t next_id;
};

/* ---- ranges ---- */

/* Room for one more of *n items of size bytes in *arr (capacity *cap,
 * doubled from first).  0 or -ENOMEM (nothing changed). */
static int grow(void *arr, int n, int *cap, size_t size, int first)
{
	void **p = arr;
	if (n < *cap)
		return 0;
	int nc = *cap ? *cap * 2 : first;
	void *np = realloc(*p, (size_t)nc * size);
	if (!np)
		return -ENOMEM;
	*p = np;
	*cap = nc;
	return 0;
}

/* Insert [a, b) (disjoint from every range held) keeping the order and
 * merging neighbours that touch.  0 or -ENOMEM (nothing changed). */
static int ranges_add(struct ranges *rs, int64_t a, int64_t b)
{
	int i = 0;
	while (i < rs->n && rs->r[i].a < a)
		i++;
	bool left = i > 0 && rs->r[i - 1].b == a, right = i < rs->n && rs->r[i].a == b;
	if (left && right) {
		rs->r[i - 1].b = rs->r[i].b;
		memmove(&rs->r[i], &rs->r[i + 1], (size_t)(rs->n - i - 1) * sizeof(*rs->r));
		rs->n--;
		return 0;
	}
	if (left) {
		rs->r[i - 1].b = b;
		return 0;
	}
	if (right) {
		rs->r[i].a = a;
		return 0;
	}
	if (grow(&rs->r, rs->n, &rs->cap, sizeof(*rs->r), 4) < 0)
		return -ENOMEM;
	memmove(&rs->r[i + 1], &rs->r[i], (size_t)(rs->n - i) * sizeof(*rs->r));
	rs->r[i] = (struct range){ a, b };
	rs->n++;
	return 0;
}

static void ranges_pop_front(struct ranges *rs)
{
	memmove(&rs->r[0], &rs->r[1], (size_t)(rs->n - 1) * sizeof(*rs->r));
	rs->n--;
}

static void ranges_release(struct ranges *rs)
{
	free(rs->r);
	*rs = (struct ranges){ 0 };
}

/* ---- construction ---- */

static void ds_release(struct sds *d)
{
	for (int p = 0; p < d->nparts; p++) {
		ranges_release(&d->parts[p].returned);
		ranges_release(&d->parts[p].held);
	}
	free(d->parts);
	d->parts = NULL;
}

void stream_free(struct stream_mgr *m)
{
	if (!m)
		return;
	for (int i = 0; i < m->nds; i++)
		ds_release(&m->ds[i]);
	free(m->ds);
	free(m->tasks);
	free(m);
}

static int check_dataset(const struct stream_dataset *d, int i, const struct stream_dataset *all,
			 struct rv_err *err)
{
	if (!d->name[0] || strlen(d->name) >= STREAM_NAME_MAX)
		return rv_err_set(err, -EINVAL, "datasets.name", "datasets[%d].name is empty", i);
	for (int j = 0; j < i; j++)
		if (strcmp(all[j].name, d->name) == 0)
			return rv_err_set(err, -EINVAL, "datasets.name",
					  "datasets[%d].name \"%s\" is given twice", i, d->name);
	if (d->shard_size < 1)
		return rv_err_set(err, -EINVAL, "datasets.shard_size",
				  "datasets[%d].shard_size must be >= 1", i);
	if (d->nparts < 1 || d->nparts > STREAM_MAX_PARTITIONS || !d->parts)
		return rv_err_set(err, -EINVAL, "datasets.partitions",
				  "datasets[%d] must have 1..%d partitions", i,
				  STREAM_MAX_PARTITIONS);
	for (int p = 0; p < d->nparts; p++) {
		const struct stream_partition *sp = &d->parts[p];
		if (!sp->name[0])
			return rv_err_set(err, -EINVAL, "datasets.partitions.name",
					  "datasets[%d].partitions[%d].name is empty", i, p);
		for (int q = 0; q < p; q++)
			if (strcmp(d->parts[q].name, sp->name) == 0)
				return rv_err_set(err, -EINVAL, "datasets.partitions.name",
						  "datasets[%d].partitions[%d].name is given twice",
						  i, p);
		if (sp->start < 0 || sp->start >= JSON_INT_MAX)
			return rv_err_set(err, -EINVAL, "datasets.partitions.start",
					  "datasets[%d].partitions[%d].start is out of range", i,
					  p);
		if (sp->end >= 0 && (sp->end < sp->start || sp->end >= JSON_INT_MAX))
			return rv_err_set(err, -EINVAL, "datasets.partitions.end",
					  "datasets[%d].partitions[%d].end is below start", i, p);
	}
	return 0;
}

struct stream_mgr *stream_new(const struct stream_dataset *ds, int nds, const struct stream_conf *c,
			      struct rv_err *err)
{
	if (nds < 0 || nds > STREAM_MAX_DATASETS) {
		rv_err_set(err, -EINVAL, "datasets", "at most %d streaming datasets",
			   STREAM_MAX_DATASETS);
		return NULL;
	}
	for (int i = 0; i < nds; i++)
		if (check_dataset(&ds[i], i, ds, err) < 0)
			return NULL;
	struct stream_mgr *m = calloc(1, sizeof(*m));
	if (!m || (nds > 0 && !(m->ds = calloc((size_t)nds, sizeof(*m->ds))))) {
		free(m);
		rv_err_set(err, -ENOMEM, "", "out of memory");
		return NULL;
	}
	m->conf = c ? *c : (struct stream_conf){ 0 };
	if (m->conf.max_tasks_in_flight <= 0)
		m->conf.max_tasks_in_flight = STREAM_DEFAULT_MAX_IN_FLIGHT;
	m->next_id = STREAM_ID_BASE;
	m->nds = nds;
	for (int i = 0; i < nds; i++) {
		struct sds *d = &m->ds[i];
		snprintf(d->name, sizeof(d->name), "%s", ds[i].name);
		d->shard_size = ds[i].shard_size;
		d->parts = calloc((size_t)ds[i].nparts, sizeof(*d->parts));
		if (!d->parts) {
			stream_free(m);
			rv_err_set(err, -ENOMEM, "", "out of memory");
			return NULL;
		}
		d->nparts = ds[i].nparts;
		for (int p = 0; p < d->nparts; p++) {
			struct part *pt = &d->parts[p];
			snprintf(pt->name, sizeof(pt->name), "%s", ds[i].parts[p].name);
			pt->start = pt->committed = pt->handed = ds[i].parts[p].start;
			pt->end = ds[i].parts[p].end < 0 ? -1 : ds[i].parts[p].end;
		}
	}
	return m;
}

/* ---- tasks ---- */

static int task_find(const struct stream_mgr *m, int64_t id)
{
	int lo = 0, hi = m->ntasks - 1;
	while (lo <= hi) {
		int mid = lo + (hi - lo) / 2;
		if (m->tasks[mid].id == id)
			return mid;
		if (m->tasks[mid].id < id)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return -1;
}

static void task_remove(struct stream_mgr *m, int i)
{
	memmove(&m->tasks[i], &m->tasks[i + 1], (size_t)(m->ntasks - i - 1) * sizeof(*m->tasks));
	m->ntasks--;
}

static int64_t deadline(const struct stream_mgr *m, int64_t now_ms)
{
	return m->conf.doing_timeout_ms > 0 ? now_ms + m->conf.doing_timeout_ms : INT64_MAX;
}

int stream_next(struct stream_mgr *m, int ds, int64_t worker, int64_t now_ms,
		struct stream_task *out)
{
	if (ds < 0 || ds >= m->nds)
		return -EINVAL;
	if (m->ntasks >= m->conf.max_tasks_in_flight)
		return -ENOSPC;
	if (grow(&m->tasks, m->ntasks, &m->captasks, sizeof(*m->tasks), 16) < 0)
		return -ENOMEM;
	struct sds *d = &m->ds[ds];
	int p = -1;
	int64_t a = 0, b = 0;
	for (int k = 0; k < d->nparts && p < 0; k++) {
		struct part *pt = &d->parts[k];
		if (pt->returned.n == 0)
			continue;
		struct range *r = &pt->returned.r[0];
		p = k;
		a = r->a;
		b = r->b - r->a > d->shard_size ? r->a + d->shard_size : r->b;
		if (b == r->b)
			ranges_pop_front(&pt->returned);
		else
			r->a = b;
	}
	for (int k = 0; k < d->nparts && p < 0; k++) {
		int q = (d->turn + k) % d->nparts;
		struct part *pt = &d->parts[q];
		int64_t lim = pt->end < 0 ? JSON_INT_MAX : pt->end;
		if (pt->handed >= lim)
			continue;
		p = q;
		a = pt->handed;
		b = lim - a > d->shard_size ? a + d->shard_size : lim;
		pt->handed = b;
		d->turn = (q + 1) % d->nparts;
	}
	if (p < 0)
		return 0;
	struct task *t = &m->tasks[m->ntasks++];
	*t = (struct task){ .id = m->next_id++,
			    .worker = worker,
			    .deadline = deadline(m, now_ms),
			    .ds = ds,
			    .part = p,
			    .a = a,
			    .b = b };
	*out = (struct stream_task){ .id = t->id, .ds = ds, .part = p, .start = a, .end = b };
	return 1;
}

/* [a, b) of pt is DONE: commit it, or hold it above the gap. */
static int part_done(struct part *pt, int64_t a, int64_t b)
{
	if (a != pt->committed) {
		int rc = ranges_add(&pt->held, a, b);
		if (rc < 0)
			return rc;
	} else {
		pt->committed = b;
		if (pt->held.n > 0 && pt->held.r[0].a == b) {
			pt->committed = pt->held.r[0].b;
			ranges_pop_front(&pt->held);
		}
	}
	pt->done += b - a;
	pt->tasks_done++;
	return 0;
}

int stream_done(struct stream_mgr *m, int64_t id, int64_t worker)
{
	int i = task_find(m, id);
	if (i < 0)
		return 0;
	struct task *t = &m->tasks[i];
	if (t->worker != worker)
		return -EPERM;
	int rc = part_done(&m->ds[t->ds].parts[t->part], t->a, t->b);
	if (rc < 0)
		return rc;
	task_remove(m, i);
	return 1;
}

/* Take back every task for which take(task) holds. */
static int take_back(struct stream_mgr *m, bool (*take)(const struct task *, int64_t), int64_t arg)
{
	int n = 0;
	for (int i = 0; i < m->ntasks;) {
		struct task *t = &m->tasks[i];
		if (!take(t, arg)) {
			i++;
			continue;
		}
		int rc = ranges_add(&m->ds[t->ds].parts[t->part].returned, t->a, t->b);
		if (rc < 0)
			return rc; /* what was taken back so far stays consistent */
		task_remove(m, i);
		n++;
	}
	return n;
}

static bool of_worker(const struct task *t, int64_t worker)
{
	return t->worker == worker;
}

static bool due(const struct task *t, int64_t now_ms)
{
	return t->deadline <= now_ms;
}

int stream_worker_dead(struct stream_mgr *m, int64_t worker)
{
	return take_back(m, of_worker, worker);
}

int stream_expire(struct stream_mgr *m, int64_t now_ms, stream_held_fn held, const void *arg)
{
	for (int i = 0; held && i < m->ntasks; i++) {
		struct task *t = &m->tasks[i];
		if (due(t, now_ms) && held(arg, t->worker))
			t->deadline = deadline(m, now_ms); /* still held: wait again */
	}
	return take_back(m, due, now_ms);
}

int64_t stream_next_deadline(const struct stream_mgr *m)
{
	int64_t dl = INT64_MAX;
	for (int i = 0; i < m->ntasks; i++)
		if (m->tasks[i].deadline < dl)
			dl = m->tasks[i].deadline;
	return dl;
}

static int part_index(const struct sds *d, const char *name)
{
	for (int p = 0; p < d->nparts; p++)
		if (strcmp(d->parts[p].name, name) == 0)
			return p;
	return -ENOENT;
}

int stream_extend(struct stream_mgr *m, int ds, const char *part, int64_t end)
{
	if (ds < 0 || ds >= m->nds || end < 0 || end >= JSON_INT_MAX)
		return -EINVAL;
	int p = part_index(&m->ds[ds], part);
	if (p < 0)
		return p;
	struct part *pt = &m->ds[ds].parts[p];
	if (pt->end < 0 || end <= pt->end)
		return 0;
	pt->end = end;
	return 1;
}

/* ---- looking ---- */

int stream_dataset(const struct stream_mgr *m, const char *name)
{
	for (int i = 0; i < m->nds; i++)
		if (strcmp(m->ds[i].name, name) == 0)
			return i;
	return -ENOENT;
}

int stream_nparts(const struct stream_mgr *m, int ds)
{
	return ds >= 0 && ds < m->nds ? m->ds[ds].nparts : 0;
}

const char *stream_part_name(const struct stream_mgr *m, int ds, int part)
{
	if (ds < 0 || ds >= m->nds || part < 0 || part >= m->ds[ds].nparts)
		return "";
	return m->ds[ds].parts[part].name;
}

void stream_part_stats(const struct stream_mgr *m, int ds, int part, struct stream_part_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->name = "";
	if (ds < 0 || ds >= m->nds || part < 0 || part >= m->ds[ds].nparts)
		return;
	const struct part *pt = &m->ds[ds].parts[part];
	*st = (struct stream_part_stats){ .name = pt->name,
					  .start = pt->start,
					  .committed = pt->committed,
					  .handed = pt->handed,
					  .end = pt->end,
					  .done = pt->done,
					  .tasks_done = pt->tasks_done,
					  .returned = pt->returned.n,
					  .held = pt->held.n };
	for (int i = 0; i < m->ntasks; i++)
		st->doing += m->tasks[i].ds == ds && m->tasks[i].part == part;
}

/* ---- committed offsets (checkpoints) ---- */

int stream_offsets_save(const struct stream_mgr *m, struct rv_buf *out)
{
	rv_buf_puts(out, "{\"datasets\":[");
	for (int i = 0; i < m->nds; i++) {
		const struct sds *d = &m->ds[i];
		rv_buf_printf(out, "%s{\"name\":\"%s\",\"partitions\":[", i ? "," : "", d->name);
		for (int p = 0; p < d->nparts; p++)
			rv_buf_printf(out, "%s{\"name\":\"%s\",\"committed\":%" PRId64 "}",
				      p ? "," : "", d->parts[p].name, d->parts[p].committed);
		rv_buf_puts(out, "]}");
	}
	rv_buf_puts(out, "]}");
	return rv_buf_failed(out) ? -ENOMEM : 0;
}

int stream_offsets_load(struct stream_mgr *m, const char *doc, size_t len, struct rv_err *err)
{
	RV_CLEANUP_CJSON cJSON *root = rv_json_parse(doc, len, err);
	if (!root)
		return -EINVAL;
	int rc;
	const cJSON *arr = rv_json_get_array(root, "datasets", "", true, &rc, err);
	if (!arr)
		return rc;
	/* Check every entry first, so that a bad one changes nothing. */
	for (int pass = 0; pass < 2; pass++) {
		int i = 0;
		for (const cJSON *it = arr->child; it; it = it->next, i++) {
			char p[64], name[STREAM_NAME_MAX];
			rv_json_path_index(p, sizeof(p), "datasets", i);
			if ((rc = rv_json_get_string(it, "name", p, true, name, sizeof(name),
						     err)) < 0)
				return rc;
			int ds = stream_dataset(m, name);
			if (ds < 0)
				return rv_err_set(err, -EINVAL, p,
						  "%s: streaming dataset \"%s\" is not in the job",
						  p, name);
			struct sds *d = &m->ds[ds];
			const cJSON *parts = rv_json_get_array(it, "partitions", p, true, &rc, err);
			if (!parts)
				return rc;
			int j = 0;
			for (const cJSON *pj = parts->child; pj; pj = pj->next, j++) {
				char q[96];
				int64_t off;
				snprintf(q, sizeof(q), "%s.partitions[%d]", p, j);
				if ((rc = rv_json_get_string(pj, "name", q, true, name,
							     sizeof(name), err)) < 0 ||
				    (rc = rv_json_get_int(pj, "committed", q, true, 0,
							  JSON_INT_MAX - 1, &off, err)) < 0)
					return rc;
				int k = part_index(d, name);
				if (k < 0)
					return rv_err_set(err, -EINVAL, q,
							  "%s: partition \"%s\" is not in dataset "
							  "\"%s\"",
							  q, name, d->name);
				if (pass == 0)
					continue;
				struct part *pt = &d->parts[k];
				ranges_release(&pt->returned);
				ranges_release(&pt->held);
				for (int t = m->ntasks - 1; t >= 0; t--)
					if (m->tasks[t].ds == ds && m->tasks[t].part == k)
						task_remove(m, t);
				pt->start = pt->committed = pt->handed = off;
				pt->done = pt->tasks_done = 0;
				if (pt->end >= 0 && pt->end < off)
					pt->end = off;
			}
		}
	}
	return 0;
}

/* ---- snapshots ---- */

/* The snapshot's entries, by name: a task DOING and a range of offsets.
 * Snapshots before the names held a task as [id,worker,deadline,ds,part,
 * start,end] and a partition's ranges as one flat array [a,b,a,b,...];
 * both still load. */
#define T struct task
static const struct rv_wire_field snap_task_fields[] = {
	WINT("id", id, RV_WIRE_REQ, STREAM_ID_BASE, JSON_INT_MAX, "task id"),
	WINT("worker", worker, RV_WIRE_REQ, -JSON_INT_MAX, JSON_INT_MAX, "worker holding it"),
	WINT("deadline", deadline, RV_WIRE_REQ, -1, JSON_INT_MAX, "ms since the epoch, -1: none"),
	WINT("ds", ds, RV_WIRE_REQ, 0, INT_MAX, "streaming dataset index"),
	WINT("part", part, RV_WIRE_REQ, 0, STREAM_MAX_PARTITIONS, "partition index"),
	WINT("start", a, RV_WIRE_REQ, 0, JSON_INT_MAX, "first offset"),
	WINT("end", b, RV_WIRE_REQ, 0, JSON_INT_MAX, "offset after the last"),
};
static const struct rv_wire_message snap_task_msg =
	RV_WIRE_MSG("SnapshotStreamTask", "a task of offsets handed out and not yet done",
		    snap_task_fields, "task", NULL);
#undef T
#define T struct range
static const struct rv_wire_field snap_offsets_fields[] = {
	WINT("start", a, RV_WIRE_REQ, 0, JSON_INT_MAX, "first offset"),
	WINT("end", b, RV_WIRE_REQ, 0, JSON_INT_MAX, "offset after the last"),
};
static const struct rv_wire_message snap_offsets_msg =
	RV_WIRE_MSG("SnapshotOffsets", "offsets [start, end) of a partition", snap_offsets_fields,
		    "range", NULL);
#undef T

static int ranges_save(const struct ranges *rs, struct rv_buf *out)
{
	int rc = 0;
	rv_buf_puts(out, "[");
	for (int i = 0; rc == 0 && i < rs->n; i++)
		rc = rv_wire_encode_text(&snap_offsets_msg, &rs->r[i], i > 0, out);
	rv_buf_puts(out, "]");
	return rc;
}

static int save_part(const struct part *pt, bool comma, struct rv_buf *out)
{
	rv_buf_printf(out,
		      "%s{\"name\":\"%s\",\"start\":%" PRId64 ",\"committed\":%" PRId64
		      ",\"handed\":%" PRId64 ",\"end\":%" PRId64 ",\"done\":%" PRId64
		      ",\"tasks_done\":%" PRId64 ",\"returned\":",
		      comma ? "," : "", pt->name, pt->start, pt->committed, pt->handed, pt->end,
		      pt->done, pt->tasks_done);
	int rc = ranges_save(&pt->returned, out);
	rv_buf_puts(out, ",\"held\":");
	if (rc == 0)
		rc = ranges_save(&pt->held, out);
	rv_buf_puts(out, "}");
	return rc;
}

int stream_snapshot_save(const struct stream_mgr *m, struct rv_buf *out)
{
	rv_buf_printf(out,
		      "{\"version\":%d,\"kind\":\"rover-stream-snapshot\",\"next_id\":%" PRId64
		      ",\"datasets\":[",
		      STREAM_DOC_VERSION, m->next_id);
	int rc = 0;
	for (int i = 0; rc == 0 && i < m->nds; i++) {
		const struct sds *d = &m->ds[i];
		rv_buf_printf(out, "%s{\"name\":\"%s\",\"turn\":%d,\"partitions\":[", i ? "," : "",
			      d->name, d->turn);
		for (int p = 0; rc == 0 && p < d->nparts; p++)
			rc = save_part(&d->parts[p], p > 0, out);
		rv_buf_puts(out, "]}");
	}
	rv_buf_puts(out, "],\"tasks\":[");
	for (int i = 0; rc == 0 && i < m->ntasks; i++) {
		struct task t = m->tasks[i];
		if (t.deadline == INT64_MAX)
			t.deadline = -1;
		rc = rv_wire_encode_text(&snap_task_msg, &t, i > 0, out);
	}
	rv_buf_puts(out, "]}");
	return rc < 0 || rv_buf_failed(out) ? -ENOMEM : 0;
}

/* Integer i of a JSON array, or -EINVAL when it is not an integer in range. */
static int arr_int(const cJSON *a, int i, int64_t lo, int64_t hi, int64_t *out)
{
	const cJSON *v = cJSON_GetArrayItem(a, i);
	if (!cJSON_IsNumber(v))
		return -EINVAL;
	double d = cJSON_GetNumberValue(v);
	if (d < (double)lo || d > (double)hi || d != (double)(int64_t)d)
		return -EINVAL;
	*out = (int64_t)d;
	return 0;
}

/* Range k of arr: a named entry, or pair k of a flat array of pairs. */
static int range_get(const cJSON *arr, int k, bool named, struct range *r)
{
	static const int64_t lo[2] = { 0, 0 }, hi[2] = { JSON_INT_MAX, JSON_INT_MAX };
	if (named)
		return rv_wire_decode_entry(&snap_offsets_msg, cJSON_GetArrayItem(arr, k), "", lo,
					    hi, r, NULL);
	if (arr_int(arr, 2 * k, 0, JSON_INT_MAX, &r->a) < 0 ||
	    arr_int(arr, 2 * k + 1, 0, JSON_INT_MAX, &r->b) < 0)
		return -EINVAL;
	return 0;
}

static int ranges_load(const cJSON *arr, struct ranges *rs)
{
	int n = cJSON_GetArraySize(arr);
	bool named = n > 0 && cJSON_IsObject(cJSON_GetArrayItem(arr, 0));
	if (!cJSON_IsArray(arr) || (!named && n % 2))
		return -EINVAL;
	int64_t prev = -1;
	for (int k = 0; k < (named ? n : n / 2); k++) {
		struct range r;
		if (range_get(arr, k, named, &r) < 0 || r.b <= r.a || r.a < prev)
			return -EINVAL;
		if (ranges_add(rs, r.a, r.b) < 0)
			return -ENOMEM;
		prev = r.b;
	}
	return 0;
}

static int load_part(const cJSON *o, struct part *pt, const char *path, struct rv_err *err)
{
	char name[STREAM_NAME_MAX];
	int rc;
	if ((rc = rv_json_get_string(o, "name", path, true, name, sizeof(name), err)) < 0)
		return rc;
	if (strcmp(name, pt->name) != 0)
		return rv_err_set(err, -EINVAL, path, "%s is partition \"%s\", not \"%s\"", path,
				  name, pt->name);
	if ((rc = rv_json_get_int(o, "start", path, true, 0, JSON_INT_MAX, &pt->start, err)) < 0 ||
	    (rc = rv_json_get_int(o, "committed", path, true, 0, JSON_INT_MAX, &pt->committed,
				  err)) < 0 ||
	    (rc = rv_json_get_int(o, "handed", path, true, 0, JSON_INT_MAX, &pt->handed, err)) <
		    0 ||
	    (rc = rv_json_get_int(o, "end", path, true, -1, JSON_INT_MAX, &pt->end, err)) < 0 ||
	    (rc = rv_json_get_int(o, "done", path, true, 0, JSON_INT_MAX, &pt->done, err)) < 0 ||
	    /* absent from a snapshot taken before it was counted */
	    (rc = rv_json_get_int(o, "tasks_done", path, false, 0, JSON_INT_MAX, &pt->tasks_done,
				  err)) < 0)
		return rc;
	if ((rc = ranges_load(cJSON_GetObjectItem(o, "returned"), &pt->returned)) < 0 ||
	    (rc = ranges_load(cJSON_GetObjectItem(o, "held"), &pt->held)) < 0)
		return rv_err_set(err, rc, path, "%s has bad ranges", path);
	return 0;
}

static int load_tasks(const cJSON *root, struct stream_mgr *n, struct rv_err *err)
{
	int rc;
	const cJSON *arr = rv_json_get_array(root, "tasks", "", true, &rc, err);
	if (!arr)
		return rc;
	int cnt = cJSON_GetArraySize(arr);
	if (cnt > 0 && !(n->tasks = calloc((size_t)cnt, sizeof(*n->tasks))))
		return rv_err_set(err, -ENOMEM, "", "out of memory");
	n->captasks = cnt;
	int64_t prev = 0;
	int k = 0;
	for (const cJSON *it = arr->child; it; it = it->next, k++) {
		struct task t;
		rv_wire_path p;
		rv_json_path_index(p, sizeof(p), "tasks", k);
		const int64_t lo[7] = { STREAM_ID_BASE, -JSON_INT_MAX, -1, 0, 0, 0, 0 };
		const int64_t hi[7] = { JSON_INT_MAX, JSON_INT_MAX,          INT64_MAX,
					n->nds - 1,   STREAM_MAX_PARTITIONS, JSON_INT_MAX,
					JSON_INT_MAX };
		if ((rc = rv_wire_decode_entry(&snap_task_msg, it, p, lo, hi, &t, err)) < 0)
			return rc;
		t.deadline = t.deadline < 0 ? INT64_MAX : t.deadline;
		if (t.id <= prev || t.part >= n->ds[t.ds].nparts || t.b <= t.a)
			return rv_err_set(err, -EINVAL, "tasks", "bad task in the snapshot");
		prev = t.id;
		n->tasks[n->ntasks++] = t;
	}
	return 0;
}

int stream_snapshot_load(struct stream_mgr *m, const char *doc, size_t len, struct rv_err *err)
{
	RV_CLEANUP_CJSON cJSON *root = rv_json_parse(doc, len, err);
	if (!root)
		return -EINVAL;
	char kind[64];
	int64_t version;
	int rc;
	if ((rc = rv_json_get_int(root, "version", "", true, STREAM_DOC_VERSION, STREAM_DOC_VERSION,
				  &version, err)) < 0 ||
	    (rc = rv_json_get_string(root, "kind", "", true, kind, sizeof(kind), err)) < 0)
		return rc;
	if (strcmp(kind, "rover-stream-snapshot") != 0)
		return rv_err_set(err, -EINVAL, "kind", "kind must be \"rover-stream-snapshot\"");
	/* Load into a fresh manager over the same datasets, then swap. */
	struct stream_mgr *n = calloc(1, sizeof(*n));
	if (!n || (m->nds > 0 && !(n->ds = calloc((size_t)m->nds, sizeof(*n->ds))))) {
		free(n);
		return rv_err_set(err, -ENOMEM, "", "out of memory");
	}
	n->conf = m->conf;
	n->nds = m->nds;
	const cJSON *arr = rv_json_get_array(root, "datasets", "", true, &rc, err);
	if (!arr)
		goto fail;
	if (cJSON_GetArraySize(arr) != m->nds) {
		rc = rv_err_set(err, -EINVAL, "datasets",
				"the snapshot has %d streaming datasets, "
				"the job %d",
				cJSON_GetArraySize(arr), m->nds);
		goto fail;
	}
	for (int i = 0; i < m->nds; i++) {
		const cJSON *o = cJSON_GetArrayItem(arr, i);
		struct sds *d = &n->ds[i];
		char p[64], name[STREAM_NAME_MAX];
		int64_t turn;
		rv_json_path_index(p, sizeof(p), "datasets", i);
		*d = (struct sds){ .shard_size = m->ds[i].shard_size };
		snprintf(d->name, sizeof(d->name), "%s", m->ds[i].name);
		if ((rc = rv_json_get_string(o, "name", p, true, name, sizeof(name), err)) < 0 ||
		    (rc = rv_json_get_int(o, "turn", p, true, 0, m->ds[i].nparts - 1, &turn, err)) <
			    0)
			goto fail;
		if (strcmp(name, d->name) != 0) {
			rc = rv_err_set(err, -EINVAL, p, "%s is \"%s\", not \"%s\"", p, name,
					d->name);
			goto fail;
		}
		d->turn = (int)turn;
		const cJSON *parts = rv_json_get_array(o, "partitions", p, true, &rc, err);
		if (!parts)
			goto fail;
		if (cJSON_GetArraySize(parts) != m->ds[i].nparts) {
			rc = rv_err_set(err, -EINVAL, p, "%s has other partitions", p);
			goto fail;
		}
		if (!(d->parts = calloc((size_t)m->ds[i].nparts, sizeof(*d->parts)))) {
			rc = rv_err_set(err, -ENOMEM, "", "out of memory");
			goto fail;
		}
		d->nparts = m->ds[i].nparts;
		for (int k = 0; k < d->nparts; k++) {
			char q[96];
			snprintf(q, sizeof(q), "%s.partitions[%d]", p, k);
			snprintf(d->parts[k].name, sizeof(d->parts[k].name), "%s",
				 m->ds[i].parts[k].name);
			if ((rc = load_part(cJSON_GetArrayItem(parts, k), &d->parts[k], q, err)) <
			    0)
				goto fail;
		}
	}
	if ((rc = rv_json_get_int(root, "next_id", "", true, STREAM_ID_BASE, JSON_INT_MAX,
				  &n->next_id, err)) < 0 ||
	    (rc = load_tasks(root, n, err)) < 0)
		goto fail;
	if (n->ntasks > 0 && n->tasks[n->ntasks - 1].id >= n->next_id) {
		rc = rv_err_set(err, -EINVAL, "next_id", "next_id is below a task's id");
		goto fail;
	}
	/* swap the states; the configuration stays m's */
	struct stream_mgr tmp = *m;
	*m = *n;
	*n = tmp;
	stream_free(n);
	return 0;
fail:
	stream_free(n);
	return rc;
}
