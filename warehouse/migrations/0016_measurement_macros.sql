-- Migration 16: one definition of each measurement, written once and used by every query that
-- reads requests and tokens (windows, totals, latency_samples, measurement_check, …).
-- They are loadgen/metrics.py's definitions (vLLM's `bench serve`), which own them; a test checks
-- the two agree on the same run (tests/warehouse/test_measurement_macros.py):
-- - measured: the requests of the measured phase (phase NULL only in files written before the
--   column existed: then what was sent after t0);
-- - ok / failed: status 'ok' / 'error' (without a status: no error / an error). A request
--   cancelled at the end of the load is neither;
-- - TTFT = first_token_ns - sent_ns, E2E = done_ns - sent_ns, ITL = every gap between
--   consecutive content chunks of a request: latencies of ok requests only;
-- - window_grid: windows 0 .. ceil(duration_s / width) - 1 from t0 (the run's extent from t0 to
--   its end where duration_s is unknown).
-- (The aliases are unusual on purpose: macro arguments are substituted as text.)

CREATE MACRO request_ok(status, error) AS coalesce(status = 'ok', coalesce(error, '') = '');

CREATE MACRO request_failed(status, error) AS coalesce(status = 'error', coalesce(error, '') <> '');

CREATE MACRO measured_requests(rid) AS TABLE
    SELECT mr_q.*,
           request_ok(mr_q.status, mr_q.error) AS ok,
           request_failed(mr_q.status, mr_q.error) AS failed
    FROM requests mr_q
    WHERE mr_q.run_id = rid
      AND (mr_q.phase = 'measure' OR (mr_q.phase IS NULL AND mr_q.sent_ns >= run_t0(rid)));

-- Chunks that carried content (n_tokens > 0; NULL: files without the column) of measured requests.
CREATE MACRO content_chunks(rid) AS TABLE
    SELECT cc_t.request_id, cc_t."index", cc_t.arrival_ns, coalesce(cc_t.n_tokens, 1) AS n_tokens,
           cc_m.ok
    FROM tokens cc_t
    JOIN measured_requests(rid) cc_m ON cc_m.request_id = cc_t.request_id
    WHERE cc_t.run_id = rid AND coalesce(cc_t.n_tokens, 1) > 0;

-- Every inter-token gap (ITL) of the ok measured requests, at the later chunk's arrival.
CREATE MACRO itl_gaps(rid) AS TABLE
    SELECT ig_g.request_id, ig_g.arrival_ns, ig_g.gap_ns
    FROM (SELECT ig_c.request_id, ig_c.arrival_ns,
                 ig_c.arrival_ns - lag(ig_c.arrival_ns)
                     OVER (PARTITION BY ig_c.request_id ORDER BY ig_c."index") AS gap_ns
          FROM content_chunks(rid) ig_c
          WHERE ig_c.ok) ig_g
    WHERE ig_g.gap_ns IS NOT NULL;

-- Every latency sample: metric ('ttft' | 'itl' | 'e2e'), request_id, ts_ns (when it was observed:
-- the first token, the later chunk, the end of the stream) and value_ms.
CREATE MACRO latency_samples(rid) AS TABLE
    SELECT 'ttft' AS metric, ls_m.request_id, ls_m.first_token_ns AS ts_ns,
           (ls_m.first_token_ns - ls_m.sent_ns) / 1e6 AS value_ms
    FROM measured_requests(rid) ls_m
    WHERE ls_m.ok AND ls_m.first_token_ns IS NOT NULL AND ls_m.sent_ns IS NOT NULL
    UNION ALL
    SELECT 'itl', ls_g.request_id, ls_g.arrival_ns, ls_g.gap_ns / 1e6
    FROM itl_gaps(rid) ls_g
    UNION ALL
    SELECT 'e2e', ls_e.request_id, ls_e.done_ns, (ls_e.done_ns - ls_e.sent_ns) / 1e6
    FROM measured_requests(rid) ls_e
    WHERE ls_e.ok AND ls_e.done_ns IS NOT NULL AND ls_e.sent_ns IS NOT NULL;

-- The windows of a run's time axis: w, start_ns, end_ns, mid_ns. No load start: no windows.
CREATE MACRO window_grid(rid, width_s) AS TABLE
    SELECT wg_r.range AS w,
           wg_a.t0_ns + wg_r.range * wg_a.window_ns AS start_ns,
           wg_a.t0_ns + (wg_r.range + 1) * wg_a.window_ns AS end_ns,
           wg_a.t0_ns + wg_r.range * wg_a.window_ns + wg_a.window_ns // 2 AS mid_ns
    FROM run_axis(rid, width_s) wg_a,
         runs wg_run,
         range(CAST(ceil(greatest(0, coalesce(wg_a.duration_s * 1e9,
                                              wg_run.ended_ns - wg_a.t0_ns, 0))
                         / wg_a.window_ns) AS BIGINT)) wg_r
    WHERE wg_run.run_id = rid AND wg_a.t0_ns IS NOT NULL;
