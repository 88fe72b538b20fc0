/*
 * plans.c: rover-master's side of the planner: the brain link (brainlink.c)
 * started in the job's optimize mode, the reports it carries, and the plans
 * it hands back turned into the desired state.
 *
 * Reports: a journaled step becomes a speed sample with the world's node
 * count, a node that left or was declared dead a node_failed event (a
 * leave of a node the node manager runs is its to report: nodelink.c), the
 * job's end a job_finished or job_failed event (plans_after_op and
 * plans_node_lost, under the state lock; enqueueing never waits for the
 * brain).  The node manager adds usage samples and node events (plans.h).
 *
 * Plans: one thread takes them from the link.  A plan to apply becomes a
 * MASTER_OP_PLAN operation whose record is the plan's JSON: plans_apply sets
 * the desired count per role (clamped to the replica spec) and resources,
 * and bumps desired.version; only once that record is durable does the
 * brain hear plan_applied.  A plan not newer than desired.plan_id is skipped
 * (the brain hands its newest plan again after a restart).  Manual mode
 * records a plan as proposed and changes nothing.  Single-job mode runs the
 * policy in-process every cfg.plan_interval_ms; its plan ids continue from
 * the journalled one, so they keep growing across restarts.  The uid the
 * brain gave is journaled (MASTER_OP_BRAIN_UID) as soon as it is known and
 * handed back to the link after a restart: the job is registered once.
 *
 * Locks: the state lock, then p->mu; never the other way.  The link takes
 * only its own mutex.
 */
#include "nodelink.h"
#include "plans.h"

#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "brainlink.h"
#include "buf.h"
#include "cleanup.h"
#include "json.h"
#include "log.h"
#include "nodemgr.h"
#include "parse.h"
#include "rover_scaling.h"
#include "wire_codec.h"

#define OOM_SLOTS    16
#define PLAN_POLL_MS 200
#define STEP_NODES   256

/* A node's own step reports: the seconds per step between its last two,
 * for its next usage sample (a straggler shows in them). */
struct step_seen {
	char node[RV_NAME_MAX];
	int64_t step, ts_ms;
	double step_s; /* > 0 and fresh: not yet in a usage sample */
	bool fresh;
	/* the compute times reported since the last usage sample */
	double compute_sum;
	int compute_n;
};

/* An oom plan's memory for one node, for plans_oom_memory. */
struct oom_slot {
	char node[RV_NAME_MAX];
	int64_t memory_mb;
	int64_t seq; /* 0: empty */
};

struct plans {
	struct master *m; /* borrowed */
	struct brainlink *link;
	enum rv_optimize_mode mode;
	bool local;      /* the policy runs here (no brain) */
	int64_t id_base; /* local plans: desired.plan_id at start */
	bool job_ended;  /* under the state lock: the job's end was reported */

	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv; /* an oom plan came; stop */
	bool stop;
	struct oom_slot oom[OOM_SLOTS];
	int64_t oom_seq;
	struct step_seen steps[STEP_NODES]; /* under mu */
	int nsteps;

	atomic_uint_least64_t received, applied, skipped, proposed, clamped, throttled;
	/* under the state lock: the progress last reported, per spec dataset */
	struct rv_sample progress[RV_MAX_DATASETS];
	bool progress_sent[RV_MAX_DATASETS];
};

static const char *brain_url(const struct master *m)
{
	return m->cfg.brain_url[0] ? m->cfg.brain_url : m->spec.brain_service;
}

/* ---- the desired state ---- */

void plans_init(struct master *m)
{
	/* A spec that names no mode and no brain anywhere runs on its own:
	 * cluster is the default only where a brain is known. */
	if (!m->spec.optimize_mode_given && !brain_url(m)[0]) {
		m->spec.optimize_mode = RV_OPT_SINGLE_JOB;
		m->spec.optimize_mode_given = true;
		rv_log_info("no optimizeMode in the spec and no brain url: single-job, the policy "
			    "runs in the master",
			    "mode=%s", "single-job");
	}
	memset(&m->desired, 0, sizeof(m->desired));
	for (int r = 0; r < RV_ROLE_COUNT; r++) {
		const struct rv_replica_spec *rs = &m->spec.replicas[r];
		struct master_group *g = &m->desired.groups[r];
		if (!rs->present)
			continue;
		g->count = rs->replicas;
		g->has_resources = rs->has_resources;
		if (rs->has_resources) {
			g->cpu = rs->resource.cpu;
			g->memory_mb = rs->resource.memory_mb;
			g->gpu = rs->resource.gpu;
		}
	}
	m->desired.version = 1;
	m->svc.apply_plan = plans_apply;
	m->svc.parts[MASTER_PART_PLANS] = (struct master_part){
		.save = plans_snapshot_save,
		.load = plans_snapshot_load,
	};
	m->svc.after_op = plans_after_op;
	m->svc.node_lost = plans_node_lost;
}

int plans_check(const struct master *m, struct rv_err *err)
{
	const char *url = brain_url(m);
	if (m->spec.optimize_mode == RV_OPT_CLUSTER && !url[0])
		return rv_err_set(
			err, -EINVAL, "spec.brainService",
			"optimizeMode cluster needs rover-brain's url: set spec.brainService "
			"in the job spec or run with --brain URL (brain.url)");
	if (url[0] && strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0)
		return rv_err_set(err, -EINVAL,
				  m->cfg.brain_url[0] ? "brain.url" : "spec.brainService",
				  "the brain's url \"%s\" must start with http:// or https://",
				  url);
	return 0;
}

/* The desired state as a ScalePlan's groups (for the in-process oom plan). */
static void desired_plan(const struct master *m, struct rv_scale_plan *pl)
{
	memset(pl, 0, sizeof(*pl));
	for (int r = 0; r < RV_ROLE_COUNT; r++) {
		const struct master_group *g = &m->desired.groups[r];
		if (!m->spec.replicas[r].present && g->count == 0)
			continue;
		pl->groups[r].present = true;
		pl->groups[r].count = g->count;
		pl->groups[r].resource = (struct rv_resource){ .cpu = g->cpu,
							       .memory_mb = g->memory_mb,
							       .gpu = g->gpu };
	}
	pl->id = m->desired.plan_id;
}

