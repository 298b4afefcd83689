-- CPU steal per window of $window_s seconds from load_started_ns, over the CPUs the engine's
-- processes may run on (/proc sampler: cumulative /proc/stat counters per CPU and tick; each
-- tick's increase over the CPU's previous tick counts in the window of the later tick).
-- steal_share: of the time those CPUs wanted to run (all but idle and iowait), the part the
-- hypervisor ran another guest instead: work needing W s of CPU took W / (1 - steal_share).
-- A halted (idle) vCPU accrues no steal, so idle time is not in the denominator. Two collector
-- sets on the same CPUs count each CPU twice, which leaves the shares as they are.
WITH run AS (SELECT * FROM run_axis($run_id, $window_s)),
deltas AS (
    SELECT c.ts_ns, c.cpu,
           c.total_ns - lag(c.total_ns) OVER w AS total,
           c.idle_ns - lag(c.idle_ns) OVER w AS idle,
           c.steal_ns - lag(c.steal_ns) OVER w AS steal
    FROM cpu_ticks c
    WHERE c.run_id = $run_id
    WINDOW w AS (PARTITION BY c.source_file, c.cpu ORDER BY c.ts_ns)
),
windowed AS (
    SELECT CAST(floor((d.ts_ns - run.t0_ns) / run.window_ns) AS BIGINT) AS w,
           d.cpu,
           greatest(d.total, 0) AS total,
           greatest(d.idle, 0) AS idle,
           greatest(d.steal, 0) AS steal
    FROM deltas d, run
    WHERE d.total IS NOT NULL AND d.ts_ns >= run.t0_ns
      AND (run.duration_s IS NULL OR d.ts_ns < run.t0_ns + CAST(run.duration_s * 1e9 AS BIGINT))
)
SELECT
    w AS "window",
    sum(steal) / nullif(sum(total - idle), 0) AS steal_share,
    sum(total - idle - steal) / nullif(sum(total), 0) AS busy_share,
    count(DISTINCT cpu) AS cpus
FROM windowed
GROUP BY w
ORDER BY w
