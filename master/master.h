/*
 * master.h: rover-master's one state struct and the functions the daemon's
 * files share.
 *
 * Threads: libmicrohttpd's connection threads run the handlers (api.c); the
 * timer thread (state.c) applies the time-driven operations; main waits for
 * SIGINT/SIGTERM.  One mutex, the state lock, guards everything under
 * "job state" below: every change is an operation applied by state_apply
 * under it and journaled before the lock is dropped; the reply waits for the
 * journal to make it durable (state_sync).  Counters are atomics.
 */
#ifndef MASTER_H
#define MASTER_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "http.h"
#include "journal.h"
#include "json.h"
#include "netcheck.h"
#include "nodes.h"
#include "rdzv.h"
#include "rover_scaling.h"
#include "sched.h"
#include "shard.h"
#include "stream.h"
#include "wire.h"

#define MASTER_USAGE_MAX 1024 /* nodes whose usage reports are kept */

/* The config table's storage (main.c master_opts[]). */
struct master_cfg {
	char listen[128];
	char token[256];
	char token_file[512];
	long long max_body_kb, conn_timeout_s, max_conns, threads;
	char job[PATH_MAX];
	char job_uid[128]; /* "" not known: the state folder is not checked */
	char state_dir[PATH_MAX];
	char nnodes[32];
	long long node_unit, last_call_ms, max_wait_s, heartbeat_timeout_ms, world_wait_max_ms;
	long long doing_timeout_ms, max_todo_ranges, max_in_flight, shard_seed;
	long long commit_delay_us, snapshot_every, sync_timeout_ms, prewrite_kb;
	long long netcheck_timeout_ms, netcheck_straggler_wait_min_ms;
	double netcheck_straggler_ratio, netcheck_straggler_wait;
	int nosync;
	long long tick_ms;
	char log_level[16];
	/* brain link and plans (plans.c) */
	char brain_url[256];
	char brain_token[256];
	char brain_token_file[512];
	long long brain_connect_timeout_ms, brain_timeout_ms, brain_max_queue, brain_max_queue_kb;
	long long brain_batch_max, brain_batch_delay_ms, brain_poll_wait_s, brain_backoff_ms;
	long long brain_backoff_max_ms, brain_stop_ms, brain_progress_interval_ms;
	long long plan_interval_ms, plan_min_samples, plan_oom_wait_ms;
	/* node manager (nodemgr.c) */
	char scheduler[16], node_limits[16];
	char node_log_dir[PATH_MAX];
	long long node_stop_grace_ms, node_usage_interval_ms, node_host_max_crashes,
		node_max_oom_relaunches, job_linger_s;
	int node_survive_master;
	/* the k8s scheduler backend (sched_k8s.c) */
	char k8s_namespace[64], k8s_kubeconfig[PATH_MAX], k8s_image[256];
	char k8s_scheduler_name[128], k8s_master_addr[160];
	long long k8s_max_pending_s, k8s_timeout_ms;
	/* the slurm scheduler (sched_slurm.c) */
	char slurm_url[PATH_MAX], slurm_token[2048], slurm_user[64], slurm_partition[64];
	char slurm_account[64], slurm_workdir[PATH_MAX];
	long long slurm_poll_ms, slurm_timeout_ms;
};

/* The job's end as the node manager sees it (nodemgr.c), journaled with
 * the node table. */
enum master_job_state { MASTER_JOB_RUNNING = 0, MASTER_JOB_SUCCEEDED, MASTER_JOB_FAILED };

struct master;
struct master_node; /* the node table's entries (nodemgr.h) */
struct rv_buf;

/* A worker that took shards: its node (for a node's death) and its last
 * shard request (a retried request gets the same answer). */
struct master_worker {
	int64_t id; /* < 0: free slot */
	char node[RV_NAME_MAX];
	int64_t last_req; /* 0: none */
	struct rv_shard_task last_task;
};

/* A heartbeat applied but not journaled yet (state.c): its record goes in
 * before the next record of any other kind, the only ones that can read
 * what it changed (a node's last heartbeat). */
struct master_heard {
	char node[RV_NAME_MAX];
	int64_t now_ms;
};

/* A time histogram for /metrics, any thread (atomics): the buckets are
 * journal_sync_le_ms's, the last one unbounded. */
