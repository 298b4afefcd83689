-- The evidence rows behind each (spike, cause) of one run.
WITH evidence_row AS (
    SELECT e.spike_id, e.cause, e.signal, e.value, e.baseline, e.unit, e.note, e.pearson_r
    FROM evidence e
    WHERE e.run_id = $run_id
)
SELECT * FROM evidence_row
ORDER BY spike_id, cause
