/*
 * json.c: parsing with a depth limit, and validated field getters over cJSON.
 *
 * Used by wire.c and by every REST handler that reads a body.  Every getter
 * names the field ("<path>.<key>") in err->field and says what was expected in
 * err->msg.  A JSON null counts as absent, as Kubernetes treats it.  Pure and
 * thread-safe; cJSON trees are borrowed, never kept.
 */
#include "json.h"

#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"

#define RV_JSON_MAX_DEPTH 64
#define RV_STR_(x) #x
#define RV_STR(x) RV_STR_(x)

/* The largest integer a double holds exactly with its neighbours: 2^53 - 1
 * (JavaScript's MAX_SAFE_INTEGER).  Beyond it cJSON would round silently. */
#define SAFE_INT_DIGITS "9007199254740991"
#define SAFE_INT        9007199254740991.0

/* What the pre-scan found; *_at are ordinals in document order (the n-th
 * string, the n-th number, counting from 1), 0 when none. */
struct scan {
	const char *why; /* a reason to refuse the whole document, or NULL */
	size_t at;       /* byte offset of that reason */
	size_t bad_utf8; /* the first string (key or value) that is not UTF-8 */
	size_t big_int;  /* the first integer literal beyond +-(2^53 - 1) */
	size_t bad_utf8_byte, big_int_byte;
};

/*
 * Length of the valid UTF-8 sequence at s (at most n bytes), 0 when it is not
 * valid: RFC 3629, so no overlong forms, no surrogates, nothing past U+10FFFF.
 */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
	unsigned char c = s[0];
	if (c < 0x80)
		return 1;
	size_t len;
	unsigned char lo = 0x80, hi = 0xbf;
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		if (c == 0xe0)
			lo = 0xa0;
		else if (c == 0xed)
			hi = 0x9f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		if (c == 0xf0)
			lo = 0x90;
		else if (c == 0xf4)
			hi = 0x8f;
	} else {
		return 0;
	}
	if (n < len || s[1] < lo || s[1] > hi)
		return 0;
	for (size_t k = 2; k < len; k++)
		if (s[k] < 0x80 || s[k] > 0xbf)
			return 0;
	return len;
}

bool rv_utf8_valid(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	for (size_t i = 0; i < len;) {
		size_t k = utf8_seq(p + i, len - i);
		if (!k)
			return false;
		i += k;
	}
	return true;
}

size_t rv_utf8_cut(const char *s, size_t max)
{
	size_t n = strnlen(s, max + 1);
	if (n <= max)
		return n;
	/* Back up over continuation bytes to the start of the cut character. */
	n = max;
	while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
		n--;
	return n;
}

/* An integer literal (digits only, sign stripped) beyond 2^53 - 1? */
static bool beyond_safe(const char *digits, size_t n)
{
	while (n > 1 && *digits == '0') {
		digits++;
		n--;
	}
	size_t safe = sizeof(SAFE_INT_DIGITS) - 1;
	return n > safe || (n == safe && memcmp(digits, SAFE_INT_DIGITS, n) > 0);
}

/*
 * cJSON parses recursively; a body of a million '[' would recurse that deep
 * before failing (its own limit is 1000, still far more than any message we
 * accept).  Count depth outside strings first so hostile input costs one
 * linear scan.  The same scan refuses NUL, raw or as \u0000: cJSON keeps
 * C strings, so "worker\u0000; rm -rf /" would silently read as "worker".
 * It also notes the first string that is not UTF-8 and the first integer
 * literal that a double would round, by ordinal, for check_tree to name
 * the field once the tree exists.
 */
