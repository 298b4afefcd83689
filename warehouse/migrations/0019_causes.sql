-- Migration 19: causes outside the engine (client, network, host) and an earned 'unexplained'.
-- The share of a spike's latency excess that no measured signal covers, beside `coverage` (the
-- part the engine's step slowdown accounts for). Attributions keep one row per cause, the
-- uncovered part as the row of cause 'unexplained'.
ALTER TABLE spikes ADD COLUMN uncovered DOUBLE;
