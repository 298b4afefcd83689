-- The stored comparison of one run (rca.findings): each signal normal vs inside the spikes.
WITH comparison AS (
    SELECT c.*
    FROM spike_comparison c
    WHERE c.run_id = $run_id
)
SELECT comparison.signal, comparison.unit, comparison.normal, comparison.spike
FROM comparison
ORDER BY comparison.seq
