/*
 * nodemgr.c: the node manager of rover-master (see nodemgr.h).
 *
 * The node thread is the only user of the backend (struct sched) and the
 * policy (struct nodes).  It polls the backend's fd and an eventfd (desired
 * changed, stop) with a timeout for the next usage sample or the job's end.
 * The node table m->nodes mirrors the policy for readers and the journal:
 * it changes only through journaled documents applied under m->lock
 * (nodetable_apply, nodetable.c), except pid, state RUNNING and usage, which a restart
 * does not need.  Order on a node's end: journal the end, then LEAVE its
 * name unless it succeeded (its shards go back to TODO and the rendezvous
 * re-forms at once), then the relaunch, journaled before it is asked of
 * the backend.
 */
#include "nodemgr.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "log.h"
#include "master.h"
#include "parse.h"
#include "plans.h"
#include "sched_k8s.h"
#include "sched_local.h"
#include "sched_slurm.h"
#include "wire_codec.h"

#define ENV_MAX 10

struct nodemgr {
	struct master *m;
	struct sched *sched;
	struct nodes *nodes;
	struct nodes_alg_oom alg;
	int efd;
	pthread_t thread;
	bool started;
	atomic_bool stop;
	char addr[160];
	char log_dir[PATH_MAX];
	bool detach;        /* nodes outlive the master (node.survive_master) */
	bool k8s;           /* pods: adopted by name after a restart */
	bool slurm;         /* the slurm backend */
	int64_t version;    /* of m->desired last reconciled */
	int64_t next_usage; /* monotonic ms */
	int64_t exit_at;    /* monotonic ms, 0: the job runs */
	bool exit_sent;
	/* resize that must relaunch: the node's instance was asked to stop */
	struct pending {
		char name[SCHED_NAME_MAX];
		struct sched_resources res;
		bool replace; /* a straggler: relaunched on another host */
		int64_t plan; /* the plan that relaunches it, 0: a resize */
	} pend[64];
	int npend;
	struct sched_resources shape; /* the backend's largest node, 0s: not known */
};

int nodemgr_wanted(const struct master_cfg *cfg, const struct rv_job_spec *spec, struct rv_err *err)
{
	static const char *const limits[] = { "auto", "cgroup2", "cgroup1", "rlimit", "none" };
	if (rv_wire_parse_of(limits, RV_ARRAY_SIZE(limits), cfg->node_limits) < 0)
		return rv_err_set(
			err, -EINVAL, "node.limits",
			"node.limits \"%s\" must be auto, cgroup2, cgroup1, rlimit or none",
			cfg->node_limits);
	bool any = false;
	for (int r = 0; r < RV_ROLE_COUNT; r++)
		any |= spec->replicas[r].present && spec->replicas[r].ncommand > 0;
	if (!strcmp(cfg->scheduler, "none"))
		return 0;
	if (!strcmp(cfg->scheduler, "auto"))
		return any;
	if (!strcmp(cfg->scheduler, "k8s")) {
		for (int r = 0; r < RV_ROLE_COUNT; r++) {
			const struct rv_replica_spec *rs = &spec->replicas[r];
			if (rs->present && rs->replicas > 0 && rs->ncommand == 0 &&
			    !rs->template_json)
				return rv_err_set(
					err, -EINVAL, "spec.replicaSpecs.template",
					"scheduler k8s needs spec.replicaSpecs.%s.template "
					"or its command",
					rv_role_name((enum rv_role)r));
		}
		return 1;
	}
	if (strcmp(cfg->scheduler, "local") != 0 && strcmp(cfg->scheduler, "slurm") != 0)
		return rv_err_set(err, -EINVAL, "scheduler",
				  "scheduler \"%s\" must be auto, local, k8s, slurm or none",
				  cfg->scheduler);
	if (!strcmp(cfg->scheduler, "slurm") && !cfg->slurm_url[0])
		return rv_err_set(err, -EINVAL, "slurm.url",
				  "scheduler slurm needs slurmrestd's url: --slurm-url "
				  "unix:/path/to/socket or http://host:port (slurm.url)");
	if (spec->replicas[RV_ROLE_WORKER].ncommand == 0)
		return rv_err_set(err, -EINVAL, "spec.replicaSpecs.worker.command",
				  "scheduler %s needs spec.replicaSpecs.worker.command: the "
				  "command each worker node runs",
				  cfg->scheduler);
	for (int r = 0; r < RV_ROLE_COUNT; r++)
		if (spec->replicas[r].present && spec->replicas[r].replicas > 0 &&
		    spec->replicas[r].ncommand == 0)
			return rv_err_set(err, -EINVAL, "spec.replicaSpecs.command",
					  "scheduler %s needs spec.replicaSpecs.%s.command",
					  cfg->scheduler, rv_role_name((enum rv_role)r));
	return 1;
}

void nodemgr_register(struct master *m)
{
	m->svc.desired_changed = nodemgr_wake;
}

int nodemgr_usage_each(struct master *m, void (*fn)(void *ctx, const struct master_node *n),
		       void *ctx)
{
	state_lock(m, "nodemgr_usage_each");
	int n = m->nnodes;
	for (int i = 0; i < n; i++)
		fn(ctx, &m->nodes[i]);
	state_unlock(m);
	return n;
}

/* ---- the node thread ---- */

/* The policy's charged hosts into doc (none: no member), so the journal
 * keeps them for a restarted master. */
static cJSON *doc_add_hosts(struct nodemgr *nm, cJSON *doc)
{
	struct nodes_host h[NODES_MAX_HOSTS];
	int n = nodes_hosts(nm->nodes, h, NODES_MAX_HOSTS);
	if (n > 0)
		nodetable_hosts_to_json(h, n < NODES_MAX_HOSTS ? n : NODES_MAX_HOSTS, doc);
	state_lock(nm->m, "doc_add_hosts");
	nodetable_charged_to_json(nm->m, doc);
	state_unlock(nm->m);
	return doc;
}

/* Journal a document (type NODE_LAUNCHED or NODE_ENDED) and wait until it
 * is durable. */
