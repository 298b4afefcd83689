-- Every GC pause of the measured part of the run, as seconds from load_started_ns.
WITH run AS (
    SELECT
        r.run_id,
        run_t0(r.run_id) AS t0_ns,
        r.duration_s
    FROM runs r
    WHERE r.run_id = $run_id
)
SELECT
    (g.start_ns - run.t0_ns) / 1e9 AS t_s,
    (g.end_ns - g.start_ns) / 1e6 AS duration_ms,
    g.generation,
    g.rank,
    g.pid,
    g.collected
FROM gc g, run
WHERE g.run_id = run.run_id AND g.start_ns >= run.t0_ns
  AND (run.duration_s IS NULL OR g.start_ns < run.t0_ns + CAST(run.duration_s * 1e9 AS BIGINT))
ORDER BY g.start_ns
