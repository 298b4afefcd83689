-- Migration 5: columns loadgen's recorder writes beyond DESIGN.md's list, and the /metrics samples.

ALTER TABLE requests ADD COLUMN worker VARCHAR;               -- the Locust process that sent it
ALTER TABLE requests ADD COLUMN prompt_tokens_target INTEGER; -- drawn prompt length before the chat template
ALTER TABLE requests ADD COLUMN token_count_source VARCHAR;   -- 'usage' | 'chunks'
ALTER TABLE requests ADD COLUMN n_chunks INTEGER;             -- content chunks received
ALTER TABLE requests ADD COLUMN http_status INTEGER;          -- 0 when no response came
ALTER TABLE requests ADD COLUMN finish_reason VARCHAR;
ALTER TABLE requests ADD COLUMN fault VARCHAR;                -- loadgen fault that shaped the request
ALTER TABLE requests ADD COLUMN seed BIGINT;

-- metrics.parquet: Prometheus /metrics scraped during the run (any engine: spikelens, vLLM, SGLang…).
CREATE TABLE metrics (
    run_id VARCHAR NOT NULL,
    ts_ns  BIGINT NOT NULL,
    name   VARCHAR NOT NULL,     -- e.g. vllm:num_requests_running
    labels JSON,                 -- {"label": "value", …}
    value  DOUBLE
);
