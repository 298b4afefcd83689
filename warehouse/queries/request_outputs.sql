-- Measured requests of a run with the window ($window_s seconds from load_started_ns) they finished
-- in, their output length, finish reason, max_tokens and (if the engine logged them) output token ids.
WITH run AS (SELECT * FROM run_axis($run_id, $window_s)),
measured AS (
    SELECT q.*
    FROM measured_requests($run_id) q, run
    WHERE q.done_ns IS NOT NULL AND q.done_ns >= run.t0_ns
)
SELECT
    CAST(floor((m.done_ns - run.t0_ns) / run.window_ns) AS BIGINT) AS "window",
    m.request_id,
    coalesce(e.output_tokens, m.output_tokens) AS output_tokens,
    m.max_tokens,
    coalesce(e.finish_reason, m.finish_reason) AS finish_reason,
    e.output_token_ids
FROM measured m
CROSS JOIN run
LEFT JOIN engine_requests e ON e.run_id = run.run_id AND e.request_id = m.request_id
ORDER BY m.done_ns
