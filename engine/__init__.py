"""spikelens engine."""
