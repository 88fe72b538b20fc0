/*
 * wire_codec.c: the table-driven codec of the wire messages (wire_codec.h)
 * and the checks, getters and builders its hooks share.
 *
 * Decoding walks a message's table in order: the first bad field wins and
 * names itself ("members[2].node"); unknown keys are ignored (newer
 * senders).  Encoding writes the table's keys in the same order, so a
 * table's order is its JSON's.  Pure and thread-safe.
 */
#include "wire_codec.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "json.h"

const char *const rv_wire_role_names[RV_ROLE_COUNT] = {
	[RV_ROLE_WORKER] = "worker",
	[RV_ROLE_PS] = "ps",
	[RV_ROLE_CHIEF] = "chief",
	[RV_ROLE_EVALUATOR] = "evaluator",
};

const char *const rv_wire_optimize_names[3] = {
	[RV_OPT_MANUAL] = "manual",
	[RV_OPT_SINGLE_JOB] = "single-job",
	[RV_OPT_CLUSTER] = "cluster",
};

const char *rv_wire_name_of(const char *const *names, size_t n, int v)
{
	return v >= 0 && (size_t)v < n ? names[v] : "unknown";
}

int rv_wire_parse_of(const char *const *names, size_t n, const char *s)
{
	if (!s)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (strcmp(names[i], s) == 0)
			return (int)i;
	return -EINVAL;
}

/* ---- checks and getters ---- */

static bool is_lower_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static bool is_alnum(char c)
{
	return is_lower_alnum(c) || (c >= 'A' && c <= 'Z');
}

/* DNS-1123 label: 1..63 of [a-z0-9-], starting and ending alphanumeric. */
int rv_wire_check_dns_label(const char *s, const char *field, struct rv_err *err)
{
	size_t n = strlen(s);
	if (n == 0 || n > 63)
		return rv_err_set(err, -EINVAL, field, "%s must be 1 to 63 characters", field);
	for (size_t i = 0; i < n; i++)
		if (!is_lower_alnum(s[i]) && s[i] != '-')
			return rv_err_set(err, -EINVAL, field,
					  "%s must hold only lowercase letters, digits and '-'",
					  field);
	if (!is_lower_alnum(s[0]) || !is_lower_alnum(s[n - 1]))
		return rv_err_set(err, -EINVAL, field,
				  "%s must start and end with a letter or digit", field);
	return 0;
}

/* Node, dataset and host names: 1..max of [A-Za-z0-9._-]. */
int rv_wire_check_name(const char *s, size_t max, const char *field, struct rv_err *err)
{
	size_t n = strlen(s);
	if (n == 0 || n > max)
		return rv_err_set(err, -EINVAL, field, "%s must be 1 to %zu characters", field,
				  max);
	for (size_t i = 0; i < n; i++)
		if (!is_alnum(s[i]) && s[i] != '.' && s[i] != '_' && s[i] != '-')
			return rv_err_set(err, -EINVAL, field,
					  "%s must hold only letters, digits, '.', '_' and '-'",
					  field);
	return 0;
}

int rv_wire_get_int32(const cJSON *o, const char *key, const char *path, bool required, int64_t min,
		      int64_t max, int *out, struct rv_err *err)
{
	int64_t v;
	int rc = rv_json_get_int(o, key, path, required, min, max, &v, err);
	if (rc == 1)
		*out = (int)v;
	return rc;
}

/* "one of a, b, c" */
static void enum_expect(char *buf, size_t size, const char *const *names, int n)
{
	size_t at = (size_t)snprintf(buf, size, "one of ");
	for (int i = 0; i < n && at < size; i++)
		at += (size_t)snprintf(buf + at, size - at, "%s%s", i ? ", " : "", names[i]);
}

/*
 * A string that must be one of names; *out gets its index.  Reads the cJSON
 * string directly so an over-long value gets the "must be one of" message
 * rather than a length one.
 */
