-- Prometheus histograms (metrics.parquet, e.g. vLLM's request queue/prefill/decode time,
-- inter-token latency, iteration tokens) per window of $window_s seconds from load_started_ns:
-- each bucket's increase over the window (last scrape in the window minus the last scrape of an
-- earlier window; a counter reset counts from 0), then the 0.5/0.9/0.99 quantiles of the
-- observations made in the window, interpolated linearly inside their bucket as Prometheus'
-- histogram_quantile does (from 0 in the first bucket). A quantile that falls in the +Inf bucket
-- is not interpolated: it is only known to be at least the last finite bound, so the value is
-- that bound and pNN_at_least says so (read "≥ pNN"). Data-parallel engines are folded into one
-- series (macro engine_metrics: their buckets add). Windows without an earlier scrape, or
-- without observations, have no row.
WITH run AS (SELECT * FROM run_axis($run_id, $window_s)),
bucket_samples AS (
    SELECT regexp_replace(m.name, '_bucket$', '') AS name,
           regexp_replace(m.labels, ', "le": "[^"]*"|"le": "[^"]*"(, )?', '') AS labels,
           json_extract_string(m.labels, '$.le') AS le_text,
           CAST(floor((m.ts_ns - run.t0_ns) / run.window_ns) AS BIGINT) AS w,
           m.ts_ns, m.value
    FROM engine_metrics($run_id) m, run
    WHERE m.name LIKE '%\_bucket' ESCAPE '\'
      AND (run.duration_s IS NULL OR m.ts_ns < run.t0_ns + CAST(run.duration_s * 1e9 AS BIGINT))
),
last_per_window AS (
    SELECT name, labels, w,
           CASE WHEN le_text = '+Inf' THEN CAST('Infinity' AS DOUBLE) ELSE CAST(le_text AS DOUBLE) END AS le,
           arg_max(value, ts_ns) AS cum
    FROM bucket_samples
    WHERE le_text IS NOT NULL
    GROUP BY name, labels, w, le_text
),
increases AS (
    SELECT name, labels, w, le,
           CASE WHEN cum >= lag(cum) OVER b THEN cum - lag(cum) OVER b ELSE cum END AS n,
           lag(cum) OVER b AS before
    FROM last_per_window
    WINDOW b AS (PARTITION BY name, labels, le ORDER BY w)
),
buckets AS (
    SELECT name, labels, w, le, n,
           coalesce(lag(le) OVER o, 0) AS lo,
           coalesce(lag(n) OVER o, 0) AS n_below,
           max(n) OVER (PARTITION BY name, labels, w) AS total   -- the +Inf bucket holds every observation
    FROM increases
    WHERE before IS NOT NULL AND w >= 0
    WINDOW o AS (PARTITION BY name, labels, w ORDER BY le)
),
ranked AS (
    SELECT b.*, q.q, q.q * b.total AS rank
    FROM buckets b, (VALUES (0.5), (0.9), (0.99)) AS q(q)
    WHERE b.total > 0
),
picked AS (
    -- the first bucket whose cumulative count reaches the rank
    SELECT name, labels, w, q, total,
           arg_min(CASE WHEN isinf(le) THEN lo
                        WHEN n = n_below THEN le
                        ELSE lo + (le - lo) * (rank - n_below) / (n - n_below) END, le) AS value,
           isinf(min(le)) AS at_least
    FROM ranked
    WHERE n >= rank
    GROUP BY name, labels, w, q, total
)
SELECT
    w AS "window",
    name,
    labels,
    any_value(total) AS observations,
    max(value) FILTER (WHERE q = 0.5) AS p50,
    max(value) FILTER (WHERE q = 0.9) AS p90,
    max(value) FILTER (WHERE q = 0.99) AS p99,
    bool_or(at_least) FILTER (WHERE q = 0.5) AS p50_at_least,
    bool_or(at_least) FILTER (WHERE q = 0.9) AS p90_at_least,
    bool_or(at_least) FILTER (WHERE q = 0.99) AS p99_at_least
FROM picked
GROUP BY w, name, labels
ORDER BY name, labels, w
