"""Flink's SinkUpsertMaterializer: the local engine's (lockstep's files) and the spark engine's (a Delta table)."""
