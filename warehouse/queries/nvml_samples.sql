-- The run's NVML samples per GPU, as seconds from load_started_ns (none where NVML was absent).
WITH run AS (
    SELECT r.run_id, run_t0(r.run_id) AS t0_ns
    FROM runs r
    WHERE r.run_id = $run_id
)
SELECT
    (n.ts_ns - run.t0_ns) / 1e9 AS t_s,
    n.gpu, n.util_gpu, n.util_mem, n.mem_used, n.mem_total, n.sm_clock, n.power_w, n.temp_c,
    n.clock_event_reasons
FROM nvml n
JOIN run ON n.run_id = run.run_id
WHERE n.ts_ns >= run.t0_ns
ORDER BY n.gpu, n.ts_ns
