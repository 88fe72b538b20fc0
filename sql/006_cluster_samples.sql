-- 006_cluster_samples: the monitor's samples kept as history, stored once.
--
-- cluster_nodes holds each node's newest sample (what capacity is computed
-- from); cluster_node_samples keeps every sample, with pressure and the
-- per-job usage, one row per (node, ts): a monitor that resends a report
-- after a timeout or a brain restart adds nothing twice.

-- One row per report that came with a report_id: a resend is acknowledged
-- and not stored again.
CREATE TABLE cluster_reports (
    report_id   text PRIMARY KEY,
    nodes       integer NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX cluster_reports_created ON cluster_reports (created_at);

CREATE TABLE cluster_node_samples (
    name                text NOT NULL,
    ts_ms               bigint NOT NULL,
    cpu                 double precision NOT NULL,
    memory_mb           bigint NOT NULL,
    gpu                 integer NOT NULL,
    cpu_used            double precision NOT NULL,
    memory_used_mb      bigint NOT NULL,
    ready               boolean NOT NULL,
    cpu_pressure        double precision,  -- PSI some avg10, percent; NULL: not measured
    memory_pressure     double precision,
    io_pressure         double precision,
    gpu_memory_used_mb  bigint,
    jobs                jsonb NOT NULL DEFAULT '[]',  -- [{name, procs, cpu_used, memory_used_mb, throttled}]
    PRIMARY KEY (name, ts_ms)
);
CREATE INDEX cluster_node_samples_ts ON cluster_node_samples (ts_ms);

ALTER TABLE cluster_nodes ADD COLUMN cpu_pressure double precision;
ALTER TABLE cluster_nodes ADD COLUMN memory_pressure double precision;
ALTER TABLE cluster_nodes ADD COLUMN io_pressure double precision;
ALTER TABLE cluster_nodes ADD COLUMN gpu_memory_used_mb bigint;
ALTER TABLE cluster_nodes ADD COLUMN jobs jsonb NOT NULL DEFAULT '[]';
