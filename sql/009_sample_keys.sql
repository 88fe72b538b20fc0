-- 009_sample_keys: the two time-series tables lose their foreign key to
-- jobs, and keep what it gave them by other means.
--
-- A foreign key checks every inserted row with a query of its own (an
-- after-row trigger): for job_speed and node_usage that was a fifth of the
-- database's time spent per metrics batch, for a question the brain has
-- already answered.  The brain stores samples only in a transaction that
-- first calls jobs_keep with their jobs (store_samples_build): it locks the
-- jobs' rows against deletion until the transaction ends, once per job
-- rather than once per sample, and fails like the foreign key would when
-- one is gone.  Deleting jobs still deletes their samples: one
-- statement-level trigger, one DELETE per table for all the deleted jobs.

ALTER TABLE job_speed DROP CONSTRAINT job_speed_job_id_fkey;
ALTER TABLE node_usage DROP CONSTRAINT node_usage_job_id_fkey;

CREATE FUNCTION jobs_delete_samples() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM job_speed WHERE job_id IN (SELECT id FROM gone);
    DELETE FROM node_usage WHERE job_id IN (SELECT id FROM gone);
    RETURN NULL;
END
$$;

CREATE TRIGGER jobs_delete_samples AFTER DELETE ON jobs
    REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT EXECUTE FUNCTION jobs_delete_samples();

-- Lock the jobs against deletion (key share: neither another transaction's
-- key share lock nor an update of the row waits for it); 23503 when one of
-- them does not exist.
CREATE FUNCTION jobs_keep(ids bigint[]) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    n bigint;
BEGIN
    PERFORM 1 FROM jobs WHERE id = ANY (ids) FOR KEY SHARE;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n <> cardinality(ids) THEN
        RAISE EXCEPTION 'a job of these samples does not exist'
            USING ERRCODE = 'foreign_key_violation';
    END IF;
END
$$;
