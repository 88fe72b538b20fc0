-- 001_core: jobs, nodes, time series, cluster nodes, scale plans, events.
-- Applied once by rover-brain at start (recorded in rover_schema_version).

CREATE TABLE jobs (
    id               bigserial PRIMARY KEY,
    uid              text NOT NULL UNIQUE,
    namespace        text NOT NULL,
    name             text NOT NULL,
    user_name        text NOT NULL DEFAULT '',
    strategy         text NOT NULL CHECK (strategy IN ('AllreduceStrategy', 'ParameterServerStrategy')),
    optimize_mode    text NOT NULL CHECK (optimize_mode IN ('manual', 'single-job', 'cluster')),
    status           text NOT NULL DEFAULT 'running'
                     CHECK (status IN ('running', 'finished', 'failed')),
    spec             jsonb NOT NULL,
    model_parameters bigint NOT NULL DEFAULT 0,
    batch_size       integer NOT NULL DEFAULT 0,
    dataset_size     bigint NOT NULL DEFAULT 0,
    last_sample_ms   bigint NOT NULL DEFAULT 0,
    -- newest sample time the planner has considered (job time, ms)
    planned_ts_ms    bigint NOT NULL DEFAULT 0,
    created_at       timestamptz NOT NULL DEFAULT now(),
    finished_at      timestamptz
);
-- One live job per name in a namespace; finished jobs stay as history.
CREATE UNIQUE INDEX jobs_live_name ON jobs (namespace, name) WHERE status = 'running';
CREATE INDEX jobs_history ON jobs (strategy, status, finished_at DESC);

CREATE TABLE job_nodes (
    job_id          bigint NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
    name            text NOT NULL,
    role            text NOT NULL,
    rank            integer NOT NULL DEFAULT -1,
    cpu             double precision NOT NULL DEFAULT 0,
    memory_mb       bigint NOT NULL DEFAULT 0,
    gpu             integer NOT NULL DEFAULT 0,
    status          text NOT NULL DEFAULT 'running',
    exit_reason     text NOT NULL DEFAULT '',
    relaunches      integer NOT NULL DEFAULT 0,
    oom_count       integer NOT NULL DEFAULT 0,
    peak_memory_mb  bigint NOT NULL DEFAULT 0,
    peak_cpu        double precision NOT NULL DEFAULT 0,
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_id, name)
);

-- Job speed: one row per speed sample, keyed by job time (ms).
CREATE TABLE job_speed (
    job_id   bigint NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
    ts_ms    bigint NOT NULL,
    speed    double precision NOT NULL,
    step     bigint NOT NULL,
    workers  integer NOT NULL,
    ps       integer NOT NULL
);
CREATE INDEX job_speed_job_ts ON job_speed (job_id, ts_ms);

-- Node usage: one row per node sample.
CREATE TABLE node_usage (
    job_id          bigint NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
    ts_ms           bigint NOT NULL,
    node            text NOT NULL,
    role            text NOT NULL,
    rank            integer NOT NULL,
    cpu             double precision NOT NULL,
    memory_mb       bigint NOT NULL,
    cpu_limit       double precision NOT NULL,
    memory_limit_mb bigint NOT NULL,
    step_time       double precision NOT NULL
);
CREATE INDEX node_usage_job_ts ON node_usage (job_id, ts_ms);

CREATE TABLE cluster_nodes (
    name            text PRIMARY KEY,
    ts_ms           bigint NOT NULL,
    cpu             double precision NOT NULL,
    memory_mb       bigint NOT NULL,
    gpu             integer NOT NULL,
    cpu_used        double precision NOT NULL,
    memory_used_mb  bigint NOT NULL,
    ready           boolean NOT NULL,
    updated_at      timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE scale_plans (
    id              bigserial PRIMARY KEY,
    job_id          bigint NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
    stage           text NOT NULL CHECK (stage IN ('create', 'running', 'oom')),
    algorithm       text NOT NULL,
    reason          text NOT NULL,
    plan            jsonb NOT NULL,
    predicted_speed double precision NOT NULL DEFAULT 0,
    based_on_ts_ms  bigint NOT NULL DEFAULT 0,
    created_at      timestamptz NOT NULL DEFAULT now(),
    applied_at      timestamptz,
    applied_ts_ms   bigint,
    -- outcome: pending until enough samples after the plan was applied
    outcome         text NOT NULL DEFAULT 'pending'
                    CHECK (outcome IN ('pending', 'better', 'neutral', 'worse', 'unknown')),
    speed_before    double precision,
    speed_after     double precision,
    reverts_plan_id bigint REFERENCES scale_plans(id)
);
CREATE INDEX scale_plans_job_stage ON scale_plans (job_id, stage, id DESC);

CREATE TABLE events (
    id              bigserial PRIMARY KEY,
    job_id          bigint NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
    ts_ms           bigint NOT NULL,
    type            text NOT NULL,
    node            text NOT NULL DEFAULT '',
    role            text NOT NULL DEFAULT '',
    rank            integer NOT NULL DEFAULT -1,
    exit_code       integer NOT NULL DEFAULT -1,
    reason          text NOT NULL DEFAULT '',
    memory_mb       bigint NOT NULL DEFAULT 0,
    peak_memory_mb  bigint NOT NULL DEFAULT 0,
    plan_id         bigint,
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX events_job ON events (job_id, id);
CREATE INDEX events_type ON events (type, created_at);
