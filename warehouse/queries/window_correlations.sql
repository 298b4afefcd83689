-- Pearson r, across the windows of $window_s seconds of a run, of each engine/GC/NVML signal with
-- each latency P99 series (ITL, TTFT). Signals per window: step stage means (rank 0), GC pause ms
-- (pause start in window), arrivals, and the latest NVML sample at the window's end (ASOF join,
-- mean over GPUs). Rows with fewer than 3 windows where both are present are left out.
WITH run AS (SELECT * FROM run_axis($run_id, $window_s)),
grid AS (SELECT w, end_ns FROM window_grid($run_id, $window_s)),
measured AS (SELECT * FROM measured_requests($run_id)),
latency AS (
    SELECT CAST(floor((s.ts_ns - run.t0_ns) / run.window_ns) AS BIGINT) AS w,
           quantile_cont(s.value_ms, 0.99) FILTER (WHERE s.metric = 'itl') AS itl_p99_ms,
           quantile_cont(s.value_ms, 0.99) FILTER (WHERE s.metric = 'ttft') AS ttft_p99_ms
    FROM latency_samples($run_id) s, run
    WHERE s.ts_ns >= run.t0_ns
    GROUP BY 1
),
step_signals AS (
    SELECT CAST(floor((sg.end_ns - run.t0_ns) / run.window_ns) AS BIGINT) AS w,
           avg(sg.dur_ms) AS step_ms, avg(sg.forward_ms) AS forward_ms,
           avg(sg.penalty_ms + coalesce(sg.sample_ms, 0)) AS penalty_sample_ms, avg(sg.comm_ms) AS comm_ms,
           avg(sg.gc_ms) AS gc_overlap_ms, avg(sg.batch_size) AS batch_size, avg(sg.waiting) AS waiting,
           avg(sg.kv_usage) AS kv_usage, sum(coalesce(sg.preempted, 0)) AS preemptions
    FROM step_gc sg, run
    WHERE sg.run_id = run.run_id AND sg.rank = 0 AND sg.end_ns >= run.t0_ns
    GROUP BY 1
),
gc_signals AS (
    SELECT CAST(floor((g.start_ns - run.t0_ns) / run.window_ns) AS BIGINT) AS w,
           sum(g.end_ns - g.start_ns) / 1e6 AS gc_pause_ms
    FROM gc g, run WHERE g.run_id = run.run_id AND g.start_ns >= run.t0_ns
    GROUP BY 1
),
arrival_signals AS (
    SELECT CAST(floor((m.sent_ns - run.t0_ns) / run.window_ns) AS BIGINT) AS w, count(*) AS arrivals
    FROM measured m, run WHERE m.sent_ns >= run.t0_ns
    GROUP BY 1
),
nvml_samples AS (
    SELECT n.* FROM nvml n, run WHERE n.run_id = run.run_id
),
nvml_grid AS (
    SELECT grid.w, grid.end_ns, gpus.gpu FROM grid, (SELECT DISTINCT gpu FROM nvml_samples) gpus
),
nvml_signals AS (
    SELECT ng.w, avg(s.util_gpu) AS nvml_util_gpu, avg(CAST(s.mem_used AS DOUBLE) / nullif(s.mem_total, 0)) AS nvml_mem_fraction,
           avg(s.power_w) AS nvml_power_w, avg(s.sm_clock) AS nvml_sm_clock, avg(s.pcie_tx + s.pcie_rx) AS nvml_pcie
    FROM nvml_grid ng
    ASOF LEFT JOIN nvml_samples s ON s.gpu = ng.gpu AND s.ts_ns <= ng.end_ns
    GROUP BY ng.w
),
per_window AS (
    SELECT grid.w, l.itl_p99_ms, l.ttft_p99_ms,
           s.step_ms, s.forward_ms, s.penalty_sample_ms, s.comm_ms, s.gc_overlap_ms, s.batch_size, s.waiting,
           s.kv_usage, s.preemptions, coalesce(gs.gc_pause_ms, 0) AS gc_pause_ms, coalesce(a.arrivals, 0) AS arrivals,
           n.nvml_util_gpu, n.nvml_mem_fraction, n.nvml_power_w, n.nvml_sm_clock, n.nvml_pcie
    FROM grid
    LEFT JOIN latency l ON l.w = grid.w
    LEFT JOIN step_signals s ON s.w = grid.w
    LEFT JOIN gc_signals gs ON gs.w = grid.w
    LEFT JOIN arrival_signals a ON a.w = grid.w
    LEFT JOIN nvml_signals n ON n.w = grid.w
),
long_form AS (
    UNPIVOT per_window
    ON step_ms, forward_ms, penalty_sample_ms, comm_ms, gc_overlap_ms, batch_size, waiting, kv_usage,
       preemptions, gc_pause_ms, arrivals, nvml_util_gpu, nvml_mem_fraction, nvml_power_w, nvml_sm_clock, nvml_pcie
    INTO NAME signal VALUE value
),
paired AS (
    SELECT signal, 'itl_p99' AS metric, value, itl_p99_ms AS latency FROM long_form
    UNION ALL
    SELECT signal, 'ttft_p99', value, ttft_p99_ms FROM long_form
)
SELECT
    signal,
    metric,
    -- a series constant up to float rounding (averages of equal values) has no correlation
    CASE WHEN stddev_pop(value) <= 1e-9 * (abs(avg(value)) + 1)
           OR stddev_pop(latency) <= 1e-9 * (abs(avg(latency)) + 1)
         THEN NULL ELSE corr(value, latency) END AS pearson_r,
    count(*) AS windows
FROM paired
WHERE value IS NOT NULL AND latency IS NOT NULL
GROUP BY signal, metric
HAVING count(*) >= 3
ORDER BY metric, abs(pearson_r) DESC NULLS LAST, signal
