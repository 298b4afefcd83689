-- spikelens warehouse schema: the tables, and nothing else.
--
-- The tables hold the files of a run directory (docs/design.md, "Files in a run directory") and
-- what is derived from them (the analysis, the nightly's verdicts, capacity sweeps). The views and
-- macros every query uses, among them the one definition of each measurement, are in macros.sql.
--
-- While spikelens is unreleased this file is edited in place: no migrations. warehouse.db.connect()
-- brings any file up to it on a read-write open: it creates the tables a file lacks and adds the
-- columns its tables lack. A change it cannot make by adding (a column whose type changed, a new
-- NOT NULL column without a default) is refused with the way out: move the file aside and ingest
-- the runs again (their files in runs/<run_id>/ are unchanged). So: add tables and nullable columns
-- freely; change or remove one only knowing that existing warehouses must be re-ingested.
--
-- Every per-run table carries run_id: a run is ingested (and re-ingested) as one unit.
-- Timestamps are integer nanoseconds of the wall clock (time.time_ns()), as in the run files.

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
    arrival_clock        VARCHAR,
    -- the server's own times of the request as it reported them in the stream (vLLM's
    -- --enable-per-request-metrics, ms): queued → scheduled, scheduled → first token, its mean
    -- inter-token time; NULL where the server reported none
    reported_queue_ms    DOUBLE,
    reported_ttft_ms     DOUBLE,
    reported_mean_itl_ms DOUBLE
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
    received_clock   VARCHAR,    -- 'kernel' | 'loop' | 'app'
    first_content_sent_ns BIGINT, -- that write's system call returned (the client's socket had the
                                  -- bytes in between, on loopback); NULL: queued, or none sent
    content_ns       BIGINT[]    -- each text-carrying chunk's write began, in order (streamed
                                 -- answers): the server's inter-token gaps; NULL: none or older file
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
-- Collectors' files (run_dir/collect/): outside-in telemetry of every process of an engine's tree
-- (spikelens' engine, vLLM's API server / EngineCore / workers)
---------------------------------------------------------------------------------------------------

-- collect/gc-<pid>.jsonl: one row per garbage collection, written by the GC hook inside each process.
CREATE TABLE process_gc (
    run_id        VARCHAR NOT NULL,
    source_file   VARCHAR,            -- gc-<pid>.jsonl
    pid           BIGINT NOT NULL,
    ppid          BIGINT,
    tid           BIGINT,             -- native id of the thread that collected
    role          VARCHAR,            -- engine, EngineCore, Worker, api_server, engine:spawn_child, …
    start_ns      BIGINT NOT NULL,
    end_ns        BIGINT NOT NULL,
    generation    INTEGER,
    collected     BIGINT,
    uncollectable BIGINT
);

-- collect/stacks-<root>.parquet: py-spy stack samples as segments [start_ns, end_ns) of one thread
-- in one stack; d seconds of segment stand for d × rate samples.
CREATE TABLE process_stacks (
    run_id      VARCHAR NOT NULL,
    source_file VARCHAR,
    pid         BIGINT NOT NULL,
    role        VARCHAR,
    tid         BIGINT NOT NULL,
    start_ns    BIGINT NOT NULL,
    end_ns      BIGINT NOT NULL,
    region      VARCHAR NOT NULL,     -- sampling_penalties | gc | collective_wait | model_forward |
                                      -- scheduler | tokenizer_detokenizer | http_serialization | idle | other
    rule        INTEGER,              -- index of the region rule that matched (-1: other)
    frame       VARCHAR,              -- the frame that decided the region
    leaf        VARCHAR,              -- the innermost frame
    depth       INTEGER
);

-- collect/proc-<root>.parquet: cumulative /proc counters per process and tick (~10 Hz).
CREATE TABLE process_cpu (
    run_id               VARCHAR NOT NULL,
    source_file          VARCHAR,
    ts_ns                BIGINT NOT NULL,
    pid                  BIGINT NOT NULL,
    ppid                 BIGINT,
    role                 VARCHAR,
    cpu_ns               BIGINT,      -- utime + stime
    run_ns               BIGINT,      -- schedstat time on CPU, summed over threads
    wait_ns              BIGINT,      -- schedstat run-queue wait, summed over threads
    timeslices           BIGINT,
    voluntary_switches   BIGINT,
    involuntary_switches BIGINT,
    threads              INTEGER,
    rss_bytes            BIGINT
);

