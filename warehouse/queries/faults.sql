-- The ground-truth faults of a run, as seconds from load_started_ns.
WITH run AS (
    SELECT
        r.run_id,
        run_t0(r.run_id) AS t0_ns
    FROM runs r
    WHERE r.run_id = $run_id
)
SELECT
    f.kind,
    coalesce(f.cause, split_part(f.kind, '.', 1)) AS cause,
    (f.start_ns - run.t0_ns) / 1e9 AS start_s,
    (f.end_ns - run.t0_ns) / 1e9 AS end_s,
    f.params,
    f.source_file
FROM faults f, run
WHERE f.run_id = run.run_id
ORDER BY f.start_ns, f.kind
