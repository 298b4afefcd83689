-- The newest runs of the warehouse (for an error message that names run ids one could use).
WITH newest AS (
    SELECT run_id, scenario_name, started_ns
    FROM runs
    ORDER BY started_ns DESC NULLS LAST, run_id DESC
    LIMIT $last_n
)
SELECT * FROM newest
