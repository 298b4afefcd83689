-- Every latency sample of a run's measured phase, with the request it belongs to (for the
-- nightly regression's cluster bootstrap). Same definitions as windows.sql:
-- TTFT = first_token_ns - sent_ns; ITL = every gap between consecutive content chunks of a
-- request; E2E = done_ns - sent_ns of successful requests; error = 1 for a failed request else 0.
WITH run AS (
    SELECT r.run_id, run_t0(r.run_id) AS t0_ns
    FROM runs r
    WHERE r.run_id = $run_id
),
measured AS (
    SELECT q.*
    FROM requests q, run
    WHERE q.run_id = run.run_id
      AND (q.phase = 'measure' OR (q.phase IS NULL AND q.sent_ns >= run.t0_ns))
      AND coalesce(q.status, '') <> 'cancelled'
),
content_chunks AS (
    SELECT t.request_id, t."index", t.arrival_ns
    FROM tokens t
    JOIN measured m ON m.request_id = t.request_id
    WHERE t.run_id = $run_id AND coalesce(t.n_tokens, 1) > 0
),
gaps AS (
    SELECT request_id,
           arrival_ns - lag(arrival_ns) OVER (PARTITION BY request_id ORDER BY "index") AS gap_ns
    FROM content_chunks
)
SELECT 'itl' AS metric, request_id, gap_ns / 1e6 AS value_ms FROM gaps WHERE gap_ns IS NOT NULL
UNION ALL
SELECT 'ttft', request_id, (first_token_ns - sent_ns) / 1e6 FROM measured
WHERE first_token_ns IS NOT NULL AND sent_ns IS NOT NULL
UNION ALL
SELECT 'e2e', request_id, (done_ns - sent_ns) / 1e6 FROM measured
WHERE done_ns IS NOT NULL AND sent_ns IS NOT NULL AND coalesce(error, '') = ''
UNION ALL
SELECT 'error', request_id, CASE WHEN coalesce(error, '') <> '' THEN 1.0 ELSE 0.0 END FROM measured
