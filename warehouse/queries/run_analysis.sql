-- The stored analysis of one run (rca.analyze): its window width, with the run's measured duration
-- and the engine that served it ('spikelens' where the engine block names no kind: its own).
WITH analysis AS (
    SELECT a.run_id, a.window_s, r.duration_s,
           coalesce(json_extract_string(r.engine, '$.kind'), 'spikelens') AS engine_kind
    FROM analyses a
    JOIN runs r USING (run_id)
    WHERE a.run_id = $run_id
)
SELECT window_s, duration_s, engine_kind FROM analysis
