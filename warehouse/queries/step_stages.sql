-- Engine step statistics per window of $window_s seconds from load_started_ns (rank 0's steps,
-- each in the window of its end; comm_max_ms: the longest wait across ranks). Stage columns are means per step in ms and still include any
-- GC pause that landed in them; gc_ms is the mean GC overlap per step (subtract it to attribute).
WITH run AS (SELECT * FROM run_axis($run_id, $window_s)),
cross_rank AS (
    -- the longest collective wait of each step across ranks: a late rank shows as the others' wait
    SELECT s.step, max(coalesce(s.comm_ms, 0)) AS comm_max_ms, max(s.page_faults) AS page_faults
    FROM steps s, run
    WHERE s.run_id = run.run_id
    GROUP BY s.step
),
primary_steps AS (
    SELECT sg.*, cr.comm_max_ms, cr.page_faults, CAST(floor((sg.end_ns - run.t0_ns) / run.window_ns) AS BIGINT) AS w
    FROM step_gc($run_id) sg
    CROSS JOIN run
    JOIN cross_rank cr ON cr.step = sg.step
    WHERE sg.run_id = run.run_id AND sg.rank = 0 AND sg.end_ns >= run.t0_ns
),
grid AS (SELECT w FROM window_grid($run_id, $window_s)),
per_window AS (
    -- sums of floats in step order: the same figures run after run, whatever order the
    -- threads hand the steps over in
    SELECT
        w,
        count(*)                         AS steps,
        avg(dur_ms ORDER BY step)                      AS step_mean_ms,
        quantile_cont(dur_ms, 0.99)      AS step_p99_ms,
        max(dur_ms)                      AS step_max_ms,
        avg(coalesce(schedule_ms, 0) ORDER BY step)    AS schedule_ms,
        avg(coalesce(forward_ms, 0) ORDER BY step)     AS forward_ms,
        avg(coalesce(penalty_ms, 0) ORDER BY step)     AS penalty_ms,
        avg(coalesce(sample_ms, 0) ORDER BY step)      AS sample_ms,
        avg(coalesce(comm_ms, 0) ORDER BY step)        AS comm_ms,
        avg(comm_max_ms ORDER BY step)                 AS comm_max_ms,
        avg(page_faults ORDER BY step)                 AS page_faults,
        avg(other_ms ORDER BY step)                    AS other_ms,
        avg(gc_ms ORDER BY step)                       AS gc_ms,
        sum(gc_ms ORDER BY step)                       AS gc_ms_total,
        avg(batch_size ORDER BY step)                  AS batch_size,
        avg(prefill_tokens ORDER BY step)              AS prefill_tokens,
        avg(decode_tokens ORDER BY step)               AS decode_tokens,
        avg(waiting ORDER BY step)                     AS waiting,
        max(waiting)                     AS waiting_max,
        avg(kv_usage ORDER BY step)                    AS kv_usage,
        max(kv_usage)                    AS kv_usage_max,
        coalesce(sum(preempted ORDER BY step), 0)      AS preemptions
    FROM primary_steps
    GROUP BY w
)
SELECT
    g.w AS "window",
    g.w * run.window_ns / 1e9 AS t_s,
    coalesce(p.steps, 0) AS steps,
    p.* EXCLUDE (w, steps)
FROM grid g
CROSS JOIN run
LEFT JOIN per_window p ON p.w = g.w
ORDER BY g.w
