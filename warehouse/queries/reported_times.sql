-- The client's TTFT against the engine's own time to the first token as the server reported it
-- in the stream (requests.reported_*, vLLM's --enable-per-request-metrics), per ok measured
-- request that carried both. vLLM's span starts when its engine core queued the request, after
-- the API server read, parsed and tokenized it, so the client's TTFT is longer by that front end,
-- the transit and the client's own reading: `outside_ms`. No reported times (spikelens' own
-- engine, which the socket stamps of server_requests time instead; an older vLLM): no requests.
WITH reported AS (
    SELECT
        (m.first_token_ns - m.sent_ns) / 1e6 AS client_ttft_ms,
        m.reported_queue_ms + m.reported_ttft_ms AS engine_ttft_ms,
        m.reported_mean_itl_ms AS engine_mean_itl_ms
    FROM measured_requests($run_id) m
    WHERE m.ok AND m.first_token_ns IS NOT NULL AND m.sent_ns IS NOT NULL
      AND m.reported_queue_ms IS NOT NULL AND m.reported_ttft_ms IS NOT NULL
),
gaps AS (
    SELECT *, client_ttft_ms - engine_ttft_ms AS outside_ms FROM reported
)
SELECT
    count(*) AS requests,
    quantile_cont(client_ttft_ms, 0.5) AS client_ttft_p50_ms,
    quantile_cont(client_ttft_ms, 0.99) AS client_ttft_p99_ms,
    quantile_cont(engine_ttft_ms, 0.5) AS engine_ttft_p50_ms,
    quantile_cont(engine_ttft_ms, 0.99) AS engine_ttft_p99_ms,
    quantile_cont(outside_ms, 0.5) AS outside_p50_ms,
    quantile_cont(outside_ms, 0.99) AS outside_p99_ms,
    quantile_cont(engine_mean_itl_ms, 0.5) AS engine_mean_itl_p50_ms
FROM gaps
