-- The metric names a run's Prometheus samples (metrics.parquet) hold, histogram buckets included:
-- what its page says the signals can and cannot tell (pages/observed_signals.py).
WITH names AS (
    SELECT DISTINCT name FROM metrics WHERE run_id = $run_id
)
SELECT name FROM names ORDER BY name
