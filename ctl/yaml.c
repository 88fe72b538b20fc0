/*
 * yaml.c: a YAML spec (the shape kubectl users write an ElasticJob in) as
 * the JSON the brain takes, through libyaml's document loader.  Plain
 * scalars become numbers, booleans (true/false, yes/no, on/off) and null
 * where they read as such; quoted scalars stay strings.  Aliases are
 * followed, so the node count is bounded (a "billion laughs" document is
 * refused), as is the depth.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

#include "ctl.h"

#define MAX_DEPTH 64
#define MAX_NODES 100000

struct conv {
	yaml_document_t *doc;
	long nodes;
	struct rv_err *err;
};

static cJSON *scalar(const yaml_node_t *n)
{
	const char *v = (const char *)n->data.scalar.value;
	size_t len = n->data.scalar.length;
	if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return cJSON_CreateString(v);
	if (len == 0 || !strcmp(v, "~") || !strcasecmp(v, "null"))
		return cJSON_CreateNull();
	static const char *const yes[] = { "true", "yes", "on" }, *const no[] = { "false", "no",
										  "off" };
	for (size_t i = 0; i < 3; i++) {
		if (!strcasecmp(v, yes[i]))
			return cJSON_CreateTrue();
		if (!strcasecmp(v, no[i]))
			return cJSON_CreateFalse();
	}
	char *end;
	errno = 0;
	double d = strtod(v, &end);
	if (end != v && *end == '\0' && errno == 0 && isfinite(d) &&
	    strspn(v, "+-0123456789.eE") == len)
		return cJSON_CreateNumber(d);
	return cJSON_CreateString(v);
}

static cJSON *node_to_json(struct conv *cv, yaml_node_t *n, int depth)
{
	if (!n) {
		rv_err_set(cv->err, -EINVAL, "", "yaml: a node is missing");
		return NULL;
	}
	if (depth > MAX_DEPTH || ++cv->nodes > MAX_NODES) {
		rv_err_set(cv->err, -E2BIG, "", "yaml: more than %d levels or %d nodes (line %zu)",
			   MAX_DEPTH, MAX_NODES, n->start_mark.line + 1);
		return NULL;
	}
	switch (n->type) {
	case YAML_SCALAR_NODE:
		return scalar(n);
	case YAML_SEQUENCE_NODE: {
		cJSON *a = cJSON_CreateArray();
		for (yaml_node_item_t *it = n->data.sequence.items.start;
		     a && it < n->data.sequence.items.top; it++) {
			cJSON *v =
				node_to_json(cv, yaml_document_get_node(cv->doc, *it), depth + 1);
			if (!v) {
				cJSON_Delete(a);
				return NULL;
			}
			cJSON_AddItemToArray(a, v);
		}
		return a;
	}
	case YAML_MAPPING_NODE: {
		cJSON *o = cJSON_CreateObject();
		for (yaml_node_pair_t *p = n->data.mapping.pairs.start;
		     o && p < n->data.mapping.pairs.top; p++) {
			yaml_node_t *k = yaml_document_get_node(cv->doc, p->key);
			if (!k || k->type != YAML_SCALAR_NODE) {
				rv_err_set(cv->err, -EINVAL, "",
					   "yaml: a key must be a plain value (line %zu)",
					   k ? k->start_mark.line + 1 : 0);
				cJSON_Delete(o);
				return NULL;
			}
			cJSON *v = node_to_json(cv, yaml_document_get_node(cv->doc, p->value),
						depth + 1);
			if (!v) {
				cJSON_Delete(o);
				return NULL;
			}
			cJSON_AddItemToObject(o, (const char *)k->data.scalar.value, v);
		}
		return o;
	}
	default:
		rv_err_set(cv->err, -EINVAL, "", "yaml: empty document");
		return NULL;
	}
}

cJSON *ctl_yaml_to_json(const char *text, size_t len, struct rv_err *err)
{
	yaml_parser_t p;
	yaml_document_t doc;
	if (!yaml_parser_initialize(&p)) {
		rv_err_set(err, -ENOMEM, "", "out of memory");
		return NULL;
	}
	yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
	if (!yaml_parser_load(&p, &doc)) {
		rv_err_set(err, -EINVAL, "", "yaml: %s at line %zu column %zu",
			   p.problem ? p.problem : "cannot parse", p.problem_mark.line + 1,
			   p.problem_mark.column + 1);
		yaml_parser_delete(&p);
		return NULL;
	}
	struct conv cv = { .doc = &doc, .err = err };
	yaml_node_t *root = yaml_document_get_root_node(&doc);
	cJSON *out = NULL;
	if (!root)
		rv_err_set(err, -EINVAL, "", "yaml: empty document");
	else
		out = node_to_json(&cv, root, 0);
	yaml_document_delete(&doc);
	yaml_parser_delete(&p);
	return out;
}