int rv_wire_get_enum(const cJSON *o, const char *key, const char *path, bool required,
		     const char *const *names, int n, const char *expect, int *out,
		     struct rv_err *err)
{
	rv_wire_path f;
	const cJSON *it = cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
	if (!it || cJSON_IsNull(it)) {
		if (!required)
			return 0;
		rv_json_path(f, sizeof(f), path, key);
		return rv_err_set(err, -EINVAL, f, "%s is required", f);
	}
	int v = cJSON_IsString(it) ? rv_wire_parse_of(names, (size_t)n, it->valuestring) : -1;
	if (v >= 0) {
		*out = v;
		return 1;
	}
	rv_json_path(f, sizeof(f), path, key); /* only now: a path costs a snprintf */
	if (!cJSON_IsString(it))
		return rv_err_set(err, -EINVAL, f, "%s must be a string", f);
	char one_of[256];
	enum_expect(one_of, sizeof(one_of), names, n);
	return rv_err_set(err, -EINVAL, f, "%s must be %s", f, expect ? expect : one_of);
}

/* Count an array's items, stopping early once past limit. */
int rv_wire_count(const cJSON *arr, int limit)
{
	int n = 0;
	for (const cJSON *it = arr ? arr->child : NULL; it && n <= limit; it = it->next)
		n++;
	return n;
}

/* ok-chained builders: each returns false when cJSON ran out of memory. */
bool rv_wire_add_num(cJSON *o, const char *k, double v)
{
	return cJSON_AddNumberToObject(o, k, v) != NULL;
}

bool rv_wire_add_str(cJSON *o, const char *k, const char *v)
{
	return cJSON_AddStringToObject(o, k, v) != NULL;
}

bool rv_wire_add_bool(cJSON *o, const char *k, bool v)
{
	return cJSON_AddBoolToObject(o, k, v) != NULL;
}

/* ---- decode ---- */

/* The member row f describes, in m. */
#define AT(m, f)  ((void *)((char *)(m) + (f)->off))
#define CAT(m, f) ((const void *)((const char *)(m) + (f)->off))

static bool required(const struct rv_wire_field *f)
{
	return (f->flags & (RV_WIRE_REQ | RV_WIRE_REQ_VARIANT)) != 0;
}

/* Whether row f applies to m (its variant, when it has one). */
static bool applies(const struct rv_wire_message *msg, const struct rv_wire_field *f, const void *m)
{
	return f->variant == 0 ||
	       *(const int *)((const char *)m + msg->fields[0].off) == f->variant - 1;
}

/*
 * The rows of each variant, worked out once per array rather than per item:
 * walking a sample's 30 rows to find its 8 cost more than reading them (a
 * batch is 10000 samples).  row[v] lists, in table order, the rows after
 * the first (the variant's own field) that apply when it is v.  A message
 * without variant rows, or beyond the limits, has nvar 0: every row is
 * walked as rv_wire_decode_fields does.
 */
#define PLAN_VARIANTS 8
#define PLAN_ROWS     64
struct plan {
	int nvar;
	unsigned char n[PLAN_VARIANTS];
	unsigned char row[PLAN_VARIANTS][PLAN_ROWS];
};

static void plan_init(struct plan *pl, const struct rv_wire_message *msg)
{
	pl->nvar = 0;
	for (int i = 0; i < msg->nfields; i++)
		if (msg->fields[i].variant > pl->nvar)
			pl->nvar = msg->fields[i].variant;
	if (pl->nvar > PLAN_VARIANTS || msg->nfields > PLAN_ROWS || msg->fields[0].variant) {
		pl->nvar = 0;
		return;
	}
	for (int v = 0; v < pl->nvar; v++) {
		pl->n[v] = 0;
		for (int i = 1; i < msg->nfields; i++)
			if (msg->fields[i].variant == 0 || msg->fields[i].variant == v + 1)
				pl->row[v][pl->n[v]++] = (unsigned char)i;
	}
}

