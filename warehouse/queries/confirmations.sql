-- The confirmations of one run's spikes (flows/confirm.py), by spike, the latest first.
WITH confirmation AS (
    SELECT c.*
    FROM confirmations c
    WHERE c.run_id = $run_id
)
SELECT confirmation.spike_id, confirmation.cause, confirmation.verdict, confirmation.reason,
       confirmation.intervention, confirmation.share_removed, confirmation.share_low,
       confirmation.share_high, confirmation.pairs, confirmation.page
FROM confirmation
ORDER BY confirmation.spike_id, confirmation.confirmed_ns DESC