static int journal_doc(struct master *m, int type, cJSON *doc)
{
	RV_CLEANUP_FREE char *s = doc ? rv_json_print(doc) : NULL;
	cJSON_Delete(doc);
	if (!s)
		return -ENOMEM;
	struct master_result res;
	int64_t seq = 0;
	state_lock(m, state_op_name(type));
	int rc = state_apply(m, type, NULL, s, strlen(s), &res, &seq);
	state_unlock(m);
	if (rc < 0) {
		char q[600];
		rv_log_error("could not journal a node change", "type=%d reason=%s", type,
			     rv_log_q(q, sizeof(q), res.err.msg));
		return rc;
	}
	return state_sync(m, seq);
}

/* The node left (its agent is gone): its shards go back to TODO, the
 * rendezvous re-forms now, without the last call (rdzv_lost). */
static void node_leave(struct master *m, const char *name)
{
	struct master_op op = { .id = MASTER_LEAVE_LOST };
	struct master_result res;
	int64_t seq = 0;
	snprintf(op.node, sizeof(op.node), "%s", name);
	state_lock(m, "node_leave");
	op.now_ms = state_now(m);
	state_apply(m, MASTER_OP_LEAVE, &op, NULL, 0, &res, &seq);
	state_unlock(m);
	state_sync(m, seq);
}

static void on_event(struct nodemgr *nm, const struct sched_event *ev);

/* What the backend gets for a node: its spec and the storage it points to. */
struct launch_spec {
	char env[ENV_MAX][PATH_MAX / 4];
	const char *envp[ENV_MAX + 1];
	char log[PATH_MAX + SCHED_NAME_MAX + 8];
	const char *avoid[NODES_AVOID_MAX + 1]; /* into the nodes_info given */
	struct sched_node_spec sp;
};

/* Fill *ls for instance ni of node base (ls points into ni: keep it alive);
 * returns its replica spec. */
static const struct rv_replica_spec *launch_spec_fill(struct nodemgr *nm, const char *base,
						      const struct nodes_info *ni,
						      const struct sched_resources *res,
						      struct launch_spec *ls)
{
	struct master *m = nm->m;
	int role = rv_role_parse(ni->role);
	const struct rv_replica_spec *rs = &m->spec.replicas[role < 0 ? 0 : role];
	size_t sz = sizeof(ls->env[0]);
	int ne = 0;
	snprintf(ls->env[ne++], sz, "ROVER_MASTER_ADDR=%s", nm->addr);
	snprintf(ls->env[ne++], sz, "ROVER_NODE_NAME=%s", base);
	snprintf(ls->env[ne++], sz, "ROVER_NODE_RANK=%d", ni->rank);
	snprintf(ls->env[ne++], sz, "ROVER_ROLE=%s", ni->role);
	snprintf(ls->env[ne++], sz, "ROVER_JOB_NAME=%s", m->spec.name);
	snprintf(ls->env[ne++], sz, "ROVER_NODE_INSTANCE=%s", ni->name);
	snprintf(ls->env[ne++], sz, "ROVER_NODE_ATTEMPT=%d", ni->attempt);
	snprintf(ls->env[ne++], sz, "ROVER_NODE_MEMORY_MB=%" PRId64, res->memory_mb);
	for (int i = 0; i < ne; i++)
		ls->envp[i] = ls->env[i];
	ls->envp[ne] = NULL;
	snprintf(ls->log, sizeof(ls->log), "%s/%s.log", nm->log_dir, ni->name);
	for (int i = 0; i <= ni->navoid; i++)
		ls->avoid[i] = i < ni->navoid ? ni->avoid[i] : NULL;
	ls->sp = (struct sched_node_spec){
		.name = ni->name,
		.role = ni->role,
		.rank = ni->rank,
		.host = ni->host,
		.avoid = ls->avoid,
		.res = *res,
		.argv = (const char *const *)rs->command,
		.env = ls->envp,
		.log_path = ls->log,
	};
	return rs;
}

/* r capped at shape, never below what spec asked for role. */
static bool spec_fit(const struct sched_resources *shape, const struct rv_job_spec *spec, int role,
		     struct sched_resources *r)
{
	const struct rv_replica_spec *rs = role >= 0 && role < RV_ROLE_COUNT ? &spec->replicas[role]
									     : NULL;
	struct sched_resources ask = { 0 };
	if (rs && rs->has_resources)
		ask = (struct sched_resources){ .cpu = rs->resource.cpu,
						.memory_mb = rs->resource.memory_mb };
	return sched_fit(shape, &ask, r);
}

bool nodemgr_fit(const struct master *m, int role, struct sched_resources *r)
{
	return spec_fit(&m->node_shape, &m->spec, role, r);
}

/* nodemgr_fit on the node thread, with its own copy of the shape. */
static bool shape_cap(const struct nodemgr *nm, const char *role, struct sched_resources *r)
{
	return spec_fit(&nm->shape, &nm->m->spec, rv_role_parse(role), r);
}

/* The launch or resize of node with r capped (shape_cap), in the log. */
static void shape_said(const char *node, const struct sched_resources *asked,
		       const struct sched_resources *r)
{
	rv_log_warn("node resources capped at the largest node",
		    "node=%s memory_mb=%" PRId64 " cpu=%g asked_memory_mb=%" PRId64 " asked_cpu=%g",
		    node, r->memory_mb, r->cpu, asked->memory_mb, asked->cpu);
}

/* Journal the launch of instance ni of node base, then ask the backend; a
 * launch it refuses is fed back as a FAILED event. */