static void prescan(const char *buf, size_t len, struct scan *sc)
{
	int depth = 0;
	size_t nstr = 0, nnum = 0;
	const unsigned char *u = (const unsigned char *)buf;

	for (size_t i = 0; i < len; i++) {
		char c = buf[i];
		sc->at = i;
		if (c == '\0') {
			sc->why = "nul byte";
			return;
		}
		switch (c) {
		case '"':
			nstr++;
			for (i++; i < len && buf[i] != '"'; i++) {
				if (buf[i] == '\0') {
					sc->at = i;
					sc->why = "nul byte";
					return;
				}
				if (buf[i] == '\\') {
					if (len - i >= 6 && memcmp(buf + i + 1, "u0000", 5) == 0) {
						sc->at = i;
						sc->why = "\\u0000 in a string";
						return;
					}
					i++; /* skip the escaped byte, whatever it is */
					if (i < len && buf[i] == '\0') {
						sc->at = i;
						sc->why = "nul byte";
						return;
					}
					continue;
				}
				if (u[i] >= 0x80) {
					size_t k = utf8_seq(u + i, len - i);
					if (!k) {
						if (!sc->bad_utf8) {
							sc->bad_utf8 = nstr;
							sc->bad_utf8_byte = i;
						}
						continue;
					}
					i += k - 1;
				}
			}
			break;
		case '[':
		case '{':
			if (++depth > RV_JSON_MAX_DEPTH) {
				sc->why = "nesting deeper than " RV_STR(RV_JSON_MAX_DEPTH);
				return;
			}
			break;
		case ']':
		case '}':
			/* Unbalanced closers are cJSON's to report. */
			if (depth > 0)
				depth--;
			break;
		case '-':
		case '0' ... '9': {
			/* A number token: its extent as cJSON reads it. */
			size_t start = i, end = i + (c == '-');
			bool integral = true;
			while (end < len && (isdigit((unsigned char)buf[end]) || buf[end] == '.' ||
					     buf[end] == 'e' || buf[end] == 'E' ||
					     buf[end] == '+' || buf[end] == '-')) {
				if (!isdigit((unsigned char)buf[end]))
					integral = false;
				end++;
			}
			nnum++;
			size_t d = start + (c == '-');
			if (integral && !sc->big_int && beyond_safe(buf + d, end - d)) {
				sc->big_int = nnum;
				sc->big_int_byte = start;
			}
			i = end - 1;
			break;
		}
		default:
			break;
		}
	}
	sc->why = NULL;
}

/* Walk state for check_tree: ordinals advance exactly as prescan counted. */
struct walk {
	const struct scan *sc;
	size_t nstr, nnum;
	struct rv_err *err;
};

static int key_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* A duplicate key among obj's members, or NULL.  Objects are small in
 * practice; a large one (hostile: 100k keys) is sorted, not compared n^2. */
static const char *duplicate_key(const cJSON *obj)
{
	size_t n = 0;
	for (const cJSON *c = obj->child; c; c = c->next)
		n++;
	if (n < 2)
		return NULL;
	if (n <= 16) {
		for (const cJSON *a = obj->child; a; a = a->next)
			for (const cJSON *b = a->next; b; b = b->next)
				if (a->string && b->string && !strcmp(a->string, b->string))
					return a->string;
		return NULL;
	}
	const char **keys = malloc(n * sizeof(*keys));
	if (!keys)
		return NULL; /* out of memory: the getters still read the first */
	size_t k = 0;
	for (const cJSON *c = obj->child; c; c = c->next)
		keys[k++] = c->string ? c->string : "";
	qsort(keys, n, sizeof(*keys), key_cmp);
	const char *dup = NULL;
	for (size_t i = 1; i < n && !dup; i++)
		if (!strcmp(keys[i - 1], keys[i]))
			dup = keys[i];
	free(keys);
	return dup;
}

/* One step of the path from the root to the item being checked, on the
 * stack: the path text is built only for an error (every sample of a large
 * batch is walked; formatting each path would cost). */
struct seg {
	const struct seg *up;
	const char *key; /* object member, or NULL for an array element */
	int index;
};

static void seg_format(const struct seg *s, char *buf, size_t size)
{
	if (!s || !s->up) {
		buf[0] = '\0';
		return;
	}
	seg_format(s->up, buf, size);
	size_t n = strlen(buf);
	if (s->key)
		snprintf(buf + n, size - n, "%s%s", n ? "." : "", s->key);
	else
		snprintf(buf + n, size - n, "[%d]", s->index);
	rv_utf8_trim_cut(buf); /* a long path is cut: never inside a character */
}

static bool is_json_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* Visit it (reached through s) in document order; 0, or -EINVAL with err
 * naming the field. */
