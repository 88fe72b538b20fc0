/*
 * wirefix.c: field-table checks shared by the wire suites (wirefix.h).
 */
#include "wirefix.h"

#include <check.h>
#include <errno.h>
#include <string.h>

#include "json.h"

cJSON *rv_test_json_must_parse(const char *s)
{
	struct rv_err err = { 0 };
	cJSON *root = rv_json_parse(s, strlen(s), &err);
	ck_assert_msg(root != NULL, "could not parse: %s", err.msg);
	return root;
}

void rv_test_wire_field_is_parsed(const struct rv_wire_message *msg, const struct rv_wire_field *fd,
				  cJSON *doc, cJSON *obj, rv_test_wire_parse_fn parse,
				  const void *kind)
{
	struct rv_err err = { 0 };
	/* a value of the wrong type */
	bool composite = !strcmp(fd->type, "object") || !strcmp(fd->type, "array");
	cJSON *wrong = composite ? cJSON_CreateNumber(7) : cJSON_CreateArray();
	cJSON_ReplaceItemInObjectCaseSensitive(obj, fd->name, wrong);
	int rc = parse(kind, doc, &err);
	ck_assert_msg(rc == -EINVAL && strstr(err.field, fd->name),
		      "%s.%s: a %s is not refused (rc %d, field \"%s\")", msg->name, fd->name,
		      composite ? "number" : "list", rc, err.field);
	/* absent */
	cJSON_DeleteItemFromObjectCaseSensitive(obj, fd->name);
	rc = parse(kind, doc, &err);
	if (fd->required)
		ck_assert_msg(rc == -EINVAL, "%s.%s: required but its absence passes", msg->name,
			      fd->name);
	else if (!strstr(fd->description, "required for"))
		ck_assert_msg(rc == 0, "%s.%s: optional but its absence fails: %s", msg->name,
			      fd->name, err.msg);
}

void rv_test_wire_keys_in_table(const struct rv_wire_message *msg, const cJSON *o, bool *seen)
{
	const cJSON *it;
	cJSON_ArrayForEach(it, o)
	{
		int f = 0;
		while (f < msg->nfields && strcmp(msg->fields[f].name, it->string))
			f++;
		ck_assert_msg(f < msg->nfields, "%s: to_json writes \"%s\", not in its table",
			      msg->name, it->string);
		seen[f] = true;
	}
}

void rv_test_wire_all_written(const struct rv_wire_message *msg, const bool *seen)
{
	for (int f = 0; f < msg->nfields; f++)
		ck_assert_msg(seen[f], "%s.%s: in the table but to_json never writes it", msg->name,
			      msg->fields[f].name);
}
