-- GC pauses per window of $window_s seconds from load_started_ns and generation (every process and
-- rank; a pause belongs to the window of its start). Windows without pauses have no row.
WITH run AS (SELECT * FROM run_axis($run_id, $window_s)),
pauses AS (
    SELECT CAST(floor((g.start_ns - run.t0_ns) / run.window_ns) AS BIGINT) AS w,
           g.generation,
           (g.end_ns - g.start_ns) / 1e6 AS pause_ms
    FROM gc g, run
    WHERE g.run_id = run.run_id AND g.start_ns >= run.t0_ns
)
SELECT
    p.w AS "window",
    p.w * run.window_ns / 1e9 AS t_s,
    p.generation,
    count(*) AS pauses,
    sum(p.pause_ms) AS total_ms,
    max(p.pause_ms) AS max_ms
FROM pauses p, run
GROUP BY ALL
ORDER BY p.w, p.generation