/* The rows after the first that apply to m, or NULL: walk them all. */
static const unsigned char *plan_rows(const struct plan *pl, const struct rv_wire_message *msg,
				      const void *m, int *n)
{
	if (!pl || pl->nvar == 0)
		return NULL;
	int v = *(const int *)((const char *)m + msg->fields[0].off);
	if (v < 0 || v >= pl->nvar)
		return NULL;
	*n = pl->n[v];
	return pl->row[v];
}

static void set_default(const struct rv_wire_field *f, void *m)
{
	if (f->kind == RV_WIRE_BOOL)
		*(bool *)AT(m, f) = f->def != 0;
	else if (f->kind == RV_WIRE_NUMBER)
		*(double *)AT(m, f) = f->def;
	else if (f->size == sizeof(int64_t))
		*(int64_t *)AT(m, f) = (int64_t)f->def;
	else
		*(int *)AT(m, f) = (int)f->def;
}

static int decode_string(const cJSON *o, const char *path, const struct rv_wire_field *f, void *m,
			 struct rv_err *err)
{
	char *s = AT(m, f);
	int rc = rv_json_get_string(o, f->name, path, required(f), s, f->size, err);
	if (rc == 1 && f->kind == RV_WIRE_NAME) {
		rv_wire_path p;
		rv_json_path(p, sizeof(p), path, f->name);
		if ((rc = rv_wire_check_name(s, f->size - 1, p, err)) < 0)
			s[0] = '\0';
		else
			rc = 1;
	}
	return rc;
}

static int decode_int(const cJSON *o, const char *path, const struct rv_wire_field *f, void *m,
		      struct rv_err *err)
{
	int64_t v;
	int rc = rv_json_get_int(o, f->name, path, required(f), f->min, f->max, &v, err);
	if (rc == 1 && f->size == sizeof(int64_t))
		*(int64_t *)AT(m, f) = v;
	else if (rc == 1)
		*(int *)AT(m, f) = (int)v;
	return rc;
}

/* The array at f->name: its items into place, or into a new allocation. */
static int decode_array(const cJSON *o, const char *path, const struct rv_wire_field *f, void *m,
			struct rv_err *err)
{
	rv_wire_path p;
	int rc;
	const cJSON *arr = rv_json_get_array(o, f->name, path, required(f), &rc, err);
	if (!arr)
		return rc;
	rv_json_path(p, sizeof(p), path, f->name);
	int n = rv_wire_count(arr, (int)f->max);
	if (n == 0 && (f->flags & RV_WIRE_NONEMPTY))
		return rv_err_set(err, -EINVAL, p, "%s must not be empty", p);
	if (n > f->max)
		return rv_err_set(err, f->flags & RV_WIRE_MAX_EINVAL ? -EINVAL : -E2BIG, p,
				  "%s must have at most %d entries", p, (int)f->max);
	void *base = AT(m, f);
	if (f->flags & RV_WIRE_ALLOC) {
		if (n == 0)
			return 1;
		void *items = calloc((size_t)n, f->elem->size);
		if (!items)
			return rv_err_set(err, -ENOMEM, p, "could not allocate %d %s", n, f->name);
		*(void **)base = items;
		base = items;
	}
	rc = rv_wire_decode_items(f->elem, arr, p, base, (int *)((char *)m + f->count_off), err);
	return rc < 0 ? rc : 1;
}

static int decode_object(const cJSON *o, const char *path, const struct rv_wire_field *f, void *m,
			 struct rv_err *err)
{
	rv_wire_path p;
	int rc;
	const cJSON *it = rv_json_get_object(o, f->name, path, required(f), &rc, err);
	if (!it)
		return rc;
	rv_json_path(p, sizeof(p), path, f->name);
	if (f->count_off)
		*(bool *)((char *)m + f->count_off) = true;
	rc = rv_wire_decode_fields(f->elem, it, p, AT(m, f), err);
	return rc < 0 ? rc : 1;
}

