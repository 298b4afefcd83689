-- NVML per window of $window_s seconds and GPU: the latest sample at or before the window's end
-- (ASOF join), with its age, so a window always shows the state the GPU reported last.
WITH run AS (SELECT * FROM run_axis($run_id, $window_s)),
samples AS (
    SELECT n.* FROM nvml n, run WHERE n.run_id = run.run_id
),
grid AS (
    SELECT g.w, gpus.gpu, g.end_ns
    FROM window_grid($run_id, $window_s) g, (SELECT DISTINCT gpu FROM samples) gpus
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
