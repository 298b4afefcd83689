-- Prometheus samples (metrics.parquet) per window of $window_s seconds from load_started_ns and
-- series (name + labels): the last value in the window and the mean. Histogram buckets are left out
-- (their _sum and _count series carry the same information per series). Data-parallel engines
-- are folded into one series (macro engine_metrics).
WITH run AS (SELECT * FROM run_axis($run_id, $window_s)),
samples AS (
    SELECT m.name, m.labels, m.ts_ns, m.value,
           CAST(floor((m.ts_ns - run.t0_ns) / run.window_ns) AS BIGINT) AS w
    FROM engine_metrics($run_id) m, run
    WHERE m.ts_ns >= run.t0_ns AND NOT m.name LIKE '%\_bucket' ESCAPE '\'
      AND (run.duration_s IS NULL OR m.ts_ns < run.t0_ns + CAST(run.duration_s * 1e9 AS BIGINT))
)
SELECT
    w AS "window",
    name,
    labels,
    arg_max(value, ts_ns) AS last_value,
    avg(value) AS mean_value,
    count(*) AS samples
FROM samples
GROUP BY w, name, labels
ORDER BY name, labels, w
