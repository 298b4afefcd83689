-- Whole-run counts and latency percentiles of the measured phase, under the definitions of the
-- measurement macros (warehouse/macros.sql), which are loadgen/metrics.py's: what run.json's
-- summary reports for the same run. output_tokens: of ok requests, as the summary counts them.
WITH req AS (
    SELECT
        count(*) AS requests,
        count(*) FILTER (WHERE failed) AS errors,
        coalesce(sum(output_tokens) FILTER (WHERE ok), 0) AS output_tokens
    FROM measured_requests($run_id)
),
latency AS (
    SELECT
        quantile_cont(value_ms, 0.5)  FILTER (WHERE metric = 'ttft') AS ttft_p50_ms,
        quantile_cont(value_ms, 0.99) FILTER (WHERE metric = 'ttft') AS ttft_p99_ms,
        quantile_cont(value_ms, 0.5)  FILTER (WHERE metric = 'itl')  AS itl_p50_ms,
        quantile_cont(value_ms, 0.99) FILTER (WHERE metric = 'itl')  AS itl_p99_ms,
        quantile_cont(value_ms, 0.5)  FILTER (WHERE metric = 'e2e')  AS e2e_p50_ms,
        quantile_cont(value_ms, 0.99) FILTER (WHERE metric = 'e2e')  AS e2e_p99_ms
    FROM latency_samples($run_id)
)
SELECT req.requests, req.errors, req.output_tokens,
       latency.ttft_p50_ms, latency.ttft_p99_ms, latency.itl_p50_ms, latency.itl_p99_ms,
       latency.e2e_p50_ms, latency.e2e_p99_ms
FROM req, latency
