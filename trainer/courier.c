/*
 * courier.c: the master's calls off the training step's path.  A thread of
 * the handle (started when it opens; it asks for shards from the loop's
 * first one on) keeps a window of
 * shards fetched ahead of the loop and delivers the step reports, the
 * shard dones and the data positions of saves from one queue, in order,
 * each once (retried with the same body until the master answers it), so
 * a master stopped or restarting for a few seconds does not stop the
 * steps.  The loop's thread only takes shards from the window and puts
 * messages in the queue, under mu; the thread owns its master client.
 *
 * Exactly once: the thread alone asks for shards, one call at a time and
 * the same request id until it is answered, so the window holds the tasks
 * in the order the master handed them (the order the loop consumes them,
 * which the master's data checkpoints rely on: a task taken after the one
 * a save names is TODO in that checkpoint).  A position's report is queued
 * before the done of the task it names, as the master needs, and the save
 * waits for it while the master answers (trainer_courier_ckpt).
 */
#include "trainer.h"

#include "clock.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

enum {
	COURIER_QUEUE = RV_TRAINER_QUEUE,
	COURIER_PAUSE_MS = 50, /* between tries of a call the master did not answer */
	COURIER_WAIT_MS = 10,  /* before asking again after "wait" */
	COURIER_DRAIN_MS = 10000,
	COURIER_STALL_MS = 200, /* a call unanswered this long: the master stands still */
};

enum courier_kind { MSG_STEP, MSG_DONE, MSG_CKPT };

struct courier_msg {
	enum courier_kind kind;
	union {
		struct rv_step_report step;
		struct rv_shard_done done;
		struct rv_ckpt_report ckpt;
	} u;
};

struct trainer_courier {
	pthread_t th;
	pid_t pid; /* the process the thread runs in */
	pthread_mutex_t mu;
	pthread_cond_t work, changed; /* for the thread; for the loop */
	struct rv_master_client *mc;
	struct courier_msg q[COURIER_QUEUE];
	int qhead, qn;
	bool sending;      /* the thread holds q[qhead] in a call */
	int64_t call_ms;   /* when that call began (0: none in flight) */
	int64_t put, sent; /* messages queued, delivered (or refused) so far */
	struct rv_shard_task win[RV_TRAINER_MAX_PREFETCH + 1];
	int whead, wn;
	int ahead;        /* shards kept ahead of the loop; -1: by time */
	double ahead_s;   /* by time: seconds of the loop's use kept ahead */
	int64_t taken_ms; /* when the loop last took a shard (0: never) */
	int64_t ntaken;   /* shards the loop took */
	double every_ms;  /* the loop's time between shards, smoothed (0: unknown) */
	bool fetching;    /* the loop has asked for a shard once */
	bool demand;      /* the loop waits for a shard */
	bool waiting;     /* the last answer was "wait": none free now */
	bool finished;    /* the last answer was "finished" */
	bool stream;      /* the last task was a stream's: no more ahead */
	int64_t again_ms; /* after "wait": ask again from then */
	int fetch_err;    /* a refused fetch (not retried), for the loop */
	struct rv_err fetch_rerr;
	struct rv_err sent_err; /* the last message the master refused */
	int64_t refused, dropped;
	bool in_fetch; /* the thread is asking for a shard */
	bool stop;
};

/* Whether rc is the master refusing the call (a retry would get the same
 * answer), not the master out of reach. */
static bool courier_refused(int rc)
{
	switch (-rc) {
	case EINVAL:
	case EACCES:
	case ENOENT:
	case EEXIST:
	case ECANCELED:
	case EMSGSIZE:
	case EDOM:
	case EPERM:
	case ERANGE:
		return true;
	default:
		return false;
	}
}

