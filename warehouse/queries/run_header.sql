-- The header of one run for every report page: what ran, where, when, and how to reproduce it.
-- target: the URL of an engine spikelens did not start (run.json's `target`), else NULL.
WITH run AS (
    SELECT run_id, scenario_name, scenario, engine, command, started_ns, duration_s, warmup_s,
           git_commit, host, status, errors,
           json_extract_string(run_json, '$.kind') AS kind,
           json_extract_string(run_json, '$.target') AS target
    FROM runs
    WHERE run_id = $run_id
)
SELECT * FROM run