static void plan_state_from(struct rv_plan_state *st, const struct rv_scale_plan *pl)
{
	memset(st, 0, sizeof(*st));
	st->id = pl->id;
	snprintf(st->stage, sizeof(st->stage), "%s", pl->stage);
	snprintf(st->reason, sizeof(st->reason), "%s", pl->reason);
	for (int r = 0; r < RV_ROLE_COUNT; r++) {
		const struct rv_plan_group *g = &pl->groups[r];
		if (!g->present)
			continue;
		st->groups[r] = (struct rv_role_target){ .present = true,
							 .count = g->count,
							 .cpu = g->resource.cpu,
							 .memory_mb = g->resource.memory_mb,
							 .gpu = g->resource.gpu };
	}
}

/* The desired state as the plan library's target, and back. */
static void target_of(const struct master *m, struct rv_scaling_target *t)
{
	memset(t, 0, sizeof(*t));
	for (int r = 0; r < RV_ROLE_COUNT; r++) {
		const struct master_group *g = &m->desired.groups[r];
		t->groups[r].present = m->spec.replicas[r].present || g->count > 0;
		t->groups[r].count = g->count;
		if (g->has_resources)
			t->groups[r].resource = (struct rv_resource){ .cpu = g->cpu,
								      .memory_mb = g->memory_mb,
								      .gpu = g->gpu };
	}
	memcpy(t->own, m->desired.own, sizeof(t->own));
	t->nown = m->desired.nown;
}

static void target_to(struct master *m, const struct rv_scaling_target *t)
{
	for (int r = 0; r < RV_ROLE_COUNT; r++) {
		struct master_group *g = &m->desired.groups[r];
		const struct rv_resource *res = &t->groups[r].resource;
		g->count = t->groups[r].count;
		if (res->cpu > 0 || res->memory_mb > 0 || res->gpu > 0) {
			g->has_resources = true;
			g->cpu = res->cpu;
			g->memory_mb = res->memory_mb;
			g->gpu = res->gpu;
		}
	}
	memcpy(m->desired.own, t->own, sizeof(m->desired.own));
	m->desired.nown = t->nown;
}

/* The plan's group resources the node manager will cap at the largest
 * node (nodemgr_fit, as it launches them), told as parts not applied so
 * the brain and `roverctl status` see them. */
static void caps_note(const struct master *m, const struct rv_scale_plan *pl, char *na, size_t size)
{
	for (int r = 0; r < RV_ROLE_COUNT; r++) {
		const struct rv_plan_group *g = &pl->groups[r];
		struct sched_resources res = { .cpu = g->resource.cpu,
					       .memory_mb = g->resource.memory_mb };
		if (!g->present || !nodemgr_fit(m, r, &res))
			continue;
		size_t len = strlen(na);
		snprintf(na + len, size - len,
			 "%s%s resources cpu %g, memory %" PRId64
			 " MiB: capped at cpu %g, memory %" PRId64 " MiB (the largest node)",
			 len ? "; " : "", rv_role_name((enum rv_role)r), g->resource.cpu,
			 g->resource.memory_mb, res.cpu, res.memory_mb);
	}
}

int plans_apply(struct master *m, const void *doc, size_t len, struct rv_err *err)
{
	RV_CLEANUP_CJSON cJSON *j = rv_json_parse(doc, len, err);
	if (!j)
		return -EINVAL;
	/* large (their node lists): not on a connection thread's stack */
	struct work {
		struct rv_scale_plan pl;
		struct rv_scaling_target t;
		struct rv_scaling_effect eff;
	};
	RV_CLEANUP_FREE struct work *w = malloc(sizeof(*w));
	if (!w)
		return rv_err_set(err, -ENOMEM, "", "out of memory for a plan");
	struct rv_scale_plan *pl = &w->pl;
	struct rv_scaling_target *t = &w->t;
	struct rv_scaling_effect *eff = &w->eff;
	int rc = rv_scale_plan_from_json(j, pl, err);
	if (rc < 0)
		return rc;
	if (pl->id <= m->desired.plan_id)
		return 0;
	bool live = m->plans != NULL; /* replay says nothing again */
	target_of(m, t);
	/* what rover-sim applies too: one function, so the simulator credits a
	 * plan with no more than the master does */
	rv_scaling_apply(pl, &m->spec, t, eff);
	target_to(m, t);
	for (int r = 0; r < RV_ROLE_COUNT; r++) {
		if (eff->asked[r] < 0 || !live)
			continue;
		atomic_fetch_add(&m->plans->clamped, 1);
		rv_log_warn("plan count clamped to the replica spec",
			    "plan=%" PRId64 " role=%s asked=%d count=%d", pl->id,
			    rv_role_name((enum rv_role)r), eff->asked[r], t->groups[r].count);
	}
	memcpy(m->desired.act, eff->act, sizeof(m->desired.act));
	m->desired.nact = eff->nact;
	m->desired.act_plan = pl->id;
	m->desired.plan_id = pl->id;
	m->desired.version++;
	plan_state_from(&m->plan, pl);
	/* the plan as applied: its counts clamped */
	for (int r = 0; r < RV_ROLE_COUNT; r++)
		if (m->plan.groups[r].present)
			m->plan.groups[r].count = t->groups[r].count;
	snprintf(m->plan.not_applied, sizeof(m->plan.not_applied), "%s", eff->not_applied);
	caps_note(m, pl, m->plan.not_applied, sizeof(m->plan.not_applied));
	m->plan.applied = true;
	return 1;
}

/* ---- snapshot ---- */

/* One node of own[] or act[] in the snapshot: {node, role, rank, kind,
 * cpu, memory_mb, gpu}. */
static bool node_save(cJSON *arr, const char *node, enum rv_role role, int rank, int kind,
		      const struct rv_resource *res)
{
	cJSON *o = cJSON_CreateObject();
	if (!o || !cJSON_AddItemToArray(arr, o)) {
		cJSON_Delete(o);
		return false;
	}
	return cJSON_AddStringToObject(o, "node", node) &&
	       cJSON_AddNumberToObject(o, "role", role) &&
	       cJSON_AddNumberToObject(o, "rank", rank) &&
	       cJSON_AddNumberToObject(o, "kind", kind) &&
	       cJSON_AddNumberToObject(o, "cpu", res->cpu) &&
	       cJSON_AddNumberToObject(o, "memory_mb", (double)res->memory_mb) &&
	       cJSON_AddNumberToObject(o, "gpu", res->gpu);
}

