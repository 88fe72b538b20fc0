/*
 * trainer.c: the handle of librover-trainer: who this process is (from
 * rover-run's variables), its master client, the shard it works on and its
 * step reports.  The flash checkpoint is in ckpt.c.  One thread per handle.
 */
#include "trainer.h"

#include "ckslot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int64_t trainer_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int trainer_fail(struct rv_trainer *t, const struct rv_err *err, int code)
{
	if (err && err->code == code && err->msg[0])
		snprintf(t->errbuf, sizeof(t->errbuf), "%s", err->msg);
	else
		snprintf(t->errbuf, sizeof(t->errbuf), "%s", strerror(code < 0 ? -code : code));
	return code;
}

const char *rv_trainer_last_error(const struct rv_trainer *t)
{
	return t->errbuf;
}

int rv_trainer_rank(const struct rv_trainer *t)
{
	return t->rank;
}

int rv_trainer_world_size(const struct rv_trainer *t)
{
	return t->world_size;
}

/* The value of an integer variable; -EINVAL with err naming it. */
static int env_int(const char *name, int min, int *out, struct rv_err *err)
{
	const char *v = getenv(name);
	if (!v || !*v)
		return rv_err_set(err, -EINVAL, name,
				  "$%s is not set: run the training script under rover-run", name);
	char *end;
	errno = 0;
	long n = strtol(v, &end, 10);
	if (errno || *end || n < min || n > 1 << 24)
		return rv_err_set(err, -EINVAL, name, "$%s is \"%s\", not a number >= %d", name, v,
				  min);
	*out = (int)n;
	return 0;
}

struct rv_trainer *rv_trainer_open(struct rv_err *err)
{
	struct rv_trainer_opts o = {
		.master = getenv("ROVER_MASTER_ADDR"),
		.node = getenv("ROVER_NODE_NAME"),
		.job = getenv("ROVER_JOB_NAME"),
		.dataset = getenv("ROVER_DATASET"),
	};
	static const char *const need[] = { "ROVER_MASTER_ADDR", "ROVER_NODE_NAME" };
	for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++) {
		const char *v = getenv(need[i]);
		if (!v || !*v) {
			rv_err_set(err, -EINVAL, need[i],
				   "$%s is not set: run the training script under rover-run",
				   need[i]);
			return NULL;
		}
	}
	if (env_int("RANK", 0, &o.rank, err) < 0 ||
	    env_int("LOCAL_RANK", 0, &o.local_rank, err) < 0 ||
	    env_int("WORLD_SIZE", 1, &o.world_size, err) < 0)
		return NULL;
	if (o.rank >= o.world_size) {
		rv_err_set(err, -EINVAL, "RANK", "$RANK %d is not below $WORLD_SIZE %d", o.rank,
			   o.world_size);
		return NULL;
	}
	return rv_trainer_open_opts(&o, err);
}

struct rv_trainer *rv_trainer_open_opts(const struct rv_trainer_opts *o, struct rv_err *err)
{
	if (o->rank < 0 || o->world_size < 1 || o->rank >= o->world_size) {
		rv_err_set(err, -EINVAL, "rank", "rank %d of a world of %d", o->rank,
			   o->world_size);
		return NULL;
	}
	struct rv_trainer *t = calloc(1, sizeof(*t));
	if (!t) {
		rv_err_set(err, -ENOMEM, "", "out of memory");
		return NULL;
	}
	t->slot[0].fd = t->slot[1].fd = t->slot[2].fd = -1;
	t->loaded_slot = -1;
	t->rank = o->rank;
	t->local_rank = o->local_rank;
	t->world_size = o->world_size;
	snprintf(t->node, sizeof(t->node), "%s", o->node ? o->node : "");
	snprintf(t->dataset, sizeof(t->dataset), "%s", o->dataset ? o->dataset : "");
	t->last_step_ns = trainer_now_ns();
	if (o->master && *o->master) {
		char url[300];
		snprintf(url, sizeof(url), "%s%s", strstr(o->master, "://") ? "" : "http://",
			 o->master);
		struct rv_master_opts mo = { .url = url, .timeout_ms = o->timeout_ms };
		struct rv_master_opts ro = {
			.url = url, .timeout_ms = 1000, .max_attempts = 2, .retry_budget_ms = 500
		};
		snprintf(t->url, sizeof(t->url), "%s", url);
		if (!(t->mc = rv_master_client_new(&mo, err)) ||
		    !(t->mc_report = rv_master_client_new(&ro, err)) ||
		    trainer_courier_start(t, err) < 0) {
			rv_trainer_close(t);
			return NULL;
		}
	}
	const char *job = o->job;
	struct rv_job_status js;
	if ((!job || !*job) && t->mc) {
		if (rv_master_job(t->mc, &js, err) < 0) {
			rv_trainer_close(t);
			return NULL;
		}
		job = js.job;
	}
	if (!job || !*job) {
		rv_err_set(err, -EINVAL, "job", "no job name (no master to ask, none given)");
		rv_trainer_close(t);
		return NULL;
	}
	rv_ckslot_job_name(t->job, sizeof(t->job), job);
	return t;
}

