"""The Kafka broker the tests start (jobs/cli/local_kafka.py) and Spark's Kafka source, which
setup fetched: keyed messages produced to a topic of two partitions come back through
spark.read.format("kafka"), each key's messages in one partition, in the order produced, and
reading up to given offsets per partition reads exactly those."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.slow


def _read(spark, kafka, topic: str, ending: str = "latest") -> list:
    frame = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", ending)
        .load()
    )
    rows = frame.selectExpr("CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value", "partition", "offset")
    return sorted(rows.collect(), key=lambda r: (r.partition, r.offset))


def test_keyed_changes_come_back_per_partition_in_the_order_produced(spark, kafka):
    kafka.create_topic("orders", partitions=2)
    changes = [(str(order), json.dumps({"order_id": order, "step": step})) for step in range(3) for order in (1, 2, 3)]
    kafka.produce("orders", changes)
    rows = _read(spark, kafka, "orders")
    assert len(rows) == len(changes)
    for order in ("1", "2", "3"):
        mine = [r for r in rows if r.key == order]
        assert len({r.partition for r in mine}) == 1  # a key's changes stay in one partition
        assert [json.loads(r.value)["step"] for r in mine] == [0, 1, 2]
    assert {r.partition for r in rows} == {0, 1}  # three keys over two partitions use both
    # Up to given offsets per partition: exactly the messages before them.
    ending = json.dumps({"orders": {"0": 1, "1": 1}})
    first = _read(spark, kafka, "orders", ending)
    assert [(r.partition, r.offset) for r in first] == [(0, 0), (1, 0)]
