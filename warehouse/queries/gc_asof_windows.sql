-- For each window of $window_s seconds from load_started_ns: the latest GC pause that started at
-- or before the window's end (ASOF join), and the latest gen-2 one — how long ago, how long it
-- lasted. Shows whether a slow window sits right after a full collection.
WITH run AS (SELECT * FROM run_axis($run_id, $window_s)),
grid AS (SELECT w, end_ns FROM window_grid($run_id, $window_s)),
pauses AS (
    SELECT g.start_ns, g.end_ns, g.generation FROM gc g, run WHERE g.run_id = run.run_id
),
full_pauses AS (
    SELECT * FROM pauses WHERE generation = 2
)
SELECT
    grid.w AS "window",
    grid.w * run.window_ns / 1e9 AS t_s,
    p.generation AS last_generation,
    (grid.end_ns - p.start_ns) / 1e6 AS last_pause_age_ms,
    (p.end_ns - p.start_ns) / 1e6 AS last_pause_ms,
    (grid.end_ns - f.start_ns) / 1e6 AS last_gen2_age_ms,
    (f.end_ns - f.start_ns) / 1e6 AS last_gen2_ms
FROM grid
CROSS JOIN run
ASOF LEFT JOIN pauses p ON p.start_ns <= grid.end_ns
ASOF LEFT JOIN full_pauses f ON f.start_ns <= grid.end_ns
ORDER BY grid.w
