-- The steps of one capacity sweep in load order, as flows/capacity.py stored them: what the
-- capacity page shows (pages/capacity.py), with the knee's loads and run ids on every row.
WITH step AS (
    SELECT c.*
    FROM capacity_steps c
    WHERE c.sweep_id = $sweep_id
),
knee AS (
    SELECT
        any_value(run_id) FILTER (WHERE knee) AS capacity_run_id,
        any_value(run_id) FILTER (WHERE load = first_fail) AS first_fail_run_id
    FROM step
)
SELECT step.*, knee.capacity_run_id, knee.first_fail_run_id
FROM step, knee
ORDER BY step.load, step.step
