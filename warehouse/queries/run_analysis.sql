-- The stored analysis of one run (rca.analyze): its window width, with the run's measured duration.
WITH analysis AS (
    SELECT a.run_id, a.window_s, r.duration_s
    FROM analyses a
    JOIN runs r USING (run_id)
    WHERE a.run_id = $run_id
)
SELECT window_s, duration_s FROM analysis
