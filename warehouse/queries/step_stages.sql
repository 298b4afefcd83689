-- Engine step statistics per window of $window_s seconds from load_started_ns (rank 0's steps,
-- each in the window of its end; comm_max_ms: the longest wait across ranks). Stage columns are means per step in ms and still include any
-- GC pause that landed in them; gc_ms is the mean GC overlap per step (subtract it to attribute).
WITH run AS (SELECT * FROM run_axis($run_id, $window_s)),
step_gc AS (
    -- schema.sql's step_gc view for this run's steps, with its GC overlap join bucketed by second
    -- (the view compares every step with every pause of its rank: steps × pauses). Each step and
    -- each pause is listed under every second it touches; a (step, pause) pair is counted in the
    -- later of their first seconds only, which both touch when they overlap: the same pairs,
    -- so the same rows as the view.
    WITH own_steps AS (
        SELECT s.* FROM steps s, run WHERE s.run_id = run.run_id
    ),
    step_secs AS (
        SELECT s.step, s.rank, s.start_ns, s.end_ns, t.sec,
               least(s.start_ns, s.end_ns) // 1000000000 AS first_sec
        FROM own_steps s,
             unnest(range(least(s.start_ns, s.end_ns) // 1000000000,
                          greatest(s.start_ns, s.end_ns) // 1000000000 + 1)) AS t(sec)
    ),
    gc_secs AS (
        SELECT coalesce(g.rank, 0) AS rank, g.start_ns, g.end_ns, g.generation, t.sec,
               least(g.start_ns, g.end_ns) // 1000000000 AS first_sec
        FROM gc g, run,
             unnest(range(least(g.start_ns, g.end_ns) // 1000000000,
                          greatest(g.start_ns, g.end_ns) // 1000000000 + 1)) AS t(sec)
        WHERE g.run_id = run.run_id
    ),
    gc_overlaps AS (
        SELECT s.step, s.rank,
               sum(least(s.end_ns, g.end_ns) - greatest(s.start_ns, g.start_ns)) / 1e6 AS gc_ms,
               max(g.generation) AS gc_max_generation,
               count(*) AS gc_count
        FROM step_secs s
        JOIN gc_secs g
          ON g.rank = s.rank AND g.sec = s.sec
         AND s.sec = greatest(s.first_sec, g.first_sec)
         AND g.start_ns < s.end_ns AND g.end_ns > s.start_ns
        GROUP BY ALL
    )
    SELECT
        s.*,
        (s.end_ns - s.start_ns) / 1e6 AS dur_ms,
        greatest(0, (s.end_ns - s.start_ns) / 1e6
            - coalesce(s.schedule_ms, 0) - coalesce(s.forward_ms, 0) - coalesce(s.penalty_ms, 0)
            - coalesce(s.sample_ms, 0) - coalesce(s.comm_ms, 0)) AS other_ms,
        coalesce(o.gc_ms, 0) AS gc_ms,
        o.gc_max_generation,
        coalesce(o.gc_count, 0) AS gc_count,
        CAST(s.kv_blocks_used AS DOUBLE) / nullif(s.kv_blocks_total, 0) AS kv_usage
    FROM own_steps s
    LEFT JOIN gc_overlaps o ON o.step = s.step AND o.rank = s.rank
),
cross_rank AS (
    -- the longest collective wait of each step across ranks: a late rank shows as the others' wait
    SELECT s.step, max(coalesce(s.comm_ms, 0)) AS comm_max_ms, max(s.page_faults) AS page_faults
    FROM steps s, run
    WHERE s.run_id = run.run_id
    GROUP BY s.step
),
primary_steps AS (
    SELECT sg.*, cr.comm_max_ms, cr.page_faults, CAST(floor((sg.end_ns - run.t0_ns) / run.window_ns) AS BIGINT) AS w
    FROM step_gc sg
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
