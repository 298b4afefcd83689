-- Prometheus counters and gauges (metrics.parquet) per window of $window_s seconds from
-- load_started_ns and series (name + labels), histogram buckets left out (see
-- metric_histogram_windows). Counters (names ending in _total, _count or _sum: preemptions,
-- tokens, a histogram's observation count and sum) as a rate per second: the last scrape in the
-- window minus the last scrape of an earlier window, a reset counting from 0. Gauges (the rest:
-- KV cache usage, running/waiting requests, waiting by reason) as the mean, max and last value.
-- Data-parallel engines are folded into one series (macro engine_metrics).
WITH run AS (SELECT * FROM run_axis($run_id, $window_s)),
samples AS (
    SELECT m.name, m.labels, m.ts_ns, m.value,
           CAST(floor((m.ts_ns - run.t0_ns) / run.window_ns) AS BIGINT) AS w,
           regexp_matches(m.name, '(_total|_count|_sum)$') AS is_counter
    FROM engine_metrics($run_id) m, run
    WHERE NOT regexp_matches(m.name, '(_bucket|_created)$')
      AND (run.duration_s IS NULL OR m.ts_ns < run.t0_ns + CAST(run.duration_s * 1e9 AS BIGINT))
),
per_window AS (
    SELECT name, labels, w, any_value(is_counter) AS is_counter,
           arg_max(value, ts_ns) AS last_value, avg(value) AS mean_value, max(value) AS max_value,
           count(*) AS scrapes
    FROM samples
    GROUP BY name, labels, w
),
with_previous AS (
    SELECT *, lag(last_value) OVER (PARTITION BY name, labels ORDER BY w) AS previous,
           lag(w) OVER (PARTITION BY name, labels ORDER BY w) AS previous_w
    FROM per_window
)
SELECT
    p.w AS "window",
    p.name,
    p.labels,
    CASE WHEN p.is_counter THEN 'counter' ELSE 'gauge' END AS kind,
    CASE WHEN NOT p.is_counter OR p.previous IS NULL THEN NULL
         ELSE (CASE WHEN p.last_value >= p.previous THEN p.last_value - p.previous ELSE p.last_value END)
              / ((p.w - p.previous_w) * run.window_ns / 1e9) END AS rate_per_s,
    p.mean_value,
    p.max_value,
    p.last_value,
    p.scrapes
FROM with_previous p, run
WHERE p.w >= 0
ORDER BY p.name, p.labels, p.w