struct master_histo {
	atomic_uint_least64_t bucket[JOURNAL_SYNC_BUCKETS + 1];
	atomic_uint_least64_t sum_us, max_us;
};

/* The state lock's holds by holder (state_lock's who), for /metrics: at
 * most MASTER_HOLDERS names, the rest counted under the last. */
#define MASTER_HOLDERS 32
struct master_holder {
	const char *who; /* a string literal; NULL: free slot */
	uint64_t n, sum_us, max_us;
};

/* Operation types: the journal record types (0 is the snapshot). */
enum master_op_type {
	MASTER_OP_JOIN = 1,
	MASTER_OP_LEAVE,
	MASTER_OP_HEARTBEAT,
	MASTER_OP_TICK,
	MASTER_OP_NEXT,
	MASTER_OP_DONE,
	MASTER_OP_CKPT_REPORT,
	MASTER_OP_CKPT_IMPORT, /* payload: the checkpoint document */
	MASTER_OP_STEP,
	MASTER_OP_GRACE, /* a restarted master serves again: every node counts as heard */
	/* Node manager (nodemgr.c): a node instance launched / ended. */
	MASTER_OP_NODE_LAUNCHED,
	MASTER_OP_NODE_ENDED,
	/* Brain link: the job's uid at the brain; a plan made the desired state. */
	MASTER_OP_BRAIN_UID,
	MASTER_OP_PLAN,
	/* Streaming datasets: a producer told a partition's end (ds: the spec's
	 * dataset, node: the partition, id: the end offset; the offsets
	 * themselves are committed by DONE); network check results. */
	MASTER_OP_OFFSET_COMMIT,
	MASTER_OP_NETCHECK, /* consumed: MASTER_NETCHECK_START or _REPORT */
	/* A node's agent saw every worker finish: a heartbeat, and its silence
	 * from now on is no death (rdzv_done) */
	MASTER_OP_NODE_FINISHED,
};

/* MASTER_OP_LEAVE with id MASTER_LEAVE_LOST: the node's agent is gone (its
 * process ended, its world watch closed), not one that reported its
 * workers' failure and joins again at once (rdzv_lost). */
enum { MASTER_LEAVE_LOST = 1 };

/* MASTER_OP_NETCHECK: START (node: the joining node; the members are the
 * current world) or REPORT (node, req: check id, step: round, id: ok,
 * speed: time_s). */
enum { MASTER_NETCHECK_START = 1, MASTER_NETCHECK_REPORT = 2 };

/*
 * What the job should run, per role: from the spec at start, then from each
 * applied plan.  Under the state lock; journaled (MASTER_OP_PLAN).  The node
 * manager reconciles the live nodes with it (launch, remove, resize or
 * relaunch with new resources) whenever version changes.
 */
struct master_group {
	int count;          /* nodes wanted; 0: none of this role */
	bool has_resources; /* false: no limits known (the spec omitted them) */
	double cpu;         /* cores, 0: no limit */
	int64_t memory_mb;  /* 0: no limit */
	int gpu;
};

struct master_desired {
	struct master_group groups[RV_ROLE_COUNT]; /* indexed by enum rv_role */
	int64_t plan_id;                           /* the last plan applied, 0: the spec's */
	int64_t version;                           /* bumped by every change */
	/* nodes with resources of their own (a migrated PS), kept until a plan
	 * changes their role's resources or drops their rank */
	struct rv_plan_node own[RV_MAX_PLAN_NODES];
	int nown;
	/* the nodes plan act_plan relaunches (replaced stragglers, migrations):
	 * a node whose table entry says an older plan is relaunched once */
	struct rv_scaling_action act[2 * RV_MAX_PLAN_NODES];
	int nact;
	int64_t act_plan;
};

/* One operation with every input it needs: what the journal stores (as these
 * bytes; a record is read back by the same binary) and what replay applies. */
struct master_op {
	int64_t now_ms;
	int64_t worker, id, req, step, consumed;
	double speed;
	double compute_time; /* STEP: the node's own work in the step, s (0: unknown) */
	int32_t ds, local_world_size;
	int32_t world_size; /* CKPT_REPORT: ranks of the world training then (0: none) */
	char node[RV_NAME_MAX];
	char addr[RV_ADDR_MAX];
};