static void launch(struct nodemgr *nm, const char *base, const struct nodes_info *ni)
{
	struct master *m = nm->m;
	struct sched_resources res = ni->res;
	if (shape_cap(nm, ni->role, &res)) {
		shape_said(base, &ni->res, &res);
		nodes_set_resources(nm->nodes, base, &res);
	}
	struct master_node v = { .rank = ni->rank,
				 .attempt = ni->attempt,
				 .restarts = ni->restarts,
				 .ooms = ni->ooms,
				 .res = res,
				 .state = MASTER_NODE_LAUNCHED };
	/* the plan that last relaunched the node stays with it */
	state_lock(m, "launch");
	const struct master_node *was = nodetable_find(m, base);
	v.plan = was ? was->plan : 0;
	state_unlock(m);
	snprintf(v.name, sizeof(v.name), "%s", base);
	snprintf(v.instance, sizeof(v.instance), "%s", ni->name);
	snprintf(v.role, sizeof(v.role), "%s", ni->role);
	snprintf(v.host, sizeof(v.host), "%s", ni->host);
	snprintf(v.left, sizeof(v.left), "%s", ni->left);
	if (journal_doc(m, MASTER_OP_NODE_LAUNCHED, doc_add_hosts(nm, nodetable_node_to_json(&v))) <
	    0)
		return; /* the journal failed: the master cannot carry on safely */

	struct launch_spec ls;
	const struct rv_replica_spec *rs = launch_spec_fill(nm, base, ni, &res, &ls);
	struct rv_err err = { 0 };
	int rc = rs->ncommand > 0 || (nm->k8s && rs->template_json)
			 ? sched_launch(nm->sched, &ls.sp, &err)
			 : rv_err_set(&err, -EINVAL, "command", "no command for role %s", ni->role);
	char q[600];
	rv_log_info("node launched",
		    "node=%s instance=%s role=%s rank=%d memory_mb=%" PRId64 " cpu=%g rc=%d", base,
		    ni->name, ni->role, ni->rank, res.memory_mb, res.cpu, rc);
	if (rc < 0) {
		/* Never started: the policy hears it as a FAILED event. */
		rv_log_warn("could not launch a node", "instance=%s reason=%s", ni->name,
			    rv_log_q(q, sizeof(q), err.msg));
		struct sched_event ev = { .type = SCHED_EV_FAILED, .rank = ni->rank, .err = rc };
		snprintf(ev.name, sizeof(ev.name), "%s", ni->name);
		snprintf(ev.role, sizeof(ev.role), "%s", ni->role);
		snprintf(ev.host, sizeof(ev.host), "%s", ni->host);
		snprintf(ev.detail, sizeof(ev.detail), "%.200s", err.msg);
		on_event(nm, &ev);
	}
}

/* Stop every live node (a failed job, or the master stopping). */
static void remove_all(struct nodemgr *nm)
{
	struct master *m = nm->m;
	state_lock(m, "remove_all");
	for (int i = 0; i < m->nnodes; i++) {
		const struct master_node *n = &m->nodes[i];
		if (n->state == MASTER_NODE_LAUNCHED || n->state == MASTER_NODE_RUNNING)
			sched_remove(nm->sched, n->instance, (int)m->cfg.node_stop_grace_ms);
	}
	state_unlock(m);
}

static void job_end(struct nodemgr *nm, enum master_job_state st, const char *reason)
{
	struct master *m = nm->m;
	cJSON *doc = cJSON_CreateObject();
	cJSON_AddStringToObject(doc, "job", nodetable_job_state_name(st));
	cJSON_AddStringToObject(doc, "reason", reason ? reason : "");
	journal_doc(m, MASTER_OP_NODE_ENDED, doc);
	struct nodes_status ns;
	nodes_status(nm->nodes, &ns);
	char q[600];
	rv_log_info("job finished",
		    "state=%s nodes=%d succeeded=%d restarts=%d oom_relaunches=%d bad_hosts=%d "
		    "linger_s=%lld reason=%s",
		    nodetable_job_state_name(st), ns.nodes, ns.succeeded, ns.restarts,
		    ns.oom_relaunches, ns.bad_hosts, m->cfg.job_linger_s,
		    rv_log_q(q, sizeof(q), reason ? reason : ""));
	plans_job_end(m, st == MASTER_JOB_SUCCEEDED, reason);
	if (st == MASTER_JOB_FAILED)
		remove_all(nm);
	nm->exit_at = rv_mono_ms() + m->cfg.job_linger_s * 1000;
}

static void check_end(struct nodemgr *nm)
{
	if (nm->exit_at)
		return;
	struct nodes_status ns;
	nodes_status(nm->nodes, &ns);
	if (ns.state == NODES_JOB_FAILED)
		job_end(nm, MASTER_JOB_FAILED, ns.reason);
	else if (ns.state == NODES_JOB_SUCCEEDED)
		job_end(nm, MASTER_JOB_SUCCEEDED, "every node exited 0");
}

static struct pending *pending_find(struct nodemgr *nm, const char *name)
{
	for (int i = 0; i < nm->npend; i++)
		if (!strcmp(nm->pend[i].name, name))
			return &nm->pend[i];
	return NULL;
}

/* Every dataset's shards are done (never, for a job with none: it ends by
 * its nodes, as a streaming one does). */
static bool data_finished(struct master *m)
{
	bool all = m->spec.ndatasets > 0;
	state_lock(m, "data_finished");
	/* A streaming dataset never finishes: such a job ends by its nodes. */
	for (int i = 0; i < m->spec.ndatasets; i++) {
		struct shard_stats ss = { .finished = false };
		if (!m->spec.datasets[i].streaming)
			shard_stats(m->shards, m->ds_index[i], &ss);
		all = all && ss.finished;
	}
	state_unlock(m);
	return all;
}

/* A node stopped for a plan or a resize starts again: a straggler with
 * the same rank on another host (its host charged), any other with its new
 * resources; pd->plan goes into its table entry (journaled with the
 * launch), so the plan relaunches it once. */
static void relaunch_pending(struct nodemgr *nm, const char *base, const struct pending *pd)
{
	struct master *m = nm->m;
	struct nodes_action act;
	struct nodes_info ni;
	int rc = pd->replace ? nodes_replace(nm->nodes, base, &pd->res, &act)
			     : nodes_relaunch(nm->nodes, base, &pd->res, &act);
	if (rc < 0 || nodes_get(nm->nodes, base, &ni) < 0)
		return;
	if (pd->plan > 0) {
		state_lock(m, "relaunch_pending");
		struct master_node *t = nodetable_find(m, base);
		if (t && t->plan < pd->plan)
			t->plan = pd->plan;
		state_unlock(m);
	}
	char q[600];
	rv_log_info(pd->replace ? "node replaced" : "node relaunched with new resources",
		    "node=%s instance=%s host=%s plan=%" PRId64 " reason=%s", base, ni.name,
		    ni.host, pd->plan, rv_log_q(q, sizeof(q), act.reason));
	launch(nm, base, &ni);
}

