-- 008_progress_retention: a job's data progress as its master reports it,
-- and the indexes the retention deletes use.
--
-- job_progress holds the newest report per job and dataset (what GET
-- /v1/jobs/{uid} and roverctl status show); job_progress_history keeps the
-- reports over time, at most retention.progress_history rows per job and
-- dataset (the store deletes the oldest beyond that).  A report older than
-- the one held (a resend, reordered batches) does not replace it.

CREATE TABLE job_progress (
    job_id          bigint NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
    dataset         text NOT NULL,
    ts_ms           bigint NOT NULL,
    epoch           integer NOT NULL,
    samples_total   bigint NOT NULL,
    samples_done    bigint NOT NULL,
    shards_total    bigint NOT NULL,   -- 0: not known (a stream)
    shards_done     bigint NOT NULL,
    shards_doing    bigint NOT NULL,
    finished        boolean NOT NULL,
    PRIMARY KEY (job_id, dataset)
);

CREATE TABLE job_progress_history (
    job_id          bigint NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
    dataset         text NOT NULL,
    ts_ms           bigint NOT NULL,
    epoch           integer NOT NULL,
    samples_done    bigint NOT NULL,
    shards_done     bigint NOT NULL,
    shards_doing    bigint NOT NULL,
    PRIMARY KEY (job_id, dataset, ts_ms)
);

-- The retention deletes (the supervisor): ids kept only as long as a
-- resend can come.
CREATE INDEX metrics_batches_created ON metrics_batches (created_at);