static int check_tree(const cJSON *it, const struct seg *s, struct walk *w)
{
	char path[128];
	switch (it->type & 0xff) {
	case cJSON_String:
		if (++w->nstr != w->sc->bad_utf8)
			return 0;
		seg_format(s, path, sizeof(path));
		return rv_err_set(w->err, -EINVAL, path, "%s is not valid UTF-8 (byte %zu)",
				  path[0] ? path : "the document", w->sc->bad_utf8_byte);
	case cJSON_Number:
		if (++w->nnum != w->sc->big_int)
			return 0;
		seg_format(s, path, sizeof(path));
		return rv_err_set(w->err, -EINVAL, path,
				  "%s is an integer beyond 2^53 - 1 that a double cannot hold "
				  "exactly (byte %zu)",
				  path[0] ? path : "the document", w->sc->big_int_byte);
	case cJSON_Array: {
		struct seg sub = { .up = s };
		for (const cJSON *c = it->child; c; c = c->next, sub.index++) {
			int rc = check_tree(c, &sub, w);
			if (rc < 0)
				return rc;
		}
		return 0;
	}
	case cJSON_Object: {
		struct seg sub = { .up = s };
		for (const cJSON *c = it->child; c; c = c->next) {
			if (++w->nstr == w->sc->bad_utf8) {
				seg_format(s, path, sizeof(path));
				return rv_err_set(w->err, -EINVAL, path,
						  "a key of %s is not valid UTF-8 (byte %zu)",
						  path[0] ? path : "the document",
						  w->sc->bad_utf8_byte);
			}
			/* Keys are UTF-8 up to the bad one: safe in a path. */
			sub.key = c->string ? c->string : "";
			int rc = check_tree(c, &sub, w);
			if (rc < 0)
				return rc;
		}
		const char *dup = duplicate_key(it);
		if (!dup)
			return 0;
		char key[80], field[128];
		size_t n = rv_utf8_cut(dup, sizeof(key) - 1);
		memcpy(key, dup, n);
		key[n] = '\0';
		seg_format(s, path, sizeof(path));
		rv_json_path(field, sizeof(field), path, key);
		return rv_err_set(w->err, -EINVAL, field, "duplicate key \"%s\" in %s", key,
				  path[0] ? path : "the document");
	}
	default:
		return 0;
	}
}

cJSON *rv_json_parse(const char *buf, size_t len, struct rv_err *err)
{
	if (!buf || len == 0) {
		rv_err_set(err, -EINVAL, "", "could not parse json: empty document at byte 0");
		return NULL;
	}
	struct scan sc = { 0 };
	prescan(buf, len, &sc);
	if (sc.why) {
		rv_err_set(err, -EINVAL, "", "could not parse json: %s at byte %zu", sc.why, sc.at);
		return NULL;
	}

	/*
	 * require_null_terminated would demand a NUL inside len bytes, so check
	 * for trailing garbage ourselves.  return_parse_end is per call, unlike
	 * cJSON_GetErrorPtr().
	 */
	const char *end = NULL;
	cJSON *root = cJSON_ParseWithLengthOpts(buf, len, &end, 0);
	if (!root) {
		size_t off = end && end >= buf ? (size_t)(end - buf) : 0;
		if (off > len)
			off = len;
		rv_err_set(err, -EINVAL, "", "could not parse json: syntax error at byte %zu", off);
		return NULL;
	}
	size_t off = (size_t)(end - buf);
	while (off < len && is_json_space(buf[off]))
		off++;
	if (off < len) {
		cJSON_Delete(root);
		rv_err_set(err, -EINVAL, "",
			   "could not parse json: unexpected data after the document at byte %zu",
			   off);
		return NULL;
	}
	/* Duplicate keys always; the rest only when the scan saw one. */
	struct walk w = { .sc = &sc, .err = err };
	struct seg top = { 0 };
	if (check_tree(root, &top, &w) < 0) {
		cJSON_Delete(root);
		return NULL;
	}
	return root;
}

/*
 * Our own compact printer: cJSON prints numbers with "%1.15g" and accepts the
 * result when it reads back within DBL_EPSILON, so 9007199254740992 goes out
 * as 9.00719925474099e+15 and a value does not survive a round trip through
 * text.  Here integral values print as integers and others with the fewest
 * digits that read back exactly.
 */
static void print_string(struct rv_buf *b, const char *s)
{
	/* the short escapes; any other control character as \u00XX */
	static const char *const short_esc[0x60] = {
		['"'] = "\\\"", ['\\'] = "\\\\", ['\n'] = "\\n", ['\r'] = "\\r",
		['\t'] = "\\t", ['\b'] = "\\b",  ['\f'] = "\\f",
	};
	rv_buf_append(b, "\"", 1);
	const char *run = s;
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c >= 0x20 && c != '"' && c != '\\')
			continue;
		rv_buf_append(b, run, (size_t)(s - run));
		run = s + 1;
		char esc[8];
		if (!short_esc[c])
			snprintf(esc, sizeof(esc), "\\u%04x", c);
		rv_buf_puts(b, short_esc[c] ? short_esc[c] : esc);
	}
	rv_buf_append(b, run, (size_t)(s - run));
	rv_buf_append(b, "\"", 1);
}

