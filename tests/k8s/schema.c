/*
 * schema.c: custom objects checked against their CustomResourceDefinition's
 * structural OpenAPI v3 schema, the subset a CRD of ours uses: type,
 * required, properties, additionalProperties (a schema), items, minimum,
 * maximum, enum, pattern (POSIX extended), minLength and maxLength;
 * x-kubernetes-preserve-unknown-fields is taken as it is meant (anything
 * below goes).  Unknown fields are kept, not pruned.  The messages are the
 * API server's ("spec.x: Invalid value: -1: spec.x in body should be
 * greater than or equal to 0").  Pure: called with s->mu held or not.
 */
#include <errno.h>
#include <math.h>
#include <regex.h>
#include <stdio.h>
#include <string.h>

#include "standin.h"

struct schema_out {
	char *field, *why;
	size_t fsize, wsize;
};

static const char *schema_type_of(const cJSON *v)
{
	if (cJSON_IsObject(v))
		return "object";
	if (cJSON_IsArray(v))
		return "array";
	if (cJSON_IsString(v))
		return "string";
	if (cJSON_IsBool(v))
		return "boolean";
	if (cJSON_IsNumber(v))
		return v->valuedouble == floor(v->valuedouble) ? "integer" : "number";
	return "null";
}

static void schema_value(const cJSON *v, char *out, size_t size)
{
	char *p = cJSON_PrintUnformatted(v);
	size_t n = p ? strlen(p) : 4;
	if (n >= size)
		n = size - 1;
	memcpy(out, p ? p : "null", n);
	out[n] = 0;
	cJSON_free(p);
}

static int schema_fail(struct schema_out *o, const char *path, const char *why)
{
	snprintf(o->field, o->fsize, "%s", path);
	snprintf(o->why, o->wsize, "%s", why);
	return -EINVAL;
}

static int schema_walk(const cJSON *sc, const cJSON *v, const char *path, struct schema_out *o);

static int schema_type(const cJSON *sc, const cJSON *v, const char *path, struct schema_out *o)
{
	const char *want = cJSON_GetStringValue(cJSON_GetObjectItem(sc, "type"));
	const char *have = schema_type_of(v);
	if (!want || !strcmp(want, have) || (!strcmp(want, "number") && !strcmp(have, "integer")))
		return 0;
	char val[160], why[400];
	schema_value(v, val, sizeof(val));
	snprintf(why, sizeof(why), "Invalid value: \"%s\": %s in body must be of type %s: \"%s\"",
		 have, path, want, have);
	return schema_fail(o, path, why);
}

static int schema_number(const cJSON *sc, const cJSON *v, const char *path, struct schema_out *o)
{
	if (!cJSON_IsNumber(v))
		return 0;
	const cJSON *mn = cJSON_GetObjectItem(sc, "minimum"),
		    *mx = cJSON_GetObjectItem(sc, "maximum");
	char val[64], lim[64], why[400];
	schema_value(v, val, sizeof(val));
	if (cJSON_IsNumber(mn) && v->valuedouble < mn->valuedouble) {
		schema_value(mn, lim, sizeof(lim));
		snprintf(why, sizeof(why),
			 "Invalid value: %s: %s in body should be greater than or equal to %s", val,
			 path, lim);
		return schema_fail(o, path, why);
	}
	if (cJSON_IsNumber(mx) && v->valuedouble > mx->valuedouble) {
		schema_value(mx, lim, sizeof(lim));
		snprintf(why, sizeof(why),
			 "Invalid value: %s: %s in body should be less than or equal to %s", val,
			 path, lim);
		return schema_fail(o, path, why);
	}
	return 0;
}

static int schema_string(const cJSON *sc, const cJSON *v, const char *path, struct schema_out *o)
{
	if (!cJSON_IsString(v))
		return 0;
	char why[600];
	const char *pat = cJSON_GetStringValue(cJSON_GetObjectItem(sc, "pattern"));
	regex_t re;
	if (pat && regcomp(&re, pat, REG_EXTENDED | REG_NOSUB) == 0) {
		int m = regexec(&re, v->valuestring, 0, NULL, 0);
		regfree(&re);
		if (m != 0) {
			snprintf(why, sizeof(why),
				 "Invalid value: \"%.100s\": %s in body should match '%.100s'",
				 v->valuestring, path, pat);
			return schema_fail(o, path, why);
		}
	}
	const cJSON *ml = cJSON_GetObjectItem(sc, "maxLength");
	if (cJSON_IsNumber(ml) && (double)strlen(v->valuestring) > ml->valuedouble) {
		snprintf(why, sizeof(why), "Too long: may not be longer than %d", ml->valueint);
		return schema_fail(o, path, why);
	}
	const cJSON *mi = cJSON_GetObjectItem(sc, "minLength");
	if (cJSON_IsNumber(mi) && (double)strlen(v->valuestring) < mi->valuedouble) {
		snprintf(why, sizeof(why),
			 "Invalid value: \"%.100s\": %s in body should be at least %d chars long",
			 v->valuestring, path, mi->valueint);
		return schema_fail(o, path, why);
	}
	return 0;
}

