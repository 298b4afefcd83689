-- Migration 10: the engine's per-step memory-pressure counters (additive steps.parquet columns).
ALTER TABLE steps ADD COLUMN page_faults BIGINT;     -- page faults of the stepping thread in the step
ALTER TABLE steps ADD COLUMN alloc_retries BIGINT;   -- CUDA caching-allocator retries so far (cumulative)
