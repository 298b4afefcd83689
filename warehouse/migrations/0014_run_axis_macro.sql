-- Migration 14: one definition of a run's time axis for the windowed queries (10 of them had the
-- same `run` CTE): the run, its time zero (run_t0), the window width in ns and the run's length.
-- Used as `WITH run AS (SELECT * FROM run_axis($run_id, $window_s))`.
-- (Unusual aliases on purpose, as in run_t0: macro arguments are substituted as text.)
CREATE MACRO run_axis(rid, width_s) AS TABLE
    SELECT
        ax_run.run_id,
        run_t0(ax_run.run_id) AS t0_ns,
        CAST(round(width_s * 1e9) AS BIGINT) AS window_ns,
        ax_run.duration_s
    FROM runs ax_run
    WHERE ax_run.run_id = rid;
