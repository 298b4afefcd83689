-- The stored fault verdicts of one run (rca.findings): each injected fault and the spike matched.
WITH verdict AS (
    SELECT v.*
    FROM fault_verdicts v
    WHERE v.run_id = $run_id
)
SELECT verdict.kind, verdict.cause, verdict.start_s, verdict.end_s, verdict.params,
       verdict.spike_id, verdict.attributed_cause
FROM verdict
ORDER BY verdict.seq
