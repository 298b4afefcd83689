"""spikelens loadgen."""
