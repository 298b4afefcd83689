-- Estimated token history held by the engine per window of $window_s seconds from load_started_ns:
-- at each window's midpoint, the requests between their first token and done (engine's view),
-- each with prompt_tokens + the share of its output generated so far (linear in time). Penalty
-- work that scales with history (the slow path) tracks this; batch size alone does not.
-- Each request is compared only with the windows it spans (joined on the window index), not
-- with every window of the run.
WITH run AS (SELECT * FROM run_axis($run_id, $window_s)),
grid AS (SELECT w, mid_ns FROM window_grid($run_id, $window_s)),
in_flight AS (
    SELECT e.first_token_ns, e.done_ns, coalesce(e.prompt_tokens, 0) AS prompt_tokens,
           coalesce(e.output_tokens, 0) AS output_tokens
    FROM engine_requests e, run
    WHERE e.run_id = run.run_id AND e.first_token_ns IS NOT NULL AND e.done_ns > e.first_token_ns
),
last_window AS (SELECT max(w) AS w FROM grid),
spans AS (
    -- every window whose midpoint the request may be in flight at: from the window of its first
    -- token to the window of its end (integer division: a midpoint lies inside its window)
    SELECT f.*, t.w
    FROM in_flight f, run, last_window,
         unnest(range(greatest(0, (f.first_token_ns - run.t0_ns) // run.window_ns),
                      least(last_window.w, (f.done_ns - run.t0_ns) // run.window_ns) + 1)) AS t(w)
)
SELECT
    grid.w AS "window",
    count(f.first_token_ns) AS running,
    coalesce(sum(f.prompt_tokens + f.output_tokens * (grid.mid_ns - f.first_token_ns)
                 / (f.done_ns - f.first_token_ns)), 0) AS history_tokens
FROM grid
LEFT JOIN spans f ON f.w = grid.w AND f.first_token_ns <= grid.mid_ns AND grid.mid_ns < f.done_ns
GROUP BY grid.w
ORDER BY grid.w