static int courier_call(struct trainer_courier *c, const struct courier_msg *m, struct rv_err *err)
{
	switch (m->kind) {
	case MSG_STEP:
		return rv_master_step(c->mc, &m->u.step, err);
	case MSG_DONE:
		return rv_master_shard_done(c->mc, &m->u.done, NULL, err);
	case MSG_CKPT:
		return rv_master_ckpt_report(c->mc, &m->u.ckpt, err);
	}
	return -EINVAL;
}

/* Deliver q[qhead] (mu held on entry and return): until answered or
 * refused, or the handle closes. */
static void courier_send(struct trainer_courier *c)
{
	struct courier_msg m = c->q[c->qhead];
	c->sending = true;
	c->call_ms = rv_mono_ms();
	for (;;) {
		pthread_mutex_unlock(&c->mu);
		struct rv_err err = { 0 };
		int rc = courier_call(c, &m, &err);
		pthread_mutex_lock(&c->mu);
		if (rc >= 0 || courier_refused(rc) || c->stop) {
			if (rc < 0) {
				c->sent_err = err;
				c->refused++;
			}
			break;
		}
		pthread_mutex_unlock(&c->mu);
		usleep(COURIER_PAUSE_MS * 1000);
		pthread_mutex_lock(&c->mu);
	}
	c->sending = false;
	c->call_ms = 0;
	c->qhead = (c->qhead + 1) % COURIER_QUEUE;
	c->qn--;
	c->sent++;
	pthread_cond_broadcast(&c->changed);
}

/* Ask for one shard (mu held on entry and return), the same request id
 * until the master answers, so a lost reply costs no task. */
static void courier_fetch(struct trainer_courier *c, const struct rv_shard_next *req)
{
	struct rv_shard_task task;
	c->in_fetch = true;
	c->call_ms = rv_mono_ms();
	for (;;) {
		pthread_mutex_unlock(&c->mu);
		struct rv_err err = { 0 };
		int rc = rv_master_shard_next(c->mc, req, &task, &err);
		pthread_mutex_lock(&c->mu);
		if (rc < 0 && courier_refused(rc)) {
			c->fetch_err = rc;
			c->fetch_rerr = err;
			break;
		}
		if (rc < 0 && !c->stop) {
			pthread_mutex_unlock(&c->mu);
			usleep(COURIER_PAUSE_MS * 1000);
			pthread_mutex_lock(&c->mu);
			continue;
		}
		if (rc < 0)
			break;
		c->waiting = task.status == RV_SHARD_WAIT;
		c->finished = task.status == RV_SHARD_FINISHED;
		if (c->waiting)
			c->again_ms = rv_mono_ms() + COURIER_WAIT_MS;
		if (task.status == RV_SHARD_TASK) {
			c->win[(c->whead + c->wn) % (RV_TRAINER_MAX_PREFETCH + 1)] = task;
			c->wn++;
			c->stream = task.partition[0] != 0;
			c->demand = false;
		}
		break;
	}
	c->in_fetch = false;
	c->call_ms = 0;
	pthread_cond_broadcast(&c->changed);
}

/* How many shards to keep ahead now (mu held): the count asked for, else
 * as many as the loop uses in ahead_s at its pace so far (at least 2). */
static int courier_ahead(const struct trainer_courier *c)
{
	if (c->ahead >= 0)
		return c->ahead;
	double n = c->every_ms > 0 ? c->ahead_s * 1000 / c->every_ms : 0;
	/* grown one shard per shard taken: a group just (re)started shares
	 * what is left of an epoch between its ranks, as without a window */
	if (n > (double)(2 + c->ntaken))
		n = (double)(2 + c->ntaken);
	if (n >= RV_TRAINER_MAX_PREFETCH)
		return RV_TRAINER_MAX_PREFETCH;
	return n > 2 ? (int)n + 1 : 2;
}

