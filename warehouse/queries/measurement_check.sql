-- How far the load generator's TTFT and E2E (to the end of the stream, at both ends) are from the
-- engine server's socket-side times
-- (server_requests, engine/server/wire_clock.py), per measured request that both sides saw.
-- With kernel clocks at both ends (requests.arrival_clock and server_requests.received_clock
-- 'kernel') the difference is the loopback or network transit and each side's stamping overhead:
-- 0.08-0.09 ms p99 at 64 streams on 2 quiet cores. With read-time clocks it also holds the client's
-- read delay and the time the server's event loop left a request unread (up to ~150 ms p99
-- there). kernel_stamped_share: the share of pairs stamped by the kernel at both ends (a first token
-- that came merged with a later packet, arrival_clock 'merged', is not: its time is that packet's). No rows in
-- server_requests (an external target): NULL figures.
-- The server's first-text time is an interval: its write began at first_content_ns and returned
-- at first_content_sent_ns, and on loopback the client's socket had the bytes in between. The
-- TTFT difference is how far the client's TTFT lies outside it, so a server thread preempted in
-- that call (p99 4.9 ms with two CPU hogs on the 2 cores) is not counted as the client's error.
-- ITL: each inter-token gap against the same gap between the server's writes (macro
-- chunk_gap_pairs); NULL where the server did not stamp its chunks (older runs).
WITH measured AS (
    SELECT request_id, sent_ns, first_token_ns, done_ns, arrival_clock
    FROM measured_requests($run_id)
    WHERE ok
),
paired AS (
    SELECT
        greatest(
            0,
            (s.first_content_ns - s.received_ns) - (m.first_token_ns - m.sent_ns),
            (m.first_token_ns - m.sent_ns)
                - (coalesce(s.first_content_sent_ns, s.first_content_ns) - s.received_ns)
        ) / 1e6 AS ttft_diff_ms,
        abs((m.done_ns - m.sent_ns) - (s.done_ns - s.received_ns)) / 1e6 AS e2e_diff_ms,
        coalesce(m.arrival_clock = 'kernel' AND s.received_clock = 'kernel', false) AS kernel_stamped
    FROM measured m
    JOIN server_requests s ON s.run_id = $run_id AND s.request_id = m.request_id
    WHERE s.status = 200 AND s.first_content_ns IS NOT NULL AND s.done_ns IS NOT NULL
      AND m.first_token_ns IS NOT NULL AND m.done_ns IS NOT NULL
)
SELECT
    count(*) AS requests,
    quantile_cont(ttft_diff_ms, 0.5) AS ttft_diff_p50_ms,
    quantile_cont(ttft_diff_ms, 0.99) AS ttft_diff_p99_ms,
    quantile_cont(e2e_diff_ms, 0.5) AS e2e_diff_p50_ms,
    quantile_cont(e2e_diff_ms, 0.99) AS e2e_diff_p99_ms,
    avg(kernel_stamped::INTEGER) AS kernel_stamped_share,
    any_value(gaps.itl_diff_p50_ms) AS itl_diff_p50_ms,
    any_value(gaps.itl_diff_p99_ms) AS itl_diff_p99_ms
FROM paired,
     (SELECT quantile_cont(abs(client_itl_ms - server_itl_ms), 0.5) AS itl_diff_p50_ms,
             quantile_cont(abs(client_itl_ms - server_itl_ms), 0.99) AS itl_diff_p99_ms
      FROM chunk_gap_pairs($run_id)) gaps
