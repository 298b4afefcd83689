-- Queueing in a run's measured phase from the engine's own steps (rank 0): how many sequences
-- waited for a batch slot after each step was scheduled, and how full the batch was.
WITH run AS (
    SELECT r.run_id, run_t0(r.run_id) AS t0_ns, r.load_started_ns + CAST(r.duration_s * 1e9 AS BIGINT) AS end_ns
    FROM runs r
    WHERE r.run_id = $run_id
),
measured AS (
    SELECT s.waiting, s.batch_size, s.preempted
    FROM steps s, run
    WHERE s.run_id = run.run_id AND s.rank = 0
      AND s.start_ns >= run.t0_ns AND (run.end_ns IS NULL OR s.start_ns < run.end_ns)
)
SELECT count(*) AS steps,
       quantile_cont(waiting, 0.5) AS waiting_p50,
       quantile_cont(waiting, 0.9) AS waiting_p90,
       avg(batch_size) AS batch_mean,
       max(batch_size) AS batch_max,
       sum(preempted) AS preempted
FROM measured
