-- Migration 9: spikes kept for the record but not reported — minor ones no engine signal explains
-- (host noise on a shared box; rca.config.AttributeConfig.report_unexplained_minor).
ALTER TABLE spikes ADD COLUMN suppressed BOOLEAN DEFAULT false;
