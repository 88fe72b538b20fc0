/*
 * wirefix.h: checks shared by the suites that hold a field table of
 * common/wire.c against the code (check_wire.c for the brain's messages,
 * check_wire_master.c for the master's): both ways, table -> code (every
 * field is read, required ones are required) and code -> table (to_json
 * writes the table's fields and none besides).  Each check fails the calling
 * test with the message and field named.
 */
#ifndef RV_TEST_WIREFIX_H
#define RV_TEST_WIREFIX_H

#include <stdbool.h>

#include <cjson/cJSON.h>

#include "err.h"
#include "wire.h"

/* Parse text that must parse; the caller frees the tree (cJSON_Delete). */
cJSON *rv_test_json_must_parse(const char *s);

/* Parse doc as the message of the suite's kind *kind (from_json only). */
typedef int (*rv_test_wire_parse_fn)(const void *kind, const cJSON *doc, struct rv_err *err);

/* Field fd of msg, which sits in object obj of doc (obj borrowed from doc):
 * a value of the wrong type is refused naming the field; without the field
 * doc fails if the table says required, parses otherwise (unless the
 * description says when it is required).  Leaves fd out of obj; the caller
 * still owns doc. */
void rv_test_wire_field_is_parsed(const struct rv_wire_message *msg, const struct rv_wire_field *fd,
				  cJSON *doc, cJSON *obj, rv_test_wire_parse_fn parse,
				  const void *kind);

/* Every key to_json wrote in object o is a field of msg's table; marks it in
 * seen (msg->nfields entries). */
void rv_test_wire_keys_in_table(const struct rv_wire_message *msg, const cJSON *o, bool *seen);

/* Every field of msg's table was marked in seen. */
void rv_test_wire_all_written(const struct rv_wire_message *msg, const bool *seen);

#endif
