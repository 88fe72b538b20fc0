-- 004_cpu_throttling: a node sample's cgroup CPU throttling counters, as
-- cpu.stat has them (cumulative since the node's cgroup was made).  NULL for
-- a sample without them (no CPU quota, or a sender that does not read
-- cpu.stat).  The planner reads the share of periods throttled between two
-- samples of one node as the sign that the node is held back by its limit.
ALTER TABLE node_usage ADD COLUMN nr_periods bigint;
ALTER TABLE node_usage ADD COLUMN nr_throttled bigint;
ALTER TABLE node_usage ADD COLUMN throttled_usec bigint;
