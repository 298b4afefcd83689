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
FROM step_gc($run_id) sg
CROSS JOIN run
JOIN per_step ps ON ps.step = sg.step
WHERE sg.run_id = run.run_id AND sg.rank = 0 AND sg.end_ns >= run.t0_ns
  AND (run.duration_s IS NULL OR sg.end_ns < run.t0_ns + CAST(run.duration_s * 1e9 AS BIGINT))
ORDER BY sg.end_ns
