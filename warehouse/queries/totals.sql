-- Whole-run latency percentiles and counts over the measured phase (same definitions as windows.sql).
WITH run AS (
    SELECT
        r.run_id,
        run_t0(r.run_id) AS t0_ns
    FROM runs r
    WHERE r.run_id = $run_id
),
measured AS (
    SELECT q.*
    FROM requests q, run
    WHERE q.run_id = run.run_id
      AND (q.phase = 'measure' OR (q.phase IS NULL AND q.sent_ns >= run.t0_ns))
),
content_chunks AS (
    SELECT t.request_id, t."index", t.arrival_ns
    FROM tokens t
    JOIN measured m ON m.request_id = t.request_id
    WHERE t.run_id = $run_id AND coalesce(t.n_tokens, 1) > 0
),
gaps AS (
    SELECT arrival_ns - lag(arrival_ns) OVER (PARTITION BY request_id ORDER BY "index") AS gap_ns
    FROM content_chunks
),
itl AS (
    SELECT quantile_cont(gap_ns / 1e6, 0.5) AS itl_p50_ms,
           quantile_cont(gap_ns / 1e6, 0.99) AS itl_p99_ms
    FROM gaps WHERE gap_ns IS NOT NULL
),
req AS (
    SELECT
        count(*) AS requests,
        count(*) FILTER (WHERE coalesce(status = 'error', coalesce(error, '') <> '')) AS errors,
        coalesce(sum(output_tokens), 0) AS output_tokens,
        quantile_cont((first_token_ns - sent_ns) / 1e6, 0.5) AS ttft_p50_ms,
        quantile_cont((first_token_ns - sent_ns) / 1e6, 0.99) AS ttft_p99_ms,
        quantile_cont((done_ns - sent_ns) / 1e6, 0.5) FILTER (WHERE coalesce(status = 'ok', coalesce(error, '') = '')) AS e2e_p50_ms,
        quantile_cont((done_ns - sent_ns) / 1e6, 0.99) FILTER (WHERE coalesce(status = 'ok', coalesce(error, '') = '')) AS e2e_p99_ms
    FROM measured
)
SELECT req.requests, req.errors, req.output_tokens,
       req.ttft_p50_ms, req.ttft_p99_ms, itl.itl_p50_ms, itl.itl_p99_ms, req.e2e_p50_ms, req.e2e_p99_ms
FROM req, itl