/* A node the last network check found faulty or a straggler failed (it
 * left the job over the verdict, or died since): its host is charged as
 * bad before the policy relaunches it, so the relaunch keeps off it; once
 * per node and check (a relaunch that fails again elsewhere is not the
 * check's).  The charge is journaled with the node's end. */
static void netcheck_charge(struct nodemgr *nm, const char *base, const struct sched_event *ev)
{
	struct master *m = nm->m;
	struct nodes_info ni;
	if (ev->type != SCHED_EV_EXITED || ev->removed || ev->lost ||
	    (ev->exit_code == 0 && !ev->signal) || nodes_get(nm->nodes, base, &ni) < 0)
		return;
	state_lock(m, "netcheck_charge");
	const struct netcheck_run *r = &m->netcheck;
	int i = r->state == NETCHECK_DONE ? netcheck_run_member(r, base) : -ENOENT;
	int verdict = i >= 0 ? r->m[i].verdict : NETCHECK_OK;
	int64_t check = r->id;
	bool again = false;
	if (verdict != NETCHECK_OK) {
		if (m->nc_check != check)
			m->nc_nnamed = 0;
		m->nc_check = check;
		for (int k = 0; k < m->nc_nnamed; k++)
			again |= !strcmp(m->nc_named[k], base);
		if (!again && m->nc_nnamed < (int)RV_ARRAY_SIZE(m->nc_named))
			snprintf(m->nc_named[m->nc_nnamed++], SCHED_NAME_MAX, "%s", base);
	}
	state_unlock(m);
	if (verdict == NETCHECK_OK || again)
		return;
	const char *host = ev->host[0] ? ev->host : ni.host;
	const char *what = verdict == NETCHECK_FAULTY ? "faulty" : "straggler";
	if (!host[0] || nodes_host_failed(nm->nodes, host) < 0) {
		rv_log_info("network check: no host to charge", "node=%s verdict=%s check=%" PRId64,
			    base, what, check);
		return;
	}
	rv_log_warn("network check: host charged", "node=%s host=%s verdict=%s check=%" PRId64,
		    base, host, what, check);
}

static void on_event(struct nodemgr *nm, const struct sched_event *ev)
{
	struct master *m = nm->m;
	char base[SCHED_NAME_MAX] = "";
	bool current = false;
	enum master_node_state was = MASTER_NODE_LAUNCHED;
	struct master_node started = { .pid = 0 };
	state_lock(m, "on_event");
	for (int i = 0; i < m->nnodes; i++) {
		struct master_node *n = &m->nodes[i];
		if (strcmp(n->instance, ev->name) != 0)
			continue;
		current = true;
		was = n->state;
		snprintf(base, sizeof(base), "%s", n->name);
		if (ev->type == SCHED_EV_STARTED) {
			n->state = MASTER_NODE_RUNNING;
			n->pid = ev->pid;
			n->start_ticks = ev->start_ticks;
			started = *n;
		}
	}
	state_unlock(m);
	/* A node that outlives us is adopted by the next master: journal its
	 * pid and start time. */
	if (nm->detach && started.pid > 0 && started.start_ticks > 0)
		journal_doc(m, MASTER_OP_NODE_LAUNCHED, nodetable_node_to_json(&started));

	/* An adopted node's status is lost: it finished when the data did. */
	struct sched_event adopted;
	if (ev->type == SCHED_EV_EXITED && ev->status_unknown && !ev->removed) {
		adopted = *ev;
		adopted.exit_code = data_finished(m) ? 0 : -1;
		ev = &adopted;
	}

	if (current && (was == MASTER_NODE_LAUNCHED || was == MASTER_NODE_RUNNING))
		netcheck_charge(nm, base, ev);
	struct nodes_action act;
	nodes_on_event(nm->nodes, ev, &act);
	char q[600];
	rv_log_info("node event", "instance=%s event=%s exit=%d signal=%d removed=%d detail=%s",
		    ev->name, sched_event_name(ev->type), ev->exit_code, ev->signal,
		    (int)ev->removed, rv_log_q(q, sizeof(q), ev->detail));
	if (m->node_event)
		m->node_event(m->node_event_ctx, ev, &act);
	if (ev->type == SCHED_EV_STARTED || !current ||
	    (was != MASTER_NODE_LAUNCHED && was != MASTER_NODE_RUNNING))
		return;

	struct nodes_info ni;
	bool known = nodes_get(nm->nodes, base, &ni) == 0;
	struct pending *p = pending_find(nm, base);
	bool forget = ev->removed && !p && !nm->exit_at; /* scaled down */
	enum master_node_state st = act.type == NODES_GIVE_UP ? MASTER_NODE_FAILED
				    : known && ni.succeeded   ? MASTER_NODE_SUCCEEDED
							      : MASTER_NODE_EXITED;
	cJSON *doc = cJSON_CreateObject();
	cJSON_AddStringToObject(doc, "name", base);
	cJSON_AddStringToObject(doc, "instance", ev->name);
	cJSON_AddStringToObject(doc, "state", nodetable_node_state_name(st));
	cJSON_AddBoolToObject(doc, "removed", forget);
	cJSON_AddNumberToObject(doc, "exit_code", ev->exit_code);
	cJSON_AddNumberToObject(doc, "signal", ev->signal);
	journal_doc(m, MASTER_OP_NODE_ENDED, doc_add_hosts(nm, doc));
	/* A node that succeeded leaves through the heartbeat timeout: its peers
	 * are finishing too, and a new round now would stop their workers in
	 * their last moments. */
	if (st != MASTER_NODE_SUCCEEDED)
		node_leave(m, base);

	if (forget) {
		nodes_forget(nm->nodes, base);
	} else if (p) {
		struct pending pd = *p;
		*p = nm->pend[--nm->npend];
		relaunch_pending(nm, base, &pd);
	} else if (act.type == NODES_RELAUNCH && nodes_get(nm->nodes, base, &ni) == 0) {
		rv_log_warn("node relaunched", "node=%s instance=%s rank=%d reason=%s", base,
			    ni.name, ni.rank, rv_log_q(q, sizeof(q), act.reason));
		launch(nm, base, &ni);
	} else if (act.type == NODES_GIVE_UP) {
		rv_log_error("node given up", "node=%s reason=%s", base,
			     rv_log_q(q, sizeof(q), act.reason));
	}
	check_end(nm);
}

