/*
 * lease.h: leader election among rover-operator replicas through a
 * coordination.k8s.io/v1 Lease, as client-go's leaderelection does it:
 * the holder renews spec.renewTime every renew period with an update
 * carrying the resourceVersion it read (so two writers cannot both win);
 * another replica takes the lease over once it has seen no change of it
 * for leaseDurationSeconds by its own clock (never comparing clocks
 * across machines).  A leader that could not renew for the duration
 * steps down by itself.  The owner thread only.
 */
#ifndef LEASE_H
#define LEASE_H

#include <stdbool.h>
#include <stdint.h>

#include "kube.h"

struct lease {
	struct kube *k;
	char ns[64], name[128], id[128];
	int duration_s;
	bool leader;
	int64_t renewed_ms;  /* when the last renewal was answered (monotonic) */
	char seen_rv[64];    /* another holder's record as last seen */
	int64_t seen_at_ms;  /* when it last changed */
	int64_t transitions; /* takeovers seen, for the log */
};

/* Borrowed strings copied. */
void lease_init(struct lease *l, struct kube *k, const char *ns, const char *name, const char *id,
		int duration_s);

/* Read the Lease, then create, renew or take it over as the rules say.
 * Returns 1 while this replica leads, 0 when not (or no longer). */
int lease_tick(struct lease *l, int64_t now_ms);

/* A leader stepping down (SIGTERM): the holder cleared, so another takes
 * over without waiting out the duration. */
void lease_release(struct lease *l);

#endif