static bool nodes_save(cJSON *o, const struct master_desired *d)
{
	cJSON *own = cJSON_AddArrayToObject(o, "own");
	cJSON *act = cJSON_AddArrayToObject(o, "act");
	if (!own || !act || !cJSON_AddNumberToObject(o, "act_plan", (double)d->act_plan))
		return false;
	for (int i = 0; i < d->nown; i++)
		if (!node_save(own, d->own[i].node, d->own[i].role, -1, 0, &d->own[i].resource))
			return false;
	for (int i = 0; i < d->nact; i++)
		if (!node_save(act, d->act[i].node, d->act[i].role, d->act[i].rank,
			       (int)d->act[i].kind, &d->act[i].resource))
			return false;
	return true;
}

static double num_of(const cJSON *o, const char *key)
{
	return cJSON_GetNumberValue(cJSON_GetObjectItem(o, key));
}

/* The other way; a snapshot from before these lists has none. */
static int nodes_load(const cJSON *o, struct master_desired *d, struct rv_err *err)
{
	const cJSON *own = cJSON_GetObjectItem(o, "own"), *act = cJSON_GetObjectItem(o, "act");
	d->nown = d->nact = 0;
	d->act_plan = cJSON_IsNumber(cJSON_GetObjectItem(o, "act_plan"))
			      ? (int64_t)num_of(o, "act_plan")
			      : 0;
	if (cJSON_GetArraySize(own) > RV_MAX_PLAN_NODES ||
	    cJSON_GetArraySize(act) > (int)RV_ARRAY_SIZE(d->act))
		return rv_err_set(err, -EUCLEAN, "plans", "bad node lists in the snapshot");
	const cJSON *it;
	cJSON_ArrayForEach(it, own)
	{
		struct rv_plan_node *n = &d->own[d->nown++];
		memset(n, 0, sizeof(*n));
		const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(it, "node"));
		snprintf(n->node, sizeof(n->node), "%s", name ? name : "");
		n->role = (enum rv_role)num_of(it, "role");
		n->resource = (struct rv_resource){ .cpu = num_of(it, "cpu"),
						    .memory_mb = (int64_t)num_of(it, "memory_mb"),
						    .gpu = (int)num_of(it, "gpu") };
	}
	cJSON_ArrayForEach(it, act)
	{
		struct rv_scaling_action *a = &d->act[d->nact++];
		memset(a, 0, sizeof(*a));
		const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(it, "node"));
		snprintf(a->node, sizeof(a->node), "%s", name ? name : "");
		a->role = (enum rv_role)num_of(it, "role");
		a->rank = (int)num_of(it, "rank");
		a->kind = (enum rv_scaling_action_kind)num_of(it, "kind");
		a->resource = (struct rv_resource){ .cpu = num_of(it, "cpu"),
						    .memory_mb = (int64_t)num_of(it, "memory_mb"),
						    .gpu = (int)num_of(it, "gpu") };
	}
	return 0;
}

#define SNAP_INT_MAX ((INT64_C(1) << 53) - 1) /* json.h's integer bound */
/* A role's desired group in the snapshot, by name; snapshots before it
 * held [count, has_resources, cpu, memory_mb, gpu] (group_positional). */
#define T            struct master_group
static const struct rv_wire_field snap_group_fields[] = {
	/* bounds no wider than the members: what was saved loads */
	WINT("count", count, RV_WIRE_REQ, INT_MIN, INT_MAX, "nodes wanted"),
	WBOOL("has_resources", has_resources, 0, "false: no limits known"),
	WNUM("cpu", cpu, 0, -DBL_MAX, DBL_MAX, "cores, 0: no limit"),
	WINT("memory_mb", memory_mb, 0, -SNAP_INT_MAX, SNAP_INT_MAX, "0: no limit"),
	WINT("gpu", gpu, 0, INT_MIN, INT_MAX, "GPUs"),
};
static const struct rv_wire_message snap_group_msg =
	RV_WIRE_MSG("SnapshotGroup", "a role's desired group", snap_group_fields, "desired group",
		    NULL);
#undef T

static int group_positional(const cJSON *a, struct master_group *g)
{
	if (cJSON_GetArraySize(a) != 5)
		return -EUCLEAN;
	g->count = (int)cJSON_GetNumberValue(cJSON_GetArrayItem(a, 0));
	g->has_resources = cJSON_GetNumberValue(cJSON_GetArrayItem(a, 1)) != 0;
	g->cpu = cJSON_GetNumberValue(cJSON_GetArrayItem(a, 2));
	g->memory_mb = (int64_t)cJSON_GetNumberValue(cJSON_GetArrayItem(a, 3));
	g->gpu = (int)cJSON_GetNumberValue(cJSON_GetArrayItem(a, 4));
	return 0;
}

int plans_snapshot_save(const struct master *m, struct rv_buf *out)
{
	RV_CLEANUP_CJSON cJSON *o = cJSON_CreateObject();
	cJSON *groups = o ? cJSON_AddArrayToObject(o, "groups") : NULL;
	if (!groups)
		return -ENOMEM;
	for (int r = 0; r < RV_ROLE_COUNT; r++) {
		cJSON *g = rv_wire_encode(&snap_group_msg, &m->desired.groups[r]);
		if (!g || !cJSON_AddItemToArray(groups, g)) {
			cJSON_Delete(g);
			return -ENOMEM;
		}
	}
	const struct rv_plan_state *p = &m->plan;
	if (!cJSON_AddNumberToObject(o, "plan_id", (double)m->desired.plan_id) ||
	    !cJSON_AddNumberToObject(o, "version", (double)m->desired.version) ||
	    !cJSON_AddStringToObject(o, "uid", m->brain_uid) ||
	    !cJSON_AddNumberToObject(o, "last_id", (double)p->id) ||
	    !cJSON_AddStringToObject(o, "stage", p->stage) ||
	    !cJSON_AddStringToObject(o, "reason", p->reason) ||
	    !cJSON_AddBoolToObject(o, "applied", p->applied) ||
	    !cJSON_AddStringToObject(o, "not_applied", p->not_applied) ||
	    !nodes_save(o, &m->desired))
		return -ENOMEM;
	RV_CLEANUP_FREE char *txt = cJSON_PrintUnformatted(o);
	if (!txt)
		return -ENOMEM;
	rv_buf_printf(out, ",\"plans\":%s", txt);
	return 0;
}