void rv_trainer_close(struct rv_trainer *t)
{
	if (!t)
		return;
	trainer_ckpt_close(t);
	trainer_courier_close(t);
	rv_master_client_free(t->mc);
	rv_master_client_free(t->mc_report);
	free(t);
}

static int need_master(struct rv_trainer *t, struct rv_err *err)
{
	if (t->mc)
		return 0;
	return trainer_fail(t, err, rv_err_set(err, -ENOTCONN, "master", "no master to ask"));
}

int rv_trainer_next(struct rv_trainer *t, struct rv_trainer_shard *out, struct rv_err *err)
{
	int rc = need_master(t, err);
	if (rc < 0)
		return rc;
	if (t->cur.id)
		return trainer_fail(t, err,
				    rv_err_set(err, -EBUSY, "", "shard %lld is not done yet",
					       (long long)t->cur.id));
	struct rv_shard_next req = { .worker = t->rank };
	snprintf(req.node, sizeof(req.node), "%s", t->node);
	snprintf(req.dataset, sizeof(req.dataset), "%s", t->dataset);
	struct rv_shard_task task;
	if ((rc = trainer_courier_next(t, &task, err)) == -ENOSYS)
		rc = rv_master_shard_next(t->mc, &req, &task, err);
	if (rc < 0)
		return trainer_fail(t, err, rc);
	memset(out, 0, sizeof(*out));
	if (task.status == RV_SHARD_WAIT)
		return RV_TRAINER_WAIT;
	if (task.status == RV_SHARD_FINISHED)
		return RV_TRAINER_FINISHED;
	snprintf(out->dataset, sizeof(out->dataset), "%s", task.dataset);
	out->id = task.id;
	out->start = task.start;
	out->end = task.end;
	out->epoch = task.epoch;
	snprintf(out->partition, sizeof(out->partition), "%s", task.partition);
	t->cur = *out;
	t->consumed = 0;
	return RV_TRAINER_SHARD;
}

int rv_trainer_consumed(struct rv_trainer *t, int64_t consumed)
{
	if (!t->cur.id)
		return -ENOENT;
	if (consumed < 0 || consumed > t->cur.end - t->cur.start)
		return -ERANGE;
	t->consumed = consumed;
	return 0;
}

int rv_trainer_done(struct rv_trainer *t, struct rv_err *err)
{
	int rc = need_master(t, err);
	if (rc < 0)
		return rc;
	if (!t->cur.id)
		return trainer_fail(t, err, rv_err_set(err, -ENOENT, "", "no current shard"));
	struct rv_shard_done d = { .worker = t->rank, .id = t->cur.id };
	snprintf(d.node, sizeof(d.node), "%s", t->node);
	if ((rc = trainer_courier_done(t, &d, err)) == -ENOSYS)
		rc = rv_master_shard_done(t->mc, &d, NULL, err);
	if (rc < 0)
		return trainer_fail(t, err, rc);
	t->last_id = t->cur.id;
	t->last_len = t->cur.end - t->cur.start;
	memset(&t->cur, 0, sizeof(t->cur));
	t->consumed = 0;
	return 0;
}

int rv_trainer_report_step(struct rv_trainer *t, int64_t step, int64_t samples, struct rv_err *err)
{
	return rv_trainer_report_step_compute(t, step, samples, 0, err);
}

int rv_trainer_report_step_compute(struct rv_trainer *t, int64_t step, int64_t samples,
				   double compute_s, struct rv_err *err)
{
	int rc = need_master(t, err);
	if (rc < 0)
		return rc;
	if (!(compute_s >= 0 && compute_s <= 1e7))
		return trainer_fail(t, err,
				    rv_err_set(err, -EINVAL, "compute_time",
					       "compute_time must be between 0 and 1e7 s"));
	int64_t now = trainer_now_ns();
	double dt = (double)(now - t->last_step_ns) / 1e9;
	struct rv_step_report s = { .step = step,
				    .speed = dt > 0 ? (double)samples / dt : 0,
				    .compute_time = compute_s };
	snprintf(s.node, sizeof(s.node), "%s", t->node);
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	s.ts_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
	t->last_step_ns = now;
	if ((rc = trainer_courier_step(t, &s, err)) == -ENOSYS)
		rc = rv_master_step(t->mc, &s, err);
	if (rc < 0)
		return trainer_fail(t, err, rc);
	return 0;
}
