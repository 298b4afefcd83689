-- Every rank-0 engine step of the run with its stage times, GC overlap, load signals and, across
-- ranks, the longest collective wait of the step and the rank that waited least (the straggler),
-- page faults and CUDA allocator retries in the step (null where the engine does not report them),
-- as seconds from load_started_ns (steps of the warm-up are left out). Feeds attribution and the
-- report's step chart.
WITH run AS (
    SELECT
        r.run_id,
        run_t0(r.run_id) AS t0_ns,
        r.duration_s
    FROM runs r
    WHERE r.run_id = $run_id
),
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
per_step AS (
    -- across ranks: the longest collective wait (a late rank makes the others wait) and the rank
    -- that waited least (the straggler, when there are several ranks)
    SELECT s.step, count(*) AS n_ranks, max(coalesce(s.comm_ms, 0)) AS comm_max_ms,
           arg_min(s.rank, coalesce(s.comm_ms, 0)) AS least_wait_rank,
           max(s.page_faults) AS page_faults,          -- the rank that faulted most
           max(s.alloc_retries) AS alloc_retries        -- cumulative per rank: the largest count
    FROM steps s, run
    WHERE s.run_id = run.run_id
    GROUP BY s.step
)
SELECT
    (sg.end_ns - run.t0_ns) / 1e9 AS t_s,
    sg.step,
    sg.dur_ms,
    coalesce(sg.schedule_ms, 0) AS schedule_ms,
    coalesce(sg.forward_ms, 0)  AS forward_ms,
    coalesce(sg.penalty_ms, 0)  AS penalty_ms,
    coalesce(sg.sample_ms, 0)   AS sample_ms,
    coalesce(sg.comm_ms, 0)     AS comm_ms,
    sg.other_ms,
    sg.gc_ms,
    sg.batch_size,
    sg.prefill_tokens,
    sg.decode_tokens,
    sg.waiting,
    sg.kv_usage,
    coalesce(sg.preempted, 0) AS preempted,
    ps.n_ranks,
    ps.comm_max_ms,
    CASE WHEN ps.n_ranks > 1 THEN ps.least_wait_rank END AS straggler_rank,
    ps.page_faults,
    ps.alloc_retries - lag(ps.alloc_retries) OVER (ORDER BY sg.step) AS alloc_retries_delta
FROM step_gc sg
CROSS JOIN run
JOIN per_step ps ON ps.step = sg.step
WHERE sg.run_id = run.run_id AND sg.rank = 0 AND sg.end_ns >= run.t0_ns
  AND (run.duration_s IS NULL OR sg.end_ns < run.t0_ns + CAST(run.duration_s * 1e9 AS BIGINT))
ORDER BY sg.end_ns
