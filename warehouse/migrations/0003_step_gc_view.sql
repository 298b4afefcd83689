-- Migration 3: step_gc, every engine step with the GC pause time that overlaps it.
-- A GC pause lands inside whichever stage is running, so stage times include it; queries subtract
-- gc_ms before attributing stage time. A GC row without a rank belongs to rank 0 (one process).
-- other_ms is the part of the step no stage timer covers (Python glue, streaming out).

CREATE VIEW step_gc AS
WITH gc_ranked AS (
    SELECT run_id, coalesce(rank, 0) AS rank, start_ns, end_ns, generation FROM gc
),
gc_overlaps AS (
    SELECT s.run_id, s.step, s.rank,
           sum(least(s.end_ns, g.end_ns) - greatest(s.start_ns, g.start_ns)) / 1e6 AS gc_ms,
           max(g.generation) AS gc_max_generation,
           count(*) AS gc_count
    FROM steps s
    JOIN gc_ranked g
      ON g.run_id = s.run_id AND g.rank = s.rank
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
FROM steps s
LEFT JOIN gc_overlaps o ON o.run_id = s.run_id AND o.step = s.step AND o.rank = s.rank;