/* What applying an operation answered, for the reply. */
struct master_result {
	int rc;
	struct rv_err err; /* detail when rc < 0 */
	int64_t round;
	struct rv_shard_task task;
	bool counted;
};

/*
 * What an applied operation did that the services above the job state act
 * on (the planner, the node manager, the API's long-polls).  apply records
 * it and calls nobody; state_apply hands it to the services (m->svc) once
 * the operation is journaled: the planner and the parked long-polls under
 * the lock, the wakes (desired_changed, m->changed) after state_unlock.
 */
struct master_effects {
	bool changed;              /* the state moved: long-polls look again */
	bool desired;              /* m->desired.version moved: reconcile the nodes */
	char (*lost)[RV_NAME_MAX]; /* nodes the timer declared dead (nlost; heap) */
	int nlost, caplost;
};

/* A service's part of the snapshot's extra document: save appends
 * `,"name":{...}`, load reads it back from the whole document (its member
 * may be absent: an older snapshot), release frees what load or the
 * service's operations kept in struct master. */
struct master_part {
	int (*save)(const struct master *m, struct rv_buf *out);
	int (*load)(struct master *m, const cJSON *extra, struct rv_err *err);
	void (*release)(struct master *m);
};
enum { MASTER_PART_PLANS, MASTER_PART_NODES, MASTER_NPARTS }; /* the snapshot's order */

/*
 * The services above the job state, as they registered (plans_init,
 * nodemgr_register, master_api_start; NULL: none), so that state.c calls
 * nobody above it.  Every entry runs under m->lock (the services read the
 * state they react to, and state_apply's callers hold the lock) but
 * desired_changed, which runs after state_unlock (or before a state_wait)
 * and must not take the lock nor wait.  The
 * planner's own operation (apply_plan) and its snapshot part are needed by
 * the journal's replay: registered before state_open (plans_init); the
 * node table's part is the state's own (nodetable.c, set by state_open);
 * the rest may come later, under m->lock (the timer thread reads them).
 */
struct master_services {
	/* MASTER_OP_PLAN's document into m->desired: 1 changed, 0 not, or a
	 * negative errno with err */
	int (*apply_plan)(struct master *m, const void *doc, size_t len, struct rv_err *err);
	struct master_part parts[MASTER_NPARTS];
	/* an operation was journaled (not on replay) */
	void (*after_op)(struct master *m, int type, const struct master_op *op);
	/* the timer declared node dead for silence */
	void (*node_lost)(struct master *m, const char *node);
	/* m->desired.version moved: after the unlock, any thread (a stopping
	 * service calls state_quiesce before freeing what this reaches) */
	void (*desired_changed)(struct master *m);
	/* the timer's and every change's look at parked world long-polls, the
	 * earliest of their deadlines, the world watches found closed
	 * (master_world_poll, master_world_deadline, master_world_lost) */
	void (*world_poll)(struct master *m);
	int64_t (*world_deadline)(const struct master *m);
	int (*world_lost)(struct master *m, char (*lost)[RV_NAME_MAX], int max);
};

struct master {
	struct master_cfg cfg;
	struct rv_job_spec spec;
	int min_nodes, max_nodes;
	struct master_services svc; /* the services' entries: see there */

	/* job state, under lock */
	pthread_mutex_t lock;
	pthread_cond_t changed;    /* broadcast after each change: world long-polls */
	pthread_cond_t timer_wake; /* the timer thread's sleep */
	struct rdzv *rdzv;
	struct shard_mgr *shards;      /* batch datasets; NULL when every one streams */
	struct stream_mgr *streams;    /* streaming datasets (maybe none) */
	int ds_index[RV_MAX_DATASETS]; /* spec dataset -> its index in shards or streams */
	struct netcheck_run netcheck;  /* the last network check */
	/* Under lock: each node's last usage report (POST /v1/usage), at most
	 * MASTER_USAGE_MAX nodes; not journaled (the next report replaces it). */
	struct rv_node_usage *agent_usage;
	int nagent_usage;
	struct master_worker *workers; /* open addressing by id, cap a power of two */
	int nworkers, capworkers;
	int64_t step, step_ts_ms;
	double speed;
	struct master_desired desired;
	char brain_uid[RV_NAME_MAX]; /* the job at the brain, "" until registered */
	struct rv_plan_state plan;   /* the newest plan handed over (plan.id 0: none) */
	struct plans *plans;         /* the brain link: set while it runs (plans.c) */
	int64_t since_snapshot;      /* records since the last snapshot */
	struct master_heard *heard;  /* heartbeats not journaled yet (nheard) */
	int nheard, capheard;
	int64_t rdzv_seq;            /* the last record that changed a heartbeat's reply */
	int64_t last_now_ms;         /* operation time never goes back */
	int64_t wall0_ms, mono0_ms;  /* state_now's anchor: both clocks at open */
	bool stopping;

