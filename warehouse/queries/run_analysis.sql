-- The stored analysis of one run (rca.analyze): its window width, with the run's measured duration,
-- the engine that served it ('spikelens' where the engine block names no kind: its own) and the
-- run's status (ok | invalid: its load generator saturated | failed), and the detector it used:
-- its preset's name (NULL: settings given in code) and settings (rca.config.DetectConfig, JSON).
WITH analysis AS (
    SELECT a.run_id, a.window_s, r.duration_s,
           coalesce(json_extract_string(r.engine, '$.kind'), 'spikelens') AS engine_kind,
           r.status,
           json_extract_string(a.config, '$.preset') AS preset,
           json_extract(a.config, '$.detect') AS detect
    FROM analyses a
    JOIN runs r USING (run_id)
    WHERE a.run_id = $run_id
)
SELECT window_s, duration_s, engine_kind, status, preset, detect FROM analysis
