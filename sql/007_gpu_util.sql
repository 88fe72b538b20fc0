-- 007_gpu_util: GPU utilisation in the monitor's node samples.
--
-- gpu_util_pct is the mean, over a node's GPUs, of the share of the last
-- sample period a kernel ran (NVML's utilisation, read by rover-gpuinfo);
-- NULL where it was not measured (no GPU, or no NVML on the node).
ALTER TABLE cluster_node_samples ADD COLUMN gpu_util_pct double precision;
ALTER TABLE cluster_nodes ADD COLUMN gpu_util_pct double precision;
