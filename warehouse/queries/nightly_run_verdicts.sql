-- The nightly verdicts of one run, one row per metric, in the config's metric order.
WITH verdicts AS (
    SELECT v.*
    FROM nightly_verdicts v
    WHERE v.run_id = $run_id
),
ordered AS (
    SELECT *, list_position(['ttft_p50', 'ttft_p99', 'itl_p50', 'itl_p99', 'e2e_p50', 'e2e_p99',
                             'throughput', 'error_rate'], metric) AS pos
    FROM verdicts
)
SELECT metric, baseline, candidate, delta, ci_low, ci_high, rel_delta, run_noise, verdict, baseline_runs
FROM ordered
ORDER BY pos NULLS LAST, metric
