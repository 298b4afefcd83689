"""spikelens warehouse."""
