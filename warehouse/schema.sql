-- spikelens warehouse schema, version 15.
--
-- The tables hold the files of a run directory (docs/design.md, "Files in a run directory") and the analysis made from
-- them. warehouse.db.connect() applies this file once to an empty database, then every
-- migrations/NNNN_*.sql above 15 in order. This file is the pre-release history (versions 1-15)
-- squashed into one: it is never edited again; a change to the schema is a new migration file,
-- numbered from 0016 on.
--
-- Every table carries run_id: a run is ingested (and re-ingested) as one unit.
-- Timestamps are integer nanoseconds of the wall clock (time.time_ns()), as in the run files.

CREATE TABLE schema_version (
    version    INTEGER PRIMARY KEY,   -- 15 = this file; N > 15 = migrations/NNNN_*.sql
    name       VARCHAR NOT NULL,
    applied_at TIMESTAMP NOT NULL DEFAULT current_timestamp
);

---------------------------------------------------------------------------------------------------
-- Raw run files
---------------------------------------------------------------------------------------------------

-- run.json, one row per run; nested values kept as JSON text.
CREATE TABLE runs (
    run_id          VARCHAR PRIMARY KEY,
    scenario_name   VARCHAR,
    scenario_path   VARCHAR,
    scenario        JSON,
    engine          JSON,
    faults_spec     JSON,       -- the scenario's fault list as given (ground truth is the faults table)
    git_commit      VARCHAR,
    host            VARCHAR,
    command         VARCHAR,
    status          VARCHAR,
    errors          JSON,
    started_ns      BIGINT,
    ended_ns        BIGINT,
    load_started_ns BIGINT,     -- t = 0 of every window and every time shown in a report
    warmup_s        DOUBLE,
    duration_s      DOUBLE,
    run_json        JSON,       -- the whole file, so keys added later are not lost
    ingested_at     TIMESTAMP NOT NULL DEFAULT current_timestamp
);