int plans_snapshot_load(struct master *m, const cJSON *extra, struct rv_err *err)
{
	const cJSON *o = cJSON_GetObjectItem(extra, "plans");
	if (!o)
		return 0; /* a snapshot from before the brain link */
	const cJSON *groups = cJSON_GetObjectItem(o, "groups");
	if (cJSON_GetArraySize(groups) != RV_ROLE_COUNT)
		return rv_err_set(err, -EUCLEAN, "plans", "bad desired state in the snapshot");
	for (int r = 0; r < RV_ROLE_COUNT; r++) {
		const cJSON *a = cJSON_GetArrayItem(groups, r);
		struct master_group *g = &m->desired.groups[r];
		if ((cJSON_IsArray(a) ? group_positional(a, g)
				      : rv_wire_decode(&snap_group_msg, a, g, NULL)) < 0)
			return rv_err_set(err, -EUCLEAN, "plans",
					  "bad desired group in the snapshot");
	}
	m->desired.plan_id = (int64_t)cJSON_GetNumberValue(cJSON_GetObjectItem(o, "plan_id"));
	m->desired.version = (int64_t)cJSON_GetNumberValue(cJSON_GetObjectItem(o, "version"));
	const char *uid = cJSON_GetStringValue(cJSON_GetObjectItem(o, "uid"));
	const char *stage = cJSON_GetStringValue(cJSON_GetObjectItem(o, "stage"));
	const char *reason = cJSON_GetStringValue(cJSON_GetObjectItem(o, "reason"));
	snprintf(m->brain_uid, sizeof(m->brain_uid), "%s", uid ? uid : "");
	memset(&m->plan, 0, sizeof(m->plan));
	m->plan.id = (int64_t)cJSON_GetNumberValue(cJSON_GetObjectItem(o, "last_id"));
	snprintf(m->plan.stage, sizeof(m->plan.stage), "%s", stage ? stage : "");
	snprintf(m->plan.reason, sizeof(m->plan.reason), "%s", reason ? reason : "");
	m->plan.applied = cJSON_IsTrue(cJSON_GetObjectItem(o, "applied"));
	const char *na = cJSON_GetStringValue(cJSON_GetObjectItem(o, "not_applied"));
	snprintf(m->plan.not_applied, sizeof(m->plan.not_applied), "%s", na ? na : "");
	if (nodes_load(o, &m->desired, err) < 0)
		return -EUCLEAN;
	if (m->plan.applied) /* what the plan asked, as applied */
		for (int r = 0; r < RV_ROLE_COUNT; r++) {
			const struct master_group *g = &m->desired.groups[r];
			if (m->spec.replicas[r].present || g->count > 0)
				m->plan.groups[r] =
					(struct rv_role_target){ .present = true,
								 .count = g->count,
								 .cpu = g->cpu,
								 .memory_mb = g->memory_mb,
								 .gpu = g->gpu };
		}
	return 0;
}

/* ---- data progress ---- */

/* Dataset i of the spec as a progress sample (state lock held).  A stream
 * has no shards_total (0: its end is not known); its shards done are the
 * tasks done, its shards doing the tasks handed out; its samples done are
 * the records below the committed offsets (done ranges held above a gap
 * are not), so samples_total - samples_done is the consumer lag.  Shards of
 * a batch dataset: ceil(size / shard_size) an epoch; one counts done once
 * all of it is (the epoch's samples done fill whole shards first: the
 * count is exact at an epoch's end, and never above the truth by more
 * than the shards partly done). */
static void progress_of(const struct master *m, int i, int64_t now, struct rv_sample *x)
{
	const struct rv_dataset *d = &m->spec.datasets[i];
	*x = (struct rv_sample){
		.kind = RV_SAMPLE_PROGRESS, .ts_ms = now, .rank = -1, .step_time = -1
	};
	snprintf(x->dataset, sizeof(x->dataset), "%s", d->name);
	if (d->streaming) {
		for (int p = 0; p < stream_nparts(m->streams, m->ds_index[i]); p++) {
			struct stream_part_stats ps;
			stream_part_stats(m->streams, m->ds_index[i], p, &ps);
			x->samples_total += (ps.end >= 0 ? ps.end : ps.handed) - ps.start;
			x->samples_done += ps.committed - ps.start;
			x->shards_done += ps.tasks_done;
			x->shards_doing += ps.doing;
		}
		if (x->samples_done > x->samples_total)
			x->samples_done = x->samples_total;
		return;
	}
	if (!m->shards || d->size <= 0 || d->shard_size <= 0)
		return;
	struct shard_stats ss;
	shard_stats(m->shards, m->ds_index[i], &ss);
	int64_t per = (d->size + d->shard_size - 1) / d->shard_size;
	x->epoch = ss.epoch;
	x->samples_total = ss.samples_total;
	x->samples_done = ss.samples_done;
	x->finished = ss.finished;
	x->shards_total = per * (d->epochs > 0 ? d->epochs : 1);
	x->shards_done = ss.finished ? x->shards_total
				     : (ss.samples_done / d->size) * per +
					       (ss.samples_done % d->size) / d->shard_size;
	if (x->shards_done > x->shards_total)
		x->shards_done = x->shards_total;
	x->shards_doing = ss.tasks_doing;
	if (x->shards_doing > x->shards_total - x->shards_done)
		x->shards_doing = x->shards_total - x->shards_done;
}

static bool progress_same(const struct rv_sample *a, const struct rv_sample *b)
{
	return a->epoch == b->epoch && a->samples_total == b->samples_total &&
	       a->samples_done == b->samples_done && a->shards_total == b->shards_total &&
	       a->shards_done == b->shards_done && a->shards_doing == b->shards_doing &&
	       a->finished == b->finished;
}

/* Report each dataset whose progress changed since its last report (state
 * lock held: the plan thread's tick and the job's end both come here).
 * Nothing after the job's end was reported: the brain takes no more
 * reports of an ended job, and the last one said where the data stood. */
static void progress_report_locked(struct plans *p, int64_t now)
{
	struct master *m = p->m;
	if (p->local || p->job_ended)
		return;
	for (int i = 0; i < m->spec.ndatasets && i < RV_MAX_DATASETS; i++) {
		struct rv_sample x;
		progress_of(m, i, now, &x);
		if (p->progress_sent[i] && progress_same(&x, &p->progress[i]))
			continue;
		if (brainlink_sample(p->link, &x) < 0)
			continue;
		p->progress[i] = x;
		p->progress_sent[i] = true;
	}
}

static void progress_report(struct plans *p)
{
	state_lock(p->m, "progress_report");
	progress_report_locked(p, rv_now_ms());
	state_unlock(p->m);
}

/* ---- reports ---- */

static void job_event(struct plans *p, enum rv_event_type type, const char *id, const char *reason,
		      int64_t now)
{
	struct rv_event ev = { .type = type, .ts_ms = now, .rank = -1, .exit_code = -1 };
	/* a fixed id: the brain stores the job's end once, restarts or not */
	snprintf(ev.event_id, sizeof(ev.event_id), "%s", id);
	snprintf(ev.reason, sizeof(ev.reason), "%s", reason);
	progress_report_locked(p, now); /* where the data stood, before the end */
	brainlink_event(p->link, &ev);
	p->job_ended = true;
}

