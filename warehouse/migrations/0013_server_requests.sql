-- Migration 13: server_requests.parquet, the engine server's socket-side times of each completion
-- request (engine/server/wire_clock.py): what a load generator's TTFT and E2E are checked against.
CREATE TABLE server_requests (
    run_id           VARCHAR NOT NULL,
    request_id       VARCHAR NOT NULL,
    path             VARCHAR,
    status           INTEGER,
    streamed         BOOLEAN,
    received_ns      BIGINT,     -- the request's first bytes were read off the socket
    app_start_ns     BIGINT,     -- the ASGI app was called (after the requests ahead of it)
    first_content_ns BIGINT,     -- first generated text handed to the socket; NULL: none sent
    done_ns          BIGINT      -- last body byte handed to the socket; NULL: connection ended first
);
