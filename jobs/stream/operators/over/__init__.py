"""OVER aggregations and LAG (plan/over.py): the touched partitions' rows, windowed by Spark
before and after the micro-batch (local engine)."""