static void node_failed(struct plans *p, const char *node, const char *reason, int64_t now)
{
	struct rv_event ev = {
		.type = RV_EVENT_NODE_FAILED, .ts_ms = now, .rank = -1, .exit_code = -1
	};
	snprintf(ev.node, sizeof(ev.node), "%s", node);
	snprintf(ev.reason, sizeof(ev.reason), "%s", reason);
	brainlink_event(p->link, &ev);
}

/* Whether the node manager runs node (a row of m->nodes; state lock held):
 * its deaths reach the brain from the scheduler through nodelink.c, with
 * the exit code or signal and the relaunch that follows, so the
 * rendezvous's leave of the same death is no second node_failed (it came
 * after the relaunch and left the brain with a running node marked
 * failed). */
static bool node_managed(const struct master *m, const char *node)
{
	for (int i = 0; i < m->nnodes; i++)
		if (!strcmp(m->nodes[i].name, node))
			return true;
	return false;
}

/* A step report of node: the time per step since its previous report, and
 * the node's compute time in the step (0: unknown). */
static void step_seen(struct plans *p, const char *node, int64_t step, double compute, int64_t now)
{
	if (!node[0])
		return;
	pthread_mutex_lock(&p->mu);
	struct step_seen *e = NULL;
	for (int i = 0; i < p->nsteps && !e; i++)
		if (!strcmp(p->steps[i].node, node))
			e = &p->steps[i];
	if (!e && p->nsteps < STEP_NODES) {
		e = &p->steps[p->nsteps++];
		memset(e, 0, sizeof(*e));
		snprintf(e->node, sizeof(e->node), "%s", node);
		e->step = -1;
	}
	if (e) {
		/* a step that went back is a relaunched node: count afresh */
		if (e->step >= 0 && step > e->step && now > e->ts_ms) {
			e->step_s = (double)(now - e->ts_ms) / 1000.0 / (double)(step - e->step);
			e->fresh = true;
		}
		if (e->step >= 0 && step < e->step)
			e->compute_sum = e->compute_n = 0; /* the host before it */
		if (step != e->step) {
			e->step = step;
			e->ts_ms = now;
		}
		if (compute > 0) {
			e->compute_sum += compute;
			e->compute_n++;
		}
	}
	pthread_mutex_unlock(&p->mu);
}

/* node's step time for one usage sample: fresh, else -1; *compute: the
 * mean compute time reported since the last sample, else 0. */
static double step_time_take(struct plans *p, const char *node, double *compute)
{
	double t = -1;
	*compute = 0;
	pthread_mutex_lock(&p->mu);
	for (int i = 0; i < p->nsteps; i++) {
		struct step_seen *e = &p->steps[i];
		if (strcmp(e->node, node) != 0)
			continue;
		if (e->fresh) {
			t = e->step_s;
			e->fresh = false;
		}
		if (e->compute_n > 0)
			*compute = e->compute_sum / e->compute_n;
		e->compute_sum = e->compute_n = 0;
	}
	pthread_mutex_unlock(&p->mu);
	return t;
}

void plans_after_op(struct master *m, int type, const struct master_op *op)
{
	struct plans *p = m->plans;
	if (!p || !op)
		return;
	switch (type) {
	case MASTER_OP_STEP: {
		step_seen(p, op->node, op->step, op->compute_time, op->now_ms);
		int64_t round = 0;
		int nn = 0;
		if (rdzv_state(m->rdzv, &round, &nn) != RDZV_COMPLETE || nn <= 0)
			return; /* no world: a speed without a configuration to credit */
		struct rv_sample s = {
			.kind = RV_SAMPLE_SPEED,
			.ts_ms = op->now_ms,
			.speed = op->speed,
			.step = op->step,
			.workers = nn,
			.ps = m->spec.strategy == RV_STRATEGY_PS
				      ? m->desired.groups[RV_ROLE_PS].count
				      : 0,
			.rank = -1,
			.step_time = -1,
		};
		brainlink_sample(p->link, &s);
		return;
	}
	case MASTER_OP_LEAVE:
		if (!node_managed(m, op->node))
			node_failed(p, op->node, "the node failed or left (reported)", op->now_ms);
		return;
	case MASTER_OP_DONE:
		/* A job whose datasets all stream has no shard manager and
		 * never finishes by its data. */
		if (!p->job_ended && m->shards) {
			struct shard_stats st;
			shard_stats(m->shards, -1, &st);
			if (st.finished)
				job_event(p, RV_EVENT_JOB_FINISHED, "job-finished",
					  "every epoch of every dataset is done", op->now_ms);
		}
		return;
	case MASTER_OP_TICK:
		if (!p->job_ended) {
			int64_t round = 0;
			int nn = 0;
			if (rdzv_state(m->rdzv, &round, &nn) == RDZV_FAILED)
				job_event(p, RV_EVENT_JOB_FAILED, "job-failed",
					  rdzv_reason(m->rdzv), op->now_ms);
		}
		return;
	default:
		return;
	}
}

void plans_node_lost(struct master *m, const char *node)
{
	if (m->plans)
		node_failed(m->plans, node, "declared dead: no heartbeat in time", state_now(m));
}

int plans_node_sample(struct master *m, const struct plans_usage *u)
{
	struct plans *p = m->plans;
	if (!p)
		return 0;
	if (!u->node[0])
		return -EINVAL;
	double compute = 0;
	struct rv_sample s = {
		.kind = RV_SAMPLE_NODE,
		.ts_ms = u->ts_ms > 0 ? u->ts_ms : rv_now_ms(),
		.role = u->role,
		.rank = u->rank,
		.cpu = u->cpu,
		.memory_mb = u->memory_mb,
		.cpu_limit = u->cpu_limit,
		.memory_limit_mb = u->memory_limit_mb,
		.step_time = u->step_time >= 0 || u->role != RV_ROLE_WORKER
				     ? u->step_time
				     : step_time_take(p, u->node, &compute),
		.nr_periods = u->nr_periods,
		.nr_throttled = u->nr_throttled,
		.throttled_usec = u->throttled_usec,
	};
	s.compute_time = compute;
	snprintf(s.node, sizeof(s.node), "%s", u->node);
	if (u->throttled > 0)
		atomic_fetch_add(&p->throttled, 1);
	return brainlink_sample(p->link, &s);
}

