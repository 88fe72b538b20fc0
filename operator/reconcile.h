/*
 * reconcile.h: what rover-operator does for one ElasticJob, decided from
 * what it sees (the job, its master pod, its Service, its worker pods):
 * pure, no I/O, time as an argument, so every rule has a unit test.
 *
 * Rules, in order: a job being deleted is left to the garbage collector
 * (its master pod and Service name it in ownerReferences); a job that
 * ended stays ended; spec.suspend deletes the master and the worker pods
 * and says Suspended; otherwise the Service and the master pod exist (one
 * master pod, named <job>-master: a create that finds it answers 409, so
 * a second operator or a restarted one never makes two); the master pod
 * decides the phase: Pending, Running, Succeeded (exit 0), Failed (exit 1,
 * the master's verdict on the job); any other end of the master (killed,
 * OOM, its node lost) deletes the pod and a new one is made, which adopts
 * the worker pods, until master.max_restarts.  A master pod seen with a new
 * uid counts one restart in status.restarts, so the count survives the
 * operator's own restarts.  The master's newest plan, when it is a new one,
 * becomes status.lastPlan (id, stage, reason, workers, applied, time) and an
 * Event (PlanApplied, or PlanProposed in manual mode).  A master the caller
 * says is busy (busy_reason) is not made: the job waits, saying why.
 */
#ifndef RECONCILE_H
#define RECONCILE_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "wire.h"

#define RECONCILE_MASTER_SUFFIX "-master"
#define RECONCILE_LABEL_JOB     "elastic.rover.dev/job"
#define RECONCILE_LABEL_ROLE    "elastic.rover.dev/role"

/* Borrowed. */
struct reconcile_in {
	const cJSON *job;     /* the ElasticJob */
	const cJSON *master;  /* its master pod, NULL when none */
	bool service;         /* its Service exists */
	const cJSON *workers; /* its worker pods (label rover.dev/job): an array or object */
	int max_restarts;
	const char *now;                  /* RFC 3339, for condition times */
	const struct rv_plan_state *plan; /* the master's newest plan, NULL when not asked */
	/* Set when the master pod may not be made yet (an earlier job of the
	 * same name still holds its state claim or master pod): the reason
	 * (StateClaimBusy, MasterPodBusy) and message of MasterReady False and
	 * of a Warning Event; NULL none. */
	const char *busy_reason, *busy_msg;
};

struct reconcile_out {
	bool create_master, create_service;
	bool delete_master, delete_workers;
	cJSON *status; /* the status wanted; the caller patches it when it differs */
	char event_type[16], event_reason[64], event_msg[600]; /* "" when none */
};

/* Decide.  out->status is allocated (free with reconcile_out_release). */
void reconcile_job(const struct reconcile_in *in, struct reconcile_out *out);
void reconcile_out_release(struct reconcile_out *out);

/* Whether status a and b differ (what a status patch would change). */
bool reconcile_status_differs(const cJSON *a, const cJSON *b);

#endif
