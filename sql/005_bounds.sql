-- 005_bounds: cluster nodes expire and their totals are kept as they change;
-- jobs record how many nodes they may run (namespace quotas).

-- The supervisor deletes nodes not reported for cluster.node_ttl_s.
CREATE INDEX cluster_nodes_updated ON cluster_nodes (updated_at);

-- One row: the sums over cluster_nodes that plans and GET /v1/cluster read,
-- kept by the statement triggers below so no reader scans every node.
-- numeric: additions and subtractions of float capacities do not drift.
CREATE TABLE cluster_totals (
    id              boolean PRIMARY KEY DEFAULT true CHECK (id),
    nodes           bigint NOT NULL,    -- every node, ready or not
    ready_nodes     bigint NOT NULL,    -- the rest: ready nodes only
    cpu             numeric NOT NULL,
    memory_mb       numeric NOT NULL,
    gpu             numeric NOT NULL,
    cpu_used        numeric NOT NULL,
    memory_used_mb  numeric NOT NULL,
    free_cpu        numeric NOT NULL,
    free_memory_mb  numeric NOT NULL
);
INSERT INTO cluster_totals
SELECT true, count(*), count(*) FILTER (WHERE ready),
       COALESCE(sum(cpu::numeric) FILTER (WHERE ready), 0),
       COALESCE(sum(memory_mb) FILTER (WHERE ready), 0),
       COALESCE(sum(gpu) FILTER (WHERE ready), 0),
       COALESCE(sum(cpu_used::numeric) FILTER (WHERE ready), 0),
       COALESCE(sum(memory_used_mb) FILTER (WHERE ready), 0),
       COALESCE(sum(greatest(cpu - cpu_used, 0)::numeric) FILTER (WHERE ready), 0),
       COALESCE(sum(greatest(memory_mb - memory_used_mb, 0)) FILTER (WHERE ready), 0)
FROM cluster_nodes;

-- Add the rows of new_rows and take away those of old_rows (transition
-- tables; a trigger has only the ones its event gives).
CREATE FUNCTION cluster_totals_apply() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        UPDATE cluster_totals t SET
            nodes = t.nodes - d.n, ready_nodes = t.ready_nodes - d.r,
            cpu = t.cpu - d.cpu, memory_mb = t.memory_mb - d.mem, gpu = t.gpu - d.gpu,
            cpu_used = t.cpu_used - d.cpu_used, memory_used_mb = t.memory_used_mb - d.mem_used,
            free_cpu = t.free_cpu - d.free_cpu, free_memory_mb = t.free_memory_mb - d.free_mem
        FROM (SELECT count(*) AS n, count(*) FILTER (WHERE ready) AS r,
                     COALESCE(sum(cpu::numeric) FILTER (WHERE ready), 0) AS cpu,
                     COALESCE(sum(memory_mb) FILTER (WHERE ready), 0) AS mem,
                     COALESCE(sum(gpu) FILTER (WHERE ready), 0) AS gpu,
                     COALESCE(sum(cpu_used::numeric) FILTER (WHERE ready), 0) AS cpu_used,
                     COALESCE(sum(memory_used_mb) FILTER (WHERE ready), 0) AS mem_used,
                     COALESCE(sum(greatest(cpu - cpu_used, 0)::numeric) FILTER (WHERE ready), 0)
                         AS free_cpu,
                     COALESCE(sum(greatest(memory_mb - memory_used_mb, 0)) FILTER (WHERE ready), 0)
                         AS free_mem
              FROM old_rows) d;
    END IF;
    IF TG_OP IN ('UPDATE', 'INSERT') THEN
        UPDATE cluster_totals t SET
            nodes = t.nodes + d.n, ready_nodes = t.ready_nodes + d.r,
            cpu = t.cpu + d.cpu, memory_mb = t.memory_mb + d.mem, gpu = t.gpu + d.gpu,
            cpu_used = t.cpu_used + d.cpu_used, memory_used_mb = t.memory_used_mb + d.mem_used,
            free_cpu = t.free_cpu + d.free_cpu, free_memory_mb = t.free_memory_mb + d.free_mem
        FROM (SELECT count(*) AS n, count(*) FILTER (WHERE ready) AS r,
                     COALESCE(sum(cpu::numeric) FILTER (WHERE ready), 0) AS cpu,
                     COALESCE(sum(memory_mb) FILTER (WHERE ready), 0) AS mem,
                     COALESCE(sum(gpu) FILTER (WHERE ready), 0) AS gpu,
                     COALESCE(sum(cpu_used::numeric) FILTER (WHERE ready), 0) AS cpu_used,
                     COALESCE(sum(memory_used_mb) FILTER (WHERE ready), 0) AS mem_used,
                     COALESCE(sum(greatest(cpu - cpu_used, 0)::numeric) FILTER (WHERE ready), 0)
                         AS free_cpu,
                     COALESCE(sum(greatest(memory_mb - memory_used_mb, 0)) FILTER (WHERE ready), 0)
                         AS free_mem
              FROM new_rows) d;
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER cluster_totals_insert AFTER INSERT ON cluster_nodes
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION cluster_totals_apply();
CREATE TRIGGER cluster_totals_update AFTER UPDATE ON cluster_nodes
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION cluster_totals_apply();
CREATE TRIGGER cluster_totals_delete AFTER DELETE ON cluster_nodes
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION cluster_totals_apply();

-- The most nodes a job may run (every role's max(replicas, maxReplicas)),
-- summed per namespace for quota.nodes_per_namespace.
ALTER TABLE jobs ADD COLUMN max_nodes bigint NOT NULL DEFAULT 0;
