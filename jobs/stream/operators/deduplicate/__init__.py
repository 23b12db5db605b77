"""Deduplication and Top-N (ROW_NUMBER() <= N per partition): the shared ranking, the local and
the spark implementation."""
