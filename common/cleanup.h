/*
 * cleanup.h: the one set of scope-bound cleanup attributes and the pointer
 * hand-off, for every folder.
 *
 *   RV_CLEANUP_FREE char *s = strdup(x);    freed at scope exit
 *   return RV_TAKE_PTR(s);                   hand ownership to the caller
 *
 * Every destructor used here accepts NULL.  This header includes no library:
 * the destructors for library handles live beside their wrappers, so code
 * that links neither libpq nor cJSON can use the rest.  Include the wrapper's
 * header where you use one:
 *   RV_CLEANUP_PGCONN PGconn *c       PQfinish   (rv_db_finishp, pg/db.h)
 *   RV_CLEANUP_PGRESULT PGresult *r   PQclear    (rv_db_clearp, pg/db.h)
 *   RV_CLEANUP_CJSON cJSON *root      cJSON_Delete (rv_json_deletep, json.h)
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
#define RV_CLEANUP_PGCONN   RV_CLEANUP(rv_db_finishp)
#define RV_CLEANUP_PGRESULT RV_CLEANUP(rv_db_clearp)
#define RV_CLEANUP_CJSON    RV_CLEANUP(rv_json_deletep)

#define RV_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#endif
