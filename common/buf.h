/*
 * buf.h: the one growable byte buffer of the project, for building text (JSON
 * output, PostgreSQL array literals, Prometheus text, reasons, a child's
 * captured output).  On allocation failure the buffer is marked failed and
 * further appends are no-ops; check rv_buf_failed() once at the end.  A
 * zeroed struct is an empty buffer (as rv_buf_init leaves it).  Appends are
 * inline with an out-of-line growth path: the JSON printer calls them for
 * every token.  Not thread-safe; one owner.
 */
#ifndef RV_BUF_H
#define RV_BUF_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

struct rv_buf {
	char *data;   /* NUL-terminated while not failed */
	size_t len, cap;
	bool failed;
};

void rv_buf_init(struct rv_buf *b);
/* Free the data; b is empty (and not failed) again. */
void rv_buf_release(struct rv_buf *b);
/* Make room for extra more bytes plus the NUL.  false when failed (then or
 * before).  Appends call it only when the room is short. */
bool rv_buf_reserve(struct rv_buf *b, size_t extra);

/* Append n bytes of s (which may hold NULs). */
static inline void rv_buf_append(struct rv_buf *b, const char *s, size_t n)
{
	if (b->failed || (b->len + n + 1 > b->cap && !rv_buf_reserve(b, n)))
		return;
	memcpy(b->data + b->len, s, n);
	b->len += n;
	b->data[b->len] = 0;
}

static inline void rv_buf_puts(struct rv_buf *b, const char *s)
{
	rv_buf_append(b, s, strlen(s));
}

/* Cut back to len bytes (no-op when len >= b->len), e.g. to a mark taken
 * earlier from b->len. */
void rv_buf_truncate(struct rv_buf *b, size_t len);
/* Drop the first n bytes (all of them when n >= b->len): what a reader has
 * taken from the front of an input or output queue. */
void rv_buf_consume(struct rv_buf *b, size_t n);
void rv_buf_printf(struct rv_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Append s as a PostgreSQL array element: double-quoted, \ and " escaped. */
void rv_buf_pg_array_str(struct rv_buf *b, const char *s);
/* Hand the string to the caller (malloc'd; free()); NULL when failed. */
char *rv_buf_steal(struct rv_buf *b);
static inline bool rv_buf_failed(const struct rv_buf *b)
{
	return b->failed;
}

#endif