/* Whether the thread should ask for a shard now (mu held). */
static bool courier_wants(const struct trainer_courier *c, int64_t now)
{
	if (!c->fetching || c->finished || c->fetch_err)
		return false;
	if (c->waiting && now < c->again_ms)
		return false;
	int ahead = c->stream ? 0 : courier_ahead(c);
	return c->wn < ahead || (c->demand && c->wn == 0);
}

struct courier_arg {
	struct trainer_courier *c;
	struct rv_shard_next req;
};

static void *courier_main(void *arg)
{
	struct courier_arg *a = arg;
	struct trainer_courier *c = a->c;
	/* request ids of this process: the master answers a repeated id with
	 * the task it gave it, so no two processes may share one */
	uint64_t base = 0;
	if (getrandom(&base, sizeof(base), 0) != sizeof(base))
		base = (uint64_t)getpid() << 32 ^ (uint64_t)rv_mono_ms();
	int64_t reqid = (int64_t)(base & ((UINT64_C(1) << 51) - 1));
	pthread_mutex_lock(&c->mu);
	while (!c->stop) {
		int64_t now = rv_mono_ms();
		if (c->qn > 0) {
			courier_send(c);
		} else if (courier_wants(c, now)) {
			a->req.req = ++reqid;
			courier_fetch(c, &a->req);
		} else {
			struct timespec ts;
			rv_mono_timespec(&ts, now + (c->waiting ? COURIER_WAIT_MS : 1000));
			pthread_cond_timedwait(&c->work, &c->mu, &ts);
		}
	}
	pthread_mutex_unlock(&c->mu);
	free(a);
	return NULL;
}

/* The window: $ROVER_PREFETCH_SHARDS shards (a count), else
 * $ROVER_PREFETCH_S seconds of the loop's use (RV_TRAINER_PREFETCH_S). */
static void courier_depth(struct trainer_courier *c)
{
	const char *v = getenv("ROVER_PREFETCH_SHARDS");
	char *end = NULL;
	long n = v && *v ? strtol(v, &end, 10) : -1;
	c->ahead = -1;
	c->ahead_s = RV_TRAINER_PREFETCH_S;
	if (n >= 0 && end && !*end) {
		c->ahead = n > RV_TRAINER_MAX_PREFETCH ? RV_TRAINER_MAX_PREFETCH : (int)n;
		return;
	}
	v = getenv("ROVER_PREFETCH_S");
	end = NULL;
	double s = v && *v ? strtod(v, &end) : -1;
	if (s >= 0 && s <= 3600 && end && !*end)
		c->ahead_s = s;
}

int trainer_courier_start(struct rv_trainer *t, struct rv_err *err)
{
	/* Opt-in ($ROVER_COURIER=1): a parameter-server job whose plan
	 * removed two workers trained a shard of each twice with it on
	 * (tests/scripts/ps_job.py), so by default the loop calls the master
	 * itself, as before. */
	const char *on = getenv("ROVER_COURIER");
	if (!on || strcmp(on, "1") != 0)
		return 0;
	struct trainer_courier *c = calloc(1, sizeof(*c));
	struct courier_arg *a = calloc(1, sizeof(*a));
	struct rv_master_opts mo = { .url = t->url, .timeout_ms = 10000 };
	if (!c || !a || !(c->mc = rv_master_client_new(&mo, err))) {
		free(a);
		free(c);
		return err && err->code ? err->code : rv_err_set(err, -ENOMEM, "", "out of memory");
	}
	pthread_mutex_init(&c->mu, NULL);
	rv_cond_init_mono(&c->work);
	rv_cond_init_mono(&c->changed);
	courier_depth(c);
	c->pid = getpid();
	a->c = c;
	a->req.worker = t->rank;
	snprintf(a->req.node, sizeof(a->req.node), "%s", t->node);
	snprintf(a->req.dataset, sizeof(a->req.dataset), "%s", t->dataset);
	int rc = pthread_create(&c->th, NULL, courier_main, a);
	if (rc != 0) {
		rv_master_client_free(c->mc);
		free(a);
		free(c);
		return rv_err_set(err, -rc, "", "could not start the master's thread: %s",
				  strerror(rc));
	}
	t->courier = c;
	return 0;
}

