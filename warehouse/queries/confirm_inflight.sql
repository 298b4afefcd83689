-- How long before a spike's start ($spike_s, seconds from load_started_ns) the earliest request
-- still in flight at that start was meant to be sent: the requests present during the spike are
-- its load, and they arrived up to one queue-and-service time before it (`spikelens confirm`
-- thins the arrivals from there). 0 when no request straddles the start.
WITH run AS (
    SELECT load_started_ns + CAST($spike_s * 1e9 AS BIGINT) AS spike_ns
    FROM runs
    WHERE run_id = $run_id
),
straddling AS (
    SELECT r.intended_send_ns
    FROM requests r, run
    WHERE r.run_id = $run_id
      AND r.intended_send_ns < run.spike_ns
      AND r.done_ns > run.spike_ns
)
SELECT coalesce(((SELECT spike_ns FROM run) - (SELECT min(intended_send_ns) FROM straddling)) / 1e9, 0.0)
    AS lead_s
