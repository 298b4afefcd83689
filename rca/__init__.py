"""spikelens rca."""