	struct journal *journal;
	pthread_t timer;
	bool timer_started;
	struct rv_http_server *http;

	/* Replies waiting for their records to be durable (pooled server):
	 * the completer syncs the journal once for all and answers them. */
	pthread_mutex_t durable_mu;
	pthread_cond_t durable_wake;
	struct durable_wait *durable_head, **durable_tail;
	bool durable_stop;
	pthread_t completer;
	bool completer_started;
	/* World long-polls parked on a pooled server, under lock. */
	struct world_wait *world_waits;

	/* Node manager (nodemgr.c).  Under lock: the job's nodes as journaled
	 * (MASTER_OP_NODE_LAUNCHED/ENDED, applied by nodetable.c) with their
	 * last usage, and the job's end.  oom_plan/oom_ctx: the OOM plan (nodes.h), nodes_alg_oom_plan
	 * when NULL; the brain link sets its own before nodemgr_start.
	 * node_event (may be NULL): told every scheduler event and the action
	 * taken, from the node thread, without the lock. */
	struct nodemgr *nodemgr;
	/* the backend's largest node (sched_shape), 0s: not known; set once
	 * by nodemgr_start before the plans start */
	struct sched_resources node_shape;
	struct master_node *nodes;
	int nnodes, capnodes;
	enum master_job_state job_state;
	char job_reason[NODES_REASON_MAX];
	/* the hosts crashes were charged to (journaled with node changes), so a
	 * restarted master keeps off the bad ones */
	struct nodes_host hosts[NODES_MAX_HOSTS];
	int nhosts;
	/* the nodes of network check nc_check whose host was charged for its
	 * verdict (journaled with the hosts), so a restarted master does not
	 * charge the host of a relaunch that fails again */
	int64_t nc_check;
	char nc_named[64][SCHED_NAME_MAX];
	int nc_nnamed;
	bool desired_restored; /* desired came from the journal or snapshot */
	nodes_oom_plan_fn oom_plan;
	void *oom_ctx;
	void (*node_event)(void *ctx, const struct sched_event *ev, const struct nodes_action *act);
	void *node_event_ctx;

	atomic_uint_least64_t ops_applied, ops_replayed, shards_handed, shards_counted, nodes_dead,
		tasks_requeued, snapshots, sync_errors;
	/* Waits for the state lock (heartbeats, status), the timer's turns
	 * late (the lock, or the master not running) and the master's own
	 * stalls (stall_grace), for /metrics. */
	struct master_histo lock_wait, timer_late;
	/* Each snapshot's hold of the state lock (serialising the state). */
	struct master_histo snapshot_hold;
	/* The state lock's holder, from state_lock to state_unlock (or a wait
	 * on a condition, which releases it): its name (read by a waiter to
	 * name who it waited for, hence atomic) and since when.  Every hold is
	 * counted in lock_hold and per holder (holders, under lock); one of
	 * STATE_LOCK_SLOW_MS or more is logged with its holder's name. */
	_Atomic(const char *) lock_who;
	int64_t lock_t0_us;
	struct master_histo lock_hold;
	struct master_holder holders[MASTER_HOLDERS];
	atomic_uint_least64_t lock_holds_long;
	/* Under lock: effects left for after the unlock (effects_deliver):
	 * m->changed to broadcast, desired_changed to call; fx_out counts the
	 * unlocks delivering them now (state_quiesce). */
	bool fx_changed, fx_desired;
	atomic_int fx_out;
	bool snap_busy; /* under lock: a snapshot is being written */
	/* Tests only: journal_opts.snapshot_step, set before state_open. */
	void (*snapshot_step)(void *ctx, int step);
	void *snapshot_step_ctx;
	atomic_uint_least64_t stalls, stall_ms_max;
};

