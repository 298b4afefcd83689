-- Migration 17: capacity sweeps (flows/capacity.py), one row per load step of a sweep. The sweep's
-- capacity (the highest load meeting the SLO with every lower step meeting it) is repeated on each
-- row, and `knee` marks the step that is the capacity, so the nightly compares sweeps by one query.
CREATE TABLE capacity_steps (
    sweep_id          VARCHAR NOT NULL,
    step              INTEGER NOT NULL,  -- 0.. in the order the steps ran
    scenario_name     VARCHAR NOT NULL,
    load_kind         VARCHAR NOT NULL,  -- users (closed loop) | rate (open loop, requests/s)
    load              DOUBLE NOT NULL,
    run_id            VARCHAR NOT NULL,  -- the step's own run (its report, spikes, causes)
    metrics           JSON,              -- rca.capacity.step_metrics: throughput, goodput, percentiles
    attainment        DOUBLE,            -- good / judged requests (NULL: none judged)
    passed            BOOLEAN NOT NULL,  -- attainment >= target_attainment
    knee              BOOLEAN NOT NULL,  -- this step is the sweep's capacity
    capacity          DOUBLE,            -- the sweep's capacity (NULL: even the lowest step failed)
    first_fail        DOUBLE,            -- the lowest failing load above it (NULL: none failed)
    slo               JSON,              -- loadgen.metrics.SLO objectives, ms
    target_attainment DOUBLE NOT NULL,
    top_cause         VARCHAR,           -- worst spike's attributed cause; NULL: no spike
    started_ns        BIGINT NOT NULL,   -- when the sweep started
    PRIMARY KEY (sweep_id, step)
);
