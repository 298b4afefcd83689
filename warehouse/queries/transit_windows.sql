-- Client-observed vs server-observed latency per window of $window_s seconds from
-- load_started_ns, over the measured requests both sides saw (macro transit_pairs: the engine
-- server's socket stamps, else the times it reported in the stream). TTFT rows count in the
-- window of the client's first token, E2E rows in the window of the client's end of stream. E2E
-- here is the whole stream on both sides, not the E2E metric (which ends at the last token): the
-- same wire event seen from each end. client − server is the time spent outside the engine:
-- transit (network) and the client's own stamping and reading (with reported times, also the
-- engine's front end). reported_pairs: the TTFT pairs whose server side was reported, not
-- stamped (rca.analyze reads the source from it).
-- merged_first_share: first tokens the client's kernel stamp could not separate from a later
-- packet (arrival_clock 'merged': the client read late). ITL rows are each gap seen from both
-- ends (macro chunk_gap_pairs), in the window of the client's chunk; reported times carry one
-- mean gap per request, so none there.
-- Neither socket stamps nor reported times (an external target, an older vLLM): no rows.
WITH run AS (SELECT * FROM run_axis($run_id, $window_s)),
paired AS (SELECT * FROM transit_pairs($run_id)),
itl AS (
    SELECT
        CAST(floor((p.arrival_ns - run.t0_ns) / run.window_ns) AS BIGINT) AS w,
        quantile_cont(p.client_itl_ms, 0.99) AS client_itl_p99_ms,
        quantile_cont(p.server_itl_ms, 0.99) AS server_itl_p99_ms,
        count(*) AS itl_pairs
    FROM chunk_gap_pairs($run_id) p, run
    WHERE p.arrival_ns >= run.t0_ns
    GROUP BY w
),
ttft AS (
    SELECT
        CAST(floor((p.first_token_ns - run.t0_ns) / run.window_ns) AS BIGINT) AS w,
        quantile_cont(p.client_ttft_ms, 0.99) AS client_ttft_p99_ms,
        quantile_cont(p.server_ttft_ms, 0.99) AS server_ttft_p99_ms,
        avg(p.client_ttft_ms - p.server_ttft_ms) AS ttft_gap_mean_ms,
        avg((p.arrival_clock = 'merged')::INTEGER) AS merged_first_share,
        count(*) AS ttft_pairs,
        count(*) FILTER (WHERE p.source = 'reported') AS reported_pairs
    FROM paired p, run
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
    FROM paired p, run
    WHERE p.done_ns >= run.t0_ns
    GROUP BY w
)
SELECT
    coalesce(t.w, e.w, i.w) AS "window",
    t.client_ttft_p99_ms, t.server_ttft_p99_ms, t.ttft_gap_mean_ms, t.merged_first_share,
    coalesce(t.ttft_pairs, 0) AS ttft_pairs,
    coalesce(t.reported_pairs, 0) AS reported_pairs,
    e.client_e2e_p99_ms, e.server_e2e_p99_ms, e.e2e_gap_mean_ms,
    coalesce(e.e2e_pairs, 0) AS e2e_pairs,
    i.client_itl_p99_ms, i.server_itl_p99_ms,
    coalesce(i.itl_pairs, 0) AS itl_pairs
FROM ttft t
FULL OUTER JOIN e2e e ON t.w = e.w
FULL OUTER JOIN itl i ON coalesce(t.w, e.w) = i.w
ORDER BY "window"
