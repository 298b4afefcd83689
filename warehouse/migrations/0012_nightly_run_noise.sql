-- Migration 12: the spread between a nightly's baseline runs (rca/compare.py between_run_noise):
-- relative (absolute for error_rate); NULL with fewer than two usable baseline runs. A verdict of
-- regressed or improved needs the change to exceed it as well as the configured threshold.
ALTER TABLE nightly_verdicts ADD COLUMN run_noise DOUBLE;
