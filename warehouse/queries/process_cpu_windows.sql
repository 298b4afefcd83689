-- CPU and scheduling per window of $window_s seconds from load_started_ns and process, from the
-- /proc sampler's cumulative counters (or `spikelens agent`'s: macro process_cpu_samples): each
-- tick's increase over the process's previous tick counts in the window of the later tick
-- (clamped at 0: a per-thread sum drops when a thread exits). Rates are per second of window: cpu_ms_per_s 1000 = one core busy; runq_wait_ms_per_s
-- is time its threads were runnable but waiting for a CPU (contention from outside or inside).
WITH run AS (SELECT * FROM run_axis($run_id, $window_s)),
deltas AS (
    SELECT c.pid, c.role, c.ts_ns,
           c.cpu_ns - lag(c.cpu_ns) OVER w AS cpu,
           c.run_ns - lag(c.run_ns) OVER w AS on_cpu,
           c.wait_ns - lag(c.wait_ns) OVER w AS wait,
           c.voluntary_switches - lag(c.voluntary_switches) OVER w AS vol,
           c.involuntary_switches - lag(c.involuntary_switches) OVER w AS invol,
           c.threads
    FROM process_cpu_samples($run_id) c
    WINDOW w AS (PARTITION BY c.pid ORDER BY c.ts_ns)
),
windowed AS (
    SELECT CAST(floor((d.ts_ns - run.t0_ns) / run.window_ns) AS BIGINT) AS w, d.*, run.window_ns
    FROM deltas d, run
    WHERE d.cpu IS NOT NULL AND d.ts_ns >= run.t0_ns
      AND (run.duration_s IS NULL OR d.ts_ns < run.t0_ns + CAST(run.duration_s * 1e9 AS BIGINT))
)
SELECT
    w AS "window",
    pid,
    any_value(role) AS role,
    sum(greatest(cpu, 0)) / 1e6 / (any_value(window_ns) / 1e9) AS cpu_ms_per_s,
    sum(greatest(on_cpu, 0)) / 1e6 / (any_value(window_ns) / 1e9) AS run_ms_per_s,
    sum(greatest(wait, 0)) / 1e6 / (any_value(window_ns) / 1e9) AS runq_wait_ms_per_s,
    sum(greatest(vol, 0)) / (any_value(window_ns) / 1e9) AS voluntary_switches_per_s,
    sum(greatest(invol, 0)) / (any_value(window_ns) / 1e9) AS involuntary_switches_per_s,
    max(threads) AS threads,
    count(*) AS ticks
FROM windowed
GROUP BY w, pid
ORDER BY w, pid
