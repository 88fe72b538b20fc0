-- 002_dashboards: views for the admin SQL dashboards (see sql/README.md).

-- Per job: what it holds (latest node limits) against what it uses (mean of
-- the per-timestamp sums over its node samples).
CREATE VIEW v_job_utilisation AS
SELECT j.uid, j.namespace, j.name, j.user_name, j.status,
       round(avg(t.cpu_used)::numeric, 2)   AS cpu_used_avg,
       round(avg(t.cpu_limit)::numeric, 2)  AS cpu_alloc_avg,
       round((100 * avg(t.cpu_used) / NULLIF(avg(t.cpu_limit), 0))::numeric, 1) AS cpu_util_pct,
       round(avg(t.mem_used)::numeric, 0)   AS mem_used_mb_avg,
       round(avg(t.mem_limit)::numeric, 0)  AS mem_alloc_mb_avg,
       round((100 * avg(t.mem_used) / NULLIF(avg(t.mem_limit), 0))::numeric, 1) AS mem_util_pct,
       count(*) AS timestamps
FROM jobs j
JOIN (SELECT job_id, ts_ms, sum(cpu) AS cpu_used, sum(cpu_limit) AS cpu_limit,
             sum(memory_mb) AS mem_used, sum(memory_limit_mb) AS mem_limit
      FROM node_usage GROUP BY job_id, ts_ms) t ON t.job_id = j.id
GROUP BY j.id;

CREATE VIEW v_user_utilisation AS
SELECT user_name, count(*) AS jobs,
       round(sum(cpu_used_avg), 2)  AS cpu_used,
       round(sum(cpu_alloc_avg), 2) AS cpu_alloc,
       round(100 * sum(cpu_used_avg) / NULLIF(sum(cpu_alloc_avg), 0), 1) AS cpu_util_pct,
       round(100 * sum(mem_used_mb_avg) / NULLIF(sum(mem_alloc_mb_avg), 0), 1) AS mem_util_pct
FROM v_job_utilisation GROUP BY user_name;

-- Over-provisioning: allocation above the 95th percentile of use, per job and role.
CREATE VIEW v_overprovisioning AS
SELECT j.uid, j.name, j.user_name, u.role,
       count(DISTINCT u.node) AS nodes,
       round(avg(u.cpu_limit)::numeric, 2) AS cpu_alloc_per_node,
       round(percentile_cont(0.95) WITHIN GROUP (ORDER BY u.cpu)::numeric, 2) AS cpu_p95_per_node,
       round(greatest(avg(u.cpu_limit) - percentile_cont(0.95) WITHIN GROUP (ORDER BY u.cpu), 0)
             ::numeric * count(DISTINCT u.node), 2) AS cpu_wasted,
       round(avg(u.memory_limit_mb)::numeric, 0) AS mem_alloc_mb_per_node,
       max(u.memory_mb) AS mem_peak_mb_per_node,
       round(greatest(avg(u.memory_limit_mb) - max(u.memory_mb), 0)::numeric
             * count(DISTINCT u.node), 0) AS mem_wasted_mb
FROM jobs j JOIN node_usage u ON u.job_id = j.id
GROUP BY j.id, u.role;

-- Plan outcomes by algorithm and stage.
CREATE VIEW v_plan_outcomes AS
SELECT algorithm, stage, count(*) AS plans,
       count(applied_at) AS applied,
       count(*) FILTER (WHERE outcome = 'better')  AS better,
       count(*) FILTER (WHERE outcome = 'neutral') AS neutral,
       count(*) FILTER (WHERE outcome = 'worse')   AS worse,
       count(*) FILTER (WHERE reverts_plan_id IS NOT NULL) AS reverts,
       round(avg(speed_after / NULLIF(speed_before, 0))::numeric, 3) AS mean_speed_ratio
FROM scale_plans GROUP BY algorithm, stage;

-- Failures by cause.
CREATE VIEW v_failures_by_cause AS
SELECT e.type,
       CASE WHEN e.type = 'node_oom' THEN 'out of memory'
            WHEN e.exit_code >= 0 THEN 'exit ' || e.exit_code
            WHEN e.reason <> '' THEN e.reason
            ELSE 'unknown' END AS cause,
       count(*) AS failures, count(DISTINCT e.job_id) AS jobs,
       max(e.created_at) AS last_seen
FROM events e
WHERE e.type IN ('node_failed', 'node_oom', 'job_failed')
GROUP BY 1, 2;
