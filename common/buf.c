/*
 * buf.c: the growable byte buffer (see buf.h): growth by doubling from 256
 * bytes, printf straight into the spare room.
 */
#include "buf.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void rv_buf_init(struct rv_buf *b)
{
	memset(b, 0, sizeof(*b));
}

void rv_buf_release(struct rv_buf *b)
{
	free(b->data);
	rv_buf_init(b);
}

bool rv_buf_reserve(struct rv_buf *b, size_t extra)
{
	if (b->failed)
		return false;
	if (b->cap > b->len && extra < b->cap - b->len) /* no overflow: room for NUL */
		return true;
	if (extra > SIZE_MAX / 2 - b->len - 1) {
		b->failed = true;
		return false;
	}
	size_t cap = b->cap ? b->cap : 256;
	while (cap < b->len + extra + 1)
		cap *= 2;
	char *p = realloc(b->data, cap);
	if (!p) {
		b->failed = true;
		return false;
	}
	b->data = p;
	b->cap = cap;
	return true;
}

void rv_buf_truncate(struct rv_buf *b, size_t len)
{
	if (b->failed || len >= b->len)
		return;
	b->len = len;
	b->data[len] = 0;
}

void rv_buf_consume(struct rv_buf *b, size_t n)
{
	if (n > b->len)
		n = b->len;
	if (b->failed || n == 0)
		return;
	memmove(b->data, b->data + n, b->len - n);
	b->len -= n;
	b->data[b->len] = 0;
}

void rv_buf_printf(struct rv_buf *b, const char *fmt, ...)
{
	if (b->failed)
		return;
	/* Format straight into the spare room; only a too-small buffer formats twice. */
	if (b->cap - b->len < 64 && !rv_buf_reserve(b, 64))
		return;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(b->data + b->len, b->cap - b->len, fmt, ap);
	va_end(ap);
	if (n < 0) {
		b->data[b->len] = 0;
		return;
	}
	if ((size_t)n >= b->cap - b->len) {
		if (!rv_buf_reserve(b, (size_t)n)) {
			b->data[b->len] = 0;
			return;
		}
		va_start(ap, fmt);
		vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
		va_end(ap);
	}
	b->len += (size_t)n;
}

void rv_buf_pg_array_str(struct rv_buf *b, const char *s)
{
	rv_buf_append(b, "\"", 1);
	for (const char *p = s; *p; p++) {
		if (*p == '"' || *p == '\\')
			rv_buf_append(b, "\\", 1);
		rv_buf_append(b, p, 1);
	}
	rv_buf_append(b, "\"", 1);
}

char *rv_buf_steal(struct rv_buf *b)
{
	if (b->failed) {
		rv_buf_release(b);
		return NULL;
	}
	if (!b->data)
		return strdup("");
	char *p = b->data;
	rv_buf_init(b);
	return p;
}
