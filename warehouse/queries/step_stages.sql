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
ordered AS (
    -- each window's steps as one list in step order (one sort per window, not one per column)
    SELECT w, list(struct_pack(
               dur_ms, schedule_ms := coalesce(schedule_ms, 0), forward_ms := coalesce(forward_ms, 0),
               penalty_ms := coalesce(penalty_ms, 0), sample_ms := coalesce(sample_ms, 0),
               comm_ms := coalesce(comm_ms, 0), comm_max_ms, page_faults, other_ms, gc_ms,
               batch_size, prefill_tokens, decode_tokens, waiting, kv_usage, preempted) ORDER BY step) AS s,
           count(*) AS steps,
           quantile_cont(dur_ms, 0.99) AS step_p99_ms,
           max(dur_ms) AS step_max_ms,
           max(waiting) AS waiting_max,
           max(kv_usage) AS kv_usage_max
    FROM primary_steps
    GROUP BY w
),
per_window AS (
    -- sums of floats in step order: the same figures run after run, whatever order the
    -- threads hand the steps over in
    SELECT
        w,
        steps,
        list_avg(list_transform(s, lambda x: x.dur_ms))          AS step_mean_ms,
        step_p99_ms,
        step_max_ms,
        list_avg(list_transform(s, lambda x: x.schedule_ms))     AS schedule_ms,
        list_avg(list_transform(s, lambda x: x.forward_ms))      AS forward_ms,
        list_avg(list_transform(s, lambda x: x.penalty_ms))      AS penalty_ms,
        list_avg(list_transform(s, lambda x: x.sample_ms))       AS sample_ms,
        list_avg(list_transform(s, lambda x: x.comm_ms))         AS comm_ms,
        list_avg(list_transform(s, lambda x: x.comm_max_ms))     AS comm_max_ms,
        list_avg(list_transform(s, lambda x: x.page_faults))     AS page_faults,
        list_avg(list_transform(s, lambda x: x.other_ms))        AS other_ms,
        list_avg(list_transform(s, lambda x: x.gc_ms))           AS gc_ms,
        list_sum(list_transform(s, lambda x: x.gc_ms))           AS gc_ms_total,
        list_avg(list_transform(s, lambda x: x.batch_size))      AS batch_size,
        list_avg(list_transform(s, lambda x: x.prefill_tokens))  AS prefill_tokens,
        list_avg(list_transform(s, lambda x: x.decode_tokens))   AS decode_tokens,
        list_avg(list_transform(s, lambda x: x.waiting))         AS waiting,
        waiting_max,
        list_avg(list_transform(s, lambda x: x.kv_usage))        AS kv_usage,
        kv_usage_max,
        coalesce(list_sum(list_transform(s, lambda x: x.preempted)), 0) AS preemptions
    FROM ordered
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
