"""spikelens scenarios."""