static int decode_field(const cJSON *o, const char *path, const struct rv_wire_field *f, void *m,
			struct rv_err *err)
{
	if (f->flags & RV_WIRE_DEF)
		set_default(f, m);
	int rc = f->parse ? f->parse(o, path, f, m, err) : rv_wire_decode_row(o, path, f, m, err);
	if (rc == 1 && (f->flags & RV_WIRE_GIVEN))
		*(bool *)((char *)m + f->count_off) = true;
	return rc;
}

int rv_wire_decode_row(const cJSON *o, const char *path, const struct rv_wire_field *f, void *m,
		       struct rv_err *err)
{
	bool req = required(f);
	int rc, v = 0;
	switch (f->kind) {
	case RV_WIRE_STRING:
	case RV_WIRE_NAME:
		return decode_string(o, path, f, m, err);
	case RV_WIRE_INT:
		return decode_int(o, path, f, m, err);
	case RV_WIRE_NUMBER:
		return rv_json_get_double(o, f->name, path, req, f->dmin, f->dmax,
					  (double *)AT(m, f), err);
	case RV_WIRE_BOOL:
		return rv_json_get_bool(o, f->name, path, req, (bool *)AT(m, f), err);
	case RV_WIRE_ENUM:
		rc = rv_wire_get_enum(o, f->name, path, req, f->names, f->nnames, NULL, &v, err);
		if (rc == 1)
			*(int *)AT(m, f) = v;
		return rc;
	case RV_WIRE_ARRAY:
		return decode_array(o, path, f, m, err);
	case RV_WIRE_OBJECT:
		return decode_object(o, path, f, m, err);
	case RV_WIRE_HOOK:
	case RV_WIRE_DOC:
		break;
	}
	return 0;
}

/* The fields of msg, by plan pl when it has one for m's variant. */
static int decode_planned(const struct rv_wire_message *msg, const struct plan *pl, const cJSON *o,
			  const char *path, void *m, struct rv_err *err)
{
	int rc = 0, n = 0;
	if (msg->nfields > 0 && (rc = decode_field(o, path, &msg->fields[0], m, err)) < 0)
		return rc;
	const unsigned char *rows = plan_rows(pl, msg, m, &n);
	if (rows) {
		for (int k = 0; k < n; k++)
			if ((rc = decode_field(o, path, &msg->fields[rows[k]], m, err)) < 0)
				return rc;
	} else {
		for (int i = 1; i < msg->nfields; i++)
			if (applies(msg, &msg->fields[i], m) &&
			    (rc = decode_field(o, path, &msg->fields[i], m, err)) < 0)
				return rc;
	}
	return msg->check ? msg->check(o, path, m, err) : 0;
}

int rv_wire_decode_fields(const struct rv_wire_message *msg, const cJSON *o, const char *path,
			  void *m, struct rv_err *err)
{
	return decode_planned(msg, NULL, o, path, m, err);
}

int rv_wire_decode_required(const struct rv_wire_message *msg, const cJSON *o, const char *path,
			    void *m, const char *const *keys, struct rv_err *err)
{
	for (; *keys; keys++)
		for (int i = 0; i < msg->nfields; i++) {
			if (strcmp(msg->fields[i].name, *keys) != 0)
				continue;
			struct rv_wire_field f = msg->fields[i];
			f.flags |= RV_WIRE_REQ;
			int rc = decode_field(o, path, &f, m, err);
			if (rc < 0)
				return rc;
		}
	return 0;
}

