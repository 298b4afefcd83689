-- Migration 2: the results of rca.analyze (spikes, their cause attributions and the evidence).
-- Derived data: analyze_run replaces a run's rows; ingest_run deletes them (they would be stale).

CREATE TABLE analyses (
    run_id      VARCHAR PRIMARY KEY,
    window_s    DOUBLE NOT NULL,       -- window width the analysis used
    baselines   JSON,                  -- per series: median_ms, spread_ms, threshold_ms, valid_windows
    config      JSON,                  -- detection and attribution settings used
    analysed_at TIMESTAMP NOT NULL DEFAULT current_timestamp
);

CREATE TABLE spikes (
    run_id         VARCHAR NOT NULL,
    spike_id       INTEGER NOT NULL,   -- 1.. in time order within the run
    metric         VARCHAR NOT NULL,   -- primary series: itl_p99 | ttft_p99 | e2e_p99
    metrics        VARCHAR[],          -- every series that spiked in this incident
    detector       VARCHAR NOT NULL,   -- 'mad' (robust baseline) | 'changepoint' | 'metric_rank'
    start_s        DOUBLE NOT NULL,    -- seconds from load_started_ns (window start)
    end_s          DOUBLE NOT NULL,    -- seconds from load_started_ns (end of last window)
    peak_ms        DOUBLE,
    baseline_ms    DOUBLE,
    severity       VARCHAR,            -- minor | major | critical (by peak / baseline)
    severity_score DOUBLE,             -- sum over windows of relative excess x window_s
    top_cause      VARCHAR,
    summary        VARCHAR,            -- the top cause in words, e.g. "GC gen-2 pauses, 187 ms on average"
    coverage       DOUBLE,             -- fraction of the latency rise the step slowdown accounts for
    PRIMARY KEY (run_id, spike_id)
);

CREATE TABLE attributions (
    run_id     VARCHAR NOT NULL,
    spike_id   INTEGER NOT NULL,
    cause      VARCHAR NOT NULL,       -- penalty | memory | communication | load | unexplained
    share      DOUBLE NOT NULL,        -- of the excess latency; shares of a spike sum to <= 1
    confidence DOUBLE NOT NULL,        -- 0..1
    excess_ms  DOUBLE,                 -- excess step time per step this cause explains
    PRIMARY KEY (run_id, spike_id, cause)
);

CREATE TABLE evidence (
    run_id    VARCHAR NOT NULL,
    spike_id  INTEGER NOT NULL,
    cause     VARCHAR NOT NULL,
    signal    VARCHAR NOT NULL,
    value     DOUBLE,                  -- during the spike
    baseline  DOUBLE,                  -- in baseline windows
    unit      VARCHAR,
    note      VARCHAR,
    pearson_r DOUBLE                   -- of the signal with the latency series across the run
);
