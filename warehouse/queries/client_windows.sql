-- The load generator's health per window of $window_s seconds from load_started_ns (over its
-- processes: the worst event-loop lag, read delay and CPU, the requests in flight, the arrivals
-- that waited for a free slot).
WITH run AS (SELECT * FROM run_axis($run_id, $window_s)),
samples AS (
    SELECT h.*, CAST(floor((h.ts_ns - run.t0_ns) / run.window_ns) AS BIGINT) AS w
    FROM client_health h, run
    WHERE h.run_id = run.run_id AND h.ts_ns >= run.t0_ns
)
SELECT
    w AS "window",
    max(lag_p99_ms) AS lag_p99_ms,
    max(lag_max_ms) AS lag_max_ms,
    max(cpu_percent) AS cpu_percent,
    max(read_delay_p99_ms) AS read_delay_p99_ms,
    sum(slot_waits) AS slot_waits,
    sum(in_flight) AS in_flight,
    count(DISTINCT worker) AS workers
FROM samples
GROUP BY w
ORDER BY w
