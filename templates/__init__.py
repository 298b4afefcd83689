"""spikelens templates."""
