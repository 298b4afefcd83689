-- What `spikelens confirm` needs of a recorded run's stretch [$from_s, $to_s) (seconds from
-- load_started_ns): where its load started on the trace's clock (the first request's intended
-- send time is the replay trace's zero), the trace's length, and the stretch's median output
-- length of ok requests and arrivals per second (the penalty and load interventions' limits).
WITH run AS (SELECT load_started_ns FROM runs WHERE run_id = $run_id),
reqs AS (SELECT * FROM requests WHERE run_id = $run_id),
stretch AS (
    SELECT r.*
    FROM reqs r, run
    WHERE r.intended_send_ns >= run.load_started_ns + CAST($from_s * 1e9 AS BIGINT)
      AND r.intended_send_ns < run.load_started_ns + CAST($to_s * 1e9 AS BIGINT)
)
SELECT
    (SELECT load_started_ns FROM run) AS load_started_ns,
    (SELECT min(intended_send_ns) FROM reqs) AS first_send_ns,
    (SELECT (max(intended_send_ns) - min(intended_send_ns)) / 1e9 FROM reqs) AS trace_end_s,
    (SELECT quantile_cont(output_tokens, 0.5) FROM stretch WHERE status = 'ok') AS median_output_tokens,
    (SELECT count(*) FROM stretch) / greatest($to_s - $from_s, 1e-9) AS arrivals_per_s
