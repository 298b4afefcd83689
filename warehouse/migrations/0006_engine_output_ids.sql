-- Migration 6: the engine's output token ids per request (when engine_requests.parquet has them),
-- for repetition-loop evidence (repeated n-gram rate) and the penalty sweep.
ALTER TABLE engine_requests ADD COLUMN output_token_ids INTEGER[];
