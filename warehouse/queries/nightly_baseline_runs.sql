-- The last $last_n passing nightly runs of a scenario before $before_ns: the rolling baseline.
-- A run passes when it finished ok and none of its metrics was judged `regressed`.
WITH nightly AS (
    SELECT r.run_id, r.scenario_name, r.started_ns, r.status
    FROM runs r
    WHERE json_extract_string(r.run_json, '$.kind') = 'nightly'
      AND r.scenario_name = $scenario_name
      AND r.started_ns < $before_ns
      AND r.status = 'ok'
),
regressed AS (
    SELECT DISTINCT run_id FROM nightly_verdicts WHERE verdict = 'regressed'
)
SELECT n.run_id, n.started_ns
FROM nightly n
LEFT JOIN regressed g USING (run_id)
WHERE g.run_id IS NULL
ORDER BY n.started_ns DESC
LIMIT $last_n