static void print_number(struct rv_buf *b, double v)
{
	char num[40];
	if (!isfinite(v)) {
		rv_buf_puts(b, "null"); /* as cJSON does: JSON has no NaN or inf */
		return;
	}
	if (v == floor(v) && v >= -SAFE_INT && v <= SAFE_INT) {
		snprintf(num, sizeof(num), "%" PRId64, (int64_t)v);
	} else if (v == floor(v)) {
		/* Past 2^53 - 1 an integer literal is refused on the way back in
		 * (rv_json_parse): exponent form reads back as the same double. */
		for (int prec = 0; prec <= 16; prec++) {
			snprintf(num, sizeof(num), "%.*e", prec, v);
			if (strtod(num, NULL) == v)
				break;
		}
	} else {
		for (int prec = 15; prec <= 17; prec++) {
			snprintf(num, sizeof(num), "%.*g", prec, v);
			if (strtod(num, NULL) == v)
				break;
		}
	}
	rv_buf_puts(b, num);
}

static void print_item(struct rv_buf *b, const cJSON *it)
{
	const cJSON *c;
	switch (it->type & 0xff) {
	case cJSON_False:
		rv_buf_puts(b, "false");
		break;
	case cJSON_True:
		rv_buf_puts(b, "true");
		break;
	case cJSON_NULL:
		rv_buf_puts(b, "null");
		break;
	case cJSON_Number:
		print_number(b, it->valuedouble);
		break;
	case cJSON_String:
		print_string(b, it->valuestring ? it->valuestring : "");
		break;
	case cJSON_Raw:
		rv_buf_puts(b, it->valuestring ? it->valuestring : "null");
		break;
	case cJSON_Array:
		rv_buf_append(b, "[", 1);
		for (c = it->child; c; c = c->next) {
			print_item(b, c);
			if (c->next)
				rv_buf_append(b, ",", 1);
		}
		rv_buf_append(b, "]", 1);
		break;
	case cJSON_Object:
		rv_buf_append(b, "{", 1);
		for (c = it->child; c; c = c->next) {
			print_string(b, c->string ? c->string : "");
			rv_buf_append(b, ":", 1);
			print_item(b, c);
			if (c->next)
				rv_buf_append(b, ",", 1);
		}
		rv_buf_append(b, "}", 1);
		break;
	default:
		b->failed = true; /* cJSON_Invalid: nothing sensible to print */
		break;
	}
}

char *rv_json_print(const cJSON *item)
{
	if (!item)
		return NULL;
	struct rv_buf b;
	rv_buf_init(&b);
	print_item(&b, item);
	return rv_buf_steal(&b);
}

const char *rv_json_path(char *buf, size_t size, const char *path, const char *key)
{
	if (!path || !*path)
		snprintf(buf, size, "%s", key ? key : "");
	else if (!key || !*key)
		snprintf(buf, size, "%s", path);
	else
		snprintf(buf, size, "%s.%s", path, key);
	rv_utf8_trim_cut(buf);
	return buf;
}

const char *rv_json_path_index(char *buf, size_t size, const char *path, int index)
{
	snprintf(buf, size, "%s[%d]", path ? path : "", index);
	rv_utf8_trim_cut(buf);
	return buf;
}

/*
 * Look key up in obj.  Returns the item, or NULL when absent (or null); for an
 * absent required key *rc is -EINVAL with err set, else 0.
 */
/* Error naming "<path>.<key>", built only when needed; uses the getter's
 * locals field, path, key and err. */