static struct sched_resources group_res(const struct master_group *g)
{
	struct sched_resources r = { 0 };
	if (g->has_resources) {
		r.cpu = g->cpu;
		r.memory_mb = g->memory_mb;
		r.gpu = g->gpu;
	}
	return r;
}

/* Bring the nodes to m->desired: more ranks, fewer ranks, new limits. */
/* What the node thread works on without the lock: a copy of the node
 * table, of the desired state and of the job's state. */
struct table_view {
	struct master_node *nodes; /* malloc'd: free() it */
	int nn;
	struct master_desired d;
	enum master_job_state js;
};

/* Take the view under the lock.  0 or -ENOMEM. */
static int table_copy(struct master *m, struct table_view *v)
{
	state_lock(m, "table_copy");
	v->nn = m->nnodes;
	v->d = m->desired;
	v->js = m->job_state;
	v->nodes = malloc(sizeof(*v->nodes) * (size_t)(v->nn ? v->nn : 1));
	if (v->nodes && v->nn)
		memcpy(v->nodes, m->nodes, sizeof(*v->nodes) * (size_t)v->nn);
	state_unlock(m);
	return v->nodes ? 0 : -ENOMEM;
}

/* What node n runs with under d: its own resources (a migration), else
 * its group's; *own says which. */
static struct sched_resources node_res(const struct master_desired *d, const struct master_group *g,
				       const struct master_node *n, bool *own)
{
	for (int i = 0; i < d->nown; i++)
		if (!strcmp(d->own[i].node, n->name)) {
			*own = true;
			const struct rv_resource *r = &d->own[i].resource;
			return (struct sched_resources){ .cpu = r->cpu,
							 .memory_mb = r->memory_mb,
							 .gpu = r->gpu };
		}
	*own = false;
	return group_res(g);
}

/* A node the newest plan relaunches (a straggler replaced, a PS migrated)
 * and no relaunch for that plan yet: stop it, and relaunch_pending starts
 * it again once it exited.  true when it was asked to stop. */
static bool plan_relaunch(struct nodemgr *nm, const struct master_desired *d,
			  const struct master_group *g, const struct master_node *n)
{
	struct master *m = nm->m;
	const struct rv_scaling_action *a = NULL;
	for (int i = 0; i < d->nact && !a; i++)
		if (!strcmp(d->act[i].node, n->name))
			a = &d->act[i];
	if (!a || n->plan >= d->act_plan || nm->npend >= (int)RV_ARRAY_SIZE(nm->pend))
		return false;
	struct pending *p = &nm->pend[nm->npend++];
	memset(p, 0, sizeof(*p));
	snprintf(p->name, sizeof(p->name), "%s", n->name);
	bool own = false;
	p->res = node_res(d, g, n, &own);
	if (!g->has_resources && !own)
		p->res = n->res;
	p->replace = a->kind == RV_SCALING_REPLACE;
	p->plan = d->act_plan;
	/* asked once per plan, also when this view is taken again before the
	 * node exited */
	state_lock(m, "plan_relaunch");
	struct master_node *t = nodetable_find(m, n->name);
	if (t && t->plan < d->act_plan)
		t->plan = d->act_plan;
	state_unlock(m);
	rv_log_info(p->replace ? "node to be replaced" : "node to be migrated",
		    "node=%s instance=%s plan=%" PRId64 " memory_mb=%" PRId64 " cpu=%g", n->name,
		    n->instance, d->act_plan, p->res.memory_mb, p->res.cpu);
	if (sched_remove(nm->sched, n->instance, (int)m->cfg.node_stop_grace_ms) < 0) {
		*p = nm->pend[--nm->npend];
		return false;
	}
	return true;
}

static void reconcile(struct nodemgr *nm)
{
	struct master *m = nm->m;
	if (nm->exit_at)
		return;
	struct table_view v;
	if (table_copy(m, &v) < 0)
		return;
	struct master_node *copy = v.nodes;
	int nn = v.nn;
	nm->version = v.d.version;
	for (int r = 0; r < RV_ROLE_COUNT; r++) {
		const char *role = rv_role_name((enum rv_role)r);
		const struct master_group *g = &v.d.groups[r];
		struct sched_resources res = group_res(g);
		/* fewer: the highest ranks go; new limits: resize or relaunch */
		for (int i = 0; i < nn; i++) {
			struct master_node *n = &copy[i];
			bool live = n->state == MASTER_NODE_LAUNCHED ||
				    n->state == MASTER_NODE_RUNNING;
			if (strcmp(n->role, role) != 0)
				continue;
			if (n->rank >= g->count) {
				struct pending *p = pending_find(nm, n->name);
				if (p)
					*p = nm->pend[--nm->npend];
				rv_log_info("node removed", "node=%s instance=%s count=%d", n->name,
					    n->instance, g->count);
				if (!live || sched_remove(nm->sched, n->instance,
							  (int)m->cfg.node_stop_grace_ms) < 0) {
					cJSON *doc = cJSON_CreateObject();
					cJSON_AddStringToObject(doc, "name", n->name);
					cJSON_AddStringToObject(doc, "instance", n->instance);
					cJSON_AddBoolToObject(doc, "removed", true);
					journal_doc(m, MASTER_OP_NODE_ENDED, doc);
					nodes_forget(nm->nodes, n->name);
				}
				continue;
			}
			if (!live || pending_find(nm, n->name))
				continue;
			if (plan_relaunch(nm, &v.d, g, n))
				continue;
			bool own = false;
			struct sched_resources want = node_res(&v.d, g, n, &own);
			if ((!g->has_resources && !own) ||
			    (n->res.cpu == want.cpu && n->res.memory_mb == want.memory_mb &&
			     n->res.gpu == want.gpu))
				continue;
			res = want;
			if (shape_cap(nm, n->role, &res)) {
				if (n->res.cpu == res.cpu && n->res.memory_mb == res.memory_mb &&
				    n->res.gpu == res.gpu)
					continue; /* already at the cap */
				shape_said(n->name, &want, &res);
			}
			struct rv_err err = { 0 };
			int rc = sched_resize(nm->sched, n->instance, &res, &err);
			rv_log_info("node resized", "node=%s memory_mb=%" PRId64 " cpu=%g rc=%d",
				    n->name, res.memory_mb, res.cpu, rc);
			if (rc == 0) {
				nodes_set_resources(nm->nodes, n->name, &res);
				state_lock(m, "reconcile");
				struct master_node *t = nodetable_find(m, n->name);
				if (t)
					t->res = res;
				state_unlock(m);
			} else if ((rc == -EOPNOTSUPP || rc == -EBUSY) &&
				   nm->npend < (int)RV_ARRAY_SIZE(nm->pend)) {
				struct pending *p = &nm->pend[nm->npend++];
				snprintf(p->name, sizeof(p->name), "%s", n->name);
				p->res = res;
				sched_remove(nm->sched, n->instance,
					     (int)m->cfg.node_stop_grace_ms);
			}
		}
		/* more: every missing rank below count */
		for (int rank = 0; rank < g->count; rank++) {
			char base[SCHED_NAME_MAX];
			snprintf(base, sizeof(base), "%s-%d", role, rank);
			struct nodes_info ni;
			if (nodes_get(nm->nodes, base, &ni) == 0)
				continue;
			if (nodes_add(nm->nodes, base, role, rank, "", &res) < 0 ||
			    nodes_get(nm->nodes, base, &ni) < 0)
				continue;
			launch(nm, base, &ni);
		}
	}
	free(copy);
}

