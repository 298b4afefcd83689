-- Latency percentiles per window of $window_s seconds from load_started_ns (measured phase only),
-- under the definitions of the latency_samples macro (warehouse/macros.sql): TTFT in the window
-- of the first token's arrival, ITL in the window of the later chunk, E2E in the window of the
-- last token, all of ok requests; arrivals (with their mean prompt length, and the mean tokens
-- each asked: prompt + max_tokens), open-loop arrivals by their scheduled time (intended_send_ns:
-- what the schedule asked, however the engine kept up; closed-loop users send when served, so
-- they count none), completions and errors (status 'error'; cancelled at the end of the test is
-- not one) of every measured request; tokens of every content chunk.
-- Windows run from 0 to duration_s (all of them, empty ones with NULL percentiles).
WITH run AS (SELECT * FROM run_axis($run_id, $window_s)),
samples AS (
    SELECT metric, ts_ns, value_ms AS value FROM latency_samples($run_id)
    UNION ALL
    -- markers that carry counts (and, for 'done', the request's output length)
    SELECT 'sent', sent_ns, coalesce(prompt_tokens, prompt_tokens_target)
    FROM measured_requests($run_id) WHERE sent_ns IS NOT NULL
    UNION ALL
    SELECT 'asked', sent_ns, coalesce(prompt_tokens, prompt_tokens_target) + max_tokens
    FROM measured_requests($run_id) WHERE sent_ns IS NOT NULL
    UNION ALL
    SELECT 'scheduled', intended_send_ns, 1
    FROM measured_requests($run_id)
    WHERE intended_send_ns IS NOT NULL AND ("user" = 'open' OR "user" LIKE '%-open')
    UNION ALL
    SELECT 'done', done_ns, output_tokens FROM measured_requests($run_id) WHERE done_ns IS NOT NULL
    UNION ALL
    SELECT 'error', coalesce(done_ns, sent_ns), 0 FROM measured_requests($run_id) WHERE failed
),
bucketed AS (
    SELECT s.metric, s.value, CAST(floor((s.ts_ns - run.t0_ns) / run.window_ns) AS BIGINT) AS w
    FROM samples s, run
    WHERE s.ts_ns >= run.t0_ns
),
token_counts AS (
    SELECT CAST(floor((c.arrival_ns - run.t0_ns) / run.window_ns) AS BIGINT) AS w, sum(c.n_tokens) AS tokens
    FROM content_chunks($run_id) c, run
    WHERE c.arrival_ns >= run.t0_ns
    GROUP BY ALL
),
grid AS (SELECT w FROM window_grid($run_id, $window_s)),
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
        avg(value)                 FILTER (WHERE metric = 'sent')  AS prompt_tokens_mean,
        avg(value)                 FILTER (WHERE metric = 'asked') AS asked_tokens_mean,
        count(*)                      FILTER (WHERE metric = 'scheduled') AS scheduled,
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
    p.prompt_tokens_mean,
    p.asked_tokens_mean,
    coalesce(p.scheduled, 0) AS scheduled,
    coalesce(p.errors, 0) AS errors,
    coalesce(tc.tokens, 0) AS tokens
FROM grid g
CROSS JOIN run
LEFT JOIN per_window p ON p.w = g.w
LEFT JOIN token_counts tc ON tc.w = g.w
ORDER BY g.w
