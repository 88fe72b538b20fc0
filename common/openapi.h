/*
 * openapi.h: a daemon's /v1/openapi.json, generated from the route table
 * that dispatches its requests (http.h) and from the wire field tables that
 * parse its messages (wire.h), so the document names every route and every
 * field the daemon reads.  The daemon's api.c gives what only it knows: the
 * schemas per route, query parameters, errors particular to a route, and
 * the schemas only its replies hold.  rover-brain and rover-master use it.
 * No state; never logs.
 */
#ifndef RV_OPENAPI_H
#define RV_OPENAPI_H

#include <stdbool.h>
#include <stddef.h>

#include "http.h"
#include "json.h"
#include "wire.h"

/* What the route table does not say about one route (in step with it). */
struct rv_openapi_route {
	const char *id;      /* operationId (unique in the document); NULL: made
			       * from the method and the pattern */
	bool hidden;         /* not an API operation (the status page): left out */
	const char *body;    /* request body schema, or NULL */
	const char *ok;      /* success reply schema, or NULL */
	const char *ok_code; /* NULL = "200" */
	const char *ok_text; /* NULL, or the x-format of a text/plain reply */
	const char *query;   /* "name:type:description;..." or NULL */
	const char *errors;  /* "code:description;..." or NULL; a code below 400
			       * is a reply without a body */
};

struct rv_openapi {
	const char *title, *description; /* info */
	const struct rv_http_route *routes;
	const struct rv_openapi_route *docs; /* nroutes of them */
	int nroutes;
	const struct rv_wire_message *messages; /* component schemas */
	int nmessages;
	const char *reply_schemas; /* JSON object: schemas only replies hold (Error among them) */
	const char *extend;        /* NULL, or the message whose replies add extend_fields */
	const char *extend_fields; /* JSON object of properties */
	const char *write_errors;  /* "code:description;..." on every write route past 401 */
	const char *all_errors;    /* "code:description;..." on every route */
	const char *server_url;    /* servers[0].url; NULL or "": "/" (this origin) */
};

/* The URL a client reached us at, for servers[0]: "http://" and the Host
 * header when it is a plain host[:port] (fits in n), else "/".  Returns out. */
char *rv_openapi_server_url(const char *host_header, char *out, size_t n);

/*
 * The document.  Every {name} in a pattern is a required string path
 * parameter; a route with a body or a query answers 400, a write route 401
 * (bearer security; a read route says it needs none); then write_errors, the
 * route's errors, all_errors, and on every route the 414 and 431 that
 * libmicrohttpd answers (HTML) for a request line or headers over its limit.
 * The caller's; cJSON_Delete.  NULL when out of memory.
 */
cJSON *rv_openapi_doc(const struct rv_openapi *spec);

#endif
