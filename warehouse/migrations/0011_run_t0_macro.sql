-- Migration 11: one definition of a run's time zero, used by every query that puts samples on the
-- run's time line. t0 = load_started_ns (the start of measured load, from run.json); for runs
-- written before that key existed, the first send of the measured phase.
-- (The aliases are unusual on purpose: a macro argument such as `r.run_id` is substituted as
-- text and would bind to an alias of the same name inside the macro.)
CREATE MACRO run_t0(rid) AS (
    SELECT coalesce(t0_run.load_started_ns,
                    (SELECT min(t0_req.sent_ns) FROM requests t0_req
                     WHERE t0_req.run_id = t0_run.run_id
                       AND coalesce(t0_req.phase, 'measure') = 'measure'))
    FROM runs t0_run
    WHERE t0_run.run_id = rid
);
