-- Migration 9: spikes kept for the record but not reported — ones no engine signal explains that
-- are minor or show every stage slowed alike (host noise on a shared box;
-- rca.config.AttributeConfig.report_unexplained_minor).
ALTER TABLE spikes ADD COLUMN suppressed BOOLEAN DEFAULT false;
