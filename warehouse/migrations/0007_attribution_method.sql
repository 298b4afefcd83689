-- Migration 7: how each spike was attributed: 'stages' (step-trace decomposition) or
-- 'metric_rank' (ranking of /metrics and NVML series, for targets without step traces).
ALTER TABLE spikes ADD COLUMN attribution_method VARCHAR;
