"""The local engine's state on disk: a keyed input's live rows (live_state.py) as snapshots
of key-range parts (snapshot_parts.py), and rows with counts summed as Spark sums them
(row_counts.py)."""
