-- Each metric's value in every nightly run of a scenario, oldest first (the trend charts).
WITH nightly AS (
    SELECT r.run_id, r.started_ns
    FROM runs r
    WHERE r.scenario_name = $scenario_name
      AND json_extract_string(r.run_json, '$.kind') = 'nightly'
)
SELECT n.run_id, n.started_ns, v.metric, v.candidate
FROM nightly n
JOIN nightly_verdicts v USING (run_id)
WHERE v.candidate IS NOT NULL AND NOT isnan(v.candidate)
ORDER BY n.started_ns, v.metric