/* Can a restarted master take node n back?  A process by its pid and start
 * time, a pod by its name, a Slurm job by its id or, when the master died
 * before it journaled the id, by its name. */
static bool restore_adoptable(const struct nodemgr *nm, const struct master_node *n)
{
	bool live = n->state == MASTER_NODE_LAUNCHED || n->state == MASTER_NODE_RUNNING;
	if (nm->k8s)
		return live;
	if (nm->slurm)
		return nm->detach && live && (n->state == MASTER_NODE_LAUNCHED || n->pid > 0);
	return nm->detach && n->state == MASTER_NODE_RUNNING && n->pid > 0 && n->start_ticks > 0;
}

/* After a restart: the journal's charged hosts go back into the policy, so
 * no relaunch goes to a host that went bad before it. */
static void restore_hosts(struct nodemgr *nm)
{
	struct master *m = nm->m;
	struct nodes_host h[NODES_MAX_HOSTS];
	state_lock(m, "restore_hosts");
	int n = m->nhosts;
	memcpy(h, m->hosts, sizeof(h[0]) * (size_t)n);
	state_unlock(m);
	for (int i = 0; i < n; i++) {
		nodes_host_restore(nm->nodes, h[i].name, h[i].crashes, h[i].bad);
		rv_log_info("charged host restored", "host=%s crashes=%d bad=%d", h[i].name,
			    h[i].crashes, (int)nodes_host_bad(nm->nodes, h[i].name));
	}
}

/* After a restart: the journal's nodes go back into the policy; those that
 * were live are gone (they died with the master) and start again with the
 * same rank, not counted as crashes. */
static void restore(struct nodemgr *nm)
{
	struct master *m = nm->m;
	struct table_view v;
	if (table_copy(m, &v) < 0)
		return;
	struct master_node *copy = v.nodes;
	int nn = v.nn;
	enum master_job_state js = v.js;
	for (int i = 0; i < nn; i++) {
		const struct master_node *n = &copy[i];
		if (nodes_add(nm->nodes, n->name, n->role, n->rank, n->host, &n->res) < 0)
			continue;
		nodes_restore(nm->nodes, n->name, n->attempt, n->restarts, n->ooms,
			      n->state == MASTER_NODE_SUCCEEDED, n->left);
	}
	restore_hosts(nm);
	if (js != MASTER_JOB_RUNNING) {
		char q[600];
		rv_log_info("job already finished", "state=%s reason=%s",
			    nodetable_job_state_name(js), rv_log_q(q, sizeof(q), m->job_reason));
		nm->exit_at = rv_mono_ms() + m->cfg.job_linger_s * 1000;
		free(copy);
		return;
	}
	for (int i = 0; i < nn; i++) {
		const struct master_node *n = &copy[i];
		struct nodes_action act;
		struct nodes_info ni;
		if (n->state == MASTER_NODE_SUCCEEDED || n->state == MASTER_NODE_FAILED)
			continue;
		bool adoptable = restore_adoptable(nm, n);
		if (adoptable && nodes_get(nm->nodes, n->name, &ni) == 0) {
			struct launch_spec ls;
			struct rv_err err = { 0 };
			launch_spec_fill(nm, n->name, &ni, &ni.res, &ls);
			int rc = sched_adopt(nm->sched, &ls.sp, n->pid, n->start_ticks, &err);
			char q[600];
			rv_log_info("node adopted after a master restart",
				    "node=%s instance=%s pid=%d rc=%d reason=%s", n->name,
				    n->instance, n->pid, rc, rv_log_q(q, sizeof(q), err.msg));
			if (rc == 0)
				continue;
		}
		node_leave(m, n->name); /* it is gone: its shards go back now */
		if (nodes_relaunch(nm->nodes, n->name, NULL, &act) == 0 &&
		    nodes_get(nm->nodes, n->name, &ni) == 0) {
			rv_log_info("node relaunched after a master restart",
				    "node=%s was=%s instance=%s", n->name, n->instance, ni.name);
			launch(nm, n->name, &ni);
		}
	}
	free(copy);
}

static void sample_usage(struct nodemgr *nm)
{
	struct master *m = nm->m;
	state_lock(m, "sample_usage");
	int nn = m->nnodes;
	char(*names)[SCHED_NAME_MAX] = malloc(SCHED_NAME_MAX * (size_t)(nn ? nn : 1));
	int k = 0;
	for (int i = 0; names && i < nn; i++)
		if (m->nodes[i].state == MASTER_NODE_RUNNING)
			memcpy(names[k++], m->nodes[i].instance, SCHED_NAME_MAX);
	state_unlock(m);
	for (int i = 0; i < k; i++) {
		struct sched_usage u;
		if (sched_usage(nm->sched, names[i], &u) < 0)
			continue;
		state_lock(m, "sample_usage");
		for (int j = 0; j < m->nnodes; j++)
			if (!strcmp(m->nodes[j].instance, names[i])) {
				m->nodes[j].usage = u;
				m->nodes[j].has_usage = true;
				m->nodes[j].usage_ms = rv_now_ms();
			}
		state_unlock(m);
	}
	free(names);
}

