"""Spark's Kafka source (spark-sql-kafka-0-10 for pyspark's Spark and Scala, its token provider,
kafka-clients and commons-pool2), which scripts/kafka-jars.sh fetched into the virtual
environment's jars/kafka folder, handed to Spark through spark.jars when the session starts
(nothing is resolved at start-up)."""

from __future__ import annotations

import sys
from pathlib import Path

from jobs.runtime.delta_connector import jars_in, with_jars

JARS = Path(sys.prefix) / "jars" / "kafka"


def with_kafka_jars(conf: dict[str, str], folder: Path = JARS) -> dict[str, str]:
    """`conf` with the Kafka source's jars added to spark.jars, when setup fetched them."""
    return with_jars(conf, jars_in(folder))
