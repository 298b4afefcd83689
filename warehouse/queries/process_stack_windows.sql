-- py-spy stack samples per window of $window_s seconds from load_started_ns, process and code
-- region: the time its threads were sampled in each region (a segment of d ns stands for
-- d × rate samples), as a share of all its sampled thread time (idle included) and of its busy
-- time (idle left out). A segment that spans windows is split at their edges.
-- GC: py-spy cannot see the collector, so the part of a non-idle segment that falls inside a
-- pause the GC hook recorded for the same process counts as `gc` (while one thread collects,
-- every other thread of the process waits for the GIL). Pauses are matched to pieces window by
-- window (an interval join bucketed by window), never across the whole run. A run imported from
-- Prometheus has the same rows from `spikelens agent`'s per-region counters.
WITH run AS (SELECT * FROM run_axis($run_id, $window_s)),
segments AS (
    SELECT s.pid, s.role, s.tid, s.region, s.start_ns, s.end_ns,
           CAST(floor((s.start_ns - run.t0_ns) / run.window_ns) AS BIGINT) AS w_first,
           CAST(floor((s.end_ns - 1 - run.t0_ns) / run.window_ns) AS BIGINT) AS w_last
    FROM process_stacks s, run
    WHERE s.run_id = run.run_id AND s.end_ns > s.start_ns AND s.end_ns > run.t0_ns
      AND (run.duration_s IS NULL OR s.start_ns < run.t0_ns + CAST(run.duration_s * 1e9 AS BIGINT))
),
segment_windows AS (
    -- first and last window as plain rows; only a segment over 3+ windows is unnested (a
    -- lateral unnest over every segment costs more than the rest of the query)
    SELECT *, w_first AS w FROM segments
    UNION ALL
    SELECT *, w_last AS w FROM segments WHERE w_last > w_first
    UNION ALL
    SELECT sg.*, t.w FROM segments sg, unnest(range(sg.w_first + 1, sg.w_last)) AS t(w)
    WHERE sg.w_last > sg.w_first + 1
),
pieces AS (
    SELECT sw.pid, sw.role, sw.tid, sw.region, sw.start_ns, sw.end_ns, sw.w,
           greatest(sw.start_ns, run.t0_ns + sw.w * run.window_ns) AS lo,
           least(sw.end_ns, run.t0_ns + (sw.w + 1) * run.window_ns) AS hi
    FROM segment_windows sw, run
),
span AS (
    SELECT min(w) AS w_lo, max(w) AS w_hi FROM pieces
),
pauses AS (
    -- each GC pause once per window it touches (clipped to the windows that have pieces), so a
    -- piece is compared only with the pauses of its own window: cost linear in the run's length
    -- rather than pieces × pauses; a pause overlapping a piece always touches the piece's window
    SELECT g.pid, g.start_ns, g.end_ns, t.w
    FROM process_gc g, run, span,
         unnest(range(
             greatest(span.w_lo, CAST(floor((least(g.start_ns, g.end_ns) - run.t0_ns) / run.window_ns) AS BIGINT)),
             least(span.w_hi, CAST(floor((greatest(g.start_ns, g.end_ns) - run.t0_ns) / run.window_ns) AS BIGINT)) + 1
         )) AS t(w)
    WHERE g.run_id = run.run_id
),
in_gc AS (
    SELECT p.pid, p.tid, p.lo, p.hi, sum(least(p.hi, g.end_ns) - greatest(p.lo, g.start_ns)) AS gc_ns
    FROM pieces p
    JOIN pauses g ON g.pid = p.pid AND g.w = p.w AND g.start_ns < p.hi AND g.end_ns > p.lo
    WHERE p.region <> 'idle'
    GROUP BY p.pid, p.tid, p.lo, p.hi
),
split AS (
    SELECT p.w, p.pid, p.role, p.region, (p.hi - p.lo) - coalesce(g.gc_ns, 0) AS ns
    FROM pieces p LEFT JOIN in_gc g USING (pid, tid, lo, hi)
    WHERE p.w >= 0
    UNION ALL
    SELECT p.w, p.pid, p.role, 'gc' AS region, g.gc_ns AS ns
    FROM pieces p JOIN in_gc g USING (pid, tid, lo, hi)
    WHERE p.w >= 0
),
hook_regions AS (
    SELECT w, pid, any_value(role) AS role, region, sum(ns) AS ns
    FROM split
    GROUP BY w, pid, region
),
agent_regions AS (
    -- a run imported from Prometheus, without stack files: the sampled thread time per region
    -- that `spikelens agent` counted (its py-spy does not see the collector either, and has no
    -- pause intervals to split by: GC time stays in the region it interrupted)
    SELECT CAST(floor((a.ts_ns - run.t0_ns) / run.window_ns) AS BIGINT) AS w, a.pid,
           any_value(a.role) AS role, a.region, sum(a.increase) * 1e9 AS ns
    FROM agent_counter_increases($run_id, 'spikelens_agent_stack_seconds_total') a, run
    WHERE a.ts_ns >= run.t0_ns
      AND (run.duration_s IS NULL OR a.ts_ns < run.t0_ns + CAST(run.duration_s * 1e9 AS BIGINT))
      AND NOT EXISTS (SELECT 1 FROM process_stacks x WHERE x.run_id = $run_id)
    GROUP BY 1, a.pid, a.region
),
per_region AS (
    SELECT * FROM hook_regions
    UNION ALL
    SELECT * FROM agent_regions
)
SELECT
    w AS "window",
    pid,
    role,
    region,
    ns / 1e6 AS sampled_ms,
    ns / sum(ns) OVER (PARTITION BY w, pid) AS share,
    CASE WHEN region = 'idle' THEN NULL
         ELSE ns / nullif(sum(CASE WHEN region <> 'idle' THEN ns END) OVER (PARTITION BY w, pid), 0)
    END AS busy_share
FROM per_region
WHERE ns > 0
ORDER BY w, pid, region
