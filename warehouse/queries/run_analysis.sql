-- The stored analysis of one run (rca.analyze): its window width, with the run's measured duration,
-- the engine that served it ('spikelens' where the engine block names no kind: its own) and the
-- run's status (ok | invalid: its load generator saturated | failed), the settings it used (JSON:
-- preset, the name of rca.config.PRESETS or null for settings given in code, absent from older
-- analyses; detect; attribute) and the per-series baselines it judged windows against (JSON).
WITH analysis AS (
    SELECT a.run_id, a.window_s, r.duration_s,
           coalesce(json_extract_string(r.engine, '$.kind'), 'spikelens') AS engine_kind,
           r.status,
           a.config,
           a.baselines
    FROM analyses a
    JOIN runs r USING (run_id)
    WHERE a.run_id = $run_id
)
SELECT window_s, duration_s, engine_kind, status, config, baselines FROM analysis
