/*
 * worldwatch.c: the watch thread (worldwatch.h).
 *
 * Loop: wait (condition variable) for a round to watch that has not ended
 * yet, long-poll the master with watch=1 for it (WW_WAIT_MS at most, then
 * again), and when the answer says the round is no longer complete with
 * this node in it, note the round and bump the eventfd.  A master that
 * does not answer is asked again after WW_RETRY_MS: losing the master is
 * the heartbeat's to judge.  Shared fields under w->mu.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "log.h"
#include "master_client.h"
#include "worldwatch.h"

#define WW_WAIT_MS  20000
#define WW_RETRY_MS 200

struct worldwatch {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int refs; /* the owner and the thread */
	bool stop;
	int64_t round; /* the round to watch, 0 none */
	int64_t ended; /* the last round seen to end */
	int efd;
	char node[RV_NAME_MAX];
	struct rv_master_client *mc;
	pthread_t th;
};

static void ww_unref(struct worldwatch *w)
{
	pthread_mutex_lock(&w->mu);
	bool last = --w->refs == 0;
	pthread_mutex_unlock(&w->mu);
	if (!last)
		return;
	rv_master_client_free(w->mc);
	close(w->efd);
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
	free(w);
}

/* The next round to watch, 0 once stopped. */
static int64_t ww_next(struct worldwatch *w)
{
	pthread_mutex_lock(&w->mu);
	while (!w->stop && (w->round == 0 || w->round == w->ended))
		pthread_cond_wait(&w->cv, &w->mu);
	int64_t r = w->stop ? 0 : w->round;
	pthread_mutex_unlock(&w->mu);
	return r;
}

static void *ww_main(void *arg)
{
	struct worldwatch *w = arg;
	int64_t round;
	while ((round = ww_next(w)) > 0) {
		struct rv_rdzv_world_reply rep;
		struct rv_err err = { 0 };
		if (rv_master_world_watch(w->mc, w->node, round, WW_WAIT_MS, &rep, &err) < 0) {
			rv_log_debug("could not watch the world", "reason=\"%s\"", err.msg);
			usleep(WW_RETRY_MS * 1000);
			continue;
		}
		enum rv_rdzv_status st = rep.status;
		rv_rdzv_world_reply_release(&rep);
		if (st == RV_RDZV_COMPLETE)
			continue; /* the wait ran out */
		pthread_mutex_lock(&w->mu);
		w->ended = round;
		pthread_mutex_unlock(&w->mu);
		uint64_t one = 1;
		if (write(w->efd, &one, sizeof(one)) < 0)
			rv_log_debug("could not signal a world change", "reason=\"%s\"",
				     strerror(errno));
	}
	ww_unref(w);
	return NULL;
}

struct worldwatch *worldwatch_start(const char *url, const char *node, struct rv_err *err)
{
	struct worldwatch *w = calloc(1, sizeof(*w));
	if (!w) {
		rv_err_set(err, -ENOMEM, "", "could not watch the world: out of memory");
		return NULL;
	}
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	snprintf(w->node, sizeof(w->node), "%s", node);
	w->refs = 1;
	w->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	/* one attempt per long-poll: the loop asks again itself.  The master
	 * takes a watch's closed connection for this rover-run's death, so the
	 * client never gives up first: its margin past the wait is wide. */
	struct rv_master_opts o = {
		.url = url, .connect_timeout_ms = 1000, .timeout_ms = 10000, .max_attempts = 1
	};
	if (w->efd >= 0)
		w->mc = rv_master_client_new(&o, err);
	if (w->efd < 0 || !w->mc) {
		if (w->efd < 0)
			rv_err_set(err, -errno, "", "could not watch the world: %s",
				   strerror(errno));
		ww_unref(w);
		return NULL;
	}
	w->refs = 2;
	if (pthread_create(&w->th, NULL, ww_main, w) != 0) {
		w->refs = 1;
		ww_unref(w);
		rv_err_set(err, -EAGAIN, "", "could not watch the world: no thread");
		return NULL;
	}
	pthread_detach(w->th);
	return w;
}

int worldwatch_fd(const struct worldwatch *w)
{
	return w->efd;
}

void worldwatch_round(struct worldwatch *w, int64_t round)
{
	pthread_mutex_lock(&w->mu);
	w->round = round;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

int64_t worldwatch_take(struct worldwatch *w)
{
	uint64_t n;
	if (read(w->efd, &n, sizeof(n)) != (ssize_t)sizeof(n))
		return 0;
	pthread_mutex_lock(&w->mu);
	int64_t r = w->ended;
	pthread_mutex_unlock(&w->mu);
	return r;
}

struct worldwatch *worldwatch_stop(struct worldwatch *w)
{
	if (!w)
		return NULL;
	pthread_mutex_lock(&w->mu);
	w->stop = true;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
	ww_unref(w);
	return NULL;
}