void plans_job_end(struct master *m, bool succeeded, const char *reason)
{
	struct plans *p = m->plans;
	if (!p)
		return;
	state_lock(m, "plans_job_end");
	if (!p->job_ended)
		job_event(p, succeeded ? RV_EVENT_JOB_FINISHED : RV_EVENT_JOB_FAILED,
			  succeeded ? "job-finished" : "job-failed", reason ? reason : "",
			  rv_now_ms());
	state_unlock(m);
}

int plans_node_event(struct master *m, const struct rv_event *ev)
{
	struct plans *p = m->plans;
	if (!p)
		return 0;
	if (!ev->node[0] ||
	    (ev->type != RV_EVENT_NODE_FAILED && ev->type != RV_EVENT_NODE_OOM &&
	     ev->type != RV_EVENT_NODE_RELAUNCHED && ev->type != RV_EVENT_NODE_FINISHED))
		return -EINVAL;
	struct rv_event e = *ev;
	if (e.ts_ms <= 0)
		e.ts_ms = rv_now_ms();
	return brainlink_event(p->link, &e);
}

/* The memory an oom plan gives node, or 0 when it does not name it. */
static int64_t oom_memory_of(const struct rv_scale_plan *pl, const char *node)
{
	for (int i = 0; i < pl->nlaunch; i++)
		if (!strcmp(pl->launch[i].node, node))
			return pl->launch[i].resource.memory_mb;
	for (int i = 0; i < pl->nmigrate; i++)
		if (!strcmp(pl->migrate[i].node, node))
			return pl->migrate[i].resource.memory_mb;
	return 0;
}

static void oom_record(struct plans *p, const struct rv_scale_plan *pl)
{
	pthread_mutex_lock(&p->mu);
	for (int i = 0; i < pl->nlaunch + pl->nmigrate; i++) {
		const struct rv_plan_node *n = i < pl->nlaunch ? &pl->launch[i]
							       : &pl->migrate[i - pl->nlaunch];
		if (n->resource.memory_mb <= 0)
			continue;
		struct oom_slot *s = &p->oom[p->oom_seq % OOM_SLOTS];
		snprintf(s->node, sizeof(s->node), "%s", n->node);
		s->memory_mb = n->resource.memory_mb;
		s->seq = ++p->oom_seq;
	}
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
}

/* The in-process oom plan over the desired state. */
static int oom_local(struct master *m, const struct rv_event *ev, int64_t *memory_mb)
{
	RV_CLEANUP_FREE struct rv_scale_plan *cur = malloc(sizeof(*cur));
	RV_CLEANUP_FREE struct rv_scale_plan *out = malloc(sizeof(*out));
	if (!cur || !out)
		return -ENOMEM;
	char uid[RV_NAME_MAX];
	state_lock(m, "oom_local");
	desired_plan(m, cur);
	snprintf(uid, sizeof(uid), "%s", m->brain_uid);
	state_unlock(m);
	struct rv_alg_params P;
	struct rv_alg_limits lim;
	struct rv_alg_config cfg;
	rv_alg_params_default(&P);
	rv_scaling_limits(&m->spec, &P, &lim);
	rv_scaling_config(cur, &cfg);
	int rc = rv_scaling_oom(&cfg, ev, 1, &m->spec, uid, &lim, &P, out);
	if (rc < 0)
		return rc;
	int64_t mb = oom_memory_of(out, ev->node);
	if (mb <= 0)
		return -ENODATA;
	*memory_mb = mb;
	return 0;
}

int plans_oom_memory(struct master *m, const struct rv_event *ev, int64_t *memory_mb)
{
	struct plans *p = m->plans;
	if (!ev->node[0])
		return -EINVAL;
	if (p) {
		struct rv_event e = *ev;
		e.type = RV_EVENT_NODE_OOM;
		if (e.ts_ms <= 0)
			e.ts_ms = rv_now_ms();
		pthread_mutex_lock(&p->mu);
		int64_t since = p->oom_seq;
		pthread_mutex_unlock(&p->mu);
		int rc = brainlink_event(p->link, &e);
		if (rc < 0)
			return rc;
		if (p->mode == RV_OPT_MANUAL) {
			/* nothing changes by itself: the limit in force */
			*memory_mb = ev->memory_mb;
			return 0;
		}
		int64_t until = rv_mono_ms() + m->cfg.plan_oom_wait_ms;
		pthread_mutex_lock(&p->mu);
		for (;;) {
			for (int i = 0; i < OOM_SLOTS; i++) {
				const struct oom_slot *s = &p->oom[i];
				if (s->seq > since && !strcmp(s->node, ev->node)) {
					*memory_mb = s->memory_mb;
					pthread_mutex_unlock(&p->mu);
					return 1;
				}
			}
			int64_t now = rv_mono_ms();
			if (now >= until || p->stop)
				break;
			struct timespec ts;
			rv_mono_timespec(&ts, until);
			pthread_cond_timedwait(&p->cv, &p->mu, &ts);
		}
		pthread_mutex_unlock(&p->mu);
		rv_log_warn("no oom plan in time: the in-process one", "node=%s wait_ms=%lld",
			    ev->node, m->cfg.plan_oom_wait_ms);
	}
	int rc = oom_local(m, ev, memory_mb);
	return rc < 0 ? rc : 0;
}

/* ---- plans ---- */

static void journal_uid(struct plans *p, const char *uid)
{
	struct master *m = p->m;
	state_lock(m, "journal_uid");
	if (!strcmp(m->brain_uid, uid)) {
		state_unlock(m);
		return;
	}
	struct master_op op;
	memset(&op, 0, sizeof(op));
	op.now_ms = state_now(m);
	snprintf(op.node, sizeof(op.node), "%s", uid);
	struct master_result res;
	int64_t seq = 0;
	int rc = state_apply(m, MASTER_OP_BRAIN_UID, &op, NULL, 0, &res, &seq);
	state_unlock(m);
	if (rc == 0)
		rc = state_sync(m, seq);
	if (rc < 0)
		rv_log_error("could not journal the job's uid at the brain", "uid=%s errno=%d", uid,
			     -rc);
	else
		rv_log_info("job registered at the brain", "uid=%s", uid);
}

