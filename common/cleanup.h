/*
 * cleanup.h: scope-bound cleanup attributes and pointer hand-off.
 *
 *   RV_CLEANUP_FREE char *s = strdup(x);    freed at scope exit
 *   return RV_TAKE_PTR(s);                   hand ownership to the caller
 *
 * Every destructor used here accepts NULL.
 */
#ifndef RV_CLEANUP_H
#define RV_CLEANUP_H

#include <stdlib.h>
#include <unistd.h>

#define RV_CLEANUP(fn) __attribute__((cleanup(fn)))

#define RV_TAKE_PTR(p)                          \
	({                                      \
		__typeof__(p) rv_tmp_ = (p);    \
		(p) = NULL;                     \
		rv_tmp_;                        \
	})

static inline void rv_freep(void *p)
{
	free(*(void **)p);
}

static inline void rv_closep(int *fd)
{
	if (*fd >= 0)
		close(*fd);
}

#define RV_CLEANUP_FREE RV_CLEANUP(rv_freep)
#define RV_CLEANUP_CLOSE RV_CLEANUP(rv_closep)

#define RV_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#endif