int rv_wire_decode_role_map(const struct rv_wire_message *msg, const cJSON *map, const char *path,
			    void *base, size_t present_off, const char *what, const char *skip,
			    struct rv_err *err)
{
	for (const cJSON *it = map->child; it; it = it->next) {
		rv_wire_path p;
		const char *key = it->string ? it->string : "";
		rv_json_path(p, sizeof(p), path, key);
		if (skip && !strcmp(key, skip))
			continue;
		int role = rv_role_parse(key);
		if (role < 0)
			return rv_err_set(err, -EINVAL, p,
					  "unknown %s \"%.32s\" (expected worker, ps, chief or "
					  "evaluator)",
					  what, key);
		char *one = (char *)base + (size_t)role * msg->size;
		bool *present = (bool *)(one + present_off);
		if (*present)
			return rv_err_set(err, -EINVAL, p, "%s is given twice", p);
		if (!cJSON_IsObject(it))
			return rv_err_set(err, -EINVAL, p, "%s must be an object", p);
		*present = true;
		int rc = rv_wire_decode_fields(msg, it, p, one, err);
		if (rc < 0)
			return rc;
	}
	return 0;
}

bool rv_wire_encode_role_map(const struct rv_wire_message *msg, cJSON *o, const char *key,
			     const void *base, size_t present_off)
{
	cJSON *map = cJSON_AddObjectToObject(o, key);
	for (int r = 0; map && r < RV_ROLE_COUNT; r++) {
		const char *one = (const char *)base + (size_t)r * msg->size;
		if (!*(const bool *)(one + present_off))
			continue;
		cJSON *e = cJSON_AddObjectToObject(map, rv_role_name((enum rv_role)r));
		if (!e || !rv_wire_encode_fields(msg, e, one))
			return false;
	}
	return map != NULL;
}

int rv_wire_decode_items(const struct rv_wire_message *msg, const cJSON *arr, const char *path,
			 void *base, int *count, struct rv_err *err)
{
	int i = 0;
	struct plan pl;
	plan_init(&pl, msg);
	for (const cJSON *it = arr->child; it; it = it->next, i++) {
		rv_wire_path p;
		rv_json_path_index(p, sizeof(p), path, i);
		*count = i + 1; /* so that a release frees what the item holds */
		if (!cJSON_IsObject(it))
			return rv_err_set(err, -EINVAL, p, "%s must be an object", p);
		int rc = decode_planned(msg, &pl, it, p, (char *)base + (size_t)i * msg->size, err);
		if (rc < 0)
			return rc;
	}
	*count = i;
	return 0;
}

int rv_wire_decode(const struct rv_wire_message *msg, const cJSON *root, void *out,
		   struct rv_err *err)
{
	memset(out, 0, msg->size);
	int rc = cJSON_IsObject(root)
			 ? rv_wire_decode_fields(msg, root, "", out, err)
			 : rv_err_set(err, -EINVAL, "", "%s must be a json object", msg->what);
	if (rc < 0) {
		rv_wire_release(msg, out);
		memset(out, 0, msg->size);
	}
	return rc < 0 ? rc : 0;
}

/* Whether a message holds anything a release frees (asked once an array,
 * not once an item: a batch has 10000 samples). */
static bool holds_allocations(const struct rv_wire_message *msg)
{
	for (int i = 0; i < msg->nfields; i++)
		if (msg->fields[i].kind == RV_WIRE_ARRAY || msg->fields[i].kind == RV_WIRE_OBJECT)
			return true;
	return false;
}

void rv_wire_release(const struct rv_wire_message *msg, void *m)
{
	for (int i = 0; m && i < msg->nfields; i++) {
		const struct rv_wire_field *f = &msg->fields[i];
		if (f->kind == RV_WIRE_OBJECT)
			rv_wire_release(f->elem, AT(m, f));
		if (f->kind != RV_WIRE_ARRAY)
			continue;
		int *n = (int *)((char *)m + f->count_off);
		char *items = f->flags & RV_WIRE_ALLOC ? *(char **)AT(m, f) : (char *)AT(m, f);
		int held = items && holds_allocations(f->elem) ? *n : 0;
		for (int k = 0; k < held; k++)
			rv_wire_release(f->elem, items + (size_t)k * f->elem->size);
		if (f->flags & RV_WIRE_ALLOC) {
			free(items);
			*(void **)AT(m, f) = NULL;
			*n = 0;
		}
	}
}

