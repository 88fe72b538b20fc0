/*
 * buf.h: a growable byte buffer for building text (array literals, Prometheus
 * text, reasons).  On allocation failure the buffer is marked failed and
 * further appends are no-ops; check rv_buf_failed() once at the end.
 * Not thread-safe; one owner.
 */
#ifndef RV_BUF_H
#define RV_BUF_H

#include <stdbool.h>
#include <stddef.h>

struct rv_buf {
	char *data;   /* NUL-terminated while not failed */
	size_t len, cap;
	bool failed;
};

void rv_buf_init(struct rv_buf *b);
void rv_buf_release(struct rv_buf *b);
void rv_buf_append(struct rv_buf *b, const char *s, size_t n);
void rv_buf_puts(struct rv_buf *b, const char *s);
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
