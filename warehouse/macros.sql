-- spikelens warehouse definitions: the views and macros the queries in queries/*.sql use, each
-- written once. Among them, the one definition of every measurement (TTFT, ITL, E2E, which
-- requests count), which loadgen/metrics.py computes the same way for run.json's summary
-- (tests/warehouse/test_measurement_macros.py checks that the two agree on the same run).
--
-- warehouse.db.connect() creates them in every connection's temporary schema, read-only ones
-- included: they are always this code's, never whatever an older spikelens stored in a file, so
-- a definition changes here without touching any warehouse.
-- (The aliases are unusual on purpose: a macro argument such as `r.run_id` is substituted as
-- text and would bind to an alias of the same name inside the macro.)

---------------------------------------------------------------------------------------------------
-- A run's time line
---------------------------------------------------------------------------------------------------

-- A run's time zero, used by every query that puts samples on the run's time line:
-- load_started_ns (the start of measured load, from run.json); for runs written before that key
-- existed, the first send of the measured phase.
CREATE OR REPLACE TEMP MACRO run_t0(rid) AS (
    SELECT coalesce(t0_run.load_started_ns,
                    (SELECT min(t0_req.sent_ns) FROM requests t0_req
                     WHERE t0_req.run_id = t0_run.run_id
                       AND coalesce(t0_req.phase, 'measure') = 'measure'))
    FROM runs t0_run
    WHERE t0_run.run_id = rid
);

-- A run's time axis for the windowed queries: the run, its time zero (run_t0), the window width
-- in ns and the run's length. Used as `WITH run AS (SELECT * FROM run_axis($run_id, $window_s))`.
CREATE OR REPLACE TEMP MACRO run_axis(rid, width_s) AS TABLE
    SELECT
        ax_run.run_id,
        run_t0(ax_run.run_id) AS t0_ns,
        CAST(round(width_s * 1e9) AS BIGINT) AS window_ns,
        ax_run.duration_s
    FROM runs ax_run
    WHERE ax_run.run_id = rid;

-- The windows of a run's time axis: w, start_ns, end_ns, mid_ns; windows 0 .. ceil(duration_s /
-- width) - 1 from t0 (the run's extent from t0 to its end where duration_s is unknown). No load
-- start: no windows.
CREATE OR REPLACE TEMP MACRO window_grid(rid, width_s) AS TABLE
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

---------------------------------------------------------------------------------------------------
-- The measurements (vLLM `bench serve`'s definitions; docs/loadgen.md "Metric definitions")
---------------------------------------------------------------------------------------------------

-- ok / failed: status 'ok' / 'error' (without a status: no error / an error). A request
-- cancelled at the end of the load is neither.
CREATE OR REPLACE TEMP MACRO request_ok(status, error) AS
    coalesce(status = 'ok', coalesce(error, '') = '');

CREATE OR REPLACE TEMP MACRO request_failed(status, error) AS
    coalesce(status = 'error', coalesce(error, '') <> '');

-- The requests of the measured phase (phase NULL only in files written before the column
-- existed: then what was sent after t0), with ok and failed.
CREATE OR REPLACE TEMP MACRO measured_requests(rid) AS TABLE
    SELECT mr_q.*,
           request_ok(mr_q.status, mr_q.error) AS ok,
           request_failed(mr_q.status, mr_q.error) AS failed
    FROM requests mr_q
    WHERE mr_q.run_id = rid
      AND (mr_q.phase = 'measure' OR (mr_q.phase IS NULL AND mr_q.sent_ns >= run_t0(rid)));

-- Chunks that carried content (n_tokens > 0; NULL: files without the column) of measured
-- requests. Role and usage chunks carry none: they are neither a token nor an ITL gap.
CREATE OR REPLACE TEMP MACRO content_chunks(rid) AS TABLE
    SELECT cc_t.request_id, cc_t."index", cc_t.arrival_ns, coalesce(cc_t.n_tokens, 1) AS n_tokens,
           cc_m.ok
    FROM tokens cc_t
    JOIN measured_requests(rid) cc_m ON cc_m.request_id = cc_t.request_id
    WHERE cc_t.run_id = rid AND coalesce(cc_t.n_tokens, 1) > 0;

-- Every inter-token gap (ITL) of the ok measured requests, at the later chunk's arrival.
CREATE OR REPLACE TEMP MACRO itl_gaps(rid) AS TABLE
    SELECT ig_g.request_id, ig_g.arrival_ns, ig_g.gap_ns
    FROM (SELECT ig_c.request_id, ig_c.arrival_ns,
                 ig_c.arrival_ns - lag(ig_c.arrival_ns)
                     OVER (PARTITION BY ig_c.request_id ORDER BY ig_c."index") AS gap_ns
          FROM content_chunks(rid) ig_c
          WHERE ig_c.ok) ig_g
    WHERE ig_g.gap_ns IS NOT NULL;

-- Every ITL gap seen from both ends: the client's k-th content chunk of an ok measured request
-- paired with the engine server's k-th text write (server_requests.content_ns) of it, where both
-- saw as many: the gap ending at chunk k (k >= 2) on each side, at the client's arrival_ns.
CREATE OR REPLACE TEMP MACRO chunk_gap_pairs(rid) AS TABLE
    SELECT gp_p.arrival_ns, gp_p.client_itl_ms, gp_p.server_itl_ms
    FROM (SELECT gp_c.k, gp_c.arrival_ns,
                 (gp_c.arrival_ns - lag(gp_c.arrival_ns)
                     OVER (PARTITION BY gp_c.request_id ORDER BY gp_c.k)) / 1e6 AS client_itl_ms,
                 (gp_s.content_ns[gp_c.k] - gp_s.content_ns[gp_c.k - 1]) / 1e6 AS server_itl_ms
          FROM (SELECT gp_t.request_id, gp_t.arrival_ns,
                       row_number() OVER (PARTITION BY gp_t.request_id ORDER BY gp_t."index") AS k,
                       count(*) OVER (PARTITION BY gp_t.request_id) AS n
                FROM content_chunks(rid) gp_t
                WHERE gp_t.ok) gp_c
          JOIN server_requests gp_s ON gp_s.run_id = rid AND gp_s.request_id = gp_c.request_id
          WHERE gp_s.status = 200 AND len(gp_s.content_ns) = gp_c.n) gp_p
    WHERE gp_p.k > 1;

-- Each ok measured request seen from both ends: the client's TTFT and whole stream beside the
-- server's own. The server's times are its socket stamps where it keeps them (server_requests:
-- spikelens' engine; source 'socket'; its whole stream ends at its last body byte), else the times
-- it reported in the stream (requests.reported_*: vLLM's --enable-per-request-metrics; source
-- 'reported'): its TTFT is its queue time plus its time to the first token, its end of stream
-- that plus its mean inter-token time for each later token. A reported span starts when vLLM's
-- engine core queued the request, after its API server read, parsed and tokenized it, so
-- client − server there also holds that front end (rca.outside_causes reads it so). Reported
-- times count only for a run without socket stamps.
CREATE OR REPLACE TEMP MACRO transit_pairs(rid) AS TABLE
    SELECT tp_m.first_token_ns, tp_m.done_ns, tp_m.arrival_clock, 'socket' AS source,
           (tp_m.first_token_ns - tp_m.sent_ns) / 1e6 AS client_ttft_ms,
           (tp_s.first_content_ns - tp_s.received_ns) / 1e6 AS server_ttft_ms,
           (tp_m.done_ns - tp_m.sent_ns) / 1e6 AS client_e2e_ms,
           (tp_s.done_ns - tp_s.received_ns) / 1e6 AS server_e2e_ms
    FROM measured_requests(rid) tp_m
    JOIN server_requests tp_s ON tp_s.run_id = rid AND tp_s.request_id = tp_m.request_id
    WHERE tp_m.ok AND tp_s.status = 200 AND tp_s.first_content_ns IS NOT NULL
      AND tp_s.done_ns IS NOT NULL AND tp_m.first_token_ns IS NOT NULL
      AND tp_m.done_ns IS NOT NULL AND tp_m.sent_ns IS NOT NULL
    UNION ALL
    SELECT tp_r.first_token_ns, tp_r.done_ns, tp_r.arrival_clock, 'reported' AS source,
           (tp_r.first_token_ns - tp_r.sent_ns) / 1e6 AS client_ttft_ms,
           tp_r.reported_queue_ms + tp_r.reported_ttft_ms AS server_ttft_ms,
           (tp_r.done_ns - tp_r.sent_ns) / 1e6 AS client_e2e_ms,
           tp_r.reported_queue_ms + tp_r.reported_ttft_ms
               + coalesce(tp_r.reported_mean_itl_ms, 0)
                 * greatest(coalesce(tp_r.output_tokens, 1) - 1, 0) AS server_e2e_ms
    FROM measured_requests(rid) tp_r
    WHERE tp_r.ok AND tp_r.reported_queue_ms IS NOT NULL AND tp_r.reported_ttft_ms IS NOT NULL
      AND tp_r.first_token_ns IS NOT NULL AND tp_r.done_ns IS NOT NULL
      AND tp_r.sent_ns IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM server_requests tp_x WHERE tp_x.run_id = rid);

-- E2E of every ok measured request: from its send to the arrival of its last content chunk, the
-- last token (vLLM's definition), not to the end of the stream: the usage chunk and `[DONE]` that
-- follow carry no token. So E2E - TTFT is exactly the sum of the request's ITL gaps.
-- last_token_ns is when the E2E sample is observed.
CREATE OR REPLACE TEMP MACRO request_e2e(rid) AS TABLE
    SELECT re_m.request_id, re_c.last_token_ns,
           (re_c.last_token_ns - re_m.sent_ns) / 1e6 AS e2e_ms
    FROM measured_requests(rid) re_m
    JOIN (SELECT re_t.request_id, max(re_t.arrival_ns) AS last_token_ns
          FROM content_chunks(rid) re_t
          GROUP BY re_t.request_id) re_c ON re_c.request_id = re_m.request_id
    WHERE re_m.ok AND re_m.sent_ns IS NOT NULL;

-- Every latency sample: metric ('ttft' | 'itl' | 'e2e'), request_id, ts_ns (when it was observed:
-- the first token, the later chunk, the last token) and value_ms; ok requests only.
-- TTFT = first_token_ns - sent_ns (the first chunk with content).
CREATE OR REPLACE TEMP MACRO latency_samples(rid) AS TABLE
    SELECT 'ttft' AS metric, ls_m.request_id, ls_m.first_token_ns AS ts_ns,
           (ls_m.first_token_ns - ls_m.sent_ns) / 1e6 AS value_ms
    FROM measured_requests(rid) ls_m
    WHERE ls_m.ok AND ls_m.first_token_ns IS NOT NULL AND ls_m.sent_ns IS NOT NULL
    UNION ALL
    SELECT 'itl', ls_g.request_id, ls_g.arrival_ns, ls_g.gap_ns / 1e6
    FROM itl_gaps(rid) ls_g
    UNION ALL
    SELECT 'e2e', ls_e.request_id, ls_e.last_token_ns, ls_e.e2e_ms
    FROM request_e2e(rid) ls_e;

---------------------------------------------------------------------------------------------------
-- Engine telemetry
---------------------------------------------------------------------------------------------------

-- step_gc(rid): every engine step of a run with the GC pause time that overlaps it. A GC pause
-- lands inside whichever stage is running, so stage times include it; queries subtract gc_ms
-- before attributing stage time. A GC row without a rank belongs to rank 0 (one process).
-- other_ms is the part of the step no stage timer covers (Python glue, streaming out).
-- The overlap join is bucketed by second, so it costs steps + pauses, not steps × pauses: each
-- step and each pause is listed under every second it touches, and a (step, pause) pair is
-- counted only in the later of their first seconds, which both touch when they overlap.
CREATE OR REPLACE TEMP MACRO step_gc(rid) AS TABLE
WITH sg_steps AS (
    SELECT sg_s.* FROM steps sg_s WHERE sg_s.run_id = rid
),
sg_step_span AS (
    SELECT st.step, st.rank, st.start_ns, st.end_ns,
           least(st.start_ns, st.end_ns) // 1000000000 AS first_sec,
           greatest(st.start_ns, st.end_ns) // 1000000000 AS last_sec
    FROM sg_steps st
),
sg_step_secs AS (
    -- first and last second as plain rows; only the rare step of 3+ seconds is unnested (a
    -- lateral unnest over every step costs more than the whole join)
    SELECT step, rank, start_ns, end_ns, first_sec, first_sec AS sec FROM sg_step_span
    UNION ALL
    SELECT step, rank, start_ns, end_ns, first_sec, last_sec AS sec FROM sg_step_span
    WHERE last_sec > first_sec
    UNION ALL
    SELECT sp.step, sp.rank, sp.start_ns, sp.end_ns, sp.first_sec, t.sec
    FROM sg_step_span sp, unnest(range(sp.first_sec + 1, sp.last_sec)) AS t(sec)
    WHERE sp.last_sec > sp.first_sec + 1
),
sg_gc_secs AS (
    SELECT coalesce(g.rank, 0) AS rank, g.start_ns, g.end_ns, g.generation, t.sec,
           least(g.start_ns, g.end_ns) // 1000000000 AS first_sec
    FROM gc g,
         unnest(range(least(g.start_ns, g.end_ns) // 1000000000,
                      greatest(g.start_ns, g.end_ns) // 1000000000 + 1)) AS t(sec)
    WHERE g.run_id = rid
),
sg_overlaps AS (
    SELECT st.step, st.rank,
           sum(least(st.end_ns, g.end_ns) - greatest(st.start_ns, g.start_ns)) / 1e6 AS gc_ms,
           max(g.generation) AS gc_max_generation,
           count(*) AS gc_count
    FROM sg_step_secs st
    JOIN sg_gc_secs g
      ON g.rank = st.rank AND g.sec = st.sec
     AND st.sec = greatest(st.first_sec, g.first_sec)
     AND g.start_ns < st.end_ns AND g.end_ns > st.start_ns
    GROUP BY ALL
)
SELECT
    st.*,
    (st.end_ns - st.start_ns) / 1e6 AS dur_ms,
    greatest(0, (st.end_ns - st.start_ns) / 1e6
        - coalesce(st.schedule_ms, 0) - coalesce(st.forward_ms, 0) - coalesce(st.penalty_ms, 0)
        - coalesce(st.sample_ms, 0) - coalesce(st.comm_ms, 0)) AS other_ms,
    coalesce(o.gc_ms, 0) AS gc_ms,
    o.gc_max_generation,
    coalesce(o.gc_count, 0) AS gc_count,
    CAST(st.kv_blocks_used AS DOUBLE) / nullif(st.kv_blocks_total, 0) AS kv_usage
FROM sg_steps st
LEFT JOIN sg_overlaps o ON o.step = st.step AND o.rank = st.rank;

---------------------------------------------------------------------------------------------------
-- `spikelens agent` beside a production engine (collectors/agent.py), as Prometheus scraped it
---------------------------------------------------------------------------------------------------

-- agent_samples(rid): the agent's series of a run imported from Prometheus, with the labels the
-- agent sets (pid, role, generation, region) taken out of the JSON. Counters stay cumulative.
-- role: the process's latest, as the agent's /proc series names it (vLLM retitles a process after
-- it started; the hook's GC series under the first title stay exported beside the new ones).
CREATE OR REPLACE TEMP MACRO agent_samples(rid) AS TABLE
    WITH as_raw AS (
        SELECT as_m.ts_ns, as_m.name, as_m.labels, as_m.value,
               CAST(json_extract_string(as_m.labels, '$.pid') AS BIGINT) AS pid,
               json_extract_string(as_m.labels, '$.role') AS role,
               json_extract_string(as_m.labels, '$.generation') AS generation,
               json_extract_string(as_m.labels, '$.region') AS region
        FROM metrics as_m
        WHERE as_m.run_id = rid AND as_m.name LIKE 'spikelens\_agent\_%' ESCAPE '\'
          AND json_extract_string(as_m.labels, '$.pid') IS NOT NULL
    ),
    as_roles AS (
        SELECT as_p.pid, arg_max(as_p.role, as_p.ts_ns) AS role
        FROM as_raw as_p
        WHERE as_p.name = 'spikelens_agent_process_cpu_seconds_total'
        GROUP BY as_p.pid
    )
    SELECT as_r.ts_ns, as_r.name, as_r.labels, as_r.value, as_r.pid,
           coalesce(as_n.role, as_r.role) AS role, as_r.generation, as_r.region
    FROM as_raw as_r
    LEFT JOIN as_roles as_n ON as_n.pid = as_r.pid;

-- agent_counter_increases(rid, family): each scrape's increase of one agent counter over the
-- scrape before of the same series (its whole label set: a process vLLM retitles after it
-- started has a series under each role), at the later scrape. A series that first appears after
-- the run's first scrape was created then, at 0 (the agent creates a series at its first
-- observation), so its first value is an increase; at the first scrape it is history. A counter
-- that went down (the agent restarted) counts from 0.
CREATE OR REPLACE TEMP MACRO agent_counter_increases(rid, family) AS TABLE
    SELECT ai_s.ts_ns, ai_s.pid, ai_s.role, ai_s.generation, ai_s.region,
           CASE WHEN ai_s.before IS NULL OR ai_s.value < ai_s.before THEN ai_s.value
                ELSE ai_s.value - ai_s.before END AS increase
    FROM (SELECT ai_a.*,
                 lag(ai_a.value) OVER (PARTITION BY ai_a.labels ORDER BY ai_a.ts_ns) AS before,
                 min(ai_a.ts_ns) OVER () AS first_scrape_ns
          FROM agent_samples(rid) ai_a
          WHERE ai_a.name = family) ai_s
    WHERE ai_s.before IS NOT NULL OR ai_s.ts_ns > ai_s.first_scrape_ns;

-- process_cpu_samples(rid): cumulative /proc counters per process and tick: the /proc sampler's
-- rows of a run spikelens drove, else (a run imported from Prometheus) the same counters as the
-- agent exported them, one tick per scrape. Never both: a run has one source.
CREATE OR REPLACE TEMP MACRO process_cpu_samples(rid) AS TABLE
    SELECT pcs_c.pid, pcs_c.role, pcs_c.ts_ns, pcs_c.cpu_ns, pcs_c.run_ns, pcs_c.wait_ns,
           pcs_c.voluntary_switches, pcs_c.involuntary_switches, pcs_c.threads
    FROM process_cpu pcs_c
    WHERE pcs_c.run_id = rid
    UNION ALL
    SELECT pcs_a.pid, any_value(pcs_a.role), pcs_a.ts_ns,
           CAST(max(pcs_a.value) FILTER (WHERE pcs_a.name = 'spikelens_agent_process_cpu_seconds_total') * 1e9 AS BIGINT),
           CAST(max(pcs_a.value) FILTER (WHERE pcs_a.name = 'spikelens_agent_process_run_seconds_total') * 1e9 AS BIGINT),
           CAST(max(pcs_a.value) FILTER (WHERE pcs_a.name = 'spikelens_agent_process_runqueue_wait_seconds_total') * 1e9 AS BIGINT),
           CAST(max(pcs_a.value) FILTER (WHERE pcs_a.name = 'spikelens_agent_process_voluntary_switches_total') AS BIGINT),
           CAST(max(pcs_a.value) FILTER (WHERE pcs_a.name = 'spikelens_agent_process_involuntary_switches_total') AS BIGINT),
           CAST(max(pcs_a.value) FILTER (WHERE pcs_a.name = 'spikelens_agent_process_threads') AS INTEGER)
    FROM agent_samples(rid) pcs_a
    WHERE pcs_a.name LIKE 'spikelens\_agent\_process\_%' ESCAPE '\'
      AND NOT EXISTS (SELECT 1 FROM process_cpu pcs_x WHERE pcs_x.run_id = rid)
    GROUP BY pcs_a.pid, pcs_a.ts_ns;

-- A run's Prometheus samples (metrics) with data-parallel engines folded into one series, the
-- server's load as `vllm bench serve` reports it: at each scrape, the series that differ only in
-- their `engine` label are summed (running and waiting requests, counters, histogram buckets),
-- except a per-engine fraction or capacity (names ending in _perc or _usage, or holding
-- available_: KV cache usage, available KV cache memory), of which the largest engine's is taken.
-- Series without an engine label pass unchanged. labels: JSON text ('{}' for none).
CREATE OR REPLACE TEMP MACRO engine_metrics(rid) AS TABLE
    SELECT em_s.ts_ns, em_s.name, em_s.labels,
           CASE WHEN regexp_matches(em_s.name, '(_perc|_usage)$|available_') THEN max(em_s.value)
                ELSE sum(em_s.value) END AS value
    FROM (SELECT em_m.ts_ns, em_m.name, em_m.value,
                 regexp_replace(coalesce(CAST(em_m.labels AS VARCHAR), '{}'),
                                ', "engine": "[^"]*"|"engine": "[^"]*"(, )?', '') AS labels
          FROM metrics em_m
          WHERE em_m.run_id = rid) em_s
    GROUP BY em_s.ts_ns, em_s.name, em_s.labels;
