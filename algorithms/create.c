/*
 * create.c: the create stage for a job that gives no resources.  A weighted
 * nearest-neighbour over finished jobs of the same strategy, in log-scaled
 * features: history is small (tens of rows per team), there is no training
 * phase to run or go stale, and the neighbours can be named in the reason so
 * a user sees why.  Logs make "10x the parameters" one fixed distance at any
 * scale.  With no near neighbour: a safe default from the model size.
 * Used by the brain at job registration and by a master without a brain.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alg_internal.h"

/* Feature weights in the squared distance. */
#define W_PARAMS  1.0
#define W_BATCH   0.5
#define W_DATASET 0.25
#define W_USER    0.25 /* added when the users differ */
#define W_STEM    0.5  /* added when the name stems differ */

#define MIB                  (1024.0 * 1024.0)
/* Default-stage figures: fp32 weights, gradients and two Adam moments. */
#define BYTES_PER_PARAM      4.0
#define STATE_COPIES         4.0
/* A zero-config job with no history starts generous: its first minutes then
 * measure its real use, and the first running plan right-sizes it down in one
 * step.  Starting small costs more: a starved role grows by one doubling per
 * plan (and distorts every speed measured meanwhile), and too little memory
 * costs an OOM and a relaunch. */
#define DEFAULT_CPU          8.0
#define DEFAULT_MEM_FLOOR_MB 16384.0
#define PS_TARGET_MB         8192.0

int rv_alg_name_stem(const char *name, char *buf, size_t size)
{
	if (!name || !buf || size == 0)
		return -EINVAL;
	size_t len = strlen(name);

	for (;;) {
		size_t l = len;

		while (l > 0 && isdigit((unsigned char)name[l - 1]))
			l--;
		/* "-v3" / "_v3" / ".v3": drop the v with its number */
		if (l < len && l >= 2 && (name[l - 1] == 'v' || name[l - 1] == 'V') &&
		    strchr("-_.", name[l - 2]))
			l--;
		while (l > 0 && strchr("-_.", name[l - 1]))
			l--;
		if (l == len || l == 0)
			break;
		len = l;
	}
	if (len >= size)
		len = size - 1;
	memcpy(buf, name, len);
	buf[len] = '\0';
	return (int)len;
}

static double log_diff2(double a, double b)
{
	if (!(a > 0) || !(b > 0))
		return 0; /* unknown on one side: no evidence either way */
	double d = log1p(a) - log1p(b);

	return d * d;
}

static double distance(const struct rv_alg_job_features *a, const struct rv_alg_job_features *b)
{
	double d2 = W_PARAMS * log_diff2(a->parameters, b->parameters) +
		    W_BATCH * log_diff2(a->batch_size, b->batch_size) +
		    W_DATASET * log_diff2(a->dataset_size, b->dataset_size);

	if (a->user && b->user && strcmp(a->user, b->user) != 0)
		d2 += W_USER;
	if (a->name && b->name) {
		char sa[128], sb[128];

		rv_alg_name_stem(a->name, sa, sizeof(sa));
		rv_alg_name_stem(b->name, sb, sizeof(sb));
		if (strcmp(sa, sb) != 0)
			d2 += W_STEM;
	}
	return sqrt(d2);
}

static double cpu_tenths(double c)
{
	c = rv_alg_cpu_up(c);
	return c < 0.1 ? 0.1 : c;
}

/* Bound per-node resources, counts and the cluster's free capacity. */
static void fit_limits(struct rv_alg_config *c, enum rv_alg_strategy s,
		       const struct rv_alg_limits *lim)
{
	static const struct rv_alg_config zero;
	struct rv_alg_group *g[2] = { &c->worker, &c->ps };

	/* PS hold shares of the model: fewer PS than asked for each hold more,
	 * so the memory follows the count after it is capped (before the
	 * per-node bound below). */
	if (s == RV_ALG_PS && lim->max_ps > 0 && c->ps.count > lim->max_ps) {
		c->ps.res.memory_mb = (int64_t)rv_alg_mb_up((double)c->ps.res.memory_mb *
							    c->ps.count / lim->max_ps);
		c->ps.count = lim->max_ps;
	}
	for (int i = 0; i < 2; i++) {
		if (lim->max_cpu > 0 && g[i]->res.cpu > lim->max_cpu)
			g[i]->res.cpu = lim->max_cpu;
		if (lim->max_memory_mb > 0 && g[i]->res.memory_mb > lim->max_memory_mb)
			g[i]->res.memory_mb = lim->max_memory_mb;
	}
	c->worker.count = rv_alg_clamp_workers(c->worker.count, lim);
	if (s == RV_ALG_PS) {
		if (c->ps.count < (lim->min_ps > 0 ? lim->min_ps : 1))
			c->ps.count = lim->min_ps > 0 ? lim->min_ps : 1;
		if (lim->max_ps > 0 && c->ps.count > lim->max_ps)
			c->ps.count = lim->max_ps;
	} else {
		c->ps = zero.ps;
	}
	int unit = lim->node_unit > 0 ? lim->node_unit : 1;
	int lo = rv_alg_clamp_workers(lim->min_workers, lim);

	while (c->worker.count - unit >= lo && !rv_alg_fits_free(lim, &zero, c))
		c->worker.count -= unit;
}

