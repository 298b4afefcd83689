-- Every client latency sample of a run's measured phase on its time axis (seconds from the load
-- start), under the latency_samples macro's definitions (warehouse/macros.sql): TTFT at the first
-- token's arrival, ITL at the later chunk's, E2E at the last token's, all of ok requests. Read by
-- the evaluation's "did the fault act" judge (rca.acted), which must not see the detector's view.
WITH run AS (SELECT * FROM run_axis($run_id, 1.0)),
samples AS (
    SELECT s.metric, (s.ts_ns - run.t0_ns) / 1e9 AS t_s, s.value_ms
    FROM latency_samples($run_id) s, run
    WHERE s.ts_ns >= run.t0_ns
)
SELECT metric, t_s, value_ms FROM samples ORDER BY metric, t_s