static void drain(struct nodemgr *nm)
{
	struct sched_event ev;
	while (sched_next_event(nm->sched, &ev) == 1)
		on_event(nm, &ev);
}

/* The master stops: SIGTERM to every node, SIGKILL after the grace. */
static void shutdown_nodes(struct nodemgr *nm)
{
	struct master *m = nm->m;
	remove_all(nm);
	int64_t until = rv_mono_ms() + m->cfg.node_stop_grace_ms + 2000;
	for (;;) {
		int live = 0;
		state_lock(m, "shutdown_nodes");
		for (int i = 0; i < m->nnodes; i++)
			live += m->nodes[i].state == MASTER_NODE_RUNNING ||
				m->nodes[i].state == MASTER_NODE_LAUNCHED;
		state_unlock(m);
		if (live == 0 || rv_mono_ms() >= until)
			break;
		struct pollfd p = { .fd = sched_fd(nm->sched), .events = POLLIN };
		poll(&p, 1, 100);
		struct sched_event ev;
		while (sched_next_event(nm->sched, &ev) == 1) {
			if (ev.type == SCHED_EV_STARTED)
				continue;
			/* not journaled: a restart relaunches them */
			state_lock(m, "shutdown_nodes");
			for (int i = 0; i < m->nnodes; i++)
				if (!strcmp(m->nodes[i].instance, ev.name))
					m->nodes[i].state = MASTER_NODE_EXITED;
			state_unlock(m);
		}
	}
}

