-- spikelens warehouse, schema version 1: the raw run files of DESIGN.md "Files in a run directory".
--
-- Applied once by warehouse.db.connect() on an empty database; later changes are forward
-- migrations in warehouse/migrations/NNNN_*.sql (never edit this file's meaning once released).
-- Every raw table carries run_id: a run is ingested (and re-ingested) as one unit.
-- Timestamps are integer nanoseconds of the wall clock (time.time_ns()), as in the run files.

CREATE TABLE schema_version (
    version    INTEGER PRIMARY KEY,   -- 1 = this file; N = migrations/NNNN_*.sql
    name       VARCHAR NOT NULL,
    applied_at TIMESTAMP NOT NULL DEFAULT current_timestamp
);

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
    run_id             VARCHAR NOT NULL,
    request_id         VARCHAR NOT NULL,
    "user"             VARCHAR,
    phase              VARCHAR,   -- 'warmup' | 'measure'
    intended_send_ns   BIGINT,
    sent_ns            BIGINT,
    first_token_ns     BIGINT,
    done_ns            BIGINT,
    prompt_tokens      INTEGER,
    output_tokens      INTEGER,
    status             VARCHAR,
    error              VARCHAR,
    temperature        DOUBLE,
    top_p              DOUBLE,
    top_k              INTEGER,
    min_p              DOUBLE,
    frequency_penalty  DOUBLE,
    presence_penalty   DOUBLE,
    repetition_penalty DOUBLE,
    max_tokens         INTEGER
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
    waiting         INTEGER    -- sequences waiting for admission after scheduling
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

-- engine_requests.parquet, the server-side view of each request.
CREATE TABLE engine_requests (
    run_id         VARCHAR NOT NULL,
    request_id     VARCHAR NOT NULL,
    arrival_ns     BIGINT,
    first_token_ns BIGINT,
    done_ns        BIGINT,
    prompt_tokens  INTEGER,
    output_tokens  INTEGER,
    finish_reason  VARCHAR
);

INSERT INTO schema_version (version, name) VALUES (1, 'schema.sql');
