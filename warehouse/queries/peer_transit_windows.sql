-- Per window of $window_s seconds from load_started_ns (by the request's send time): how much
-- longer the load generator saw each request's TTFT than the engine server saw it at its socket
-- (client − server, ms; the network path and the client's read delay), and the server's own TTFT.
-- Rows only for windows with a request both sides saw; no server_requests rows: no rows.
WITH run AS (SELECT * FROM run_axis($run_id, $window_s)),
measured AS (
    SELECT request_id, sent_ns, first_token_ns
    FROM measured_requests($run_id)
    WHERE ok AND first_token_ns IS NOT NULL
),
paired AS (
    SELECT
        CAST(floor((m.sent_ns - run.t0_ns) / run.window_ns) AS BIGINT) AS w,
        ((m.first_token_ns - m.sent_ns) - (s.first_content_ns - s.received_ns)) / 1e6 AS gap_ms,
        (s.first_content_ns - s.received_ns) / 1e6 AS server_ttft_ms
    FROM measured m
    CROSS JOIN run
    JOIN server_requests s ON s.run_id = $run_id AND s.request_id = m.request_id
    WHERE s.status = 200 AND s.first_content_ns IS NOT NULL AND m.sent_ns >= run.t0_ns
)
SELECT
    w AS "window",
    avg(gap_ms) AS ttft_gap_ms,
    avg(server_ttft_ms) AS server_ttft_ms,
    count(*) AS requests
FROM paired
GROUP BY w
ORDER BY w
