-- Latency percentiles per window of $window_s seconds from load_started_ns (measured phase only).
-- TTFT = first_token_ns - sent_ns, in the window of the first token's arrival;
-- ITL  = every gap between consecutive content chunks of a request, in the window of the later chunk;
-- E2E  = done_ns - sent_ns of successful requests (status 'ok'; without a status: no error), in
--        the window of completion; errors = status 'error' (cancelled at the end of the test is not one).
-- Windows run from 0 to duration_s (all of them, empty ones with NULL percentiles).
WITH run AS (SELECT * FROM run_axis($run_id, $window_s)),
measured AS (
    -- phase is NULL only in files written before the column existed: keep what was sent after t0
    SELECT q.*
    FROM requests q, run
    WHERE q.run_id = run.run_id
      AND (q.phase = 'measure' OR (q.phase IS NULL AND q.sent_ns >= run.t0_ns))
),
content_chunks AS (
    SELECT t.request_id, t."index", t.arrival_ns, t.n_tokens
    FROM tokens t
    JOIN measured m ON m.request_id = t.request_id
    WHERE t.run_id = $run_id AND coalesce(t.n_tokens, 1) > 0
),
gaps AS (
    SELECT arrival_ns,
           arrival_ns - lag(arrival_ns) OVER (PARTITION BY request_id ORDER BY "index") AS gap_ns
    FROM content_chunks
),
samples AS (
    SELECT 'itl' AS metric, arrival_ns AS ts_ns, gap_ns / 1e6 AS value FROM gaps WHERE gap_ns IS NOT NULL
    UNION ALL
    SELECT 'ttft', first_token_ns, (first_token_ns - sent_ns) / 1e6 FROM measured
    WHERE first_token_ns IS NOT NULL AND sent_ns IS NOT NULL
    UNION ALL
    SELECT 'e2e', done_ns, (done_ns - sent_ns) / 1e6 FROM measured
    WHERE done_ns IS NOT NULL AND sent_ns IS NOT NULL AND coalesce(status = 'ok', coalesce(error, '') = '')
    UNION ALL
    -- markers that carry counts (and, for 'done', the request's output length)
    SELECT 'sent', sent_ns, 0 FROM measured WHERE sent_ns IS NOT NULL
    UNION ALL
    SELECT 'done', done_ns, output_tokens FROM measured WHERE done_ns IS NOT NULL
    UNION ALL
    SELECT 'error', coalesce(done_ns, sent_ns), 0 FROM measured WHERE coalesce(status = 'error', coalesce(error, '') <> '')
),
bucketed AS (
    SELECT s.metric, s.value, CAST(floor((s.ts_ns - run.t0_ns) / run.window_ns) AS BIGINT) AS w
    FROM samples s, run
    WHERE s.ts_ns >= run.t0_ns
),
token_counts AS (
    SELECT CAST(floor((c.arrival_ns - run.t0_ns) / run.window_ns) AS BIGINT) AS w, sum(coalesce(c.n_tokens, 1)) AS tokens
    FROM content_chunks c, run
    WHERE c.arrival_ns >= run.t0_ns
    GROUP BY ALL
),
n_windows AS (
    SELECT CASE WHEN run.duration_s IS NOT NULL
                THEN CAST(ceil(run.duration_s * 1e9 / run.window_ns) AS BIGINT)
                ELSE coalesce((SELECT max(w) + 1 FROM bucketed), 0) END AS n
    FROM run
),
grid AS (
    SELECT range AS w FROM n_windows, range(n_windows.n), run
    WHERE run.t0_ns IS NOT NULL          -- no load start, no requests: no time axis
),
per_window AS (
    SELECT
        w,
        quantile_cont(value, 0.5)  FILTER (WHERE metric = 'itl')  AS itl_p50_ms,
        quantile_cont(value, 0.9)  FILTER (WHERE metric = 'itl')  AS itl_p90_ms,
        quantile_cont(value, 0.99) FILTER (WHERE metric = 'itl')  AS itl_p99_ms,
        count(*)                      FILTER (WHERE metric = 'itl')  AS itl_n,
        quantile_cont(value, 0.5)  FILTER (WHERE metric = 'ttft') AS ttft_p50_ms,
        quantile_cont(value, 0.9)  FILTER (WHERE metric = 'ttft') AS ttft_p90_ms,
        quantile_cont(value, 0.99) FILTER (WHERE metric = 'ttft') AS ttft_p99_ms,
        count(*)                      FILTER (WHERE metric = 'ttft') AS ttft_n,
        quantile_cont(value, 0.5)  FILTER (WHERE metric = 'e2e')  AS e2e_p50_ms,
        quantile_cont(value, 0.9)  FILTER (WHERE metric = 'e2e')  AS e2e_p90_ms,
        quantile_cont(value, 0.99) FILTER (WHERE metric = 'e2e')  AS e2e_p99_ms,
        count(*)                      FILTER (WHERE metric = 'e2e')  AS e2e_n,
        count(*)                      FILTER (WHERE metric = 'sent')  AS arrivals,
        count(*)                      FILTER (WHERE metric = 'done')  AS requests,
        avg(value)                 FILTER (WHERE metric = 'done')  AS output_tokens_mean,
        count(*)                      FILTER (WHERE metric = 'error') AS errors
    FROM bucketed
    GROUP BY w
)
SELECT
    g.w AS "window",
    g.w * run.window_ns / 1e9 AS t_s,
    p.itl_p50_ms, p.itl_p90_ms, p.itl_p99_ms, coalesce(p.itl_n, 0) AS itl_n,
    p.ttft_p50_ms, p.ttft_p90_ms, p.ttft_p99_ms, coalesce(p.ttft_n, 0) AS ttft_n,
    p.e2e_p50_ms, p.e2e_p90_ms, p.e2e_p99_ms, coalesce(p.e2e_n, 0) AS e2e_n,
    coalesce(p.arrivals, 0) AS arrivals,
    coalesce(p.requests, 0) AS requests,
    p.output_tokens_mean,
    coalesce(p.errors, 0) AS errors,
    coalesce(tc.tokens, 0) AS tokens
FROM grid g
CROSS JOIN run
LEFT JOIN per_window p ON p.w = g.w
LEFT JOIN token_counts tc ON tc.w = g.w
ORDER BY g.w
