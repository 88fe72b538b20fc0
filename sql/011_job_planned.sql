-- 011_job_planned: the newest sample time the planner has considered moves
-- from jobs.planned_ts_ms to a table of its own, job_planned.
--
-- A planner pass reads in one REPEATABLE READ snapshot and ends by writing
-- this time.  Every metrics batch updates the job's row (last_sample_ms):
-- with both on one row, a batch committed while a pass ran made the pass's
-- write fail (40001, could not serialize access due to concurrent update),
-- and a job whose batches came more often than a pass took was never
-- planned.  Only planner passes write job_planned, one at a time per job
-- (under the job's planner lock), and the metrics ingest never does: the
-- two no longer meet on a row.  A job with no row here has not been
-- planned yet (0).

CREATE TABLE job_planned (
    job_id        bigint PRIMARY KEY REFERENCES jobs(id) ON DELETE CASCADE,
    planned_ts_ms bigint NOT NULL DEFAULT 0
);

INSERT INTO job_planned (job_id, planned_ts_ms)
    SELECT id, planned_ts_ms FROM jobs WHERE planned_ts_ms > 0;

ALTER TABLE jobs DROP COLUMN planned_ts_ms;
