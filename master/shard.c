/*
 * shard.c: exactly-once dynamic data sharding (see shard.h).
 *
 * State, per manager:
 *   TODO  = per dataset a cursor (epoch, position in the epoch's order) plus
 *           a sorted array of returned ranges, each inside one shard;
 *   DOING = an array of tasks sorted by id (ids only grow, so next appends),
 *           removals leave tombstones that are compacted once they outnumber
 *           the live tasks;
 *   DONE  = everything else: implied, never stored.
 * The epoch's order is a keyed bijection on [0, nshards): a Feistel network
 * with cycle walking, keyed by (seed, epoch), evaluated per call, so 10^7
 * shards cost the same few words as 10.  Checkpoint steps keep a copy of the
 * TODO state at their first report and the intervals reporters consumed
 * since; workers keep a ring of their recent dones so a done that arrived
 * after the first report can be told from one before it.
 *
 * Everything mutable lives in struct shard_state so that a document load
 * builds a new state and swaps it in only when the whole document is good.
 * Not thread-safe; no I/O, no clock, no randomness but the keyed shuffle.
 */
#include "shard.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "json.h"
#include "wire_codec.h"

#define SHARD_MAX_SAMPLES (INT64_C(1) << 53) /* exact in JSON numbers */
#define SHARD_MAX_EPOCHS  1000000
#define SHARD_ROUNDS      6
#define SHARD_DOC_VERSION 1
#define JSON_INT_MAX       (INT64_C(1) << 53)
#define SHARD_REPORT_NOMEM "could not record the checkpoint report: out of memory"

struct shard_cur {
	int32_t epoch;
	int64_t pos; /* next position in the epoch's order, 0..nshards */
};

/* A TODO range, or a consumed interval of a checkpoint: [start, end) of
 * dataset ds in epoch epoch, never across a shard boundary. */
struct shard_range {
	int32_t ds, epoch;
	int64_t start, end;
};

struct shard_doing {
	int64_t id, worker, deadline;
	int32_t ds, epoch;
	int64_t start, end;
	bool live;
};

/* A done counted for a worker, with the seq it was counted at. */
struct shard_recent {
	int64_t id, seq;
	int32_t ds, epoch;
	int64_t start, end;
};

struct shard_worker {
	int64_t id;
	int64_t lost_seq;          /* seq of its last death (its ring was dropped), 0 none */
	int64_t evicted_seq;       /* seq of the newest done pushed out of the ring, 0 none */
	struct shard_recent *ring; /* SHARD_RING entries, allocated at the first done */
	int nring, ring_head;      /* ring_head: the oldest entry */
	bool used;
};

struct shard_report {
	int64_t worker, task, consumed;
	int32_t ds; /* -1 for task 0 */
};

struct rangevec {
	struct shard_range *v;
	int n, cap;
};

/* A pending checkpoint step: the TODO state at its first report (cursors,
 * and todo = returned ranges plus the tasks then DOING), and what reporters
 * consumed out of it since. */
struct shard_step {
	int64_t step, seq;
	struct shard_cur *cur; /* nds */
	struct rangevec todo, carved;
	struct shard_report *rep;
	int nrep, caprep;
	int expect; /* ranks whose reports make it whole; 0: not known */
};

struct shard_dsstate {
	struct shard_cur cur;
	int64_t samples_done, ndoing, nranges;
};

struct shard_state {
	struct shard_dsstate *ds; /* nds */
	int64_t next_id, seq, dropped_step;
	struct rangevec ranges;
	struct {
		struct shard_doing *v;
		int n, cap, head, nlive;
		bool sorted; /* live deadlines never decrease along the array */
	} doing;
	struct {
		struct shard_worker *v;
		int cap, n;
	} workers;
	struct shard_step *steps[SHARD_MAX_PENDING_STEPS];
	int nsteps;
};

struct shard_dsconf {
	struct shard_dataset d;
	int64_t nshards, last_len;
	int hbits; /* Feistel half width: 2^(2*hbits) >= nshards */
};

struct shard_mgr {
	struct shard_conf conf;
	int nds;
	struct shard_dsconf *ds;
	struct shard_state st;
};

/* ---- growable arrays ---- */

static int grow(void **p, int *cap, int need, size_t elem)
{
	if (need <= *cap)
		return 0;
	if (need < 0 || need > INT_MAX / 2)
		return -ENOMEM;
	int ncap = *cap ? *cap : 8;
	while (ncap < need)
		ncap *= 2;
	void *np = realloc(*p, (size_t)ncap * elem);
	if (!np)
		return -ENOMEM;
	*p = np;
	*cap = ncap;
	return 0;
}

/* ---- the shuffle: a keyed bijection on [0, nshards) ---- */

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= UINT64_C(0xbf58476d1ce4e5b9);
	x ^= x >> 27;
	x *= UINT64_C(0x94d049bb133111eb);
	x ^= x >> 31;
	return x;
}

static void perm_keys(const struct shard_dsconf *d, int epoch, uint64_t k[SHARD_ROUNDS])
{
	uint64_t base = mix64(d->d.seed ^ mix64((uint64_t)epoch + UINT64_C(0x9e3779b97f4a7c15)));
	for (int i = 0; i < SHARD_ROUNDS; i++)
		k[i] = mix64(base + (uint64_t)(i + 1) * UINT64_C(0x9e3779b97f4a7c15));
}

/* Shard index at position pos of the epoch's order.  Cycle walking keeps the
 * Feistel permutation of [0, 2^(2h)) inside [0, n): a bijection still, and
 * since 2^(2h) < 4n, under four walks on average. */
static int64_t perm(const struct shard_dsconf *d, int epoch, int64_t pos)
{
	if (!d->d.shuffle || d->nshards <= 1)
		return pos;
	uint64_t k[SHARD_ROUNDS], mask = (UINT64_C(1) << d->hbits) - 1, x = (uint64_t)pos;
	perm_keys(d, epoch, k);
	do {
		uint64_t l = x >> d->hbits, r = x & mask;
		for (int i = 0; i < SHARD_ROUNDS; i++) {
			uint64_t t = l ^ (mix64(r ^ k[i]) & mask);
			l = r;
			r = t;
		}
		x = (l << d->hbits) | r;
	} while (x >= (uint64_t)d->nshards);
	return (int64_t)x;
}

/* Position of shard index shard in the epoch's order: perm's inverse. */
static int64_t perm_inv(const struct shard_dsconf *d, int epoch, int64_t shard)
{
	if (!d->d.shuffle || d->nshards <= 1)
		return shard;
	uint64_t k[SHARD_ROUNDS], mask = (UINT64_C(1) << d->hbits) - 1, x = (uint64_t)shard;
	perm_keys(d, epoch, k);
	do {
		uint64_t l = x >> d->hbits, r = x & mask;
		for (int i = SHARD_ROUNDS - 1; i >= 0; i--) {
			uint64_t t = r ^ (mix64(l ^ k[i]) & mask);
			r = l;
			l = t;
		}
		x = (l << d->hbits) | r;
	} while (x >= (uint64_t)d->nshards);
	return (int64_t)x;
}

static int64_t shard_len(const struct shard_dsconf *d, int64_t shard)
{
	return shard == d->nshards - 1 ? d->last_len : d->d.shard_size;
}

static int cur_cmp(int ea, int64_t pa, int eb, int64_t pb)
{
	if (ea != eb)
		return ea < eb ? -1 : 1;
	return pa < pb ? -1 : pa > pb;
}

/* Samples of ds still ahead of cursor c (positions c.pos.. of c.epoch and
 * every later epoch). */
static int64_t cur_remaining(const struct shard_dsconf *d, struct shard_cur c)
{
	int64_t rest = (int64_t)(d->d.epochs - c.epoch - 1) * d->d.size;
	if (c.pos >= d->nshards)
		return rest;
	rest += (d->nshards - c.pos) * d->d.shard_size;
	if (d->last_len != d->d.shard_size && perm_inv(d, c.epoch, d->nshards - 1) >= c.pos)
		rest -= d->d.shard_size - d->last_len;
	return rest;
}

/* ---- sorted range arrays (by ds, epoch, start) ---- */

static int range_cmp(const struct shard_range *a, const struct shard_range *b)
{
	if (a->ds != b->ds)
		return a->ds < b->ds ? -1 : 1;
	if (a->epoch != b->epoch)
		return a->epoch < b->epoch ? -1 : 1;
	return a->start < b->start ? -1 : a->start > b->start;
}

static int range_qcmp(const void *a, const void *b)
{
	return range_cmp(a, b);
}

