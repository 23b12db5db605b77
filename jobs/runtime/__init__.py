"""What every step shares: the Spark session, the run folder layout, progress output."""
