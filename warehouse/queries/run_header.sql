-- The header of one run for every report page: what ran, where, when, and how to reproduce it.
-- From run.json: target (the URL of an engine spikelens did not start, else NULL), and what the
-- load drove (extra.model, extra.endpoint, extra.stopped_early, extra.vllm: a vLLM it started),
-- why the load generator judged itself invalid (extra.client_health.reasons), and how much CPU
-- the hypervisor took from the engine's CPUs over the load (extra.cpu_steal, collectors.cpu_steal).
WITH run AS (
    SELECT run_id, scenario_name, scenario, engine, command, started_ns, duration_s, warmup_s,
           git_commit, host, status, errors,
           json_extract_string(run_json, '$.kind') AS kind,
           json_extract_string(run_json, '$.target') AS target,
           json_extract_string(run_json, '$.extra.model') AS model,
           json_extract_string(run_json, '$.extra.endpoint') AS endpoint,
           json_extract(run_json, '$.extra.stopped_early') AS stopped_early,
           json_extract(run_json, '$.extra.vllm') AS vllm,
           json_extract(run_json, '$.extra.client_health.reasons') AS client_reasons,
           json_extract(run_json, '$.extra.cpu_steal') AS cpu_steal
    FROM runs
    WHERE run_id = $run_id
)
SELECT * FROM run