/* ---- encode ---- */

static bool omitted(const struct rv_wire_field *f, const void *m)
{
	if (f->flags & RV_WIRE_GIVEN)
		return !*(const bool *)((const char *)m + f->count_off);
	if (f->flags & RV_WIRE_OMIT_NEG)
		return f->kind == RV_WIRE_NUMBER    ? *(const double *)CAT(m, f) < 0
		       : f->size == sizeof(int64_t) ? *(const int64_t *)CAT(m, f) < 0
						    : *(const int *)CAT(m, f) < 0;
	if (!(f->flags & RV_WIRE_OMIT))
		return false;
	switch (f->kind) {
	case RV_WIRE_STRING:
	case RV_WIRE_NAME:
		return ((const char *)CAT(m, f))[0] == '\0';
	case RV_WIRE_INT:
		return f->size == sizeof(int64_t) ? *(const int64_t *)CAT(m, f) <= 0
						  : *(const int *)CAT(m, f) <= 0;
	case RV_WIRE_NUMBER:
		return !(*(const double *)CAT(m, f) > 0);
	case RV_WIRE_BOOL:
		return !*(const bool *)CAT(m, f);
	case RV_WIRE_OBJECT:
		return f->count_off && !*(const bool *)((const char *)m + f->count_off);
	case RV_WIRE_ARRAY:
		return *(const int *)((const char *)m + f->count_off) <= 0;
	default:
		return false;
	}
}

/*
 * Item v under key k, a row's name: tables are static, so the key is
 * borrowed (cJSON_StringIsConst) rather than copied, one allocation less a
 * member.  False when out of memory (v NULL, or not added: then freed).
 */
static bool add_row_item(cJSON *o, const char *k, cJSON *v)
{
	if (v && cJSON_AddItemToObjectCS(o, k, v))
		return true;
	cJSON_Delete(v);
	return false;
}

static bool encode_planned(const struct rv_wire_message *msg, const struct plan *pl, cJSON *o,
			   const void *m);

static bool encode_items(cJSON *o, const struct rv_wire_field *f, const void *m)
{
	cJSON *arr = cJSON_CreateArray();
	if (!add_row_item(o, f->name, arr))
		return false;
	int n = *(const int *)((const char *)m + f->count_off);
	const char *items = f->flags & RV_WIRE_ALLOC ? *(char *const *)CAT(m, f)
						     : (const char *)CAT(m, f);
	struct plan pl;
	plan_init(&pl, f->elem);
	for (int i = 0; arr && items && i < n && i < f->max; i++) {
		cJSON *e = cJSON_CreateObject();
		if (!e || !cJSON_AddItemToArray(arr, e)) {
			cJSON_Delete(e);
			return false;
		}
		if (!encode_planned(f->elem, &pl, e, items + (size_t)i * f->elem->size))
			return false;
	}
	return arr != NULL;
}

static bool encode_field(cJSON *o, const struct rv_wire_field *f, const void *m)
{
	return f->emit ? f->emit(o, f, m) : rv_wire_encode_row(o, f, m);
}