void rv_alg_create_default(const struct rv_alg_job_features *job, const struct rv_alg_limits *lim,
			   struct rv_alg_config *out)
{
	double params = job->parameters > 0 ? job->parameters : 0;
	double model_mb = params * BYTES_PER_PARAM / MIB;
	double state_mb = model_mb * STATE_COPIES;

	memset(out, 0, sizeof(*out));
	out->worker.count = 2;
	out->worker.res.cpu = DEFAULT_CPU;
	if (job->strategy == RV_ALG_PS) {
		/* PS hold the model and optimizer state, sharded over PS_TARGET_MB each;
		 * workers hold one pulled copy of the weights plus gradients */
		int nps = (int)ceil(state_mb / PS_TARGET_MB);

		out->ps.count = nps < 1 ? 1 : nps;
		/* as wide as the job allows (see wide_ps_tier) */
		if (lim->max_ps > out->ps.count)
			out->ps.count = lim->max_ps;
		out->ps.res.cpu = DEFAULT_CPU;
		out->ps.res.memory_mb = (int64_t)rv_alg_mb_up(
			fmax(DEFAULT_MEM_FLOOR_MB, state_mb / out->ps.count * 1.5));
		out->worker.res.memory_mb = (int64_t)rv_alg_mb_up(
			fmax(DEFAULT_MEM_FLOOR_MB, 2 * model_mb * 1.5 + 2048));
	} else {
		/* each all-reduce worker holds the full state, plus activations */
		out->worker.res.memory_mb =
			(int64_t)rv_alg_mb_up(fmax(DEFAULT_MEM_FLOOR_MB, state_mb * 1.5 + 2048));
	}
	fit_limits(out, job->strategy, lim);
}

struct neighbour {
	size_t i;
	double d;
};

static int cmp_neighbour(const void *a, const void *b)
{
	const struct neighbour *x = a, *y = b;

	return (x->d > y->d) - (x->d < y->d);
}

/* The neighbours of job in hist within knn_max_dist, nearest first, at
 * most knn_k: their count (0 with *nbp NULL or to free), or -ENOMEM. */
static long create_neighbours(const struct rv_alg_job_features *job,
			      const struct rv_alg_history_job *hist, size_t n,
			      const struct rv_alg_params *p, struct neighbour **nbp)
{
	struct neighbour *nb = n ? malloc(n * sizeof(*nb)) : NULL;
	size_t m = 0;

	*nbp = nb;
	if (n && !nb)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		if (hist[i].f.strategy != job->strategy || hist[i].cfg.worker.count <= 0)
			continue;
		double d = distance(job, &hist[i].f);

		if (d <= p->knn_max_dist)
			nb[m++] = (struct neighbour){ i, d };
	}
	if (m == 0)
		return 0;
	qsort(nb, m, sizeof(*nb), cmp_neighbour);
	if (p->knn_k > 0 && m > (size_t)p->knn_k)
		m = (size_t)p->knn_k;
	return (long)m;
}

/* CREATE_DEFAULT: no near neighbour: rv_alg_create_default. */
static void create_default_decision(const struct rv_alg_job_features *job,
				    const struct rv_alg_limits *lim, struct rv_alg_decision *out)
{
	rv_alg_create_default(job, lim, &out->cfg);
	out->algorithm = RV_ALG_ID_CREATE_DEFAULT;
	rv_alg_reason_add(out,
			  "no similar finished job; default from %.3g parameters: %d workers x "
			  "%.1f CPU %lld MiB",
			  job->parameters, out->cfg.worker.count, out->cfg.worker.res.cpu,
			  (long long)out->cfg.worker.res.memory_mb);
	if (job->strategy == RV_ALG_PS)
		rv_alg_reason_add(out, "%d PS x %.1f CPU %lld MiB", out->cfg.ps.count,
				  out->cfg.ps.res.cpu, (long long)out->cfg.ps.res.memory_mb);
}

/* CREATE_KNN: counts and CPU weighted 1/(d + 0.1) over the neighbours (0.1
 * keeps an exact match from taking all), memory the largest any used (too
 * little is an OOM, too much the first running plan trims), plus
 * create_margin; an all-reduce worker never under its own model's state
 * (returns true when that floor raised it); the neighbours' PS CPU in all
 * spread over the widest PS tier the job allows. */
