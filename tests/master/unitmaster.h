/*
 * unitmaster.h: the job state of a master built in a test, with no
 * daemon: check_nodemgr, check_plans and check_state open it on a state
 * folder of their own.  Header only (static inline), since each suite is
 * one object; called from a test, a bad spec fails it.
 */
#ifndef RV_TEST_UNITMASTER_H
#define RV_TEST_UNITMASTER_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "master.h"

/* A master for the job spec (JSON text) with its state in state_dir and
 * min..max nodes: one node unit, heartbeats of 5 s, 1024 ranges, a
 * snapshot every 100000 records, syncs of 10 s and ticks of 100 ms.  Not
 * opened; the caller sets the rest of m->cfg, then plans_init and
 * state_open (nodemgr_register for the node manager's wake).  The caller's (rv_job_spec_release of m->spec, free). */
static inline struct master *unitmaster_new(const char *spec, const char *state_dir, int min,
					    int max)
{
	struct master *m = calloc(1, sizeof(*m));
	ck_assert_ptr_nonnull(m);
	struct rv_err err = { 0 };
	cJSON *doc = rv_json_parse(spec, strlen(spec), &err);
	ck_assert_msg(doc, "%s", err.msg);
	ck_assert_int_eq(rv_job_spec_from_json(doc, &m->spec, &err), 0);
	cJSON_Delete(doc);
	struct master_cfg *c = &m->cfg;
	snprintf(c->state_dir, sizeof(c->state_dir), "%s", state_dir);
	c->node_unit = 1;
	c->heartbeat_timeout_ms = 5000;
	c->max_todo_ranges = c->max_in_flight = 1024;
	c->snapshot_every = 100000;
	c->sync_timeout_ms = 10000;
	c->tick_ms = 100;
	m->min_nodes = min;
	m->max_nodes = max;
	return m;
}

#endif
