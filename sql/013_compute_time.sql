-- 013_compute_time: each node's own compute time per step.
--
-- In a synchronous (all-reduce) job every node waits for the slowest at each
-- step, so every node's step_time is the same and the straggler rule cannot
-- single one out.  A trainer that measures the part of its step that is its
-- own work (forward and backward up to its gradients being ready to reduce)
-- reports it; the rule reads it instead of step_time when every worker has
-- it.  NULL: the sample had none.

ALTER TABLE node_usage ADD COLUMN compute_time double precision;
