-- NVML per window of $window_s seconds and GPU: the latest sample at or before the window's end
-- (ASOF join), with its age, so a window always shows the state the GPU reported last.
WITH run AS (SELECT * FROM run_axis($run_id, $window_s)),
samples AS (
    SELECT n.* FROM nvml n, run WHERE n.run_id = run.run_id
),
n_windows AS (
    SELECT CASE WHEN run.duration_s IS NOT NULL
                THEN CAST(ceil(run.duration_s * 1e9 / run.window_ns) AS BIGINT)
                ELSE coalesce((SELECT CAST(floor((max(ts_ns) - run.t0_ns) / run.window_ns) AS BIGINT) + 1
                               FROM samples), 0) END AS n
    FROM run
),
grid AS (
    SELECT g.range AS w, gpus.gpu, run.t0_ns + (g.range + 1) * run.window_ns AS end_ns
    FROM n_windows, range(n_windows.n) g, run, (SELECT DISTINCT gpu FROM samples) gpus
    WHERE run.t0_ns IS NOT NULL          -- no load start, no requests: no time axis
)
SELECT
    grid.w AS "window",
    grid.w * run.window_ns / 1e9 AS t_s,
    grid.gpu,
    s.util_gpu, s.util_mem, s.mem_used, s.mem_total,
    CAST(s.mem_used AS DOUBLE) / nullif(s.mem_total, 0) AS mem_fraction,
    s.sm_clock, s.mem_clock, s.power_w, s.temp_c, s.pstate, s.clock_event_reasons, s.pcie_tx, s.pcie_rx,
    (grid.end_ns - s.ts_ns) / 1e6 AS sample_age_ms
FROM grid
CROSS JOIN run
ASOF LEFT JOIN samples s ON s.gpu = grid.gpu AND s.ts_ns <= grid.end_ns
ORDER BY grid.w, grid.gpu
