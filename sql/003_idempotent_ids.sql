-- 003_idempotent_ids: client-chosen ids on metrics batches and events, so a
-- report resent after a timeout or a brain restart is stored once.

-- One row per metrics batch that came with a batch_id: a second batch with
-- the same id for the job is acknowledged with the first one's count and
-- not stored.
CREATE TABLE metrics_batches (
    job_id      bigint NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
    batch_id    text NOT NULL,
    samples     integer NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_id, batch_id)
);

-- events.event_id: the sender's id, NULL for senders that give none.
-- events.result_plan_id: the plan the event made (an OOM's oom plan), so a
-- resent event gets the same plan id back.
ALTER TABLE events ADD COLUMN event_id text;
ALTER TABLE events ADD COLUMN result_plan_id bigint REFERENCES scale_plans(id) ON DELETE SET NULL;
CREATE UNIQUE INDEX events_job_event_id ON events (job_id, event_id) WHERE event_id IS NOT NULL;
