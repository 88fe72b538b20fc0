/*
 * select.c: label selectors (a=b, a==b, a!=b, a, !a, a in (x,y),
 * a notin (x,y)) and field selectors (path=value, path==value,
 * path!=value) over the fields clients select on: metadata.name,
 * metadata.namespace, spec.nodeName, spec.schedulerName, status.phase,
 * involvedObject.*, reason, type.  Pure; selectors are short, parsed on
 * every use.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "standin.h"

#define SELECT_MAX 1024

static void select_trim(char *s)
{
	size_t n = strlen(s);
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
		s[--n] = 0;
	size_t i = strspn(s, " \t");
	memmove(s, s + i, n - i + 1);
}

/* Split sel at top-level commas (not inside parentheses) into terms;
 * fn(term) for each until it returns false. */
static bool select_terms(const char *sel, bool (*fn)(char *term, void *ctx), void *ctx)
{
	char buf[SELECT_MAX];
	if (!sel || !*sel)
		return true;
	snprintf(buf, sizeof(buf), "%s", sel);
	int depth = 0;
	char *start = buf;
	for (char *p = buf;; p++) {
		if (*p == '(')
			depth++;
		else if (*p == ')')
			depth--;
		if ((*p == ',' && depth == 0) || *p == 0) {
			bool end = *p == 0;
			*p = 0;
			select_trim(start);
			if (*start && !fn(start, ctx))
				return false;
			if (end)
				return true;
			start = p + 1;
		}
	}
}

static bool select_in_list(const char *list, const char *v)
{
	char buf[SELECT_MAX];
	snprintf(buf, sizeof(buf), "%s", list);
	char *save = NULL;
	for (char *t = strtok_r(buf, ",()", &save); t; t = strtok_r(NULL, ",()", &save)) {
		select_trim(t);
		if (v && strcmp(t, v) == 0)
			return true;
	}
	return false;
}

/* One label term against labels: 1 matches, 0 not, -1 malformed. */
static int select_label_term(char *t, const cJSON *labels)
{
	char *op, *key = t;
	const char *val;
	if (t[0] == '!') {
		select_trim(++key);
		return !cJSON_GetObjectItem(labels, key);
	}
	char *sp = strpbrk(t, " \t");
	if (sp && !strpbrk(t, "=!")) {
		*sp = 0;
		char *rest = sp + 1;
		select_trim(rest);
		val = cJSON_GetStringValue(cJSON_GetObjectItem(labels, key));
		if (strncmp(rest, "in", 2) == 0 && strchr(rest, '('))
			return select_in_list(strchr(rest, '('), val);
		if (strncmp(rest, "notin", 5) == 0 && strchr(rest, '('))
			return !select_in_list(strchr(rest, '('), val);
		return -1;
	}
	if (!(op = strpbrk(t, "=!")))
		return cJSON_GetObjectItem(labels, key) != NULL;
	bool neq = op[0] == '!';
	if (neq && op[1] != '=')
		return -1;
	char *v = op + (neq || op[1] == '=' ? 2 : 1);
	*op = 0;
	select_trim(key);
	select_trim(v);
	val = cJSON_GetStringValue(cJSON_GetObjectItem(labels, key));
	bool eq = val && strcmp(val, v) == 0;
	return neq ? !eq : eq;
}

struct select_ctx {
	const cJSON *obj;
	bool ok;
	bool fields;
};

static bool select_label_fn(char *t, void *p)
{
	struct select_ctx *c = p;
	const cJSON *labels =
		cJSON_GetObjectItem(cJSON_GetObjectItem(c->obj, "metadata"), "labels");
	c->ok = select_label_term(t, labels) == 1;
	return c->ok;
}

bool select_labels(const char *sel, const cJSON *obj)
{
	struct select_ctx c = { obj, true, false };
	select_terms(sel, select_label_fn, &c);
	return c.ok;
}

/* The value of a dotted field path in obj as text ("" when absent). */
static void select_field_value(const cJSON *obj, const char *path, char *out, size_t size)
{
	char buf[256];
	snprintf(buf, sizeof(buf), "%s", path);
	const cJSON *cur = obj;
	char *save = NULL;
	for (char *t = strtok_r(buf, ".", &save); t && cur; t = strtok_r(NULL, ".", &save))
		cur = cJSON_GetObjectItem(cur, t);
	out[0] = 0;
	if (!cur)
		return;
	if (cJSON_IsString(cur))
		snprintf(out, size, "%s", cur->valuestring);
	else if (cJSON_IsNumber(cur))
		snprintf(out, size, "%lld", (long long)cur->valuedouble);
	else if (cJSON_IsBool(cur))
		snprintf(out, size, "%s", cJSON_IsTrue(cur) ? "true" : "false");
}

static bool select_field_fn(char *t, void *p)
{
	struct select_ctx *c = p;
	char *op = strpbrk(t, "=!");
	if (!op) {
		c->ok = false;
		return false;
	}
	bool neq = op[0] == '!';
	char *v = op + (neq || op[1] == '=' ? 2 : 1);
	*op = 0;
	select_trim(t);
	select_trim(v);
	char have[512];
	select_field_value(c->obj, t, have, sizeof(have));
	bool eq = strcmp(have, v) == 0;
	c->ok = neq ? !eq : eq;
	return c->ok;
}

bool select_fields(const char *sel, const cJSON *obj)
{
	struct select_ctx c = { obj, true, true };
	select_terms(sel, select_field_fn, &c);
	return c.ok;
}

static bool select_check_label_fn(char *t, void *p)
{
	struct select_ctx *c = p;
	cJSON *empty = cJSON_CreateObject();
	c->ok = select_label_term(t, empty) >= 0;
	cJSON_Delete(empty);
	return c->ok;
}

/* A selector's syntax checked term by term with fn; *why is too_long or bad
 * on failure. */
static int select_check(const char *sel, bool fields, bool (*fn)(char *, void *),
			const char *too_long, const char *bad, const char **why)
{
	struct select_ctx c = { NULL, true, fields };
	if (sel && strlen(sel) >= SELECT_MAX) {
		*why = too_long;
		return -EINVAL;
	}
	select_terms(sel, fn, &c);
	if (!c.ok)
		*why = bad;
	return c.ok ? 0 : -EINVAL;
}

int select_check_labels(const char *sel, const char **why)
{
	return select_check(sel, false, select_check_label_fn, "label selector too long",
			    "unable to parse requirement: found unexpected token", why);
}

static bool select_check_field_fn(char *t, void *p)
{
	struct select_ctx *c = p;
	char *op = strpbrk(t, "=!");
	c->ok = op && op != t && (op[0] == '=' || op[1] == '=');
	return c->ok;
}

int select_check_fields(const char *sel, const char **why)
{
	return select_check(sel, true, select_check_field_fn, "field selector too long",
			    "invalid selector: expected an operator", why);
}
