"""Spark settings for the length of a block: a stage's streaming query, a small job."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from pyspark.sql import SparkSession


@contextmanager
def settings_for(spark: SparkSession, conf: Mapping[str, str]) -> Iterator[None]:
    """Run the block with `conf` set on the session, then put the session's own values back (a
    key it had no value for is unset again)."""
    saved = {key: spark.conf.get(key, None) for key in conf}
    for key, value in conf.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, own in saved.items():
            if own is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, own)
