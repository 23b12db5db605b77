"""A Kafka source in a spec: a topic instead of a path, the formats and starting points it takes,
and where its bootstrap servers come from when the spec does not name them."""

from __future__ import annotations

import pytest

from jobs.errors import SpecError
from jobs.kafka.servers import VARIABLE, with_bootstrap_servers
from jobs.spec import load_spec
from jobs.spec.model import KafkaSettings
from tests.conftest import write_spec

SPEC = """
name: q
sql: SELECT pId, SUM(income) AS total FROM orders GROUP BY pId
sources:
  orders:
    kafka:
      topic: shop.orders
    format: debezium-json
    schema: "order_id BIGINT, pId BIGINT, income BIGINT"
    primary_key: [order_id]
"""


def test_a_topic_with_offsets_per_partition_is_a_source(tmp_path):
    spec = load_spec(
        write_spec(tmp_path, SPEC.replace("topic: shop.orders", "topic: t\n      starting_offsets: {0: 5, 1: 0}"))
    )
    source = spec.sources["orders"]
    assert source.path is None and source.kafka is not None
    assert (source.kafka.topic, source.kafka.starting_offsets) == ("t", {0: 5, 1: 0})


@pytest.mark.parametrize(
    "change, message",
    [
        (("    format: debezium-json", "    format: debezium-json\n    path: orders"), "either path .* or kafka"),
        (("    kafka:\n      topic: shop.orders\n", ""), "either path .* or kafka"),
        (("format: debezium-json", "format: delta"), "a kafka source's format is changelog-json"),
        (("    primary_key", "    starting_version: 3\n    primary_key"), "starting_version is for format: delta"),
        (("    primary_key", "    partitioned_by: date\n    primary_key"), "read by offset, not by date partition"),
        (("      topic: shop.orders", "      topic: t\n      starting_offsets: latest"), "starting_offsets"),
        (
            ("    primary_key", "    starting_timestamp: 2026-11-01T00:00:00\n    primary_key"),
            None,  # a topic may start at a time
        ),
    ],
)
def test_what_a_kafka_source_takes(tmp_path, change, message):
    path = write_spec(tmp_path, SPEC.replace(*change), name="q.yaml")
    if message is None:
        assert load_spec(path).sources["orders"].starting_timestamp is not None
        return
    with pytest.raises(SpecError, match=message):
        load_spec(path)


def test_bootstrap_servers_come_from_the_spec_then_the_settings_then_airflow_then_the_environment(
    tmp_path, monkeypatch
):
    spec = load_spec(write_spec(tmp_path, SPEC))
    servers = lambda settings: with_bootstrap_servers(spec, settings).sources["orders"].kafka.bootstrap_servers  # noqa: E731
    monkeypatch.delenv(VARIABLE, raising=False)
    with pytest.raises(SpecError, match="source orders .*: no Kafka bootstrap servers"):
        servers(KafkaSettings())
    monkeypatch.setenv(VARIABLE, "env:9092")
    assert servers(KafkaSettings()) == "env:9092"
    monkeypatch.setenv("AIRFLOW_CONN_SHOP_KAFKA", '{"conn_type": "kafka", "host": "airflow", "port": 9093}')
    assert servers(KafkaSettings(airflow_connection="shop_kafka")) == "airflow:9093"
    assert servers(KafkaSettings(bootstrap_servers="settings:9094", airflow_connection="shop_kafka")) == "settings:9094"
    named = load_spec(
        write_spec(tmp_path, SPEC.replace("topic: shop.orders", "topic: t\n      bootstrap_servers: spec:1"))
    )
    assert with_bootstrap_servers(named, KafkaSettings(bootstrap_servers="settings:9094")) == named
