"""spikelens flows."""
