-- Migration 8: client_health.parquet — the load generator's own health per process and second,
-- so a latency spike made by a starved client can be told apart from one made by the engine.
CREATE TABLE client_health (
    run_id      VARCHAR NOT NULL,
    ts_ns       BIGINT NOT NULL,
    worker      VARCHAR,      -- the Locust process
    phase       VARCHAR,      -- 'warmup' | 'measure'
    cpu_percent DOUBLE,
    lag_p50_ms  DOUBLE,       -- event-loop lag of the client process
    lag_p99_ms  DOUBLE,
    lag_max_ms  DOUBLE,
    lag_samples INTEGER,
    in_flight   INTEGER,      -- requests open in that process
    slot_waits  INTEGER
);
