-- 010_job_end: what a job's nodes and plans say once the job has ended.
--
-- A plan is judged by the planner while its job runs; a job that ends
-- before that (its create plan, a plan applied just before the end) left
-- the plan "pending" for good.  Such a plan is now "unjudged": its outcome
-- was never measured, and never will be.  Nodes the master did not report
-- as ended before the job did (it stops them with the job) take the job's
-- end: "finished" when the job finished, "stopped" when it failed.  The
-- brain does both when it stores the job's end (store_event_insert); this
-- file does it for jobs that ended before it was applied.

ALTER TABLE scale_plans DROP CONSTRAINT scale_plans_outcome_check;
ALTER TABLE scale_plans ADD CONSTRAINT scale_plans_outcome_check
    CHECK (outcome IN ('pending', 'unknown', 'better', 'neutral', 'worse', 'unjudged'));

UPDATE scale_plans p SET outcome = 'unjudged'
FROM jobs j WHERE j.id = p.job_id AND j.status <> 'running' AND p.outcome = 'pending';

UPDATE job_nodes n SET status = CASE WHEN j.status = 'finished' THEN 'finished' ELSE 'stopped' END,
    updated_at = now()
FROM jobs j WHERE j.id = n.job_id AND j.status <> 'running' AND n.status = 'running';
