-- Migration 4: the nightly regression's verdicts, one row per run and metric.
CREATE TABLE nightly_verdicts (
    run_id        VARCHAR NOT NULL,   -- the candidate nightly run
    scenario_name VARCHAR NOT NULL,
    metric        VARCHAR NOT NULL,   -- ttft_p50 … error_rate (flows/nightly_config.METRICS)
    baseline      DOUBLE,             -- statistic over the pooled baseline runs
    candidate     DOUBLE,
    delta         DOUBLE,             -- candidate - baseline
    ci_low        DOUBLE,             -- 95 % cluster-bootstrap CI of delta
    ci_high       DOUBLE,
    rel_delta     DOUBLE,
    verdict       VARCHAR NOT NULL,   -- regressed | improved | unchanged | insufficient | no-baseline
    baseline_runs VARCHAR[],          -- run ids pooled as the baseline
    PRIMARY KEY (run_id, metric)
);