-- requests.parquet (client view), one row per request.
CREATE TABLE requests (
    run_id               VARCHAR NOT NULL,
    request_id           VARCHAR NOT NULL,
    "user"               VARCHAR,
    phase                VARCHAR,   -- 'warmup' | 'measure'
    intended_send_ns     BIGINT,
    sent_ns              BIGINT,
    first_token_ns       BIGINT,
    done_ns              BIGINT,
    prompt_tokens        INTEGER,
    output_tokens        INTEGER,
    status               VARCHAR,   -- 'ok' | 'error' | 'cancelled' (in flight when the load stopped)
    error                VARCHAR,
    temperature          DOUBLE,
    top_p                DOUBLE,
    top_k                INTEGER,
    min_p                DOUBLE,
    frequency_penalty    DOUBLE,
    presence_penalty     DOUBLE,
    repetition_penalty   DOUBLE,
    max_tokens           INTEGER,
    worker               VARCHAR,   -- the Locust process that sent it
    prompt_tokens_target INTEGER,   -- drawn prompt length before the chat template
    token_count_source   VARCHAR,   -- 'usage' | 'chunks'
    n_chunks             INTEGER,   -- content chunks received
    http_status          INTEGER,   -- 0 when no response came
    finish_reason        VARCHAR,
    fault                VARCHAR,   -- loadgen fault that shaped the request
    seed                 BIGINT,
    -- which clock the send and arrival times come from: 'kernel' (sendall / the kernel's receive
    -- time of each read, loadgen/timed_socket.py), 'merged' (the first token shared a later
    -- packet's receive time), 'read' (stamped when read); NULL: older runs
    arrival_clock        VARCHAR
);

-- tokens.parquet, one row per streamed chunk.
CREATE TABLE tokens (
    run_id     VARCHAR NOT NULL,
    request_id VARCHAR NOT NULL,
    "index"    INTEGER NOT NULL,  -- chunk order within the request
    arrival_ns BIGINT NOT NULL,
    n_tokens   INTEGER            -- 0 for chunks without content (role, usage)
);

-- steps.parquet, one row per engine step and rank.
CREATE TABLE steps (
    run_id          VARCHAR NOT NULL,
    step            BIGINT NOT NULL,
    rank            INTEGER NOT NULL,
    start_ns        BIGINT NOT NULL,
    end_ns          BIGINT NOT NULL,
    batch_size      INTEGER,
    prefill_tokens  INTEGER,
    decode_tokens   INTEGER,
    schedule_ms     DOUBLE,
    forward_ms      DOUBLE,
    penalty_ms      DOUBLE,
    sample_ms       DOUBLE,
    comm_ms         DOUBLE,
    kv_blocks_used  INTEGER,
    kv_blocks_total INTEGER,
    preempted       INTEGER,   -- sequences preempted in this step
    waiting         INTEGER,   -- sequences waiting for admission after scheduling
    page_faults     BIGINT,    -- page faults of the stepping thread in the step
    alloc_retries   BIGINT     -- CUDA caching-allocator retries so far (cumulative)
);

-- gc.parquet, one row per garbage collection.
CREATE TABLE gc (
    run_id     VARCHAR NOT NULL,
    pid        INTEGER,
    rank       INTEGER,
    start_ns   BIGINT NOT NULL,
    end_ns     BIGINT NOT NULL,
    generation INTEGER,
    collected  BIGINT
);

-- nvml.parquet, one row per sample and GPU (null where the device does not report a field).
CREATE TABLE nvml (
    run_id              VARCHAR NOT NULL,
    ts_ns               BIGINT NOT NULL,
    gpu                 INTEGER,
    util_gpu            DOUBLE,
    util_mem            DOUBLE,
    mem_used            BIGINT,
    mem_total           BIGINT,
    sm_clock            DOUBLE,
    mem_clock           DOUBLE,
    power_w             DOUBLE,
    temp_c              DOUBLE,
    pstate              INTEGER,
    clock_event_reasons BIGINT,
    pcie_tx             DOUBLE,
    pcie_rx             DOUBLE
);

-- faults.parquet and faults.loadgen.parquet (every faults*.parquet), the ground truth.
CREATE TABLE faults (
    run_id      VARCHAR NOT NULL,
    kind        VARCHAR NOT NULL,
    cause       VARCHAR,
    start_ns    BIGINT,
    end_ns      BIGINT,
    params      JSON,
    source_file VARCHAR    -- which faults*.parquet the row came from
);

-- engine_requests.parquet, the engine's view of each request.
CREATE TABLE engine_requests (
    run_id           VARCHAR NOT NULL,
    request_id       VARCHAR NOT NULL,
    arrival_ns       BIGINT,
    first_token_ns   BIGINT,
    done_ns          BIGINT,
    prompt_tokens    INTEGER,
    output_tokens    INTEGER,
    finish_reason    VARCHAR,
    output_token_ids INTEGER[]   -- for repetition-loop evidence and the penalty sweep
);

-- server_requests.parquet, the engine server's socket-side times of each completion request
-- (engine/server/wire_clock.py): what a load generator's TTFT and E2E are checked against.
CREATE TABLE server_requests (
    run_id           VARCHAR NOT NULL,
    request_id       VARCHAR NOT NULL,
    path             VARCHAR,
    status           INTEGER,
    streamed         BOOLEAN,
    received_ns      BIGINT,     -- the request's first bytes were read off the socket
    app_start_ns     BIGINT,     -- the ASGI app was called (after the requests ahead of it)
    first_content_ns BIGINT,     -- first generated text handed to the socket; NULL: none sent
    done_ns          BIGINT,     -- last body byte handed to the socket; NULL: connection ended first
    received_clock   VARCHAR     -- 'kernel' | 'loop' | 'app'
);

-- metrics.parquet: Prometheus /metrics scraped during the run (any engine: spikelens, vLLM, SGLang…).
CREATE TABLE metrics (
    run_id VARCHAR NOT NULL,
    ts_ns  BIGINT NOT NULL,
    name   VARCHAR NOT NULL,     -- e.g. vllm:num_requests_running
    labels JSON,                 -- {"label": "value", …}
    value  DOUBLE
);

-- client_health.parquet: the load generator's own health per process and second, so a latency
-- spike made by a starved client can be told apart from one made by the engine.
CREATE TABLE client_health (
    run_id            VARCHAR NOT NULL,
    ts_ns             BIGINT NOT NULL,
    worker            VARCHAR,      -- the Locust process
    phase             VARCHAR,      -- 'warmup' | 'measure'
    cpu_percent       DOUBLE,
    lag_p50_ms        DOUBLE,       -- event-loop lag of the client process
    lag_p99_ms        DOUBLE,
    lag_max_ms        DOUBLE,
    lag_samples       INTEGER,
    in_flight         INTEGER,      -- requests open in that process
    slot_waits        INTEGER,
    read_delay_p99_ms DOUBLE        -- how long stream data waited in the socket before it was read
);

---------------------------------------------------------------------------------------------------
-- Analysis (derived: analyze_run replaces a run's rows; ingest_run deletes them as stale)
---------------------------------------------------------------------------------------------------

CREATE TABLE analyses (
    run_id      VARCHAR PRIMARY KEY,
    window_s    DOUBLE NOT NULL,       -- window width the analysis used
    baselines   JSON,                  -- per series: median_ms, spread_ms, threshold_ms, valid_windows
    config      JSON,                  -- detection and attribution settings used
    analysed_at TIMESTAMP NOT NULL DEFAULT current_timestamp
);

CREATE TABLE spikes (
    run_id             VARCHAR NOT NULL,
    spike_id           INTEGER NOT NULL,   -- 1.. in time order within the run
    metric             VARCHAR NOT NULL,   -- primary series: itl_p99 | ttft_p99 | e2e_p99
    metrics            VARCHAR[],          -- every series that spiked in this incident
    detector           VARCHAR NOT NULL,   -- 'mad' (robust baseline) | 'changepoint' | 'metric_rank'
    start_s            DOUBLE NOT NULL,    -- seconds from load_started_ns (window start)
    end_s              DOUBLE NOT NULL,    -- seconds from load_started_ns (end of last window)
    peak_ms            DOUBLE,
    baseline_ms        DOUBLE,
    severity           VARCHAR,            -- minor | major | critical (by peak / baseline)
    severity_score     DOUBLE,             -- sum over windows of relative excess x window_s
    top_cause          VARCHAR,
    summary            VARCHAR,            -- the top cause in words, e.g. "GC gen-2 pauses, 187 ms on average"
    coverage           DOUBLE,             -- fraction of the latency rise the step slowdown accounts for
    -- 'stages' (step-trace decomposition) or 'metric_rank' (ranking of /metrics and NVML series,
    -- for targets without step traces)
    attribution_method VARCHAR,
    -- kept for the record but not reported: no engine signal explains it and it is minor, or
    -- every stage slowed alike (rca.config.AttributeConfig.report_unexplained_minor)
    suppressed         BOOLEAN DEFAULT false,
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

-- The nightly regression's verdicts, one row per run and metric.
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
    -- the spread between the baseline runs (rca/compare.py between_run_noise): relative (absolute
    -- for error_rate); NULL with fewer than two usable baseline runs. A verdict of regressed or
    -- improved needs the change to exceed it as well as the configured threshold.
    run_noise     DOUBLE,
    PRIMARY KEY (run_id, metric)
);

---------------------------------------------------------------------------------------------------
-- Views and macros: definitions written once, used by the queries in queries/*.sql
---------------------------------------------------------------------------------------------------

-- step_gc: every engine step with the GC pause time that overlaps it. A GC pause lands inside
-- whichever stage is running, so stage times include it; queries subtract gc_ms before
-- attributing stage time. A GC row without a rank belongs to rank 0 (one process).
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

-- A run's time zero, used by every query that puts samples on the run's time line:
-- load_started_ns (the start of measured load, from run.json); for runs written before that key
-- existed, the first send of the measured phase.
-- (The aliases are unusual on purpose: a macro argument such as `r.run_id` is substituted as
-- text and would bind to an alias of the same name inside the macro.)
CREATE MACRO run_t0(rid) AS (
    SELECT coalesce(t0_run.load_started_ns,
                    (SELECT min(t0_req.sent_ns) FROM requests t0_req
                     WHERE t0_req.run_id = t0_run.run_id
                       AND coalesce(t0_req.phase, 'measure') = 'measure'))
    FROM runs t0_run
    WHERE t0_run.run_id = rid
);

-- A run's time axis for the windowed queries: the run, its time zero (run_t0), the window width
-- in ns and the run's length. Used as `WITH run AS (SELECT * FROM run_axis($run_id, $window_s))`.
CREATE MACRO run_axis(rid, width_s) AS TABLE
    SELECT
        ax_run.run_id,
        run_t0(ax_run.run_id) AS t0_ns,
        CAST(round(width_s * 1e9) AS BIGINT) AS window_ns,
        ax_run.duration_s
    FROM runs ax_run
    WHERE ax_run.run_id = rid;

INSERT INTO schema_version (version, name) VALUES (15, 'schema.sql');