/* plan_applied for plan id, naming the parts not applied ("" none). */
static void send_applied(struct plans *p, int64_t id, int64_t ts, const char *not_applied)
{
	struct rv_event ev = { .type = RV_EVENT_PLAN_APPLIED,
			       .ts_ms = ts,
			       .rank = -1,
			       .exit_code = -1,
			       .plan_id = id };
	snprintf(ev.not_applied, sizeof(ev.not_applied), "%s", not_applied);
	/* a fixed id: sent again after a restart, stored once */
	snprintf(ev.event_id, sizeof(ev.event_id), "plan-applied-%" PRId64, id);
	brainlink_event(p->link, &ev);
}

static void log_plan(const char *msg, const struct rv_scale_plan *pl)
{
	char q[600];
	rv_log_info(msg, "plan=%" PRId64 " stage=%s workers=%d ps=%d reason=%s", pl->id, pl->stage,
		    pl->groups[RV_ROLE_WORKER].count, pl->groups[RV_ROLE_PS].count,
		    rv_log_q(q, sizeof(q), pl->reason));
}

static void take_plan(struct plans *p, struct brainlink_plan *bp)
{
	struct master *m = p->m;
	struct rv_scale_plan *pl = &bp->plan;
	int64_t link_id = pl->id;
	atomic_fetch_add(&p->received, 1);
	if (!p->local && pl->job[0])
		journal_uid(p, pl->job);
	if (p->local) {
		if (p->id_base > 0 && !strcmp(pl->stage, "create")) {
			atomic_fetch_add(&p->skipped, 1);
			return; /* a restart: the journal holds what was applied */
		}
		pl->id += p->id_base;
	}
	if (!bp->apply) {
		state_lock(m, "take_plan");
		plan_state_from(&m->plan, pl);
		m->plan.proposed = true;
		state_unlock(m);
		atomic_fetch_add(&p->proposed, 1);
		log_plan("plan proposed, not applied (manual mode)", pl);
		return;
	}
	RV_CLEANUP_CJSON cJSON *doc = rv_scale_plan_to_json(pl);
	RV_CLEANUP_FREE char *txt = doc ? cJSON_PrintUnformatted(doc) : NULL;
	if (!txt) {
		rv_log_error("could not apply a plan", "plan=%" PRId64 " reason=\"out of memory\"",
			     pl->id);
		return;
	}
	state_lock(m, "take_plan");
	if (pl->id <= m->desired.plan_id) {
		bool same = pl->id == m->desired.plan_id;
		int64_t now = state_now(m);
		char na[RV_NOT_APPLIED_MAX];
		snprintf(na, sizeof(na), "%s", m->plan.not_applied);
		state_unlock(m);
		atomic_fetch_add(&p->skipped, 1);
		rv_log_debug("plan skipped: not newer than the applied one", "plan=%" PRId64,
			     pl->id);
		if (same && !p->local)
			send_applied(p, link_id, now, na); /* its first report may have been lost */
		return;
	}
	struct master_op op;
	memset(&op, 0, sizeof(op));
	op.now_ms = state_now(m);
	struct master_result res;
	int64_t seq = 0;
	int rc = state_apply(m, MASTER_OP_PLAN, &op, txt, strlen(txt), &res, &seq);
	char na[RV_NOT_APPLIED_MAX];
	snprintf(na, sizeof(na), "%s", m->plan.not_applied);
	state_unlock(m);
	if (rc == 0)
		rc = state_sync(m, seq);
	if (rc < 0) {
		char q[600];
		rv_log_error("could not apply a plan", "plan=%" PRId64 " errno=%d reason=%s",
			     pl->id, -rc, rv_log_q(q, sizeof(q), res.err.msg));
		return;
	}
	atomic_fetch_add(&p->applied, 1);
	send_applied(p, link_id, op.now_ms, na);
	log_plan("plan applied", pl);
	if (na[0]) {
		char q[RV_NOT_APPLIED_MAX + 64];
		rv_log_warn("plan applied in part", "plan=%" PRId64 " not_applied=%s", pl->id,
			    rv_log_q(q, sizeof(q), na));
	}
	if (!strcmp(pl->stage, "oom"))
		oom_record(p, pl);
}

static bool stopping(struct plans *p)
{
	pthread_mutex_lock(&p->mu);
	bool s = p->stop;
	pthread_mutex_unlock(&p->mu);
	return s;
}

static void *plans_main(void *arg)
{
	struct plans *p = arg;
	struct master *m = p->m;
	int64_t next_local = rv_mono_ms() + m->cfg.plan_interval_ms;
	int64_t next_usage = rv_mono_ms() + m->cfg.node_usage_interval_ms;
	int64_t next_progress = rv_mono_ms();
	struct nodelink_usage *usage = nodelink_usage_new();
	struct brainlink_plan *bp = malloc(sizeof(*bp));
	if (!bp || !usage) {
		free(bp);
		nodelink_usage_free(usage);
		rv_log_error("could not start taking plans", "reason=\"out of memory\"");
		return NULL;
	}
	while (!stopping(p)) {
		if (brainlink_plan_take(p->link, bp, PLAN_POLL_MS) == 1)
			take_plan(p, bp);
		char uid[RV_BRAIN_UID_MAX];
		if (!p->local && brainlink_uid(p->link, uid) == 1)
			journal_uid(p, uid);
		if (p->local && rv_mono_ms() >= next_local) {
			struct rv_err err = { 0 };
			if (brainlink_plan_local(p->link, NULL, &err) < 0) {
				char q[600];
				rv_log_warn("could not make a plan", "reason=%s",
					    rv_log_q(q, sizeof(q), err.msg));
			}
			next_local = rv_mono_ms() + m->cfg.plan_interval_ms;
		}
		if (rv_mono_ms() >= next_usage) {
			nodelink_usage_report(m, usage);
			next_usage = rv_mono_ms() + m->cfg.node_usage_interval_ms;
		}
		if (rv_mono_ms() >= next_progress) {
			progress_report(p);
			next_progress = rv_mono_ms() + m->cfg.brain_progress_interval_ms;
		}
	}
	/* the last word before a stop */
	progress_report(p);
	free(bp);
	nodelink_usage_free(usage);
	return NULL;
}

