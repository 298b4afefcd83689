-- GC pauses per window of $window_s seconds from load_started_ns and process (pid, role), from
-- the GC hook inside each process: pause time clipped to the window (a pause across an edge is
-- split), the number of collections starting in it, the longest and the full (gen-2) ones; for a
-- run imported from Prometheus, the same from `spikelens agent`'s pause histogram.
-- Windows in which a process did not collect have no row.
WITH run AS (SELECT * FROM run_axis($run_id, $window_s)),
pieces AS (
    SELECT g.pid, g.role, g.generation, g.start_ns, g.end_ns, t.w,
           least(g.end_ns, run.t0_ns + (t.w + 1) * run.window_ns)
             - greatest(g.start_ns, run.t0_ns + t.w * run.window_ns) AS ns,
           g.start_ns >= run.t0_ns + t.w * run.window_ns AS starts_here
    FROM process_gc g, run,
         unnest(range(CAST(floor((g.start_ns - run.t0_ns) / run.window_ns) AS BIGINT),
                      CAST(floor((greatest(g.end_ns - 1, g.start_ns) - run.t0_ns) / run.window_ns) AS BIGINT) + 1)) AS t(w)
    WHERE g.run_id = run.run_id AND g.end_ns >= g.start_ns AND g.end_ns >= run.t0_ns
      AND (run.duration_s IS NULL OR g.start_ns < run.t0_ns + CAST(run.duration_s * 1e9 AS BIGINT))
),
hook_windows AS (
    SELECT
        w AS "window",
        pid,
        any_value(role) AS role,
        sum(ns) / 1e6 AS pause_ms,
        count(*) FILTER (WHERE starts_here) AS collections,
        count(*) FILTER (WHERE starts_here AND generation = 2) AS full_collections,
        max(end_ns - start_ns) / 1e6 AS max_pause_ms
    FROM pieces
    WHERE w >= 0
    GROUP BY w, pid
),
agent_increases AS (
    SELECT 'sum' AS part, * FROM agent_counter_increases($run_id, 'spikelens_agent_gc_pause_seconds_sum')
    UNION ALL
    SELECT 'count' AS part, * FROM agent_counter_increases($run_id, 'spikelens_agent_gc_pause_seconds_count')
),
agent_windows AS (
    -- a run imported from Prometheus, without the hook's files: the agent's pause histogram per
    -- process and generation, its _sum and _count increases per window; a histogram does not
    -- keep the longest pause (NULL)
    SELECT
        CAST(floor((a.ts_ns - run.t0_ns) / run.window_ns) AS BIGINT) AS "window",
        a.pid,
        any_value(a.role) AS role,
        coalesce(sum(a.increase) FILTER (WHERE a.part = 'sum'), 0) * 1e3 AS pause_ms,
        CAST(coalesce(sum(a.increase) FILTER (WHERE a.part = 'count'), 0) AS BIGINT) AS collections,
        CAST(coalesce(sum(a.increase) FILTER (WHERE a.part = 'count' AND a.generation = '2'), 0) AS BIGINT)
            AS full_collections,
        CAST(NULL AS DOUBLE) AS max_pause_ms
    FROM agent_increases a, run
    WHERE a.ts_ns >= run.t0_ns
      AND (run.duration_s IS NULL OR a.ts_ns < run.t0_ns + CAST(run.duration_s * 1e9 AS BIGINT))
      AND NOT EXISTS (SELECT 1 FROM process_gc x WHERE x.run_id = $run_id)
    GROUP BY 1, a.pid
    HAVING pause_ms > 0 OR collections > 0
)
SELECT * FROM hook_windows
UNION ALL
SELECT * FROM agent_windows
ORDER BY "window", pid
