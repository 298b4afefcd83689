-- A run's spikes, worst first (by severity score), with the top cause's share: what the capacity
-- page names as the cause of a step's spikes.
WITH spiked AS (
    SELECT s.run_id, s.spike_id, s.metric, s.start_s, s.end_s, s.peak_ms, s.baseline_ms,
           s.severity, s.severity_score, s.top_cause, s.summary
    FROM spikes s
    WHERE s.run_id = $run_id
),
shares AS (
    SELECT a.spike_id, a.share, a.confidence
    FROM attributions a
    JOIN spiked ON a.run_id = spiked.run_id AND a.spike_id = spiked.spike_id
               AND a.cause = spiked.top_cause
)
SELECT spiked.*, shares.share AS top_share, shares.confidence AS top_confidence
FROM spiked LEFT JOIN shares USING (spike_id)
ORDER BY severity_score DESC NULLS LAST, spike_id
