/*
 * clock.c: wall and monotonic milliseconds, monotonic condition variables.
 */
#include "clock.h"

int64_t rv_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t rv_mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int rv_cond_init_mono(pthread_cond_t *cv)
{
	pthread_condattr_t ca;
	int rc = pthread_condattr_init(&ca);
	if (rc != 0)
		return rc;
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	rc = pthread_cond_init(cv, &ca);
	pthread_condattr_destroy(&ca);
	return rc;
}

void rv_mono_timespec(struct timespec *ts, int64_t mono_ms)
{
	int64_t ms = mono_ms < 0 ? 0 : mono_ms;
	ts->tv_sec = (time_t)(ms / 1000);
	ts->tv_nsec = (long)(ms % 1000) * 1000000L;
}
