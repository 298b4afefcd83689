-- Migration 18: the collectors' files (run_dir/collect/), outside-in telemetry of every process of
-- an engine's tree (spikelens' engine, vLLM's API server / EngineCore / workers).

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