static void *nodemgr_main(void *arg)
{
	struct nodemgr *nm = arg;
	struct master *m = nm->m;
	restore(nm);
	reconcile(nm);
	check_end(nm);
	nm->next_usage = rv_mono_ms() + m->cfg.node_usage_interval_ms;
	while (!atomic_load(&nm->stop)) {
		int64_t now = rv_mono_ms();
		int64_t wake = nm->next_usage;
		if (nm->exit_at && !nm->exit_sent && nm->exit_at < wake)
			wake = nm->exit_at;
		struct pollfd p[2] = { { .fd = sched_fd(nm->sched), .events = POLLIN },
				       { .fd = nm->efd, .events = POLLIN } };
		poll(p, 2, wake > now ? (int)(wake - now) : 0);
		if (p[1].revents & POLLIN) {
			uint64_t v;
			if (read(nm->efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
				break;
		}
		if (atomic_load(&nm->stop))
			break;
		drain(nm);
		state_lock(m, "nodemgr_main");
		bool changed = m->desired.version != nm->version;
		state_unlock(m);
		if (changed)
			reconcile(nm);
		now = rv_mono_ms();
		if (now >= nm->next_usage) {
			sample_usage(nm);
			nm->next_usage = now + m->cfg.node_usage_interval_ms;
		}
		if (nm->exit_at && !nm->exit_sent && now >= nm->exit_at) {
			nm->exit_sent = true;
			rv_log_info("master exits: the job ended", "state=%s",
				    nodetable_job_state_name(m->job_state));
			kill(getpid(), SIGTERM); /* main's sigwait stops the daemon */
		}
	}
	shutdown_nodes(nm);
	return NULL;
}

static int64_t total_memory_mb(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
	return pages > 0 && size > 0 ? (int64_t)pages * size / (1024 * 1024) : 1 << 20;
}

/* The backend's largest node (kept in m for the plans) and what the OOM
 * policy may ask: at most that node's memory, else this machine's. */
static void limits_init(struct nodemgr *nm)
{
	rv_alg_params_default(&nm->alg.p);
	nm->alg.lim.max_memory_mb = total_memory_mb();
	if (sched_shape(nm->sched, &nm->shape) == 0 && nm->shape.memory_mb > 0)
		nm->alg.lim.max_memory_mb = nm->shape.memory_mb;
	nm->alg.lim.free_memory_mb = -1;
	nm->alg.lim.free_cpu = -1;
	state_lock(nm->m, "limits_init");
	nm->m->node_shape = nm->shape;
	state_unlock(nm->m);
}

static void nodemgr_free(struct nodemgr *nm)
{
	if (!nm)
		return;
	sched_free(nm->sched);
	nodes_free(nm->nodes);
	if (nm->efd >= 0)
		close(nm->efd);
	free(nm);
}

/* The k8s backend for m's job: each role's pod template, the k8s.* keys. */
static struct sched *k8s_new(struct master *m, struct rv_err *err)
{
	const struct master_cfg *c = &m->cfg;
	struct sched_k8s_opts ko = {
		.job = m->spec.name,
		.namespace_ = c->k8s_namespace[0] ? c->k8s_namespace : m->spec.namespace_,
		.kubeconfig = c->k8s_kubeconfig,
		.image = c->k8s_image,
		.scheduler_name = c->k8s_scheduler_name,
		.max_pending_ms = c->k8s_max_pending_s * 1000,
		.timeout_ms = (int)c->k8s_timeout_ms,
	};
	for (int r = 0; r < RV_ROLE_COUNT && ko.ntemplates < SCHED_K8S_MAX_TEMPLATES; r++)
		if (m->spec.replicas[r].present && m->spec.replicas[r].template_json) {
			ko.templates[ko.ntemplates].role = rv_role_name((enum rv_role)r);
			ko.templates[ko.ntemplates++].template_json =
				m->spec.replicas[r].template_json;
		}
	return sched_k8s_new(&ko, err);
}

/* The slurm backend from the [slurm] keys; a node pending past the gang
 * wait fails. */
static struct sched *slurm_open(struct nodemgr *nm, struct rv_err *err)
{
	const struct master_cfg *c = &nm->m->cfg;
	struct sched_slurm_opts o = {
		.url = c->slurm_url,
		.token = c->slurm_token,
		.user = c->slurm_user,
		.partition = c->slurm_partition,
		.account = c->slurm_account,
		.job = nm->m->spec.name,
		.workdir = c->slurm_workdir,
		.log_dir = nm->log_dir,
		.poll_ms = (int)c->slurm_poll_ms,
		.timeout_ms = (int)c->slurm_timeout_ms,
		.pend_max_ms = c->max_wait_s * 1000,
	};
	return sched_slurm_new(&o, err);
}

int nodemgr_start(struct master *m, const char *master_addr, struct rv_err *err)
{
	static const enum sched_local_mode modes[] = { SCHED_LOCAL_AUTO, SCHED_LOCAL_CGROUP2,
						       SCHED_LOCAL_CGROUP1, SCHED_LOCAL_RLIMIT,
						       SCHED_LOCAL_NONE };
	static const char *const mode_names[] = { "auto", "cgroup2", "cgroup1", "rlimit", "none" };
	struct nodemgr *nm = calloc(1, sizeof(*nm));
	if (!nm)
		return rv_err_set(err, -ENOMEM, "", "out of memory");
	nm->m = m;
	nm->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (nm->efd < 0) {
		int e = -errno;
		nodemgr_free(nm);
		return rv_err_set(err, e, "", "could not make an eventfd: %s", strerror(-e));
	}
	snprintf(nm->addr, sizeof(nm->addr), "%s", master_addr);
	if (m->cfg.node_log_dir[0])
		snprintf(nm->log_dir, sizeof(nm->log_dir), "%s", m->cfg.node_log_dir);
	else
		snprintf(nm->log_dir, sizeof(nm->log_dir), "%.4000s/nodes", m->cfg.state_dir);
	if (mkdir(nm->log_dir, 0755) < 0 && errno != EEXIST) {
		int e = -errno;
		nodemgr_free(nm);
		return rv_err_set(err, e, "node.log_dir", "could not make \"%s\": %s",
				  m->cfg.node_log_dir[0] ? m->cfg.node_log_dir : "state/nodes",
				  strerror(-e));
	}
	int mi = rv_wire_parse_of(mode_names, RV_ARRAY_SIZE(mode_names), m->cfg.node_limits);
	struct sched_local_opts so = {
		.job = m->spec.name,
		.mode = modes[mi < 0 ? 0 : mi],
		.log_dir = nm->log_dir,
		.detach = m->cfg.node_survive_master != 0,
	};
	nm->k8s = !strcmp(m->cfg.scheduler, "k8s");
	nm->slurm = !strcmp(m->cfg.scheduler, "slurm");
	nm->detach = so.detach || nm->slurm; /* Slurm jobs outlive us anyway */
	nm->sched = nm->k8s     ? k8s_new(m, err)
		    : nm->slurm ? slurm_open(nm, err)
				: sched_local_new(&so, err);
	if (!nm->sched) {
		nodemgr_free(nm);
		return err->code ? err->code : -ENOMEM;
	}
	limits_init(nm);
	struct nodes_conf nc = {
		.host_max_crashes = (int)m->cfg.node_host_max_crashes,
		.max_oom_relaunches = (int)m->cfg.node_max_oom_relaunches,
		.default_restart_count = -1,
		.backend_places = nm->k8s || nm->slurm,
	};
	nm->nodes = m->oom_plan ? nodes_new(&nc, m->oom_plan, m->oom_ctx, err)
				: nodes_new(&nc, nodes_alg_oom_plan, &nm->alg, err);
	if (!nm->nodes) {
		nodemgr_free(nm);
		return err->code ? err->code : -ENOMEM;
	}
	for (int r = 0; r < RV_ROLE_COUNT; r++)
		if (m->spec.replicas[r].present)
			nodes_set_restart_count(nm->nodes, rv_role_name((enum rv_role)r),
						m->spec.replicas[r].restart_count);
	char q[600];
	if (nm->k8s) {
		rv_log_info("node manager started",
			    "scheduler=k8s server=%s namespace=%s resize=%d master_addr=%s",
			    sched_k8s_server(nm->sched), sched_k8s_namespace(nm->sched),
			    (int)sched_k8s_can_resize(nm->sched), nm->addr);
		goto started;
	}
	const char *why = "";
	enum sched_local_mode mode = nm->slurm ? SCHED_LOCAL_NONE
					       : sched_local_mode(nm->sched, &why);
	rv_log_info("node manager started",
		    "scheduler=%s limits=%s log_dir=%s master_addr=%s largest_memory_mb=%" PRId64
		    " largest_cpu=%g why=%s",
		    m->cfg.scheduler,
		    nm->slurm ? sched_slurm_version(nm->sched) : sched_local_mode_name(mode),
		    nm->log_dir, nm->addr, nm->shape.memory_mb, nm->shape.cpu,
		    rv_log_q(q, sizeof(q), why ? why : ""));
started:
	state_lock(m, "nodemgr_start");
	m->nodemgr = nm;
	state_unlock(m);
	if (pthread_create(&nm->thread, NULL, nodemgr_main, nm) != 0) {
		state_lock(m, "nodemgr_start");
		m->nodemgr = NULL;
		state_unlock(m);
		state_quiesce(m);
		nodemgr_free(nm);
		return rv_err_set(err, -EAGAIN, "", "could not start the node thread");
	}
	nm->started = true;
	return 0;
}

/* Any thread; with m->lock held or not (m->nodemgr changes only while
 * the node thread does not run; state_unlock calls this after the unlock,
 * and nodemgr_stop's state_quiesce waits for such calls before the free). */
void nodemgr_wake(struct master *m)
{
	struct nodemgr *nm = m->nodemgr;
	uint64_t one = 1;
	if (nm && write(nm->efd, &one, sizeof(one)) < 0) {
		/* the counter is full: the thread is awake anyway */
	}
}

void nodemgr_stop(struct master *m)
{
	struct nodemgr *nm = m->nodemgr;
	if (!nm)
		return;
	atomic_store(&nm->stop, true);
	nodemgr_wake(m);
	if (nm->started)
		pthread_join(nm->thread, NULL);
	state_lock(m, "nodemgr_stop");
	m->nodemgr = NULL;
	state_unlock(m);
	state_quiesce(m); /* a nodemgr_wake after another unlock may still read nm */
	nodemgr_free(nm);
}
