"""What happened over time: the metadata-log replay and the per-partition timeline."""
