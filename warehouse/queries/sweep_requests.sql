-- Per measured request of a sweep run: its sampling cell, output token ids (from the engine's
-- log), finish reason, E2E latency and the p99 of its own inter-token gaps (latencies of ok
-- requests, as the measurement macros define them; cancelled requests are left out).
WITH measured AS (
    SELECT request_id, temperature, frequency_penalty, ok
    FROM measured_requests($run_id)
    WHERE ok OR failed
),
request_itl AS (
    SELECT request_id, quantile_cont(gap_ns / 1e6, 0.99) AS itl_p99_ms
    FROM itl_gaps($run_id)
    GROUP BY request_id
)
SELECT
    m.request_id,
    m.temperature,
    m.frequency_penalty,
    e.output_token_ids,
    e.finish_reason,
    r.e2e_ms,
    i.itl_p99_ms
FROM measured m
JOIN engine_requests e ON e.run_id = $run_id AND e.request_id = m.request_id
LEFT JOIN request_e2e($run_id) r ON r.request_id = m.request_id
LEFT JOIN request_itl i ON i.request_id = m.request_id
ORDER BY m.temperature, m.frequency_penalty, m.request_id
