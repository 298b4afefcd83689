-- Per measured request of a sweep run: its sampling cell, output token ids (from the engine's
-- log), finish reason, E2E latency and the p99 of its own inter-token gaps.
WITH measured AS (
    SELECT q.request_id, q.temperature, q.frequency_penalty, q.sent_ns, q.done_ns, q.error
    FROM requests q
    WHERE q.run_id = $run_id
      AND coalesce(q.phase, 'measure') = 'measure'
      AND coalesce(q.status, '') <> 'cancelled'
),
gaps AS (
    SELECT t.request_id,
           t.arrival_ns - lag(t.arrival_ns) OVER (PARTITION BY t.request_id ORDER BY t."index") AS gap_ns
    FROM tokens t
    WHERE t.run_id = $run_id AND coalesce(t.n_tokens, 1) > 0
),
request_itl AS (
    SELECT request_id, quantile_cont(gap_ns / 1e6, 0.99) AS itl_p99_ms
    FROM gaps
    WHERE gap_ns IS NOT NULL
    GROUP BY request_id
)
SELECT
    m.request_id,
    m.temperature,
    m.frequency_penalty,
    e.output_token_ids,
    e.finish_reason,
    CASE WHEN coalesce(m.error, '') = '' THEN (m.done_ns - m.sent_ns) / 1e6 END AS e2e_ms,
    i.itl_p99_ms
FROM measured m
JOIN engine_requests e ON e.run_id = $run_id AND e.request_id = m.request_id
LEFT JOIN request_itl i ON i.request_id = m.request_id
ORDER BY m.temperature, m.frequency_penalty, m.request_id