static int schema_enum(const cJSON *sc, const cJSON *v, const char *path, struct schema_out *o)
{
	const cJSON *en = cJSON_GetObjectItem(sc, "enum"), *e;
	if (!cJSON_IsArray(en))
		return 0;
	cJSON_ArrayForEach(e, en) if (cJSON_Compare(e, v, true)) return 0;
	char val[160], list[300] = "", why[600];
	schema_value(v, val, sizeof(val));
	cJSON_ArrayForEach(e, en)
	{
		char one[80];
		schema_value(e, one, sizeof(one));
		size_t l = strlen(list);
		snprintf(list + l, sizeof(list) - l, "%s%s", l ? ", " : "", one);
	}
	snprintf(why, sizeof(why), "Unsupported value: %s: supported values: %s", val, list);
	return schema_fail(o, path, why);
}

static int schema_object(const cJSON *sc, const cJSON *v, const char *path, struct schema_out *o)
{
	if (!cJSON_IsObject(v))
		return 0;
	char sub[512];
	const cJSON *req, *it;
	cJSON_ArrayForEach(req, cJSON_GetObjectItem(sc, "required"))
	{
		if (!cJSON_IsString(req) || cJSON_GetObjectItem(v, req->valuestring))
			continue;
		snprintf(sub, sizeof(sub), "%s%s%s", path, path[0] ? "." : "", req->valuestring);
		return schema_fail(o, sub, "Required value");
	}
	const cJSON *props = cJSON_GetObjectItem(sc, "properties");
	const cJSON *extra = cJSON_GetObjectItem(sc, "additionalProperties");
	cJSON_ArrayForEach(it, v)
	{
		const cJSON *p = cJSON_GetObjectItem(props, it->string);
		if (!p && cJSON_IsObject(extra))
			p = extra;
		if (!p || (!path[0] && !strcmp(it->string, "metadata")))
			continue;
		snprintf(sub, sizeof(sub), "%s%s%s", path, path[0] ? "." : "", it->string);
		if (schema_walk(p, it, sub, o) < 0)
			return -EINVAL;
	}
	return 0;
}

static int schema_walk(const cJSON *sc, const cJSON *v, const char *path, struct schema_out *o)
{
	if (schema_type(sc, v, path, o) < 0 || schema_enum(sc, v, path, o) < 0 ||
	    schema_number(sc, v, path, o) < 0 || schema_string(sc, v, path, o) < 0 ||
	    schema_object(sc, v, path, o) < 0)
		return -EINVAL;
	const cJSON *items = cJSON_GetObjectItem(sc, "items"), *it;
	if (!cJSON_IsArray(v) || !cJSON_IsObject(items))
		return 0;
	int i = 0;
	cJSON_ArrayForEach(it, v)
	{
		char sub[512];
		snprintf(sub, sizeof(sub), "%s[%d]", path, i++);
		if (schema_walk(items, it, sub, o) < 0)
			return -EINVAL;
	}
	return 0;
}

int schema_check(const cJSON *schema, const cJSON *obj, char *field, size_t fsize, char *why,
		 size_t wsize)
{
	struct schema_out o = { field, why, fsize, wsize };
	if (!schema)
		return 0;
	return schema_walk(schema, obj, "", &o);
}

static const char *schema_str(const cJSON *o, const char *key)
{
	const char *v = cJSON_GetStringValue(cJSON_GetObjectItem(o, key));
	return v && *v ? v : NULL;
}

int schema_crd_ok(const cJSON *crd, const char **why)
{
	const cJSON *spec = cJSON_GetObjectItem(crd, "spec");
	const cJSON *names = cJSON_GetObjectItem(spec, "names");
	const cJSON *vers = cJSON_GetObjectItem(spec, "versions");
	const cJSON *v0 = cJSON_GetArrayItem(vers, 0);
	const char *name = schema_str(cJSON_GetObjectItem(crd, "metadata"), "name");
	const char *group = schema_str(spec, "group"), *plural = schema_str(names, "plural");
	const char *scope = schema_str(spec, "scope");
	char want[300];
	if (!group)
		*why = "spec.group: Required value";
	else if (!plural)
		*why = "spec.names.plural: Required value";
	else if (!schema_str(names, "kind"))
		*why = "spec.names.kind: Required value";
	else if (!scope || (strcmp(scope, "Namespaced") != 0 && strcmp(scope, "Cluster") != 0))
		*why = "spec.scope: Unsupported value: supported values: \"Cluster\", "
		       "\"Namespaced\"";
	else if (!schema_str(v0, "name"))
		*why = "spec.versions: Invalid value: must have exactly one version marked as "
		       "storage version";
	else if (!cJSON_IsObject(
			 cJSON_GetObjectItem(cJSON_GetObjectItem(v0, "schema"), "openAPIV3Schema")))
		*why = "spec.versions[0].schema.openAPIV3Schema: Required value: schemas are "
		       "required";
	else {
		snprintf(want, sizeof(want), "%s.%s", plural, group);
		if (!name || strcmp(name, want) != 0)
			*why = "metadata.name: Invalid value: must be "
			       "spec.names.plural+\".\"+spec.group";
		else
			return 0;
	}
	return -EINVAL;
}
