-- The causes of each stored spike of one run, largest share first.
WITH attribution AS (
    SELECT a.spike_id, a.cause, a.share, a.confidence
    FROM attributions a
    WHERE a.run_id = $run_id
)
SELECT * FROM attribution
ORDER BY spike_id, share DESC