int plans_start(struct master *m, struct rv_err *err)
{
	int rc = plans_check(m, err);
	if (rc < 0)
		return rc;
	struct plans *p = calloc(1, sizeof(*p));
	if (!p)
		return rv_err_set(err, -ENOMEM, "", "out of memory for the brain link");
	p->m = m;
	p->mode = m->spec.optimize_mode;
	const char *url = p->mode == RV_OPT_SINGLE_JOB ? "" : brain_url(m);
	p->local = !url[0];
	char uid[RV_NAME_MAX];
	state_lock(m, "plans_start");
	snprintf(uid, sizeof(uid), "%s", m->brain_uid);
	p->id_base = p->local ? m->desired.plan_id : 0;
	state_unlock(m);
	const struct master_cfg *c = &m->cfg;
	struct brainlink_opts o = {
		.mode = p->mode,
		.spec = &m->spec,
		.brain = { .url = url,
			   .token = c->brain_token,
			   .connect_timeout_ms = (int)c->brain_connect_timeout_ms,
			   .timeout_ms = (int)c->brain_timeout_ms },
		.uid = uid,
		.max_queue = (int)c->brain_max_queue,
		.max_queue_bytes = (size_t)c->brain_max_queue_kb * 1024,
		.batch_max = (int)c->brain_batch_max,
		.batch_delay_ms = (int)c->brain_batch_delay_ms,
		.poll_wait_s = (int)c->brain_poll_wait_s,
		.backoff_ms = (int)c->brain_backoff_ms,
		.backoff_max_ms = (int)c->brain_backoff_max_ms,
		.min_samples = (int)c->plan_min_samples,
	};
	p->link = brainlink_start(&o, err);
	if (!p->link) {
		free(p);
		return err->code ? err->code : -ENOMEM;
	}
	pthread_mutex_init(&p->mu, NULL);
	rv_cond_init_mono(&p->cv);
	state_lock(m, "plans_start");
	m->plans = p;
	state_unlock(m);
	if (pthread_create(&p->thread, NULL, plans_main, p) != 0) {
		state_lock(m, "plans_start");
		m->plans = NULL;
		state_unlock(m);
		brainlink_stop(p->link, 0);
		pthread_cond_destroy(&p->cv);
		pthread_mutex_destroy(&p->mu);
		free(p);
		return rv_err_set(err, -EAGAIN, "", "could not start the plan thread");
	}
	rv_log_info("brain link started", "mode=%s brain=%s uid=%s", rv_optimize_mode_name(p->mode),
		    url[0] ? url : "in-process",
		    p->local ? "-"
		    : uid[0] ? uid
			     : "(registering)");
	return 0;
}

void plans_stop(struct master *m)
{
	state_lock(m, "plans_stop");
	struct plans *p = m->plans;
	m->plans = NULL;
	state_unlock(m);
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->stop = true;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	pthread_join(p->thread, NULL);
	int left = brainlink_stop(p->link, (int)m->cfg.brain_stop_ms);
	rv_log_info("brain link stopped", "unsent=%d", left);
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->mu);
	free(p);
}

/* ---- status ---- */

void plans_status(struct master *m, struct rv_job_status *js)
{
	struct plans *p = m->plans;
	js->has_brain = true;
	struct rv_brain_link *b = &js->brain;
	b->mode = m->spec.optimize_mode;
	snprintf(b->uid, sizeof(b->uid), "%s", m->brain_uid);
	if (p) {
		struct brainlink_stats st;
		brainlink_stats(p->link, &st);
		b->reachable = st.reachable;
		b->queued = st.queued;
		b->sent = st.sent_samples + st.sent_events;
		b->dropped = st.dropped_samples + st.dropped_events;
		snprintf(b->last_error, sizeof(b->last_error), "%s", st.last_error);
	}
	js->has_plan = m->plan.id > 0;
	if (js->has_plan)
		js->plan = m->plan;
	js->has_desired = true;
	for (int r = 0; r < RV_ROLE_COUNT; r++) {
		const struct master_group *g = &m->desired.groups[r];
		if (!m->spec.replicas[r].present && g->count == 0)
			continue;
		js->desired[r] = (struct rv_role_target){ .present = true,
							  .count = g->count,
							  .cpu = g->cpu,
							  .memory_mb = g->memory_mb,
							  .gpu = g->gpu };
	}
}

void plans_metrics(struct master *m, struct rv_buf *out)
{
	struct plans *p = m->plans;
	if (!p)
		return;
	struct brainlink_stats st;
	brainlink_stats(p->link, &st);
	const struct {
		const char *name, *type, *help;
		long long v;
	} rows[] = {
		{ "rover_master_brain_reachable", "gauge",
		  "The last call to the brain got an answer", st.reachable },
		{ "rover_master_brain_queued", "gauge", "Reports waiting to be sent", st.queued },
		{ "rover_master_brain_queued_bytes", "gauge", "Memory of the reports waiting",
		  st.queued_bytes },
		{ "rover_master_brain_samples_sent_total", "counter",
		  "Samples the brain acknowledged", st.sent_samples },
		{ "rover_master_brain_events_sent_total", "counter",
		  "Events the brain acknowledged", st.sent_events },
		{ "rover_master_brain_dropped_total", "counter",
		  "Reports dropped, oldest first, from a full queue",
		  st.dropped_samples + st.dropped_events },
		{ "rover_master_brain_resends_total", "counter",
		  "Batches and events sent again after a failure", st.resends },
		{ "rover_master_plans_received_total", "counter", "Plans handed to the master",
		  (long long)atomic_load(&p->received) },
		{ "rover_master_plans_applied_total", "counter",
		  "Plans applied to the desired state", (long long)atomic_load(&p->applied) },
		{ "rover_master_plans_skipped_total", "counter",
		  "Plans not newer than the applied one", (long long)atomic_load(&p->skipped) },
		{ "rover_master_plans_proposed_total", "counter",
		  "Plans recorded as proposed (manual mode)",
		  (long long)atomic_load(&p->proposed) },
		{ "rover_master_plans_clamped_total", "counter",
		  "Plan counts clamped to the replica spec", (long long)atomic_load(&p->clamped) },
		{ "rover_master_node_throttled_samples_total", "counter",
		  "Usage samples of a node whose CPU was throttled",
		  (long long)atomic_load(&p->throttled) },
	};
	for (size_t i = 0; i < RV_ARRAY_SIZE(rows); i++)
		rv_buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n%s %lld\n", rows[i].name,
			      rows[i].help, rows[i].name, rows[i].type, rows[i].name, rows[i].v);
	state_lock(m, "plans_metrics");
	long long version = (long long)m->desired.version, plan_id = (long long)m->desired.plan_id;
	state_unlock(m);
	rv_buf_printf(
		out,
		"# HELP rover_master_desired_version Changes of the desired state\n"
		"# TYPE rover_master_desired_version gauge\nrover_master_desired_version %lld\n"
		"# HELP rover_master_plan_id The plan the desired state follows\n"
		"# TYPE rover_master_plan_id gauge\nrover_master_plan_id %lld\n",
		version, plan_id);
}
