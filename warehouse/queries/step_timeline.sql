-- Every rank-0 engine step of the run with its stage times, GC overlap and load signals,
-- as seconds from load_started_ns (steps of the warm-up are left out). Feeds attribution and the
-- report's step chart.
WITH run AS (
    SELECT
        r.run_id,
        coalesce(r.load_started_ns,
                 (SELECT min(q.sent_ns) FROM requests q
                  WHERE q.run_id = r.run_id AND coalesce(q.phase, 'measure') = 'measure')) AS t0_ns,
        r.duration_s
    FROM runs r
    WHERE r.run_id = $run_id
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
    coalesce(sg.preempted, 0) AS preempted
FROM step_gc sg, run
WHERE sg.run_id = run.run_id AND sg.rank = 0 AND sg.end_ns >= run.t0_ns
  AND (run.duration_s IS NULL OR sg.end_ns < run.t0_ns + CAST(run.duration_s * 1e9 AS BIGINT))
ORDER BY sg.end_ns
