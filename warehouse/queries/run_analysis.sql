-- The stored analysis of one run (rca.analyze): its window width, with the run's measured duration,
-- the engine that served it ('spikelens' where the engine block names no kind: its own) and the
-- run's status (ok | invalid: its load generator saturated | failed).
WITH analysis AS (
    SELECT a.run_id, a.window_s, r.duration_s,
           coalesce(json_extract_string(r.engine, '$.kind'), 'spikelens') AS engine_kind,
           r.status
    FROM analyses a
    JOIN runs r USING (run_id)
    WHERE a.run_id = $run_id
)
SELECT window_s, duration_s, engine_kind, status FROM analysis
