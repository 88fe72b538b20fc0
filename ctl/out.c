/*
 * out.c: what roverctl prints: aligned tables, colour on a terminal only,
 * progress bars, numbers and times, JSON for scripts.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctl.h"

#define BOLD  "\033[1m"
#define RESET "\033[0m"

struct out_table {
	int ncols, nrows, cap;
	const char *const *headers;
	char **cells;        /* nrows * ncols */
	const char **colors; /* nrows * ncols */
};

struct out_table *out_table_new(int ncols, const char *const *headers)
{
	struct out_table *t = calloc(1, sizeof(*t));
	if (t) {
		t->ncols = ncols;
		t->headers = headers;
	}
	return t;
}

void out_table_row(struct out_table *t, const char *const *cells, const char *const *colors)
{
	if (!t)
		return;
	if (t->nrows == t->cap) {
		int cap = t->cap ? t->cap * 2 : 16;
		char **c = realloc(t->cells, sizeof(*c) * (size_t)(cap * t->ncols));
		if (!c)
			return;
		t->cells = c;
		const char **k = realloc(t->colors, sizeof(*k) * (size_t)(cap * t->ncols));
		if (!k)
			return;
		t->colors = k;
		t->cap = cap;
	}
	for (int i = 0; i < t->ncols; i++) {
		t->cells[t->nrows * t->ncols + i] = strdup(cells[i] ? cells[i] : "");
		t->colors[t->nrows * t->ncols + i] = colors ? colors[i] : NULL;
	}
	t->nrows++;
}

void out_table_print(struct ctl *c, struct out_table *t)
{
	if (!t)
		return;
	int w[32] = { 0 };
	for (int i = 0; i < t->ncols && i < 32; i++) {
		w[i] = (int)strlen(t->headers[i]);
		for (int r = 0; r < t->nrows; r++) {
			const char *s = t->cells[r * t->ncols + i];
			int l = s ? (int)strlen(s) : 0;
			if (l > w[i])
				w[i] = l;
		}
	}
	/* the last column gets what the terminal has left */
	int used = 0;
	for (int i = 0; i < t->ncols - 1; i++)
		used += w[i] + 2;
	int last = t->ncols - 1;
	if (c->width > 0 && used + w[last] > c->width)
		w[last] = c->width - used > 10 ? c->width - used : 10;
	for (int i = 0; i < t->ncols; i++)
		fprintf(c->out, "%s%-*s%s%s", c->color ? BOLD : "", i == last ? 0 : w[i],
			t->headers[i], c->color ? RESET : "", i == last ? "\n" : "  ");
	for (int r = 0; r < t->nrows; r++)
		for (int i = 0; i < t->ncols; i++) {
			const char *s = t->cells[r * t->ncols + i];
			const char *col = c->color ? t->colors[r * t->ncols + i] : NULL;
			int len = (int)strlen(s);
			if (i == last) {
				int cut = c->width > 0 && len > w[i] ? w[i] - 3 : len;
				fprintf(c->out, "%s%.*s%s%s\n", col ? col : "", cut, s,
					cut < len ? "..." : "", col ? RESET : "");
			} else {
				fprintf(c->out, "%s%s%s%*s  ", col ? col : "", s, col ? RESET : "",
					w[i] - len, "");
			}
		}
}

void out_table_free(struct out_table *t)
{
	if (!t)
		return;
	for (int i = 0; i < t->nrows * t->ncols; i++)
		free(t->cells[i]);
	free(t->cells);
	free(t->colors);
	free(t);
}

const char *out_state_color(const char *s)
{
	if (!s)
		return NULL;
	if (!strcmp(s, "running") || !strcmp(s, "better") || !strcmp(s, "ok"))
		return "\033[32m"; /* green */
	if (!strcmp(s, "failed") || !strcmp(s, "worse") || !strncmp(s, "node_oom", 8) ||
	    !strncmp(s, "node_failed", 11) || !strcmp(s, "stale"))
		return "\033[31m"; /* red */
	if (!strcmp(s, "finished") || !strcmp(s, "pending"))
		return "\033[34m"; /* blue */
	return NULL;
}

void out_heading(struct ctl *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (c->color)
		fputs(BOLD, c->out);
	vfprintf(c->out, fmt, ap);
	if (c->color)
		fputs(RESET, c->out);
	fputc('\n', c->out);
	va_end(ap);
}

void out_bar(struct ctl *c, double done, double total, int width)
{
	double f = total > 0 ? done / total : 0;
	if (f < 0)
		f = 0;
	if (f > 1)
		f = 1;
	int full = (int)(f * width + 0.5);
	fputc('[', c->out);
	if (c->color && full)
		fputs("\033[32m", c->out);
	for (int i = 0; i < full; i++)
		fputc('#', c->out);
	if (c->color && full)
		fputs(RESET, c->out);
	for (int i = full; i < width; i++)
		fputc('.', c->out);
	fprintf(c->out, "] %3.0f%%", f * 100);
}

void out_json(struct ctl *c, const cJSON *doc)
{
	char *s = doc ? cJSON_Print(doc) : NULL;
	fprintf(c->out, "%s\n", s ? s : "null");
	free(s);
}

void out_num(char *buf, size_t size, double v)
{
	if (v < 0)
		snprintf(buf, size, "-");
	else if (v >= 1e6)
		snprintf(buf, size, "%.1fM", v / 1e6);
	else if (v >= 1e4)
		snprintf(buf, size, "%.1fk", v / 1e3);
	else if (v == (double)(long long)v)
		snprintf(buf, size, "%lld", (long long)v);
	else
		snprintf(buf, size, "%.1f", v);
}

void out_time_ms(char *buf, size_t size, double ms)
{
	if (ms <= 0) {
		snprintf(buf, size, "-");
		return;
	}
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	localtime_r(&t, &tm);
	strftime(buf, size, "%Y-%m-%d %H:%M:%S", &tm);
}
