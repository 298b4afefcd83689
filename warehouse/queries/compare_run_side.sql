-- One side of a run-vs-run comparison: what ran (scenario, engine or target, load) and how it ended.
WITH run AS (
    SELECT run_id, scenario_name, started_ns, git_commit, host, status, command,
           engine::VARCHAR AS engine_json,
           json_extract(scenario, '$.load')::VARCHAR AS load_json,
           json_extract_string(scenario, '$.target') AS target,
           json_extract_string(run_json, '$.kind') AS kind
    FROM runs
    WHERE run_id = $run_id
)
SELECT * FROM run