#define FIELD_ERR(fmt, ...) \
	rv_err_set(err, -EINVAL, rv_json_path(field, sizeof(field), path, key), fmt, field, ##__VA_ARGS__)

static const cJSON *lookup(const cJSON *obj, const char *key, const char *path, bool required,
			   int *rc, char *field, size_t fsize, struct rv_err *err)
{
	const cJSON *it = cJSON_IsObject(obj) ? cJSON_GetObjectItemCaseSensitive(obj, key) : NULL;
	if (it && cJSON_IsNull(it))
		it = NULL;
	if (!it) {
		/* The field path is only built for an error: getters run for every
		 * field of every sample, so formatting it each time costs. */
		if (required)
			rv_json_path(field, fsize, path, key);
		*rc = required ? rv_err_set(err, -EINVAL, field, "%s is required", field) : 0;
		return NULL;
	}
	*rc = 1;
	return it;
}

int rv_json_get_string(const cJSON *obj, const char *key, const char *path, bool required,
		       char *out, size_t size, struct rv_err *err)
{
	char field[128];
	int rc;
	const cJSON *it = lookup(obj, key, path, required, &rc, field, sizeof(field), err);
	if (!it)
		return rc;
	if (!cJSON_IsString(it) || !it->valuestring)
		return FIELD_ERR("%s must be a string");
	size_t n = strlen(it->valuestring);
	if (size == 0 || n >= size)
		return FIELD_ERR("%s must be at most %zu characters",
				  size ? size - 1 : 0);
	memcpy(out, it->valuestring, n + 1);
	return 1;
}

int rv_json_get_int(const cJSON *obj, const char *key, const char *path, bool required,
		    int64_t min, int64_t max, int64_t *out, struct rv_err *err)
{
	char field[128];
	int rc;
	const cJSON *it = lookup(obj, key, path, required, &rc, field, sizeof(field), err);
	if (!it)
		return rc;
	if (!cJSON_IsNumber(it))
		return FIELD_ERR("%s must be an integer");
	double v = it->valuedouble;
	/* cJSON turns 1e999 into inf; strtod never gives NaN for JSON text, but a
	 * tree built in code might hold one. */
	if (!isfinite(v) || v != floor(v))
		return FIELD_ERR("%s must be an integer");
	/* Beyond 2^53 - 1 the text may have been rounded on the way in. */
	if (min < -(int64_t)SAFE_INT)
		min = -(int64_t)SAFE_INT;
	if (max > (int64_t)SAFE_INT)
		max = (int64_t)SAFE_INT;
	if (v < -SAFE_INT || v > SAFE_INT || (int64_t)v < min || (int64_t)v > max)
		return FIELD_ERR("%s must be between %" PRId64 " and %" PRId64, min, max);
	*out = (int64_t)v;
	return 1;
}

int rv_json_get_double(const cJSON *obj, const char *key, const char *path, bool required,
		       double min, double max, double *out, struct rv_err *err)
{
	char field[128];
	int rc;
	const cJSON *it = lookup(obj, key, path, required, &rc, field, sizeof(field), err);
	if (!it)
		return rc;
	if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble))
		return FIELD_ERR("%s must be a finite number");
	double v = it->valuedouble;
	if (v < min || v > max)
		return FIELD_ERR("%s must be between %g and %g", min,
				  max);
	*out = v;
	return 1;
}

int rv_json_get_bool(const cJSON *obj, const char *key, const char *path, bool required,
		     bool *out, struct rv_err *err)
{
	char field[128];
	int rc;
	const cJSON *it = lookup(obj, key, path, required, &rc, field, sizeof(field), err);
	if (!it)
		return rc;
	if (!cJSON_IsBool(it))
		return FIELD_ERR("%s must be a boolean");
	*out = cJSON_IsTrue(it);
	return 1;
}

/* The member key of obj (path names it in errors) when is() holds for it;
 * else NULL with *rc (rc may be NULL) as lookup left it, or -EINVAL and
 * "<field> must be <what>" in err. */
static const cJSON *get_typed(const cJSON *obj, const char *key, const char *path, bool required,
			      int *rc, struct rv_err *err, cJSON_bool (*is)(const cJSON *),
			      const char *what)
{
	char field[128];
	int dummy;
	if (!rc)
		rc = &dummy;
	const cJSON *it = lookup(obj, key, path, required, rc, field, sizeof(field), err);
	if (!it)
		return NULL;
	if (!is(it)) {
		*rc = FIELD_ERR("%s must be %s", what);
		return NULL;
	}
	return it;
}

const cJSON *rv_json_get_object(const cJSON *obj, const char *key, const char *path, bool required,
				int *rc, struct rv_err *err)
{
	return get_typed(obj, key, path, required, rc, err, cJSON_IsObject, "an object");
}

const cJSON *rv_json_get_array(const cJSON *obj, const char *key, const char *path,
			       bool required, int *rc, struct rv_err *err)
{
	return get_typed(obj, key, path, required, rc, err, cJSON_IsArray, "an array");
}
