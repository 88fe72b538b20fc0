/*
 * patch.c: the three patch types clients send: JSON merge patch (RFC 7386),
 * strategic merge patch (as a merge patch, but lists of named items, such
 * as containers and env, merge by name and honour "$patch": "delete"), and
 * JSON patch (RFC 6902: add, remove, replace, test).  Pure.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "standin.h"

void patch_merge(cJSON *target, const cJSON *patch)
{
	const cJSON *p;
	cJSON_ArrayForEach(p, patch)
	{
		if (cJSON_IsNull(p)) {
			cJSON_DeleteItemFromObject(target, p->string);
			continue;
		}
		cJSON *t = cJSON_GetObjectItem(target, p->string);
		if (cJSON_IsObject(p) && cJSON_IsObject(t)) {
			patch_merge(t, p);
			continue;
		}
		cJSON *copy;
		if (cJSON_IsObject(p)) { /* nulls inside a new object mean nothing */
			copy = cJSON_CreateObject();
			patch_merge(copy, p);
		} else {
			copy = cJSON_Duplicate(p, true);
		}
		if (t)
			cJSON_ReplaceItemInObject(target, p->string, copy);
		else
			cJSON_AddItemToObject(target, p->string, copy);
	}
}

static cJSON *patch_named(cJSON *list, const char *name)
{
	cJSON *it;
	cJSON_ArrayForEach(it, list)
	{
		const char *n = cJSON_GetStringValue(cJSON_GetObjectItem(it, "name"));
		if (n && strcmp(n, name) == 0)
			return it;
	}
	return NULL;
}

static bool patch_is_named_list(const cJSON *l)
{
	const cJSON *first = cJSON_GetArrayItem(l, 0);
	return cJSON_IsArray(l) && cJSON_IsObject(first) &&
	       cJSON_IsString(cJSON_GetObjectItem(first, "name"));
}

/* Merge a named list patch into the target list by name. */
static void patch_named_list(cJSON *t, const cJSON *p)
{
	const cJSON *it;
	cJSON_ArrayForEach(it, p)
	{
		const char *n = cJSON_GetStringValue(cJSON_GetObjectItem(it, "name"));
		const char *dir = cJSON_GetStringValue(cJSON_GetObjectItem(it, "$patch"));
		cJSON *have = n ? patch_named(t, n) : NULL;
		if (dir && strcmp(dir, "delete") == 0) {
			if (have)
				cJSON_Delete(cJSON_DetachItemViaPointer(t, have));
			continue;
		}
		if (have)
			patch_strategic(have, it);
		else
			cJSON_AddItemToArray(t, cJSON_Duplicate(it, true));
	}
}

void patch_strategic(cJSON *target, const cJSON *patch)
{
	const cJSON *p;
	cJSON_ArrayForEach(p, patch)
	{
		if (p->string && p->string[0] == '$')
			continue; /* directives ($patch, $retainKeys) */
		if (cJSON_IsNull(p)) {
			cJSON_DeleteItemFromObject(target, p->string);
			continue;
		}
		cJSON *t = cJSON_GetObjectItem(target, p->string);
		if (cJSON_IsObject(p) && cJSON_IsObject(t)) {
			patch_strategic(t, p);
		} else if (patch_is_named_list(p) && cJSON_IsArray(t)) {
			patch_named_list(t, p);
		} else if (t) {
			cJSON_ReplaceItemInObject(target, p->string, cJSON_Duplicate(p, true));
		} else {
			cJSON_AddItemToObject(target, p->string, cJSON_Duplicate(p, true));
		}
	}
}

/* An array index token ("0", "12"), -1 when it is not one. */
static int patch_index(const char *t)
{
	char *end;
	long v = strtol(t, &end, 10);
	return end == t || *end || v < 0 || v > 1000000 ? -1 : (int)v;
}

/* Resolve a JSON pointer's parent: *parent and the last token in key. */
static int patch_pointer(cJSON *root, const char *path, cJSON **parent, char *key, size_t size)
{
	char buf[512];
	if (path[0] != '/' || strlen(path) >= sizeof(buf))
		return -EINVAL;
	snprintf(buf, sizeof(buf), "%s", path + 1);
	char *last = strrchr(buf, '/');
	cJSON *cur = root;
	if (last) {
		*last = 0;
		char *save = NULL;
		for (char *t = strtok_r(buf, "/", &save); t && cur; t = strtok_r(NULL, "/", &save))
			cur = cJSON_IsArray(cur) ? cJSON_GetArrayItem(cur, patch_index(t))
						 : cJSON_GetObjectItem(cur, t);
		last++;
	} else {
		last = buf;
	}
	if (!cur)
		return -EINVAL;
	/* ~1 is '/', ~0 is '~' */
	size_t o = 0;
	for (const char *c = last; *c && o + 1 < size; c++) {
		if (c[0] == '~' && (c[1] == '0' || c[1] == '1')) {
			key[o++] = c[1] == '1' ? '/' : '~';
			c++;
		} else {
			key[o++] = *c;
		}
	}
	key[o] = 0;
	*parent = cur;
	return 0;
}

static int patch_op(cJSON *target, const cJSON *op, const char **why)
{
	const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(op, "op"));
	const char *path = cJSON_GetStringValue(cJSON_GetObjectItem(op, "path"));
	const cJSON *val = cJSON_GetObjectItem(op, "value");
	cJSON *parent;
	char key[256];
	if (!name || !path || patch_pointer(target, path, &parent, key, sizeof(key)) < 0) {
		*why = "json patch: a bad op or path";
		return -EINVAL;
	}
	bool arr = cJSON_IsArray(parent);
	if (arr && strcmp(key, "-") != 0 && patch_index(key) < 0) {
		*why = "json patch: not an array index";
		return -EINVAL;
	}
	cJSON *cur =
		arr ? (strcmp(key, "-") == 0 ? NULL : cJSON_GetArrayItem(parent, patch_index(key)))
		    : cJSON_GetObjectItem(parent, key);
	if (strcmp(name, "test") == 0) {
		if (!cur || !val || !cJSON_Compare(cur, val, true)) {
			*why = "json patch: test failed";
			return -EINVAL;
		}
		return 0;
	}
	if (strcmp(name, "remove") == 0 || (strcmp(name, "replace") == 0 && !cur)) {
		if (!cur) {
			*why = "json patch: the path to remove does not exist";
			return -EINVAL;
		}
		cJSON_Delete(cJSON_DetachItemViaPointer(parent, cur));
		return 0;
	}
	if (!val || (strcmp(name, "add") != 0 && strcmp(name, "replace") != 0)) {
		*why = "json patch: unsupported op";
		return -EINVAL;
	}
	cJSON *copy = cJSON_Duplicate(val, true);
	if (arr && strcmp(name, "add") == 0)
		cur ? cJSON_InsertItemInArray(parent, patch_index(key), copy)
		    : cJSON_AddItemToArray(parent, copy);
	else if (arr)
		cJSON_ReplaceItemViaPointer(parent, cur, copy);
	else if (cur)
		cJSON_ReplaceItemInObject(parent, key, copy);
	else
		cJSON_AddItemToObject(parent, key, copy);
	return 0;
}

int patch_json(cJSON *target, const cJSON *ops, const char **why)
{
	const cJSON *op;
	if (!cJSON_IsArray(ops)) {
		*why = "json patch: the body is not an array";
		return -EINVAL;
	}
	cJSON_ArrayForEach(op, ops)
	{
		int r = patch_op(target, op, why);
		if (r < 0)
			return r;
	}
	return 0;
}