bool rv_wire_encode_row(cJSON *o, const struct rv_wire_field *f, const void *m)
{
	cJSON *e;
	switch (f->kind) {
	case RV_WIRE_STRING:
	case RV_WIRE_NAME:
		return add_row_item(o, f->name, cJSON_CreateString(CAT(m, f)));
	case RV_WIRE_INT:
		return add_row_item(o, f->name,
				    cJSON_CreateNumber(f->size == sizeof(int64_t)
							       ? (double)*(const int64_t *)CAT(m, f)
							       : *(const int *)CAT(m, f)));
	case RV_WIRE_NUMBER:
		return add_row_item(o, f->name, cJSON_CreateNumber(*(const double *)CAT(m, f)));
	case RV_WIRE_BOOL:
		return add_row_item(o, f->name, cJSON_CreateBool(*(const bool *)CAT(m, f)));
	case RV_WIRE_ENUM:
		return add_row_item(o, f->name,
				    cJSON_CreateString(rv_wire_name_of(f->names, (size_t)f->nnames,
								       *(const int *)CAT(m, f))));
	case RV_WIRE_ARRAY:
		return encode_items(o, f, m);
	case RV_WIRE_OBJECT:
		e = cJSON_CreateObject();
		return add_row_item(o, f->name, e) && rv_wire_encode_fields(f->elem, e, CAT(m, f));
	case RV_WIRE_HOOK:
	case RV_WIRE_DOC:
		break;
	}
	return true;
}

/* The rows of msg that apply to m, by plan pl when it has one. */
static bool encode_planned(const struct rv_wire_message *msg, const struct plan *pl, cJSON *o,
			   const void *m)
{
	int n = 0;
	const unsigned char *rows = plan_rows(pl, msg, m, &n);
	if (!rows) {
		for (int i = 0; i < msg->nfields; i++) {
			const struct rv_wire_field *f = &msg->fields[i];
			if (applies(msg, f, m) && !omitted(f, m) && !encode_field(o, f, m))
				return false;
		}
		return true;
	}
	if (!omitted(&msg->fields[0], m) && !encode_field(o, &msg->fields[0], m))
		return false;
	for (int k = 0; k < n; k++) {
		const struct rv_wire_field *f = &msg->fields[rows[k]];
		if (!omitted(f, m) && !encode_field(o, f, m))
			return false;
	}
	return true;
}

bool rv_wire_encode_fields(const struct rv_wire_message *msg, cJSON *o, const void *m)
{
	return encode_planned(msg, NULL, o, m);
}

cJSON *rv_wire_encode(const struct rv_wire_message *msg, const void *m)
{
	RV_CLEANUP_CJSON cJSON *o = cJSON_CreateObject();
	return o && rv_wire_encode_fields(msg, o, m) ? RV_TAKE_PTR(o) : NULL;
}

static int64_t entry_get(const struct rv_wire_field *f, const void *m);

/* v in decimal at p (room for 20 characters); its length. */
static size_t put_int(char *p, int64_t v)
{
	char t[24];
	int n = 0;
	uint64_t u = v < 0 ? -(uint64_t)v : (uint64_t)v;
	do
		t[n++] = (char)('0' + u % 10);
	while (u /= 10);
	size_t k = 0;
	if (v < 0)
		p[k++] = '-';
	while (n > 0)
		p[k++] = t[--n];
	return k;
}

/* Whether msg's rows are all plain integers (no hook, no variant, keys
 * that need no escaping): printed straight, no tree built (a snapshot
 * writes 10^5 such entries). */
static bool all_ints(const struct rv_wire_message *msg)
{
	for (int i = 0; i < msg->nfields; i++) {
		const struct rv_wire_field *f = &msg->fields[i];
		if (f->kind != RV_WIRE_INT || f->emit || f->variant || strpbrk(f->name, "\"\\") ||
		    strlen(f->name) > 64)
			return false;
	}
	return msg->nfields <= 8; /* then an entry fits encode_text's line */
}