-- collect/cpu-<root>.parquet: cumulative /proc/stat counters of the CPUs the engine's processes may
-- run on, per CPU and tick of the /proc sampler (collectors.cpu_steal).
CREATE TABLE cpu_ticks (
    run_id      VARCHAR NOT NULL,
    source_file VARCHAR,
    ts_ns       BIGINT NOT NULL,
    cpu         INTEGER NOT NULL,
    total_ns    BIGINT,      -- every field of the CPU's line
    idle_ns     BIGINT,      -- idle + iowait: nothing to run
    steal_ns    BIGINT       -- the hypervisor ran another guest while this vCPU wanted to run
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
    detector           VARCHAR NOT NULL,   -- the tests that flagged it, '+'-joined: mad | sustained | changepoint | median
    start_s            DOUBLE NOT NULL,    -- seconds from load_started_ns (window start)
    end_s              DOUBLE NOT NULL,    -- seconds from load_started_ns (end of last window)
    peak_ms            DOUBLE,
    baseline_ms        DOUBLE,
    severity           VARCHAR,            -- minor | major | critical (by peak / baseline)
    severity_score     DOUBLE,             -- sum over windows of relative excess x window_s
    top_cause          VARCHAR,
    summary            VARCHAR,            -- the top cause in words, e.g. "GC gen-2 pauses, 187 ms on average"
    coverage           DOUBLE,             -- fraction of the latency rise the step slowdown accounts for
    -- the share of the latency excess no measured signal covers; attributions keep it as the row
    -- of cause 'unexplained'
    uncovered          DOUBLE,
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

-- rca.findings, stored by analyze_run with the spikes: each signal's mean outside every reported
-- spike (2-window guard) against its mean inside any, in the incident page's order.
CREATE TABLE spike_comparison (
    run_id   VARCHAR NOT NULL,
    seq      INTEGER NOT NULL,       -- 0.. the order the page lists them in
    signal   VARCHAR NOT NULL,
    unit     VARCHAR,
    normal   DOUBLE,                 -- NULL: no sample outside the spikes
    spike    DOUBLE,                 -- NULL: no sample inside them
    PRIMARY KEY (run_id, seq)
);

-- rca.findings: each injected fault (ground truth, query faults' order) matched one-to-one to a
-- reported spike as rca.evaluate scores runs; NULL spike_id: no spike matched it (missed).
CREATE TABLE fault_verdicts (
    run_id           VARCHAR NOT NULL,
    seq              INTEGER NOT NULL, -- 0.. in the order of query faults
    kind             VARCHAR NOT NULL,
    cause            VARCHAR NOT NULL,
    start_s          DOUBLE NOT NULL,  -- seconds from load_started_ns
    end_s            DOUBLE NOT NULL,  -- the start when the fault has no end
    params           JSON,
    spike_id         INTEGER,          -- the matched reported spike
    attributed_cause VARCHAR,          -- that spike's top cause
    PRIMARY KEY (run_id, seq)
);

-- `spikelens confirm` (flows/confirm.py): a spike's verdict replayed with its cause removed. The
-- flow writes each result to runs/<run>/confirmations/<spike>-<cause>.jsonl too, so a re-ingest
-- of the run keeps it.
CREATE TABLE confirmations (
    run_id        VARCHAR NOT NULL,
    spike_id      INTEGER NOT NULL,
    cause         VARCHAR NOT NULL,  -- the cause removed (the spike's verdict unless --cause)
    verdict       VARCHAR NOT NULL,  -- confirmed | not confirmed | inconclusive
    reason        VARCHAR,           -- the verdict in words
    intervention  VARCHAR,           -- what was changed, in words (flows/interventions.py)
    share_removed DOUBLE,            -- of the recorded excess; NULL: not measured
    share_low     DOUBLE,            -- min over the repeat pairs
    share_high    DOUBLE,            -- max over the repeat pairs
    pairs         INTEGER,           -- repeat pairs measured; 0: client/network, measured (no re-run)
    confirmed_ns  BIGINT,            -- when the confirmation finished
    page          VARCHAR,           -- its page, relative to the run's report folder
    PRIMARY KEY (run_id, spike_id, cause)
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
-- Capacity sweeps (keyed by sweep_id, not run_id)
---------------------------------------------------------------------------------------------------

-- One row per load step of a sweep (flows/capacity.py). The sweep's
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
    -- what the capacity page needs beyond the figures (pages/capacity.py reads the sweep from here)
    judged            INTEGER,           -- completed + failed requests of the measured phase
    good_requests     INTEGER,           -- of those, completed within every objective
    run_status        VARCHAR,           -- the step's run status: ok | invalid | failed
    run_note          VARCHAR,           -- why, when not ok
    queueing          BOOLEAN,           -- rca.capacity.queueing_reading; NULL: not measured
    queueing_note     VARCHAR,           -- … in words
    command           VARCHAR,           -- the command line that reproduces the sweep
    search            BOOLEAN,           -- the loads were searched, not chosen
    PRIMARY KEY (sweep_id, step)
);