/* First index whose range is >= key. */
static int range_lower(const struct rangevec *rv, const struct shard_range *key)
{
	int lo = 0, hi = rv->n;
	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;
		if (range_cmp(&rv->v[mid], key) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static bool same_shard(const struct shard_mgr *m, const struct shard_range *a,
		       const struct shard_range *b)
{
	int64_t ss = m->ds[a->ds].d.shard_size;
	return a->ds == b->ds && a->epoch == b->epoch && a->start / ss == b->start / ss;
}

/* Index of the range holding all of r, or -1. */
static int range_find_containing(const struct rangevec *rv, const struct shard_range *r)
{
	int i = range_lower(rv, r);
	if (i < rv->n && rv->v[i].ds == r->ds && rv->v[i].epoch == r->epoch &&
	    rv->v[i].start == r->start)
		return r->end <= rv->v[i].end ? i : -1;
	i--;
	if (i >= 0 && rv->v[i].ds == r->ds && rv->v[i].epoch == r->epoch &&
	    rv->v[i].start <= r->start && r->end <= rv->v[i].end)
		return i;
	return -1;
}

/* Whether r overlaps any range of rv. */
static bool range_overlaps(const struct rangevec *rv, const struct shard_range *r)
{
	int i = range_lower(rv, r);
	if (i < rv->n && rv->v[i].ds == r->ds && rv->v[i].epoch == r->epoch &&
	    rv->v[i].start < r->end)
		return true;
	return i > 0 && rv->v[i - 1].ds == r->ds && rv->v[i - 1].epoch == r->epoch &&
	       rv->v[i - 1].end > r->start;
}

/* Insert r (disjoint from every range of rv), merging it with an adjacent
 * range of the same shard.  Needs room for one more (rangevec_reserve).
 * Returns the change in the number of ranges: 1, 0 or -1. */
static int range_insert(const struct shard_mgr *m, struct rangevec *rv, const struct shard_range *r)
{
	int i = range_lower(rv, r);
	bool left = i > 0 && same_shard(m, &rv->v[i - 1], r) && rv->v[i - 1].end == r->start;
	bool right = i < rv->n && same_shard(m, &rv->v[i], r) && rv->v[i].start == r->end;
	if (left && right) {
		rv->v[i - 1].end = rv->v[i].end;
		memmove(&rv->v[i], &rv->v[i + 1], (size_t)(rv->n - i - 1) * sizeof(*rv->v));
		rv->n--;
		return -1;
	}
	if (left) {
		rv->v[i - 1].end = r->end;
		return 0;
	}
	if (right) {
		rv->v[i].start = r->start;
		return 0;
	}
	memmove(&rv->v[i + 1], &rv->v[i], (size_t)(rv->n - i) * sizeof(*rv->v));
	rv->v[i] = *r;
	rv->n++;
	return 1;
}

static int rangevec_reserve(struct rangevec *rv, int extra)
{
	return grow((void **)&rv->v, &rv->cap, rv->n + extra, sizeof(*rv->v));
}

static void rangevec_release(struct rangevec *rv)
{
	free(rv->v);
	*rv = (struct rangevec){ 0 };
}

#define RV_CLEANUP_RANGEVEC RV_CLEANUP(rangevec_release)

/* Sort and merge (adjacent within a shard) the ranges of rv. */
static void rangevec_normalize(const struct shard_mgr *m, struct rangevec *rv)
{
	if (rv->n == 0)
		return;
	qsort(rv->v, (size_t)rv->n, sizeof(*rv->v), range_qcmp);
	int w = 0;
	for (int i = 1; i < rv->n; i++) {
		if (same_shard(m, &rv->v[w], &rv->v[i]) && rv->v[w].end == rv->v[i].start)
			rv->v[w].end = rv->v[i].end;
		else
			rv->v[++w] = rv->v[i];
	}
	rv->n = w + 1;
}

/* ---- state ---- */

static void step_free(struct shard_step *s)
{
	if (!s)
		return;
	free(s->cur);
	rangevec_release(&s->todo);
	rangevec_release(&s->carved);
	free(s->rep);
	free(s);
}

static void state_release(struct shard_state *s)
{
	free(s->ds);
	rangevec_release(&s->ranges);
	free(s->doing.v);
	for (int i = 0; i < s->workers.cap; i++)
		free(s->workers.v[i].ring);
	free(s->workers.v);
	for (int i = 0; i < s->nsteps; i++)
		step_free(s->steps[i]);
	memset(s, 0, sizeof(*s));
}

/* A fresh state: every epoch TODO, next id 1. */
static int state_init(const struct shard_mgr *m, struct shard_state *s)
{
	memset(s, 0, sizeof(*s));
	s->ds = calloc((size_t)m->nds, sizeof(*s->ds));
	if (!s->ds)
		return -ENOMEM;
	s->next_id = 1;
	s->dropped_step = -1;
	s->doing.sorted = true;
	return 0;
}

/* ---- DOING ---- */

static int doing_find(const struct shard_state *s, int64_t id)
{
	int lo = s->doing.head, hi = s->doing.n;
	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;
		if (s->doing.v[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < s->doing.n && s->doing.v[lo].id == id && s->doing.v[lo].live ? lo : -1;
}

static void doing_check_sorted(struct shard_state *s)
{
	int64_t last = INT64_MIN;
	s->doing.sorted = true;
	for (int i = s->doing.head; i < s->doing.n; i++) {
		if (!s->doing.v[i].live)
			continue;
		if (s->doing.v[i].deadline < last) {
			s->doing.sorted = false;
			return;
		}
		last = s->doing.v[i].deadline;
	}
}

/* Drop tombstones once they outnumber the live tasks: removals stay O(1)
 * amortised while lookups stay a binary search from head.  Called once per
 * operation, after its removals. */
static void doing_compact(struct shard_state *s)
{
	if (s->doing.nlive == 0) {
		s->doing.n = s->doing.head = 0;
		s->doing.sorted = true;
		return;
	}
	while (s->doing.head < s->doing.n && !s->doing.v[s->doing.head].live)
		s->doing.head++;
	int dead = s->doing.n - s->doing.nlive;
	if (dead <= 64 || dead <= s->doing.nlive)
		return;
	int w = 0;
	for (int i = s->doing.head; i < s->doing.n; i++)
		if (s->doing.v[i].live)
			s->doing.v[w++] = s->doing.v[i];
	s->doing.n = w;
	s->doing.head = 0;
	if (!s->doing.sorted)
		doing_check_sorted(s);
}

/* Remove DOING entry i (the caller returns it to TODO or counts it DONE,
 * then compacts). */
static void doing_remove(struct shard_state *s, int i)
{
	s->doing.v[i].live = false;
	s->doing.nlive--;
	s->ds[s->doing.v[i].ds].ndoing--;
}

/* Put DOING entry i back to TODO (room reserved by the caller). */
static void doing_return(const struct shard_mgr *m, struct shard_state *s, int i)
{
	const struct shard_doing *d = &s->doing.v[i];
	struct shard_range r = { d->ds, d->epoch, d->start, d->end };
	s->ds[d->ds].nranges += range_insert(m, &s->ranges, &r);
}

/* ---- workers ---- */

static uint64_t worker_hash(int64_t id)
{
	return mix64((uint64_t)id);
}

static struct shard_worker *worker_find(const struct shard_state *s, int64_t id)
{
	if (s->workers.cap == 0)
		return NULL;
	size_t mask = (size_t)s->workers.cap - 1;
	for (size_t i = worker_hash(id) & mask;; i = (i + 1) & mask) {
		struct shard_worker *w = &s->workers.v[i];
		if (!w->used)
			return NULL;
		if (w->id == id)
			return w;
	}
}

/* The worker's record, made when missing.  NULL when out of memory. */
static struct shard_worker *worker_get(struct shard_state *s, int64_t id)
{
	struct shard_worker *w = worker_find(s, id);
	if (w)
		return w;
	if ((s->workers.n + 1) * 2 > s->workers.cap) {
		int ncap = s->workers.cap ? s->workers.cap * 2 : 16;
		struct shard_worker *nv = calloc((size_t)ncap, sizeof(*nv));
		if (!nv)
			return NULL;
		for (int i = 0; i < s->workers.cap; i++) {
			if (!s->workers.v[i].used)
				continue;
			size_t j = worker_hash(s->workers.v[i].id) & (size_t)(ncap - 1);
			while (nv[j].used)
				j = (j + 1) & (size_t)(ncap - 1);
			nv[j] = s->workers.v[i];
		}
		free(s->workers.v);
		s->workers.v = nv;
		s->workers.cap = ncap;
	}
	size_t mask = (size_t)s->workers.cap - 1, i = worker_hash(id) & mask;
	while (s->workers.v[i].used)
		i = (i + 1) & mask;
	w = &s->workers.v[i];
	*w = (struct shard_worker){ .id = id, .used = true };
	s->workers.n++;
	return w;
}

static int worker_ring_alloc(struct shard_worker *w)
{
	if (!w->ring) {
		w->ring = calloc(SHARD_RING, sizeof(*w->ring));
		if (!w->ring)
			return -ENOMEM;
	}
	return 0;
}

static void worker_ring_push(struct shard_worker *w, const struct shard_recent *r)
{
	if (w->nring == SHARD_RING) {
		w->evicted_seq = w->ring[w->ring_head].seq;
		w->ring[w->ring_head] = *r;
		w->ring_head = (w->ring_head + 1) % SHARD_RING;
		return;
	}
	w->ring[(w->ring_head + w->nring) % SHARD_RING] = *r;
	w->nring++;
}

static const struct shard_recent *worker_ring_find(const struct shard_worker *w, int64_t id)
{
	for (int i = 0; w && i < w->nring; i++) {
		const struct shard_recent *r = &w->ring[(w->ring_head + i) % SHARD_RING];
		if (r->id == id)
			return r;
	}
	return NULL;
}

/* ---- construction ---- */

static bool name_ok(const char *s)
{
	size_t n = strnlen(s, SHARD_NAME_MAX);
	if (n == 0 || n == SHARD_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      strchr("_.:/-", c)))
			return false;
	}
	return true;
}

static int dsconf_init(struct shard_dsconf *dc, const struct shard_dataset *d, int i,
		       struct rv_err *err)
{
	char f[64];
	snprintf(f, sizeof(f), "datasets[%d].name", i);
	if (!name_ok(d->name))
		return rv_err_set(err, -EINVAL, f,
				  "%s must be 1..%d characters of letters, digits and _.:/-", f,
				  SHARD_NAME_MAX - 1);
	snprintf(f, sizeof(f), "datasets[%d].size", i);
	if (d->size < 1 || d->size > SHARD_MAX_SAMPLES)
		return rv_err_set(err, -EINVAL, f, "%s must be between 1 and %" PRId64, f,
				  SHARD_MAX_SAMPLES);
	snprintf(f, sizeof(f), "datasets[%d].shard_size", i);
	if (d->shard_size < 1 || d->shard_size > d->size)
		return rv_err_set(err, -EINVAL, f,
				  "%s must be between 1 and the size (%" PRId64 ")", f, d->size);
	snprintf(f, sizeof(f), "datasets[%d].epochs", i);
	if (d->epochs < 1 || d->epochs > SHARD_MAX_EPOCHS)
		return rv_err_set(err, -EINVAL, f, "%s must be between 1 and %d", f,
				  SHARD_MAX_EPOCHS);
	dc->d = *d;
	dc->nshards = (d->size + d->shard_size - 1) / d->shard_size;
	dc->last_len = d->size - (dc->nshards - 1) * d->shard_size;
	dc->hbits = 1;
	while ((UINT64_C(1) << (2 * dc->hbits)) < (uint64_t)dc->nshards)
		dc->hbits++;
	return 0;
}

struct shard_mgr *shard_new(const struct shard_dataset *ds, int nds, const struct shard_conf *c,
			    struct rv_err *err)
{
	if (nds < 1 || nds > SHARD_MAX_DATASETS || !ds) {
		rv_err_set(err, -EINVAL, "datasets", "datasets must hold 1..%d datasets",
			   SHARD_MAX_DATASETS);
		return NULL;
	}
	struct shard_mgr *m = calloc(1, sizeof(*m));
	if (!m) {
		rv_err_set(err, -ENOMEM, "", "could not allocate the shard manager: out of memory");
		return NULL;
	}
	m->conf = c ? *c : (struct shard_conf){ 0 };
	if (m->conf.max_tasks_in_flight <= 0)
		m->conf.max_tasks_in_flight = SHARD_DEFAULT_MAX_IN_FLIGHT;
	if (m->conf.max_todo_ranges <= 0)
		m->conf.max_todo_ranges = SHARD_DEFAULT_MAX_TODO_RANGES;
	m->nds = nds;
	m->ds = calloc((size_t)nds, sizeof(*m->ds));
	if (!m->ds) {
		rv_err_set(err, -ENOMEM, "", "could not allocate the shard manager: out of memory");
		goto fail;
	}
	for (int i = 0; i < nds; i++) {
		if (dsconf_init(&m->ds[i], &ds[i], i, err) < 0)
			goto fail;
		for (int j = 0; j < i; j++) {
			if (strcmp(m->ds[j].d.name, ds[i].name) == 0) {
				char f[64];
				snprintf(f, sizeof(f), "datasets[%d].name", i);
				rv_err_set(err, -EINVAL, f,
					   "%s \"%s\" is already the name of datasets[%d]", f,
					   ds[i].name, j);
				goto fail;
			}
		}
	}
	if (state_init(m, &m->st) < 0) {
		rv_err_set(err, -ENOMEM, "", "could not allocate the shard manager: out of memory");
		goto fail;
	}
	return m;
fail:
	shard_free(m);
	return NULL;
}

void shard_free(struct shard_mgr *m)
{
	if (!m)
		return;
	state_release(&m->st);
	free(m->ds);
	free(m);
}

/* ---- pull, done, deaths, stalls ---- */

/* When a task handed out (or renewed) at now_ms is due; INT64_MAX: never. */
static int64_t doing_deadline(const struct shard_mgr *m, int64_t now_ms)
{
	if (m->conf.doing_timeout_ms <= 0)
		return INT64_MAX;
	return now_ms > INT64_MAX - m->conf.doing_timeout_ms ? INT64_MAX
							     : now_ms + m->conf.doing_timeout_ms;
}

int shard_next(struct shard_mgr *m, int ds, int64_t worker, int64_t now_ms, struct shard_task *out)
{
	struct shard_state *s = &m->st;
	if (ds < 0 || ds >= m->nds)
		return -EINVAL;
	if (s->doing.nlive >= m->conf.max_tasks_in_flight)
		return -ENOSPC;
	if (grow((void **)&s->doing.v, &s->doing.cap, s->doing.n + 1, sizeof(*s->doing.v)) < 0)
		return -ENOMEM;

	const struct shard_dsconf *dc = &m->ds[ds];
	struct shard_dsstate *dst = &s->ds[ds];
	struct shard_range r;
	/* Returned ranges first, the lowest epoch and sample first. */
	struct shard_range key = { ds, INT32_MIN, INT64_MIN, 0 };
	int i = range_lower(&s->ranges, &key);
	if (i < s->ranges.n && s->ranges.v[i].ds == ds) {
		r = s->ranges.v[i];
		memmove(&s->ranges.v[i], &s->ranges.v[i + 1],
			(size_t)(s->ranges.n - i - 1) * sizeof(r));
		s->ranges.n--;
		dst->nranges--;
	} else {
		/* No returned range of this dataset is left: the next epoch may start. */
		while (dst->cur.pos >= dc->nshards && dst->cur.epoch + 1 < dc->d.epochs) {
			dst->cur.epoch++;
			dst->cur.pos = 0;
		}
		if (dst->cur.pos >= dc->nshards)
			return 0;
		int64_t sh = perm(dc, dst->cur.epoch, dst->cur.pos++);
		r = (struct shard_range){ ds, dst->cur.epoch, sh * dc->d.shard_size,
					  sh * dc->d.shard_size + shard_len(dc, sh) };
	}

	int64_t deadline = doing_deadline(m, now_ms);
	if (s->doing.nlive > 0 && deadline < s->doing.v[s->doing.n - 1].deadline)
		s->doing.sorted = false;
	if (s->doing.nlive == 0) {
		s->doing.n = s->doing.head = 0;
		s->doing.sorted = true;
	}
	s->doing.v[s->doing.n++] = (struct shard_doing){
		.id = s->next_id++,
		.worker = worker,
		.deadline = deadline,
		.ds = r.ds,
		.epoch = r.epoch,
		.start = r.start,
		.end = r.end,
		.live = true,
	};
	s->doing.nlive++;
	dst->ndoing++;
	s->seq++;
	*out = (struct shard_task){ s->next_id - 1, r.ds, r.epoch, r.start, r.end };
	return 1;
}

int shard_done(struct shard_mgr *m, int64_t task_id, int64_t worker, int64_t now_ms)
{
	struct shard_state *s = &m->st;
	(void)now_ms; /* part of the operation's record; a late done is judged by state, not time */
	int i = doing_find(s, task_id);
	if (i < 0)
		return 0;
	struct shard_doing d = s->doing.v[i];
	if (d.worker != worker)
		return -EPERM;
	struct shard_worker *w = worker_get(s, worker);
	if (!w || worker_ring_alloc(w) < 0)
		return -ENOMEM;
	doing_remove(s, i);
	doing_compact(s);
	s->ds[d.ds].samples_done += d.end - d.start;
	s->seq++;
	worker_ring_push(w, &(struct shard_recent){ d.id, s->seq, d.ds, d.epoch, d.start, d.end });
	return 1;
}

int shard_worker_dead(struct shard_mgr *m, int64_t worker)
{
	struct shard_state *s = &m->st;
	int n = 0;
	for (int i = s->doing.head; i < s->doing.n; i++)
		if (s->doing.v[i].live && s->doing.v[i].worker == worker)
			n++;
	struct shard_worker *w = worker_get(s, worker);
	if (!w || rangevec_reserve(&s->ranges, n) < 0)
		return -ENOMEM;
	/* Its recent dones go with it: a report for a step whose first report
	 * came before this death can no longer be reconciled (lost_seq). */
	if (n == 0) {
		free(w->ring);
		w->ring = NULL;
	} else if (worker_ring_alloc(w) < 0) {
		return -ENOMEM;
	}
	w->nring = w->ring_head = 0;
	w->lost_seq = ++s->seq;
	for (int i = s->doing.head; i < s->doing.n; i++) {
		const struct shard_doing *d = &s->doing.v[i];
		if (d->live && d->worker == worker) {
			/* in its ring at its death's seq: a step report of the
			 * worker still on its way (a node leaves before its
			 * workers stopped) places what it consumed of it */
			if (w->ring)
				worker_ring_push(w, &(struct shard_recent){ d->id, w->lost_seq,
									    d->ds, d->epoch,
									    d->start, d->end });
			doing_return(m, s, i);
			doing_remove(s, i);
		}
	}
	doing_compact(s);
	return n;
}

/* Whether DOING entry d is due at now_ms and its worker no longer holds it. */
static bool doing_expired(const struct shard_doing *d, int64_t now_ms, shard_held_fn held,
			  const void *arg)
{
	return d->live && d->deadline <= now_ms && !(held && held(arg, d->worker));
}

int shard_expire(struct shard_mgr *m, int64_t now_ms, shard_held_fn held, const void *arg)
{
	struct shard_state *s = &m->st;
	if (m->conf.doing_timeout_ms <= 0 || s->doing.nlive == 0)
		return 0;
	int n = 0, due = 0;
	for (int i = s->doing.head; i < s->doing.n; i++) {
		const struct shard_doing *d = &s->doing.v[i];
		if (d->live && d->deadline <= now_ms) {
			due++;
			n += doing_expired(d, now_ms, held, arg);
		} else if (d->live && s->doing.sorted) {
			break;
		}
	}
	if (due == 0)
		return 0;
	if (rangevec_reserve(&s->ranges, n) < 0)
		return -ENOMEM;
	for (int i = s->doing.head, left = due; i < s->doing.n && left > 0; i++) {
		struct shard_doing *d = &s->doing.v[i];
		if (!d->live || d->deadline > now_ms)
			continue;
		left--;
		if (doing_expired(d, now_ms, held, arg)) {
			doing_return(m, s, i);
			doing_remove(s, i);
		} else {
			d->deadline = doing_deadline(m, now_ms); /* still held: wait again */
		}
	}
	doing_compact(s);
	if (n < due) /* renewed deadlines are the latest: those after them may be earlier */
		doing_check_sorted(s);
	if (n > 0)
		s->seq++;
	return n;
}

int64_t shard_next_deadline(const struct shard_mgr *m)
{
	const struct shard_state *s = &m->st;
	if (m->conf.doing_timeout_ms <= 0 || s->doing.nlive == 0)
		return INT64_MAX;
	int64_t min = INT64_MAX;
	for (int i = s->doing.head; i < s->doing.n; i++) {
		if (!s->doing.v[i].live)
			continue;
		if (s->doing.sorted)
			return s->doing.v[i].deadline;
		if (s->doing.v[i].deadline < min)
			min = s->doing.v[i].deadline;
	}
	return min;
}

static void stats_one(const struct shard_mgr *m, int ds, struct shard_stats *st)
{
	const struct shard_dsconf *dc = &m->ds[ds];
	const struct shard_dsstate *d = &m->st.ds[ds];
	st->samples_total = dc->d.size * dc->d.epochs;
	st->samples_done = d->samples_done;
	st->tasks_doing = d->ndoing;
	st->todo_ranges = d->nranges;
	st->epoch = d->cur.epoch;
	st->finished = d->samples_done == st->samples_total;
}

void shard_stats(const struct shard_mgr *m, int ds, struct shard_stats *st)
{
	memset(st, 0, sizeof(*st));
	if (ds >= m->nds)
		return;
	if (ds >= 0) {
		stats_one(m, ds, st);
		return;
	}
	st->finished = true;
	st->epoch = INT_MAX;
	for (int i = 0; i < m->nds; i++) {
		struct shard_stats one;
		stats_one(m, i, &one);
		st->samples_total += one.samples_total;
		st->samples_done += one.samples_done;
		st->tasks_doing += one.tasks_doing;
		st->todo_ranges += one.todo_ranges;
		st->finished = st->finished && one.finished;
		if (one.epoch < st->epoch)
			st->epoch = one.epoch;
	}
}

/* ---- checkpoints ---- */

static struct shard_step *step_find(const struct shard_state *s, int64_t step)
{
	for (int i = 0; i < s->nsteps; i++)
		if (s->steps[i]->step == step)
			return s->steps[i];
	return NULL;
}

/* The TODO state now, as the base of a new checkpoint step. */
static struct shard_step *step_new(const struct shard_mgr *m, int64_t step)
{
	const struct shard_state *s = &m->st;
	struct shard_step *st = calloc(1, sizeof(*st));
	if (!st)
		return NULL;
	st->step = step;
	st->seq = s->seq;
	st->cur = calloc((size_t)m->nds, sizeof(*st->cur));
	if (!st->cur || rangevec_reserve(&st->todo, s->ranges.n + s->doing.nlive) < 0) {
		step_free(st);
		return NULL;
	}
	for (int i = 0; i < m->nds; i++)
		st->cur[i] = s->ds[i].cur;
	if (s->ranges.n)
		memcpy(st->todo.v, s->ranges.v, (size_t)s->ranges.n * sizeof(*s->ranges.v));
	st->todo.n = s->ranges.n;
	for (int i = s->doing.head; i < s->doing.n; i++) {
		const struct shard_doing *d = &s->doing.v[i];
		if (d->live)
			st->todo.v[st->todo.n++] =
				(struct shard_range){ d->ds, d->epoch, d->start, d->end };
	}
	rangevec_normalize(m, &st->todo);
	return st;
}

/* Install a new step, dropping the oldest when SHARD_MAX_PENDING_STEPS are kept. */
static void step_install(struct shard_state *s, struct shard_step *st)
{
	if (s->nsteps == SHARD_MAX_PENDING_STEPS) {
		int old = 0;
		for (int i = 1; i < s->nsteps; i++)
			if (s->steps[i]->seq < s->steps[old]->seq)
				old = i;
		if (s->steps[old]->step > s->dropped_step)
			s->dropped_step = s->steps[old]->step;
		step_free(s->steps[old]);
		s->steps[old] = s->steps[--s->nsteps];
	}
	s->steps[s->nsteps++] = st;
}

/* Whether r was TODO at the step's first report: inside its todo copy, or
 * ahead of its cursor. */
static bool step_was_todo(const struct shard_mgr *m, const struct shard_step *st,
			  const struct shard_range *r)
{
	if (range_find_containing(&st->todo, r) >= 0)
		return true;
	const struct shard_dsconf *dc = &m->ds[r->ds];
	int64_t pos = perm_inv(dc, r->epoch, r->start / dc->d.shard_size);
	return cur_cmp(r->epoch, pos, st->cur[r->ds].epoch, st->cur[r->ds].pos) >= 0;
}

static int add_interval(struct rangevec *iv, int32_t ds, int32_t epoch, int64_t start, int64_t end)
{
	if (end <= start)
		return 0;
	if (rangevec_reserve(iv, 1) < 0)
		return -ENOMEM;
	iv->v[iv->n++] = (struct shard_range){ ds, epoch, start, end };
	return 0;
}

/* A report of step (first reported at base_seq) is exact only if its
 * worker neither died nor pushed a done out of its ring since. */
static int report_check_worker(const struct shard_worker *w, int64_t step, int64_t worker,
			       int64_t base_seq, struct rv_err *err)
{
	if (w && w->lost_seq > base_seq)
		return rv_err_set(err, -ERANGE, "worker",
				  "worker %" PRId64 " died after the first report of step %" PRId64,
				  worker, step);
	if (w && w->evicted_seq > base_seq)
		return rv_err_set(err, -ERANGE, "worker",
				  "worker %" PRId64
				  " finished more than %d tasks since the first report of "
				  "step %" PRId64,
				  worker, SHARD_RING, step);
	return 0;
}

/* The reported task still DOING: what the worker consumed of it. */
static int report_task_doing(const struct shard_doing *d, int64_t worker, int64_t consumed,
			     struct rangevec *iv, struct rv_err *err)
{
	if (d->worker != worker)
		return rv_err_set(err, -ERANGE, "task_id",
				  "task %" PRId64 " is worker %" PRId64 "'s, not worker %" PRId64
				  "'s",
				  d->id, d->worker, worker);
	if (consumed > d->end - d->start)
		return rv_err_set(err, -EINVAL, "consumed",
				  "consumed must be at most the task's %" PRId64 " samples",
				  d->end - d->start);
	return add_interval(iv, d->ds, d->epoch, d->start, d->start + consumed);
}

/* The reported task done and in the worker's ring: all of it DONE already
 * when done before the step's first report, else what it consumed. */
static int report_task_done(const struct shard_recent *rc, int64_t step, int64_t consumed,
			    int64_t base_seq, struct rangevec *iv, struct rv_err *err)
{
	if (consumed > rc->end - rc->start)
		return rv_err_set(err, -EINVAL, "consumed",
				  "consumed must be at most the task's %" PRId64 " samples",
				  rc->end - rc->start);
	if (rc->seq > base_seq)
		return add_interval(iv, rc->ds, rc->epoch, rc->start, rc->start + consumed);
	if (consumed != rc->end - rc->start)
		return rv_err_set(err, -ERANGE, "consumed",
				  "task %" PRId64 " was done before step %" PRId64
				  "'s first report but is reported %" PRId64 " of %" PRId64
				  " consumed",
				  rc->id, step, consumed, rc->end - rc->start);
	return 0;
}

/* The reported task (0: none): its dataset into *ds (-1 for none) and what
 * the worker consumed of it into iv. */
static int report_task(const struct shard_mgr *m, const struct shard_worker *w, int64_t step,
		       int64_t worker, int64_t task_id, int64_t consumed, int64_t base_seq,
		       struct rangevec *iv, int32_t *ds, struct rv_err *err)
{
	const struct shard_state *s = &m->st;
	*ds = -1;
	if (task_id == 0)
		return 0;
	int i = doing_find(s, task_id);
	const struct shard_recent *rc = i < 0 ? worker_ring_find(w, task_id) : NULL;
	if (i >= 0) {
		*ds = s->doing.v[i].ds;
		return report_task_doing(&s->doing.v[i], worker, consumed, iv, err);
	}
	if (rc && rc->seq == w->lost_seq) {
		/* Taken back at the worker's death, after what it consumed of it
		 * went into this step: those samples were TODO again at the
		 * step's first report (report_check_claims), so the step counts
		 * them consumed, else its data checkpoint hands them out again. */
		*ds = rc->ds;
		if (consumed > rc->end - rc->start)
			return rv_err_set(err, -EINVAL, "consumed",
					  "consumed must be at most the task's %" PRId64 " samples",
					  rc->end - rc->start);
		return add_interval(iv, rc->ds, rc->epoch, rc->start, rc->start + consumed);
	}
	if (rc) {
		*ds = rc->ds;
		return report_task_done(rc, step, consumed, base_seq, iv, err);
	}
	/* Done long before, or taken back from this worker (then what it
	 * consumed of it counts for nothing): either way nothing of it to
	 * carve; its predecessors still are. */
	if (task_id < 0 || task_id >= s->next_id)
		return rv_err_set(err, -ERANGE, "task_id", "task %" PRId64 " was never handed out",
				  task_id);
	if (m->nds > 1)
		return rv_err_set(err, -ERANGE, "task_id",
				  "task %" PRId64 " is no longer known: its dataset is unknown",
				  task_id);
	*ds = 0;
	return 0;
}

/* The worker's earlier tasks of dataset ds, DOING or done since base_seq:
 * consumed before the step. */
static int report_earlier(const struct shard_state *s, const struct shard_worker *w, int64_t worker,
			  int32_t ds, int64_t task_id, int64_t base_seq, struct rangevec *iv)
{
	for (int i = s->doing.head; i < s->doing.n; i++) {
		const struct shard_doing *d = &s->doing.v[i];
		if (d->live && d->worker == worker && d->ds == ds && d->id < task_id &&
		    add_interval(iv, ds, d->epoch, d->start, d->end) < 0)
			return -ENOMEM;
	}
	for (int i = 0; w && i < w->nring; i++) {
		const struct shard_recent *r = &w->ring[(w->ring_head + i) % SHARD_RING];
		if (r->seq > base_seq && r->ds == ds && r->id < task_id &&
		    add_interval(iv, ds, r->epoch, r->start, r->end) < 0)
			return -ENOMEM;
	}
	return 0;
}

/* Every interval (sorted here) was TODO at the first report, and no other
 * report claimed it: otherwise the checkpoint could not be exact. */
static int report_check_claims(const struct shard_mgr *m, const struct shard_step *st,
			       struct rangevec *iv, int64_t step, struct rv_err *err)
{
	if (iv->n > 1)
		qsort(iv->v, (size_t)iv->n, sizeof(*iv->v), range_qcmp);
	for (int i = 0; i < iv->n; i++) {
		const struct shard_range *r = &iv->v[i];
		if (!step_was_todo(m, st, r) || range_overlaps(&st->carved, r) ||
		    (i > 0 && iv->v[i - 1].ds == r->ds && iv->v[i - 1].epoch == r->epoch &&
		     iv->v[i - 1].end > r->start))
			return rv_err_set(err, -ERANGE, "task_id",
					  "samples [%" PRId64 ",%" PRId64
					  ") of epoch %d reported consumed "
					  "at step %" PRId64
					  " were not TODO at its first report or are "
					  "claimed twice",
					  r->start, r->end, r->epoch, step);
	}
	return 0;
}

/* Carve iv out of step st (fresh: a new step, installed here) and record
 * the report. */
static int report_record(struct shard_mgr *m, struct shard_step *st, struct shard_step *fresh,
			 const struct rangevec *iv, const struct shard_report *rep)
{
	if (rangevec_reserve(&st->carved, iv->n) < 0 ||
	    grow((void **)&st->rep, &st->caprep, st->nrep + 1, sizeof(*st->rep)) < 0) {
		step_free(fresh);
		return -ENOMEM;
	}
	for (int i = 0; i < iv->n; i++)
		range_insert(m, &st->carved, &iv->v[i]);
	st->rep[st->nrep++] = *rep;
	if (fresh)
		step_install(&m->st, fresh);
	return 0;
}

int shard_ckpt_report(struct shard_mgr *m, int64_t step, int64_t worker, int64_t task_id,
		      int64_t consumed, struct rv_err *err)
{
	struct shard_state *s = &m->st;
	if (step < 0)
		return rv_err_set(err, -EINVAL, "step", "step must be >= 0");
	if (consumed < 0)
		return rv_err_set(err, -EINVAL, "consumed", "consumed must be >= 0");
	struct shard_step *st = step_find(s, step);
	if (!st && step <= s->dropped_step)
		return rv_err_set(err, -ERANGE, "step",
				  "step %" PRId64 " is older than the %d checkpoint steps kept",
				  step, SHARD_MAX_PENDING_STEPS);
	/* A retry of a report already recorded (whatever happened since). */
	for (int i = 0; st && i < st->nrep; i++)
		if (st->rep[i].worker == worker && st->rep[i].task == task_id &&
		    st->rep[i].consumed == consumed)
			return 0;
	/* The base seq: the first report's, or now for this one. */
	int64_t base_seq = st ? st->seq : s->seq;
	const struct shard_worker *w = worker_find(s, worker);
	int rc = report_check_worker(w, step, worker, base_seq, err);
	if (rc < 0)
		return rc;
	RV_CLEANUP_RANGEVEC struct rangevec iv = { 0 };
	int32_t ds;
	rc = report_task(m, w, step, worker, task_id, consumed, base_seq, &iv, &ds, err);
	if (rc < 0)
		return rc == -ENOMEM ? rv_err_set(err, -ENOMEM, "", SHARD_REPORT_NOMEM) : rc;
	for (int i = 0; st && i < st->nrep; i++) {
		const struct shard_report *r = &st->rep[i];
		if (r->worker == worker && r->ds == ds)
			return rv_err_set(err, -EEXIST, "task_id",
					  "worker %" PRId64 " already reported task %" PRId64
					  " at %" PRId64 " for step %" PRId64,
					  worker, r->task, r->consumed, step);
	}
	if (ds >= 0 && report_earlier(s, w, worker, ds, task_id, base_seq, &iv) < 0)
		return rv_err_set(err, -ENOMEM, "", SHARD_REPORT_NOMEM);
	struct shard_step *fresh = NULL;
	if (!st && !(st = fresh = step_new(m, step)))
		return rv_err_set(err, -ENOMEM, "", SHARD_REPORT_NOMEM);
	if ((rc = report_check_claims(m, st, &iv, step, err)) < 0) {
		step_free(fresh);
		return rc;
	}
	const struct shard_report rep = { worker, task_id, consumed, ds };
	if (report_record(m, st, fresh, &iv, &rep) < 0)
		return rv_err_set(err, -ENOMEM, "", SHARD_REPORT_NOMEM);
	return 0;
}

int shard_ckpt_expect(struct shard_mgr *m, int64_t step, int ranks)
{
	struct shard_step *st = step_find(&m->st, step);
	if (!st)
		return -ENOENT;
	if (st->expect == 0 && ranks > 0)
		st->expect = ranks;
	return 0;
}

/* Workers that reported the step (one worker may report once per dataset). */
static int step_reporters(const struct shard_step *st)
{
	int n = 0;
	for (int i = 0; i < st->nrep; i++) {
		bool seen = false;
		for (int k = 0; k < i && !seen; k++)
			seen = st->rep[k].worker == st->rep[i].worker;
		n += !seen;
	}
	return n;
}

/*
 * Whether a step reported in part can never be whole: every rank of its
 * world that did not report it never will, because it died since the
 * step's first report or finished more than SHARD_RING tasks since (its
 * report would be refused, shard_ckpt_report), or because it reported a
 * later step (a worker reports its steps in order: it skipped this one,
 * as ranks that save at different steps do).  -ENOMEM when the ranks
 * cannot be counted (then it may still be whole, for all we know).
 */
static int step_hopeless(const struct shard_state *s, const struct shard_step *st)
{
	if (st->expect <= 0)
		return 0;
	RV_CLEANUP_FREE unsigned char *gone = calloc((size_t)st->expect, 1);
	if (!gone)
		return -ENOMEM;
	for (int i = 0; i < st->nrep; i++)
		if (st->rep[i].worker >= 0 && st->rep[i].worker < st->expect)
			gone[st->rep[i].worker] = 1;
	for (int k = 0; k < s->nsteps; k++) {
		const struct shard_step *later = s->steps[k];
		if (later->step <= st->step)
			continue;
		for (int i = 0; i < later->nrep; i++)
			if (later->rep[i].worker >= 0 && later->rep[i].worker < st->expect)
				gone[later->rep[i].worker] = 1;
	}
	for (int64_t w = 0; w < st->expect; w++) {
		if (gone[w])
			continue;
		const struct shard_worker *wk = worker_find(s, w);
		if (!wk || (wk->lost_seq <= st->seq && wk->evicted_seq <= st->seq))
			return 0;
	}
	return 1;
}

/* The TODO of a step's checkpoint: cursors in cur, ranges in out (sorted). */
static int step_resolve(const struct shard_mgr *m, const struct shard_step *st,
			struct shard_cur *cur, struct rangevec *out, struct rv_err *err)
{
	int cap = m->conf.max_todo_ranges;
	memcpy(cur, st->cur, (size_t)m->nds * sizeof(*cur));
	/* The todo copy minus what was carved out of it (a carved interval
	 * lies wholly inside one todo range, or wholly ahead of the cursor). */
	for (int i = 0; i < st->todo.n; i++) {
		struct shard_range r = st->todo.v[i];
		for (int k = range_lower(&st->carved, &r); k < st->carved.n; k++) {
			const struct shard_range *c = &st->carved.v[k];
			if (c->ds != r.ds || c->epoch != r.epoch || c->start >= r.end)
				break;
			if (c->start > r.start &&
			    add_interval(out, r.ds, r.epoch, r.start, c->start) < 0)
				goto nomem;
			r.start = c->end;
		}
		if (add_interval(out, r.ds, r.epoch, r.start, r.end) < 0)
			goto nomem;
	}
	/* Carved intervals ahead of the cursor: the cursor moves past the last
	 * of them and what it passes that was not carved becomes ranges. */
	for (int ds = 0; ds < m->nds; ds++) {
		const struct shard_dsconf *dc = &m->ds[ds];
		struct shard_cur last = { -1, 0 };
		for (int k = 0; k < st->carved.n; k++) {
			const struct shard_range *c = &st->carved.v[k];
			if (c->ds != ds || range_find_containing(&st->todo, c) >= 0)
				continue;
			int64_t pos = perm_inv(dc, c->epoch, c->start / dc->d.shard_size);
			if (cur_cmp(c->epoch, pos, last.epoch, last.pos) > 0)
				last = (struct shard_cur){ c->epoch, pos };
		}
		if (last.epoch < 0)
			continue;
		struct shard_cur c = cur[ds];
		int budget = cap + st->carved.n + 1;
		while (cur_cmp(c.epoch, c.pos, last.epoch, last.pos) <= 0) {
			if (c.pos >= dc->nshards) {
				c.epoch++;
				c.pos = 0;
				continue;
			}
			if (--budget < 0 || out->n > cap)
				return rv_err_set(err, -ERANGE, "step",
						  "checkpoint of step %" PRId64
						  " would hold more than %d ranges",
						  st->step, cap);
			int64_t sh = perm(dc, c.epoch, c.pos);
			struct shard_range r = { ds, c.epoch, sh * dc->d.shard_size,
						 sh * dc->d.shard_size + shard_len(dc, sh) };
			struct shard_range key = { ds, c.epoch, r.start, 0 };
			for (int k = range_lower(&st->carved, &key); k < st->carved.n; k++) {
				const struct shard_range *cv = &st->carved.v[k];
				if (cv->ds != ds || cv->epoch != c.epoch || cv->start >= r.end)
					break;
				if (cv->start > r.start &&
				    add_interval(out, ds, c.epoch, r.start, cv->start) < 0)
					goto nomem;
				r.start = cv->end;
			}
			if (add_interval(out, ds, c.epoch, r.start, r.end) < 0)
				goto nomem;
			c.pos++;
		}
		cur[ds] = c;
	}
	rangevec_normalize(m, out);
	if (out->n > cap)
		return rv_err_set(err, -ERANGE, "step",
				  "checkpoint of step %" PRId64 " would hold more than %d ranges",
				  st->step, cap);
	return 0;
nomem:
	return rv_err_set(err, -ENOMEM, "", "could not build the checkpoint: out of memory");
}

/* ---- documents ---- */

static void put_dataset(struct rv_buf *b, const struct shard_dsconf *dc, struct shard_cur cur,
			int64_t done)
{
	rv_buf_printf(b,
		      "{\"name\":\"%s\",\"size\":%" PRId64 ",\"shard_size\":%" PRId64
		      ",\"epochs\":%d,\"shuffle\":%s,\"seed\":\"%" PRIu64
		      "\",\"epoch\":%d,\"pos\":%" PRId64 ",\"samples_done\":%" PRId64 ",\"todo\":[",
		      dc->d.name, dc->d.size, dc->d.shard_size, dc->d.epochs,
		      dc->d.shuffle ? "true" : "false", dc->d.seed, cur.epoch, cur.pos, done);
}

/* Print ranges of dataset ds as [epoch,start,end] triples. */
static void put_ranges_of(struct rv_buf *b, const struct rangevec *rv, int ds)
{
	struct shard_range key = { ds, INT32_MIN, INT64_MIN, 0 };
	bool first = true;
	for (int i = range_lower(rv, &key); i < rv->n && rv->v[i].ds == ds; i++) {
		rv_buf_printf(b, "%s[%d,%" PRId64 ",%" PRId64 "]", first ? "" : ",", rv->v[i].epoch,
			      rv->v[i].start, rv->v[i].end);
		first = false;
	}
}

int shard_ckpt_export(const struct shard_mgr *m, int64_t step, struct rv_buf *out,
		      struct rv_err *err)
{
	const struct shard_step *st = step_find(&m->st, step);
	if (!st)
		return rv_err_set(err, -ENOENT, "step",
				  "no checkpoint report of step %" PRId64 " is kept", step);
	int have = step_reporters(st);
	if (st->expect > 0 && have < st->expect) {
		if (step_hopeless(&m->st, st) == 1)
			return rv_err_set(err, -ESTALE, "step",
					  "step %" PRId64 " has the reports of %d of its %d ranks"
					  " and the others will not report it (they died or"
					  " reported a later step)",
					  step, have, st->expect);
		return rv_err_set(err, -EBUSY, "step",
				  "step %" PRId64 " has the reports of %d of its %d ranks", step,
				  have, st->expect);
	}
	RV_CLEANUP_FREE struct shard_cur *cur = calloc((size_t)m->nds, sizeof(*cur));
	struct rangevec todo = { 0 };
	if (!cur)
		return rv_err_set(err, -ENOMEM, "",
				  "could not build the checkpoint: out of memory");
	int rc = step_resolve(m, st, cur, &todo, err);
	if (rc < 0) {
		rangevec_release(&todo);
		return rc;
	}
	size_t mark = out->len;
	rv_buf_printf(out,
		      "{\"version\":%d,\"kind\":\"rover-shard-ckpt\",\"step\":%" PRId64
		      ",\"next_id\":%" PRId64 ",\"datasets\":[",
		      SHARD_DOC_VERSION, step, m->st.next_id);
	for (int ds = 0; ds < m->nds; ds++) {
		int64_t left = cur_remaining(&m->ds[ds], cur[ds]);
		for (int i = 0; i < todo.n; i++)
			if (todo.v[i].ds == ds)
				left += todo.v[i].end - todo.v[i].start;
		if (ds)
			rv_buf_puts(out, ",");
		put_dataset(out, &m->ds[ds], cur[ds], m->ds[ds].d.size * m->ds[ds].d.epochs - left);
		put_ranges_of(out, &todo, ds);
		rv_buf_puts(out, "]}");
	}
	rv_buf_puts(out, "]}");
	rangevec_release(&todo);
	if (rv_buf_failed(out)) {
		rv_buf_truncate(out, mark);
		return rv_err_set(err, -ENOMEM, "",
				  "could not print the checkpoint: out of memory");
	}
	return 0;
}

static int worker_qcmp(const void *a, const void *b)
{
	const struct shard_worker *x = *(const struct shard_worker *const *)a;
	const struct shard_worker *y = *(const struct shard_worker *const *)b;
	return x->id < y->id ? -1 : x->id > y->id;
}

/* ---- the snapshot's entries, by name ----
 * Snapshots before the names held each entry as an array of its rows'
 * values in table order ([id,ds,epoch,start,end,worker,deadline] for a
 * task DOING); rv_wire_decode_entry still reads that form.  The bounds
 * here are the widest; the loaders narrow them to the manager's. */
#define T struct shard_range
static const struct rv_wire_field snap_range_fields[] = {
	WINT("ds", ds, RV_WIRE_REQ, 0, INT_MAX, "dataset index"),
	WINT("epoch", epoch, RV_WIRE_REQ, 0, SHARD_MAX_EPOCHS, "epoch"),
	WINT("start", start, RV_WIRE_REQ, 0, JSON_INT_MAX, "first sample"),
	WINT("end", end, RV_WIRE_REQ, 1, JSON_INT_MAX, "sample after the last"),
};
/* A TODO range inside its dataset's entry: the dataset is implied. */
static const struct rv_wire_field snap_todo_fields[] = {
	WINT("epoch", epoch, RV_WIRE_REQ, 0, SHARD_MAX_EPOCHS, "epoch"),
	WINT("start", start, RV_WIRE_REQ, 0, JSON_INT_MAX, "first sample"),
	WINT("end", end, RV_WIRE_REQ, 1, JSON_INT_MAX, "sample after the last"),
};
static const struct rv_wire_message snap_range_msg =
	RV_WIRE_MSG("SnapshotRange", "samples [start, end) of a dataset's epoch", snap_range_fields,
		    "range", NULL);
static const struct rv_wire_message snap_todo_msg =
	RV_WIRE_MSG("SnapshotTodo", "a range returned to TODO", snap_todo_fields, "range", NULL);
#undef T
#define T struct shard_doing
static const struct rv_wire_field snap_doing_fields[] = {
	WINT("id", id, RV_WIRE_REQ, 1, JSON_INT_MAX, "task id"),
	WINT("ds", ds, RV_WIRE_REQ, 0, INT_MAX, "dataset index"),
	WINT("epoch", epoch, RV_WIRE_REQ, 0, SHARD_MAX_EPOCHS, "epoch"),
	WINT("start", start, RV_WIRE_REQ, 0, JSON_INT_MAX, "first sample"),
	WINT("end", end, RV_WIRE_REQ, 1, JSON_INT_MAX, "sample after the last"),
	WINT("worker", worker, RV_WIRE_REQ, -JSON_INT_MAX, JSON_INT_MAX, "worker holding it"),
	WINT("deadline", deadline, RV_WIRE_REQ, -1, JSON_INT_MAX, "ms since the epoch, -1: none"),
};
static const struct rv_wire_message snap_doing_msg =
	RV_WIRE_MSG("SnapshotDoing", "a task handed out and not yet done", snap_doing_fields,
		    "task", NULL);
#undef T
#define T struct shard_recent
static const struct rv_wire_field snap_recent_fields[] = {
	WINT("id", id, RV_WIRE_REQ, 1, JSON_INT_MAX, "task id"),
	WINT("seq", seq, RV_WIRE_REQ, 1, JSON_INT_MAX, "the manager's seq when it was counted"),
	WINT("ds", ds, RV_WIRE_REQ, 0, INT_MAX, "dataset index"),
	WINT("epoch", epoch, RV_WIRE_REQ, 0, SHARD_MAX_EPOCHS, "epoch"),
	WINT("start", start, RV_WIRE_REQ, 0, JSON_INT_MAX, "first sample"),
	WINT("end", end, RV_WIRE_REQ, 1, JSON_INT_MAX, "sample after the last"),
};
static const struct rv_wire_message snap_recent_msg =
	RV_WIRE_MSG("SnapshotRecent", "a done in a worker's ring", snap_recent_fields, "ring entry",
		    NULL);
#undef T
#define T struct shard_cur
static const struct rv_wire_field snap_cursor_fields[] = {
	WINT("epoch", epoch, RV_WIRE_REQ, 0, SHARD_MAX_EPOCHS, "epoch"),
	WINT("pos", pos, RV_WIRE_REQ, 0, JSON_INT_MAX, "next position in the epoch's order"),
};
static const struct rv_wire_message snap_cursor_msg =
	RV_WIRE_MSG("SnapshotCursor", "a dataset's cursor at a step", snap_cursor_fields, "cursor",
		    NULL);
#undef T
#define T struct shard_report
static const struct rv_wire_field snap_report_fields[] = {
	WINT("worker", worker, RV_WIRE_REQ, -JSON_INT_MAX, JSON_INT_MAX, "reporting worker"),
	WINT("ds", ds, RV_WIRE_REQ, -1, INT_MAX, "dataset index, -1: no task"),
	WINT("task", task, RV_WIRE_REQ, 0, JSON_INT_MAX, "task it held, 0: none"),
	WINT("consumed", consumed, RV_WIRE_REQ, 0, JSON_INT_MAX, "samples of it consumed"),
};
static const struct rv_wire_message snap_report_msg =
	RV_WIRE_MSG("SnapshotReport", "a worker's checkpoint report", snap_report_fields, "report",
		    NULL);
#undef T

/* Ranges of dataset ds as TODO entries, or (ds < 0) all of them with
 * their dataset. */
static int save_ranges(struct rv_buf *b, const struct rangevec *rv, int ds)
{
	struct shard_range key = { ds, INT32_MIN, INT64_MIN, 0 };
	int i = ds < 0 ? 0 : range_lower(rv, &key), rc = 0;
	for (int k = 0; rc == 0 && i < rv->n && (ds < 0 || rv->v[i].ds == ds); i++, k++)
		rc = rv_wire_encode_text(ds < 0 ? &snap_range_msg : &snap_todo_msg, &rv->v[i],
					 k > 0, b);
	return rc;
}

static int save_doing(const struct shard_state *s, struct rv_buf *out)
{
	bool first = true;
	for (int i = s->doing.head; i < s->doing.n; i++) {
		struct shard_doing d = s->doing.v[i];
		if (!d.live)
			continue;
		if (d.deadline == INT64_MAX)
			d.deadline = -1;
		if (rv_wire_encode_text(&snap_doing_msg, &d, !first, out) < 0)
			return -ENOMEM;
		first = false;
	}
	return 0;
}

/* By id, so that a loaded state saves to the same text. */
static int save_workers(const struct shard_state *s, struct rv_buf *out)
{
	RV_CLEANUP_FREE const struct shard_worker **ws =
		malloc((size_t)(s->workers.n + 1) * sizeof(*ws));
	if (!ws)
		return -ENOMEM;
	int nw = 0;
	for (int i = 0; i < s->workers.cap; i++)
		if (s->workers.v[i].used)
			ws[nw++] = &s->workers.v[i];
	if (nw > 1)
		qsort(ws, (size_t)nw, sizeof(*ws), worker_qcmp);
	for (int i = 0; i < nw; i++) {
		const struct shard_worker *w = ws[i];
		rv_buf_printf(out,
			      "%s{\"id\":%" PRId64 ",\"lost_seq\":%" PRId64
			      ",\"evicted_seq\":%" PRId64 ",\"ring\":[",
			      i ? "," : "", w->id, w->lost_seq, w->evicted_seq);
		for (int k = 0; k < w->nring; k++)
			if (rv_wire_encode_text(&snap_recent_msg,
						&w->ring[(w->ring_head + k) % SHARD_RING], k > 0,
						out) < 0)
				return -ENOMEM;
		rv_buf_puts(out, "]}");
	}
	return 0;
}

static int save_step(const struct shard_mgr *m, const struct shard_step *st, bool comma,
		     struct rv_buf *out)
{
	rv_buf_printf(out,
		      "%s{\"step\":%" PRId64 ",\"seq\":%" PRId64 ",\"expect\":%d,\"cursors\":[",
		      comma ? "," : "", st->step, st->seq, st->expect);
	int rc = 0;
	for (int ds = 0; rc == 0 && ds < m->nds; ds++)
		rc = rv_wire_encode_text(&snap_cursor_msg, &st->cur[ds], ds > 0, out);
	rv_buf_puts(out, "],\"todo\":[");
	if (rc == 0)
		rc = save_ranges(out, &st->todo, -1);
	rv_buf_puts(out, "],\"carved\":[");
	if (rc == 0)
		rc = save_ranges(out, &st->carved, -1);
	rv_buf_puts(out, "],\"reports\":[");
	for (int k = 0; rc == 0 && k < st->nrep; k++)
		rc = rv_wire_encode_text(&snap_report_msg, &st->rep[k], k > 0, out);
	rv_buf_puts(out, "]}");
	return rc;
}

int shard_snapshot_save(const struct shard_mgr *m, struct rv_buf *out)
{
	const struct shard_state *s = &m->st;
	size_t mark = out->len;
	rv_buf_printf(out,
		      "{\"version\":%d,\"kind\":\"rover-shard-snapshot\",\"next_id\":%" PRId64
		      ",\"seq\":%" PRId64 ",\"dropped_step\":%" PRId64 ",\"datasets\":[",
		      SHARD_DOC_VERSION, s->next_id, s->seq, s->dropped_step);
	int rc = 0;
	for (int ds = 0; rc == 0 && ds < m->nds; ds++) {
		if (ds)
			rv_buf_puts(out, ",");
		put_dataset(out, &m->ds[ds], s->ds[ds].cur, s->ds[ds].samples_done);
		rc = save_ranges(out, &s->ranges, ds);
		rv_buf_puts(out, "]}");
	}
	rv_buf_puts(out, "],\"doing\":[");
	if (rc == 0)
		rc = save_doing(s, out);
	rv_buf_puts(out, "],\"workers\":[");
	if (rc == 0)
		rc = save_workers(s, out);
	rv_buf_puts(out, "],\"steps\":[");
	for (int i = 0; rc == 0 && i < s->nsteps; i++)
		rc = save_step(m, s->steps[i], i > 0, out);
	rv_buf_puts(out, "]}");
	if (rc < 0 || rv_buf_failed(out)) {
		rv_buf_truncate(out, mark);
		return -ENOMEM;
	}
	return 0;
}

/* ---- loading ---- */

/* Range r must lie in one shard of its dataset. */
static int check_range(const struct shard_mgr *m, const struct shard_range *r, const char *f,
		       struct rv_err *err)
{
	const struct shard_dsconf *dc = &m->ds[r->ds];
	if (r->epoch >= dc->d.epochs || r->start >= r->end || r->end > dc->d.size ||
	    r->start / dc->d.shard_size != (r->end - 1) / dc->d.shard_size)
		return rv_err_set(err, -EINVAL, f,
				  "%s must be a non-empty range inside one shard of %s", f,
				  dc->d.name);
	return 0;
}

/* A sorted, disjoint range array: ranges with their dataset (ds_fixed < 0)
 * or TODO entries of dataset ds_fixed, appended to rv. */
static int load_ranges(const struct shard_mgr *m, const cJSON *arr, const char *path, int ds_fixed,
		       struct rangevec *rv, struct rv_err *err)
{
	if (!cJSON_IsArray(arr))
		return rv_err_set(err, -EINVAL, path, "%s must be an array", path);
	int n = cJSON_GetArraySize(arr), idx = 0;
	if (rangevec_reserve(rv, n) < 0)
		return rv_err_set(err, -ENOMEM, "", "could not load the ranges: out of memory");
	const int64_t lo[4] = { 0, 0, 0, 1 },
		      hi[4] = { m->nds - 1, SHARD_MAX_EPOCHS, JSON_INT_MAX, JSON_INT_MAX };
	const cJSON *it;
	cJSON_ArrayForEach(it, arr)
	{
		char f[128];
		snprintf(f, sizeof(f), "%s[%d]", path, idx);
		struct shard_range r = { .ds = ds_fixed };
		if (ds_fixed < 0 ? rv_wire_decode_entry(&snap_range_msg, it, f, lo, hi, &r, err) < 0
				 : rv_wire_decode_entry(&snap_todo_msg, it, f, lo + 1, hi + 1, &r,
							err) < 0)
			return -EINVAL;
		if (check_range(m, &r, f, err) < 0)
			return -EINVAL;
		if (rv->n > 0) {
			const struct shard_range *p = &rv->v[rv->n - 1];
			if (range_cmp(p, &r) >= 0 ||
			    (p->ds == r.ds && p->epoch == r.epoch && p->end > r.start))
				return rv_err_set(err, -EINVAL, f,
						  "%s must come after and not overlap %s[%d]", f,
						  path, idx - 1);
		}
		rv->v[rv->n++] = r;
		idx++;
	}
	return 0;
}

static int load_cursor(const struct shard_mgr *m, int ds, int64_t epoch, int64_t pos,
		       struct shard_cur *c, const char *f, struct rv_err *err)
{
	const struct shard_dsconf *dc = &m->ds[ds];
	if (epoch < 0 || epoch >= dc->d.epochs || pos < 0 || pos > dc->nshards)
		return rv_err_set(err, -EINVAL, f,
				  "%s must be an epoch in 0..%d and a position in 0..%" PRId64, f,
				  dc->d.epochs - 1, dc->nshards);
	*c = (struct shard_cur){ (int32_t)epoch, pos };
	return 0;
}

/* The datasets array: each must be the manager's own; cursors and the TODO
 * ranges into s (and samples_done into done[]). */
static int load_datasets(const struct shard_mgr *m, const cJSON *root, struct shard_state *s,
			 int64_t *done, struct rv_err *err)
{
	int rc;
	const cJSON *arr = rv_json_get_array(root, "datasets", "", true, &rc, err);
	if (!arr)
		return rc ? rc : -EINVAL;
	if (cJSON_GetArraySize(arr) != m->nds)
		return rv_err_set(err, -EINVAL, "datasets",
				  "datasets must hold this job's %d datasets", m->nds);
	int ds = 0;
	const cJSON *it;
	cJSON_ArrayForEach(it, arr)
	{
		const struct shard_dsconf *dc = &m->ds[ds];
		char path[64], name[SHARD_NAME_MAX], seed[32], f[128];
		int64_t size, ss, epochs, epoch, pos;
		bool shuffle;
		snprintf(path, sizeof(path), "datasets[%d]", ds);
		if (!cJSON_IsObject(it))
			return rv_err_set(err, -EINVAL, path, "%s must be an object", path);
		if ((rc = rv_json_get_string(it, "name", path, true, name, sizeof(name), err)) <
			    0 ||
		    (rc = rv_json_get_int(it, "size", path, true, 1, JSON_INT_MAX, &size, err)) <
			    0 ||
		    (rc = rv_json_get_int(it, "shard_size", path, true, 1, JSON_INT_MAX, &ss,
					  err)) < 0 ||
		    (rc = rv_json_get_int(it, "epochs", path, true, 1, SHARD_MAX_EPOCHS, &epochs,
					  err)) < 0 ||
		    (rc = rv_json_get_bool(it, "shuffle", path, true, &shuffle, err)) < 0 ||
		    (rc = rv_json_get_string(it, "seed", path, true, seed, sizeof(seed), err)) <
			    0 ||
		    (rc = rv_json_get_int(it, "epoch", path, true, 0, SHARD_MAX_EPOCHS, &epoch,
					  err)) < 0 ||
		    (rc = rv_json_get_int(it, "pos", path, true, 0, JSON_INT_MAX, &pos, err)) < 0 ||
		    (rc = rv_json_get_int(it, "samples_done", path, true, 0, INT64_MAX, &done[ds],
					  err)) < 0)
			return rc;
		char want[32];
		snprintf(want, sizeof(want), "%" PRIu64, dc->d.seed);
		const char *what = strcmp(name, dc->d.name) != 0 ? "name"
				   : size != dc->d.size          ? "size"
				   : ss != dc->d.shard_size      ? "shard_size"
				   : epochs != dc->d.epochs      ? "epochs"
				   : shuffle != dc->d.shuffle    ? "shuffle"
				   : strcmp(seed, want) != 0     ? "seed"
								 : NULL;
		if (what) {
			snprintf(f, sizeof(f), "%s.%s", path, what);
			return rv_err_set(err, -EINVAL, f,
					  "%s differs from this job's dataset %d (\"%s\")", f, ds,
					  dc->d.name);
		}
		snprintf(f, sizeof(f), "%s.pos", path);
		if ((rc = load_cursor(m, ds, epoch, pos, &s->ds[ds].cur, f, err)) < 0)
			return rc;
		const cJSON *todo = rv_json_get_array(it, "todo", path, true, &rc, err);
		if (!todo)
			return rc ? rc : -EINVAL;
		snprintf(f, sizeof(f), "%s.todo", path);
		int before = s->ranges.n;
		if ((rc = load_ranges(m, todo, f, ds, &s->ranges, err)) < 0)
			return rc;
		s->ds[ds].nranges = s->ranges.n - before;
		/* A range must be behind the cursor, or it would be handed out twice. */
		for (int i = before; i < s->ranges.n; i++) {
			const struct shard_range *r = &s->ranges.v[i];
			int64_t p = perm_inv(dc, r->epoch, r->start / dc->d.shard_size);
			if (cur_cmp(r->epoch, p, s->ds[ds].cur.epoch, s->ds[ds].cur.pos) >= 0) {
				snprintf(f, sizeof(f), "%s.todo[%d]", path, i - before);
				return rv_err_set(err, -EINVAL, f, "%s is ahead of the cursor", f);
			}
		}
		ds++;
	}
	return 0;
}

static int load_doc(const char *doc, size_t len, const char *kind, cJSON **root, struct rv_err *err)
{
	char k[64];
	int64_t version;
	int rc;
	*root = rv_json_parse(doc, len, err);
	if (!*root)
		return -EINVAL;
	if ((rc = rv_json_get_int(*root, "version", "", true, SHARD_DOC_VERSION, SHARD_DOC_VERSION,
				  &version, err)) < 0 ||
	    (rc = rv_json_get_string(*root, "kind", "", true, k, sizeof(k), err)) < 0)
		return rc;
	if (strcmp(k, kind) != 0)
		return rv_err_set(err, -EINVAL, "kind", "kind must be \"%s\"", kind);
	return 0;
}

int shard_ckpt_import(struct shard_mgr *m, const char *doc, size_t len, struct rv_err *err)
{
	RV_CLEANUP_CJSON cJSON *root = NULL;
	int rc = load_doc(doc, len, "rover-shard-ckpt", &root, err);
	if (rc < 0)
		return rc;
	int64_t next_id, step;
	if ((rc = rv_json_get_int(root, "next_id", "", true, 1, JSON_INT_MAX, &next_id, err)) < 0 ||
	    (rc = rv_json_get_int(root, "step", "", true, 0, INT64_MAX, &step, err)) < 0)
		return rc;
	struct shard_state ns;
	RV_CLEANUP_FREE int64_t *done = calloc((size_t)m->nds, sizeof(*done));
	if (!done || state_init(m, &ns) < 0)
		return rv_err_set(err, -ENOMEM, "",
				  "could not import the checkpoint: out of memory");
	if ((rc = load_datasets(m, root, &ns, done, err)) < 0)
		goto fail;
	if (ns.ranges.n > m->conf.max_todo_ranges) {
		rc = rv_err_set(err, -EINVAL, "datasets",
				"the checkpoint holds %d ranges, more than %d", ns.ranges.n,
				m->conf.max_todo_ranges);
		goto fail;
	}
	/* DONE is what is neither ahead of the cursor nor in a range: counted
	 * here, and it must match what the document says. */
	for (int ds = 0; ds < m->nds; ds++) {
		int64_t left = cur_remaining(&m->ds[ds], ns.ds[ds].cur);
		for (int i = 0; i < ns.ranges.n; i++)
			if (ns.ranges.v[i].ds == ds)
				left += ns.ranges.v[i].end - ns.ranges.v[i].start;
		int64_t total = m->ds[ds].d.size * m->ds[ds].d.epochs;
		if (total - left != done[ds]) {
			char f[64];
			snprintf(f, sizeof(f), "datasets[%d].samples_done", ds);
			rc = rv_err_set(err, -EINVAL, f,
					"%s is %" PRId64 " but the cursor and ranges leave %" PRId64
					" done",
					f, done[ds], total - left);
			goto fail;
		}
		ns.ds[ds].samples_done = done[ds];
	}
	/* Ids keep increasing: a done from before the import never matches a
	 * task handed out after it. */
	ns.next_id = next_id > m->st.next_id ? next_id : m->st.next_id;
	ns.seq = m->st.seq + 1;
	state_release(&m->st);
	m->st = ns;
	return 0;
fail:
	state_release(&ns);
	return rc;
}

static int load_doing(const struct shard_mgr *m, const cJSON *root, struct shard_state *s,
		      struct rv_err *err)
{
	int rc;
	const cJSON *arr = rv_json_get_array(root, "doing", "", true, &rc, err);
	if (!arr)
		return rc ? rc : -EINVAL;
	int n = cJSON_GetArraySize(arr), idx = 0;
	if (grow((void **)&s->doing.v, &s->doing.cap, n, sizeof(*s->doing.v)) < 0)
		return rv_err_set(err, -ENOMEM, "", "could not load the snapshot: out of memory");
	const cJSON *it;
	cJSON_ArrayForEach(it, arr)
	{
		const int64_t lo[7] = { 1, 0, 0, 0, 1, -JSON_INT_MAX, -1 },
			      hi[7] = { JSON_INT_MAX, m->nds - 1,   SHARD_MAX_EPOCHS, JSON_INT_MAX,
					JSON_INT_MAX, JSON_INT_MAX, JSON_INT_MAX };
		struct shard_doing d = { 0 };
		char f[64];
		snprintf(f, sizeof(f), "doing[%d]", idx);
		if (rv_wire_decode_entry(&snap_doing_msg, it, f, lo, hi, &d, err) < 0)
			return -EINVAL;
		struct shard_range r = { d.ds, d.epoch, d.start, d.end };
		if ((rc = check_range(m, &r, f, err)) < 0)
			return rc;
		if (d.id >= s->next_id || (idx > 0 && d.id <= s->doing.v[idx - 1].id))
			return rv_err_set(err, -EINVAL, f,
					  "%s must have an id above the one before it and "
					  "below next_id",
					  f);
		d.deadline = d.deadline < 0 ? INT64_MAX : d.deadline;
		d.live = true;
		s->doing.v[idx] = d;
		s->ds[r.ds].ndoing++;
		idx++;
	}
	s->doing.n = s->doing.nlive = n;
	doing_check_sorted(s);
	return 0;
}

static int load_workers(const struct shard_mgr *m, const cJSON *root, struct shard_state *s,
			struct rv_err *err)
{
	int rc, idx = 0;
	const cJSON *arr = rv_json_get_array(root, "workers", "", true, &rc, err);
	if (!arr)
		return rc ? rc : -EINVAL;
	const cJSON *it;
	cJSON_ArrayForEach(it, arr)
	{
		char path[64], f[96];
		int64_t id, lost, evicted;
		snprintf(path, sizeof(path), "workers[%d]", idx);
		if ((rc = rv_json_get_int(it, "id", path, true, -JSON_INT_MAX, JSON_INT_MAX, &id,
					  err)) < 0 ||
		    (rc = rv_json_get_int(it, "lost_seq", path, true, 0, s->seq, &lost, err)) < 0 ||
		    (rc = rv_json_get_int(it, "evicted_seq", path, true, 0, s->seq, &evicted,
					  err)) < 0)
			return rc;
		if (worker_find(s, id))
			return rv_err_set(err, -EINVAL, path, "%s.id repeats worker %" PRId64, path,
					  id);
		struct shard_worker *w = worker_get(s, id);
		if (!w)
			return rv_err_set(err, -ENOMEM, "",
					  "could not load the snapshot: out of memory");
		w->lost_seq = lost;
		w->evicted_seq = evicted;
		snprintf(f, sizeof(f), "%s.ring", path);
		const cJSON *ring = rv_json_get_array(it, "ring", path, true, &rc, err);
		if (!ring)
			return rc ? rc : -EINVAL;
		if (cJSON_GetArraySize(ring) > SHARD_RING)
			return rv_err_set(err, -EINVAL, f, "%s must hold at most %d entries", f,
					  SHARD_RING);
		if (cJSON_GetArraySize(ring) > 0 && worker_ring_alloc(w) < 0)
			return rv_err_set(err, -ENOMEM, "",
					  "could not load the snapshot: out of memory");
		const cJSON *e;
		int k = 0;
		cJSON_ArrayForEach(e, ring)
		{
			const int64_t lo[6] = { 1, 1, 0, 0, 0, 1 },
				      hi[6] = { s->next_id - 1,   s->seq,       m->nds - 1,
						SHARD_MAX_EPOCHS, JSON_INT_MAX, JSON_INT_MAX };
			struct shard_recent e1;
			char fe[128];
			snprintf(fe, sizeof(fe), "%s[%d]", f, k);
			if (rv_wire_decode_entry(&snap_recent_msg, e, fe, lo, hi, &e1, err) < 0)
				return -EINVAL;
			struct shard_range r = { e1.ds, e1.epoch, e1.start, e1.end };
			if ((rc = check_range(m, &r, fe, err)) < 0)
				return rc;
			worker_ring_push(w, &e1);
			k++;
		}
		idx++;
	}
	return 0;
}

static int load_steps(const struct shard_mgr *m, const cJSON *root, struct shard_state *s,
		      struct rv_err *err)
{
	int rc, idx = 0;
	const cJSON *arr = rv_json_get_array(root, "steps", "", true, &rc, err);
	if (!arr)
		return rc ? rc : -EINVAL;
	if (cJSON_GetArraySize(arr) > SHARD_MAX_PENDING_STEPS)
		return rv_err_set(err, -EINVAL, "steps", "steps must hold at most %d steps",
				  SHARD_MAX_PENDING_STEPS);
	const cJSON *it;
	cJSON_ArrayForEach(it, arr)
	{
		char path[64], f[96];
		snprintf(path, sizeof(path), "steps[%d]", idx);
		struct shard_step *st = calloc(1, sizeof(*st));
		if (!st || !(st->cur = calloc((size_t)m->nds, sizeof(*st->cur)))) {
			step_free(st);
			return rv_err_set(err, -ENOMEM, "",
					  "could not load the snapshot: out of memory");
		}
		s->steps[s->nsteps++] = st; /* freed with s on failure */
		if ((rc = rv_json_get_int(it, "step", path, true, 0, INT64_MAX, &st->step, err)) <
			    0 ||
		    (rc = rv_json_get_int(it, "seq", path, true, 0, s->seq, &st->seq, err)) < 0)
			return rc;
		int64_t expect = 0; /* absent in snapshots taken before it was kept */
		if ((rc = rv_json_get_int(it, "expect", path, false, 0, INT32_MAX, &expect, err)) <
		    0)
			return rc;
		st->expect = (int)expect;
		if (step_find(s, st->step) != st)
			return rv_err_set(err, -EINVAL, path, "%s.step repeats step %" PRId64, path,
					  st->step);
		snprintf(f, sizeof(f), "%s.cursors", path);
		const cJSON *cur = rv_json_get_array(it, "cursors", path, true, &rc, err);
		if (!cur)
			return rc ? rc : -EINVAL;
		if (cJSON_GetArraySize(cur) != m->nds)
			return rv_err_set(err, -EINVAL, f, "%s must hold %d cursors", f, m->nds);
		const cJSON *c;
		int ds = 0;
		cJSON_ArrayForEach(c, cur)
		{
			const int64_t lo[2] = { 0, 0 }, hi[2] = { SHARD_MAX_EPOCHS, JSON_INT_MAX };
			struct shard_cur v;
			char fc[128];
			snprintf(fc, sizeof(fc), "%s[%d]", f, ds);
			if (rv_wire_decode_entry(&snap_cursor_msg, c, fc, lo, hi, &v, err) < 0 ||
			    load_cursor(m, ds, v.epoch, v.pos, &st->cur[ds], f, err) < 0)
				return -EINVAL;
			ds++;
		}
		snprintf(f, sizeof(f), "%s.todo", path);
		if ((rc = load_ranges(m, cJSON_GetObjectItemCaseSensitive(it, "todo"), f, -1,
				      &st->todo, err)) < 0)
			return rc;
		snprintf(f, sizeof(f), "%s.carved", path);
		if ((rc = load_ranges(m, cJSON_GetObjectItemCaseSensitive(it, "carved"), f, -1,
				      &st->carved, err)) < 0)
			return rc;
		snprintf(f, sizeof(f), "%s.reports", path);
		const cJSON *rep = rv_json_get_array(it, "reports", path, true, &rc, err);
		if (!rep)
			return rc ? rc : -EINVAL;
		int n = cJSON_GetArraySize(rep), k = 0;
		if (grow((void **)&st->rep, &st->caprep, n, sizeof(*st->rep)) < 0)
			return rv_err_set(err, -ENOMEM, "",
					  "could not load the snapshot: out of memory");
		cJSON_ArrayForEach(c, rep)
		{
			const int64_t lo[4] = { -JSON_INT_MAX, -1, 0, 0 },
				      hi[4] = { JSON_INT_MAX, m->nds - 1, JSON_INT_MAX,
						JSON_INT_MAX };
			char fr[128];
			snprintf(fr, sizeof(fr), "%s[%d]", f, k);
			if (rv_wire_decode_entry(&snap_report_msg, c, fr, lo, hi, &st->rep[k],
						 err) < 0)
				return -EINVAL;
			k++;
		}
		st->nrep = n;
		idx++;
	}
	return 0;
}

int shard_snapshot_load(struct shard_mgr *m, const char *doc, size_t len, struct rv_err *err)
{
	RV_CLEANUP_CJSON cJSON *root = NULL;
	int rc = load_doc(doc, len, "rover-shard-snapshot", &root, err);
	if (rc < 0)
		return rc;
	struct shard_state ns;
	RV_CLEANUP_FREE int64_t *done = calloc((size_t)m->nds, sizeof(*done));
	if (!done || state_init(m, &ns) < 0)
		return rv_err_set(err, -ENOMEM, "", "could not load the snapshot: out of memory");
	if ((rc = rv_json_get_int(root, "next_id", "", true, 1, JSON_INT_MAX, &ns.next_id, err)) <
		    0 ||
	    (rc = rv_json_get_int(root, "seq", "", true, 0, JSON_INT_MAX, &ns.seq, err)) < 0 ||
	    (rc = rv_json_get_int(root, "dropped_step", "", true, -1, INT64_MAX, &ns.dropped_step,
				  err)) < 0 ||
	    (rc = load_datasets(m, root, &ns, done, err)) < 0 ||
	    (rc = load_doing(m, root, &ns, err)) < 0 ||
	    (rc = load_workers(m, root, &ns, err)) < 0 || (rc = load_steps(m, root, &ns, err)) < 0)
		goto fail;
	for (int ds = 0; ds < m->nds; ds++)
		ns.ds[ds].samples_done = done[ds];
	state_release(&m->st);
	m->st = ns;
	return 0;
fail:
	state_release(&ns);
	return rc;
}
