-- Every latency sample of a run's measured phase with the request it belongs to (for the
-- nightly regression's cluster bootstrap): the latency_samples macro (warehouse/macros.sql),
-- plus error = 1 for a failed request else 0, over every measured request but the ones
-- cancelled at the end of the load (neither a success nor a failure).
SELECT metric, request_id, value_ms FROM latency_samples($run_id)
UNION ALL
SELECT 'error', request_id, CASE WHEN failed THEN 1.0 ELSE 0.0 END
FROM measured_requests($run_id)
WHERE ok OR failed
