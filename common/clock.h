/*
 * clock.h: the clocks.  Wall time (rv_now_ms) only for what is shown or
 * stored; every deadline, timeout and interval runs on CLOCK_MONOTONIC
 * (rv_mono_ms), and so do the condition variables that wait for them.
 */
#ifndef RV_CLOCK_H
#define RV_CLOCK_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

/* Milliseconds since the epoch (wall clock) and since an arbitrary start
 * (monotonic). */
int64_t rv_now_ms(void);
int64_t rv_mono_ms(void);

/* A condition variable whose timed waits take CLOCK_MONOTONIC deadlines.
 * 0 or pthread_cond_init's error. */
int rv_cond_init_mono(pthread_cond_t *cv);

/* The absolute timespec of monotonic time mono_ms (negative: 0), for
 * pthread_cond_timedwait on a condition made by rv_cond_init_mono. */
void rv_mono_timespec(struct timespec *ts, int64_t mono_ms);

#endif
