-- Every engine step of every rank with the series the report charts per step: collective wait
-- per rank (a straggler shows as the others waiting), KV occupancy, preemptions and the queue,
-- as seconds from load_started_ns (warm-up steps left out).
WITH run AS (
    SELECT r.run_id, run_t0(r.run_id) AS t0_ns
    FROM runs r
    WHERE r.run_id = $run_id
),
steps_of_run AS (
    SELECT s.*
    FROM steps s, run
    WHERE s.run_id = run.run_id AND s.end_ns >= run.t0_ns
)
SELECT
    (s.end_ns - run.t0_ns) / 1e9 AS t_s,
    s.step,
    s.rank,
    s.comm_ms,
    s.kv_blocks_used,
    s.kv_blocks_total,
    s.preempted,
    s.waiting
FROM steps_of_run s
CROSS JOIN run
ORDER BY s.rank, s.end_ns