/* state.c */
/* Build the rendezvous and the shard manager from the config and spec, open
 * the journal in cfg.state_dir and replay it, then start the timer thread.
 * 0 or a negative errno with err. */
int state_open(struct master *m, struct rv_err *err);
/* Stop the timer thread, close the journal, free the modules.  Idempotent. */
void state_close(struct master *m);
/* Current time for a new operation, under the lock: never before the last. */
int64_t state_now(struct master *m);
/* Apply op of type under the lock; journal it when it changed the state.
 * *seq (may be NULL) gets the record's sequence number (0: nothing
 * journaled).  The services are told what it did (struct master_effects):
 * some now, the wakes at the caller's state_unlock.  Returns the
 * operation's result code (res->rc). */
int state_apply(struct master *m, int type, const struct master_op *op, const void *doc,
		size_t doc_len, struct master_result *res, int64_t *seq);
/* After unlocking: wait until seq is durable; a snapshot when due. */
int state_sync(struct master *m, int64_t seq);
/* What a failed state_sync (rc) tells the client, in err: -ENOSPC when the
 * state folder is full or over quota (the records stay buffered and the
 * next sync writes them once there is room; err names the folder), else
 * -EIO with the cause.  Returns that code. */
int state_sync_err(const struct master *m, int rc, struct rv_err *err);
/* Reply resp (filled by the handler) once every record up to seq (0: every
 * record appended so far) is durable: on a pooled server the reply is
 * deferred to the completer thread, else this waits.  must_sync: a failed
 * sync replaces the reply with state_sync_err's (503 for a full folder, else
 * 500).  Returns 0 (resp is the reply or was
 * deferred). */
int state_reply_durable(struct master *m, struct rv_http_resp *resp, int64_t seq, bool must_sync);
/* A hold of the state lock this long or longer is logged (state_unlock). */
#define STATE_LOCK_SLOW_MS 500
/* Lock the state as who (a string literal naming the holder), timing the
 * wait (m->lock_wait; a wait of a second or more is logged, naming who
 * waited and who held the lock then).  Every m->lock goes through
 * state_lock, state_unlock and state_wait, so the holder is always known. */
void state_lock(struct master *m, const char *who);
/* Unlock the state: the hold is counted under its holder's name
 * (m->lock_hold, m->holders; one of STATE_LOCK_SLOW_MS or more is logged
 * with the name and ms). */
void state_unlock(struct master *m);
/* pthread_cond_timedwait on m->lock (abstime NULL: pthread_cond_wait): the
 * wait releases the lock, so the hold ends before it and a new one of the
 * same holder starts after.  Returns pthread_cond_timedwait's code. */
int state_wait(struct master *m, pthread_cond_t *cond, const struct timespec *abstime);
/* Wait until no unlock is delivering effects (desired_changed) any more:
 * a service that stopped taking them (its entry made a no-op under the
 * lock) calls it before freeing what its entry reached. */
void state_quiesce(struct master *m);
/* The operation type's name (a string literal; "op" when unknown), for a
 * holder of the lock that applies one. */
const char *state_op_name(int type);
/* Copy the per-holder counts out (under the lock: takes it as "metrics");
 * returns how many. */
int state_holders(struct master *m, struct master_holder *out, int max);
/* Count us in h. */
void state_histo_add(struct master_histo *h, int64_t us);
/* Under the lock: the sequence number a heartbeat's reply must be durable
 * up to (the last record that changed the round, its state, the nodes
 * waiting or known); 0 when that is durable already. */
int64_t state_heartbeat_seq(struct master *m);
/* Append the data checkpoint of step to *out (under the lock): the shard
 * module's document, with the streaming datasets' committed offsets under
 * "streams".  0; -ENOENT no report of step; -ERANGE; -ENOMEM. */
int state_ckpt_export(const struct master *m, int64_t step, struct rv_buf *out, struct rv_err *err);
/* Dataset index by name ("" = 0); -ENOENT. */
int state_dataset(const struct master *m, const char *name);

#endif
