-- The latest earlier capacity sweeps of a scenario over the same kind of load (the nightly's
-- capacity baseline): one row per sweep with its capacity, newest first.
WITH sweeps AS (
    SELECT sweep_id, any_value(scenario_name) AS scenario_name, any_value(load_kind) AS load_kind,
           any_value(capacity) AS capacity, any_value(first_fail) AS first_fail,
           min(started_ns) AS started_ns, list(load ORDER BY load) AS loads
    FROM capacity_steps
    WHERE scenario_name = $scenario_name AND load_kind = $load_kind AND started_ns < $before_ns
    GROUP BY sweep_id
)
SELECT * FROM sweeps ORDER BY started_ns DESC LIMIT $last_n