/* t's courier in this process, or NULL (the caller calls the master). */
static struct trainer_courier *courier_get(struct rv_trainer *t)
{
	return t->courier && t->courier->pid == getpid() ? t->courier : NULL;
}

int trainer_courier_next(struct rv_trainer *t, struct rv_shard_task *out, struct rv_err *err)
{
	struct trainer_courier *c = courier_get(t);
	if (!c)
		return -ENOSYS;
	int rc = 0;
	pthread_mutex_lock(&c->mu);
	c->fetching = true;
	for (;;) {
		if (c->wn > 0) {
			int64_t now = rv_mono_ms();
			if (c->taken_ms) {
				double dt = (double)(now - c->taken_ms);
				c->every_ms = c->every_ms > 0 ? 0.8 * c->every_ms + 0.2 * dt : dt;
			}
			c->taken_ms = now;
			c->ntaken++;
			*out = c->win[c->whead];
			c->whead = (c->whead + 1) % (RV_TRAINER_MAX_PREFETCH + 1);
			c->wn--;
			break;
		}
		if (c->fetch_err) {
			rc = c->fetch_err;
			*err = c->fetch_rerr;
			c->fetch_err = 0;
			break;
		}
		if (c->finished || c->waiting) {
			memset(out, 0, sizeof(*out));
			out->status = c->finished ? RV_SHARD_FINISHED : RV_SHARD_WAIT;
			break;
		}
		c->demand = true;
		pthread_cond_signal(&c->work);
		pthread_cond_wait(&c->changed, &c->mu);
	}
	pthread_cond_signal(&c->work); /* room in the window */
	pthread_mutex_unlock(&c->mu);
	return rc;
}

/* Queue m; a step report is dropped when the queue is full (-ENOBUFS),
 * any other waits for room. */
static int courier_put(struct rv_trainer *t, const struct courier_msg *m, struct rv_err *err)
{
	struct trainer_courier *c = courier_get(t);
	if (!c)
		return -ENOSYS;
	int rc = 0;
	pthread_mutex_lock(&c->mu);
	while (c->qn == COURIER_QUEUE && m->kind != MSG_STEP && !c->stop)
		pthread_cond_wait(&c->changed, &c->mu);
	if (c->qn == COURIER_QUEUE) {
		c->dropped++;
		rc = rv_err_set(err, -ENOBUFS, "", "%d reports wait for the master: step dropped",
				COURIER_QUEUE);
	} else {
		c->q[(c->qhead + c->qn) % COURIER_QUEUE] = *m;
		c->qn++;
		rc = (int)(++c->put & 0x3fffffff);
		pthread_cond_signal(&c->work);
	}
	pthread_mutex_unlock(&c->mu);
	return rc;
}

/* Wait until the message put as seq (courier_put's answer) is delivered,
 * while the master answers: not once a call has waited COURIER_STALL_MS
 * (the master stands still: the loop goes on, the queue grows). */
static void courier_wait_sent(struct trainer_courier *c, int seq)
{
	pthread_mutex_lock(&c->mu);
	while ((int)(c->sent & 0x3fffffff) < seq && !c->stop &&
	       !(c->call_ms && rv_mono_ms() - c->call_ms >= COURIER_STALL_MS)) {
		struct timespec ts;
		rv_mono_timespec(&ts, rv_mono_ms() + 10);
		pthread_cond_timedwait(&c->changed, &c->mu, &ts);
	}
	pthread_mutex_unlock(&c->mu);
}

int trainer_courier_step(struct rv_trainer *t, const struct rv_step_report *s, struct rv_err *err)
{
	struct courier_msg m = { .kind = MSG_STEP, .u.step = *s };
	int rc = courier_put(t, &m, err);
	return rc > 0 ? 0 : rc;
}

