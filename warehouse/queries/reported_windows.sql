-- Client-observed vs engine-reported latency per window of $window_s seconds from
-- load_started_ns, over the ok measured requests whose server reported its own times in the
-- stream (requests.reported_*: vLLM's --enable-per-request-metrics), with the columns of query
-- transit_windows, so the analysis reads either alike. The engine's TTFT is its queue time plus
-- its time to the first token; its end of stream is that plus its mean inter-token time for each
-- later token. vLLM's span starts when its engine core queued the request, after its API server
-- read, parsed and tokenized it: client − server here is that front end, the transit and the
-- client's own reading (rca.outside_causes reads it so). No ITL pairs: the server reports one
-- mean gap per request, not each gap. No reported times (spikelens' own engine, an older vLLM):
-- no rows.
WITH run AS (SELECT * FROM run_axis($run_id, $window_s)),
reported AS (
    SELECT
        m.first_token_ns, m.done_ns, m.arrival_clock,
        (m.first_token_ns - m.sent_ns) / 1e6 AS client_ttft_ms,
        m.reported_queue_ms + m.reported_ttft_ms AS server_ttft_ms,
        (m.done_ns - m.sent_ns) / 1e6 AS client_e2e_ms,
        m.reported_queue_ms + m.reported_ttft_ms
            + coalesce(m.reported_mean_itl_ms, 0) * greatest(coalesce(m.output_tokens, 1) - 1, 0)
            AS server_e2e_ms
    FROM measured_requests($run_id) m
    WHERE m.ok AND m.reported_queue_ms IS NOT NULL AND m.reported_ttft_ms IS NOT NULL
      AND m.first_token_ns IS NOT NULL AND m.done_ns IS NOT NULL AND m.sent_ns IS NOT NULL
),
ttft AS (
    SELECT
        CAST(floor((p.first_token_ns - run.t0_ns) / run.window_ns) AS BIGINT) AS w,
        quantile_cont(p.client_ttft_ms, 0.99) AS client_ttft_p99_ms,
        quantile_cont(p.server_ttft_ms, 0.99) AS server_ttft_p99_ms,
        avg(p.client_ttft_ms - p.server_ttft_ms) AS ttft_gap_mean_ms,
        avg((p.arrival_clock = 'merged')::INTEGER) AS merged_first_share,
        count(*) AS ttft_pairs
    FROM reported p, run
    WHERE p.first_token_ns >= run.t0_ns
    GROUP BY w
),
e2e AS (
    SELECT
        CAST(floor((p.done_ns - run.t0_ns) / run.window_ns) AS BIGINT) AS w,
        quantile_cont(p.client_e2e_ms, 0.99) AS client_e2e_p99_ms,
        quantile_cont(p.server_e2e_ms, 0.99) AS server_e2e_p99_ms,
        avg(p.client_e2e_ms - p.server_e2e_ms) AS e2e_gap_mean_ms,
        count(*) AS e2e_pairs
    FROM reported p, run
    WHERE p.done_ns >= run.t0_ns
    GROUP BY w
)
SELECT
    coalesce(t.w, e.w) AS "window",
    t.client_ttft_p99_ms, t.server_ttft_p99_ms, t.ttft_gap_mean_ms, t.merged_first_share,
    coalesce(t.ttft_pairs, 0) AS ttft_pairs,
    e.client_e2e_p99_ms, e.server_e2e_p99_ms, e.e2e_gap_mean_ms,
    coalesce(e.e2e_pairs, 0) AS e2e_pairs,
    CAST(NULL AS DOUBLE) AS client_itl_p99_ms, CAST(NULL AS DOUBLE) AS server_itl_p99_ms,
    0 AS itl_pairs
FROM ttft t
FULL OUTER JOIN e2e e ON t.w = e.w
ORDER BY "window"
