-- The header fields of one run, for report pages.
WITH run AS (
    SELECT run_id, scenario_name, command, started_ns, git_commit, host, status,
           json_extract_string(run_json, '$.kind') AS kind
    FROM runs
    WHERE run_id = $run_id
)
SELECT * FROM run