static bool create_from_neighbours(const struct rv_alg_job_features *job,
				   const struct rv_alg_history_job *hist,
				   const struct neighbour *nb, size_t m,
				   const struct rv_alg_limits *lim, const struct rv_alg_params *p,
				   struct rv_alg_config *c)
{
	double sw = 0, w_cnt = 0, w_cpu = 0, w_mem = 0, p_cnt = 0, p_cpu = 0, p_mem = 0, p_tot = 0;
	double mg = 1 + p->create_margin;
	bool state_floor = false;

	for (size_t j = 0; j < m; j++) {
		const struct rv_alg_config *h = &hist[nb[j].i].cfg;
		double w = 1 / (nb[j].d + 0.1);

		sw += w;
		w_cnt += w * h->worker.count;
		w_cpu += w * h->worker.res.cpu;
		p_cnt += w * h->ps.count;
		p_cpu += w * h->ps.res.cpu;
		p_tot += w * h->ps.count * h->ps.res.cpu;
		if ((double)h->worker.res.memory_mb > w_mem)
			w_mem = (double)h->worker.res.memory_mb;
		if ((double)h->ps.res.memory_mb > p_mem)
			p_mem = (double)h->ps.res.memory_mb;
	}
	c->worker.count = (int)lround(w_cnt / sw);
	c->worker.res.cpu = cpu_tenths(w_cpu / sw * mg);
	c->worker.res.memory_mb = (int64_t)rv_alg_mb_up(w_mem * mg);
	if (job->strategy == RV_ALG_ALLREDUCE && job->parameters > 0) {
		double state_mb = job->parameters * BYTES_PER_PARAM * STATE_COPIES / MIB;

		if ((double)c->worker.res.memory_mb < state_mb) {
			c->worker.res.memory_mb = (int64_t)rv_alg_mb_up(state_mb);
			state_floor = true;
		}
	}
	if (job->strategy == RV_ALG_PS) {
		c->ps.count = (int)lround(p_cnt / sw);
		c->ps.res.cpu = cpu_tenths(p_cpu / sw * mg);
		c->ps.res.memory_mb = (int64_t)rv_alg_mb_up(p_mem * mg);
		if (lim->max_ps > c->ps.count) {
			c->ps.count = lim->max_ps;
			c->ps.res.cpu = cpu_tenths(p_tot / sw * mg / c->ps.count);
		}
	}
	fit_limits(c, job->strategy, lim);
	return state_floor;
}

/* The reason of a create_knn decision: up to three neighbours with their
 * distances, then what was chosen. */
static void create_knn_reason(const struct rv_alg_job_features *job,
			      const struct rv_alg_history_job *hist, const struct neighbour *nb,
			      size_t m, bool state_floor, struct rv_alg_decision *out)
{
	const struct rv_alg_config *c = &out->cfg;

	rv_alg_reason_add(out, "%zu similar finished job%s (", m, m > 1 ? "s" : "");
	for (size_t j = 0; j < m && j < 3; j++) {
		const char *id = hist[nb[j].i].id ? hist[nb[j].i].id : "?";
		size_t len = strlen(out->reason);

		snprintf(out->reason + len, sizeof(out->reason) - len, "%s%s d=%.2f", j ? ", " : "",
			 id, nb[j].d);
	}
	size_t len = strlen(out->reason);

	snprintf(out->reason + len, sizeof(out->reason) - len,
		 "%s): %d workers x %.1f CPU %lld MiB", m > 3 ? ", ..." : "", c->worker.count,
		 c->worker.res.cpu, (long long)c->worker.res.memory_mb);
	if (job->strategy == RV_ALG_PS)
		rv_alg_reason_add(out, "%d PS x %.1f CPU %lld MiB", c->ps.count, c->ps.res.cpu,
				  (long long)c->ps.res.memory_mb);
	if (state_floor)
		rv_alg_reason_add(out,
				  "worker memory raised to the model and optimizer state of %.3g "
				  "parameters",
				  job->parameters);
}

int rv_alg_plan_create(const struct rv_alg_job_features *job, const struct rv_alg_history_job *hist,
		       size_t n, const struct rv_alg_limits *lim, const struct rv_alg_params *p,
		       struct rv_alg_decision *out)
{
	static const struct rv_alg_config zero;
	struct neighbour *nb = NULL;

	if (!job || (n > 0 && !hist) || !lim || !p || !out)
		return -EINVAL;
	rv_alg_decision_init(out, &zero);
	out->changed = true;
	long m = create_neighbours(job, hist, n, p, &nb);

	if (m < 0)
		return (int)m;
	if (m == 0) {
		create_default_decision(job, lim, out);
	} else {
		bool state_floor =
			create_from_neighbours(job, hist, nb, (size_t)m, lim, p, &out->cfg);
		out->algorithm = RV_ALG_ID_CREATE_KNN;
		create_knn_reason(job, hist, nb, (size_t)m, state_floor, out);
	}
	free(nb);
	return 0;
}
