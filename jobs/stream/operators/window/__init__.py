"""Tumbling and hopping windows: assignment, and final results on the local and the spark engine."""
