-- The stored spikes of one run in spike_id order; suppressed: a minor slowdown no engine signal
-- explains, stored but not reported (rca.config.AttributeConfig.report_unexplained_minor).
WITH spike AS (
    SELECT s.*
    FROM spikes s
    WHERE s.run_id = $run_id
)
SELECT spike.* REPLACE (coalesce(spike.suppressed, false) AS suppressed)
FROM spike
ORDER BY spike.spike_id