int trainer_courier_done(struct rv_trainer *t, const struct rv_shard_done *d, struct rv_err *err)
{
	struct courier_msg m = { .kind = MSG_DONE, .u.done = *d };
	int rc = courier_put(t, &m, err);
	return rc > 0 ? 0 : rc;
}

int trainer_courier_ckpt(struct rv_trainer *t, const struct rv_ckpt_report *r, struct rv_err *err)
{
	struct courier_msg m = { .kind = MSG_CKPT, .u.ckpt = *r };
	int rc = courier_put(t, &m, err);
	if (rc <= 0)
		return rc;
	/* A restore finds a step whose positions every rank reported only
	 * if they arrive with the steps: a queue that ran ahead of the
	 * master lost its last ones with the worker, and the master keeps
	 * the last 8 steps only.  So the save waits for its position while
	 * the master answers, and goes on without it while it stands still. */
	courier_wait_sent(courier_get(t), rc);
	return 0;
}

int rv_trainer_flush(struct rv_trainer *t, int timeout_ms, struct rv_err *err)
{
	struct trainer_courier *c = courier_get(t);
	if (!c)
		return 0;
	int64_t until = rv_mono_ms() + timeout_ms;
	int rc = 0;
	pthread_mutex_lock(&c->mu);
	while (c->qn > 0 && rv_mono_ms() < until) {
		struct timespec ts;
		rv_mono_timespec(&ts, until);
		pthread_cond_timedwait(&c->changed, &c->mu, &ts);
	}
	if (c->qn > 0)
		rc = rv_err_set(err, -ETIMEDOUT, "", "%d reports still wait for the master", c->qn);
	else if (c->refused) {
		rc = rv_err_set(err, c->sent_err.code ? c->sent_err.code : -EIO, "",
				"the master refused %lld reports, the last: %s",
				(long long)c->refused, c->sent_err.msg);
		c->refused = 0;
	}
	pthread_mutex_unlock(&c->mu);
	return rc;
}

int rv_trainer_ahead(struct rv_trainer *t)
{
	struct trainer_courier *c = courier_get(t);
	if (!c)
		return 0;
	pthread_mutex_lock(&c->mu);
	int n = c->wn;
	pthread_mutex_unlock(&c->mu);
	return n;
}

int trainer_courier_forget(struct rv_trainer *t)
{
	struct trainer_courier *c = courier_get(t);
	if (!c)
		return 0;
	struct rv_err err = { 0 };
	int rc = rv_trainer_flush(t, COURIER_DRAIN_MS, &err);
	pthread_mutex_lock(&c->mu);
	c->fetching = false;
	while (c->in_fetch)
		pthread_cond_wait(&c->changed, &c->mu);
	c->wn = c->whead = 0;
	c->waiting = c->finished = c->demand = c->stream = false;
	c->fetch_err = 0;
	pthread_mutex_unlock(&c->mu);
	return rc == -ETIMEDOUT ? rc : 0;
}

void trainer_courier_close(struct rv_trainer *t)
{
	struct trainer_courier *c = t->courier;
	t->courier = NULL;
	if (!c || c->pid != getpid())
		return; /* a forked child's copy: not its thread, its memory stays */
	struct rv_err err = { 0 };
	if (rv_trainer_flush(t, COURIER_DRAIN_MS, &err) < 0)
		fprintf(stderr, "rover: at close: %s\n", err.msg);
	pthread_mutex_lock(&c->mu);
	c->stop = true;
	pthread_cond_broadcast(&c->work);
	pthread_mutex_unlock(&c->mu);
	pthread_join(c->th, NULL);
	rv_master_client_free(c->mc);
	pthread_mutex_destroy(&c->mu);
	pthread_cond_destroy(&c->work);
	pthread_cond_destroy(&c->changed);
	free(c);
}