int rv_wire_encode_text(const struct rv_wire_message *msg, const void *m, bool comma,
			struct rv_buf *out)
{
	char line[1024];
	size_t n = 0;
	if (all_ints(msg)) {
		line[n++] = comma ? ',' : '{';
		if (comma)
			line[n++] = '{';
		for (int i = 0; i < msg->nfields; i++) {
			const struct rv_wire_field *f = &msg->fields[i];
			size_t k = strlen(f->name);
			if (omitted(f, m))
				continue;
			if (line[n - 1] != '{')
				line[n++] = ',';
			line[n++] = '"';
			memcpy(line + n, f->name, k);
			n += k;
			line[n++] = '"';
			line[n++] = ':';
			n += put_int(line + n, entry_get(f, m));
		}
		line[n++] = '}';
		rv_buf_append(out, line, n);
		return rv_buf_failed(out) ? -ENOMEM : 0;
	}
	RV_CLEANUP_CJSON cJSON *o = rv_wire_encode(msg, m);
	/* json.h's printer: cJSON's own rounds integers above 2^50 or so */
	RV_CLEANUP_FREE char *text = o ? rv_json_print(o) : NULL;
	if (!text)
		return -ENOMEM;
	rv_buf_printf(out, "%s%s", comma ? "," : "", text);
	return rv_buf_failed(out) ? -ENOMEM : 0;
}

static int64_t entry_get(const struct rv_wire_field *f, const void *m)
{
	return f->size == sizeof(int64_t) ? *(const int64_t *)CAT(m, f) : *(const int *)CAT(m, f);
}

static void entry_set(const struct rv_wire_field *f, void *m, int64_t v)
{
	if (f->size == sizeof(int64_t))
		*(int64_t *)AT(m, f) = v;
	else
		*(int *)AT(m, f) = (int)v;
}

/* Row i's value v must lie in both the row's bounds and the caller's. */
static int entry_check(const struct rv_wire_field *f, int64_t v, int64_t lo, int64_t hi,
		       const char *field, struct rv_err *err)
{
	if (lo < f->min)
		lo = f->min;
	if (hi > f->max)
		hi = f->max;
	if (v < lo || v > hi)
		return rv_err_set(err, -EINVAL, field,
				  "%s must be an integer between %" PRId64 " and %" PRId64, field,
				  lo, hi);
	return 0;
}

/* The positional form: exactly nfields integers, each checked as its row. */
static int entry_positional(const struct rv_wire_message *msg, const cJSON *it, const char *p,
			    const int64_t *lo, const int64_t *hi, void *m, struct rv_err *err)
{
	if (cJSON_GetArraySize(it) != msg->nfields)
		return rv_err_set(err, -EINVAL, p, "%s must be an array of %d integers", p,
				  msg->nfields);
	int i = 0;
	for (const cJSON *x = it->child; x; x = x->next, i++) {
		rv_wire_path f;
		rv_json_path_index(f, sizeof(f), p, i);
		double v = x->valuedouble;
		/* Within +-2^53 (exact in JSON) first: the cast is then defined. */
		if (!cJSON_IsNumber(x) || !(fabs(v) <= (double)(INT64_C(1) << 53)) ||
		    v != (double)(int64_t)v)
			return rv_err_set(err, -EINVAL, f, "%s must be an integer", f);
		int rc = entry_check(&msg->fields[i], (int64_t)v, lo[i], hi[i], f, err);
		if (rc < 0)
			return rc;
		entry_set(&msg->fields[i], m, (int64_t)v);
	}
	return 0;
}

int rv_wire_decode_entry(const struct rv_wire_message *msg, const cJSON *it, const char *p,
			 const int64_t *lo, const int64_t *hi, void *m, struct rv_err *err)
{
	if (cJSON_IsArray(it))
		return entry_positional(msg, it, p, lo, hi, m, err);
	if (!cJSON_IsObject(it))
		return rv_err_set(err, -EINVAL, p, "%s must be an object", p);
	int rc = rv_wire_decode_fields(msg, it, p, m, err);
	if (rc < 0)
		return rc;
	for (int i = 0; i < msg->nfields; i++) {
		rv_wire_path f;
		rv_json_path(f, sizeof(f), p, msg->fields[i].name);
		if ((rc = entry_check(&msg->fields[i], entry_get(&msg->fields[i], m), lo[i], hi[i],
				      f, err)) < 0)
			return rc;
	}
	return 0;
}
