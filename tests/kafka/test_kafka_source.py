"""Kafka topics as sources, against the broker the session starts: Debezium envelopes (wrapped
or not) and tombstones, topics of two partitions, the consistency point in offsets per partition,
the batch step reading the topic up to exactly those offsets, reruns that read only new offsets,
a logical date's end as offsets, bad messages named by offset, retention, a broker restarted
between runs, and an unreachable broker."""

from __future__ import annotations

import json
import time
from datetime import UTC, date, datetime

import pytest
import yaml
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from jobs.errors import InputError
from jobs.pipeline import Pipeline
from jobs.runtime.progress import Progress
from jobs.stream.job import run_stream
from tests.conftest import write_changelog
from tests.integration.conftest import table_rows
from tests.integration.test_cli import lockstep

pytestmark = pytest.mark.slow

SCHEMA = "order_id BIGINT, pId BIGINT, income BIGINT"
TOTALS = "SELECT pId, SUM(income) AS total, COUNT(*) AS n FROM orders GROUP BY pId"


def order(order_id: int, pid: int, income: int) -> dict:
    return {"order_id": order_id, "pId": pid, "income": income}


def debezium(op: str, before: dict | None, after: dict | None, wrapped: bool = False) -> str:
    envelope = {"before": before, "after": after, "op": op, "source": {"db": "shop"}, "ts_ms": 0}
    return json.dumps({"schema": {"type": "struct", "optional": False}, "payload": envelope} if wrapped else envelope)


def created(*orders: dict, wrapped: bool = False) -> list[tuple[str, str]]:
    return [(str(o["order_id"]), debezium("c", None, o, wrapped)) for o in orders]


def topic_spec(folder, kafka, topic: str, sql: str = TOTALS, *, name: str = "q", more: dict | None = None, **source):
    spec = {
        "name": name,
        "sql": sql,
        "sources": {
            "orders": {
                "kafka": {"topic": topic, "bootstrap_servers": kafka.bootstrap},
                "format": "debezium-json",
                "schema": SCHEMA,
                "primary_key": ["order_id"],
                **source,
            },
            **(more or {}),
        },
        "stream": {"rows_per_batch": 3},
    }
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def totals(live: list[dict]) -> list[dict]:
    found: dict[int, tuple[int, int]] = {}
    for o in live:
        total, n = found.get(o["pId"], (0, 0))
        found[o["pId"]] = (total + o["income"], n + 1)
    return [{"pId": p, "total": t, "n": n} for p, (t, n) in sorted(found.items())]


def high_watermarks(kafka, topic: str, partitions: int) -> dict[int, int]:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": "test"})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
    finally:
        consumer.close()


def point_of(pipeline: Pipeline) -> dict:
    return json.loads(pipeline.layout.consistency.read_text())["sources"]["orders"]


def opened(spec, runs, said: list[str] | None = None) -> Pipeline:
    return Pipeline.open(spec, runs_dir=runs, progress=Progress(emit=said.append) if said is not None else None)


def test_a_two_partition_debezium_topic_is_a_changelog_and_a_rerun_reads_only_new_offsets(kafka, tmp_path):
    kafka.create_topic("shop.orders", partitions=2)
    first = [order(i, i % 3, 10 * i) for i in range(1, 9)]
    kafka.produce("shop.orders", created(*first[:4]) + created(*first[4:], wrapped=True))
    kafka.produce(
        "shop.orders",
        [
            ("2", debezium("u", order(2, 2, 20), order(2, 2, 25), wrapped=True)),
            ("3", debezium("d", order(3, 0, 30), None)),
            ("3", None),  # the tombstone Debezium writes after a delete
        ],
    )
    said: list[str] = []
    pipeline = opened(topic_spec(tmp_path, kafka, "shop.orders"), tmp_path / "runs", said)

    assert pipeline.run().verdict == "pass"
    live = [o for o in first if o["order_id"] != 3]
    live[1] = order(2, 2, 25)
    assert table_rows(pipeline.layout.stream) == totals(live)
    position = point_of(pipeline)
    ends = high_watermarks(kafka, "shop.orders", 2)
    assert position["topic"] == "shop.orders"
    assert position["offsets"] == {str(p): end for p, end in ends.items()}
    assert min(ends.values()) > 0  # both partitions carry changes
    assert position["rows"] == 8 + 2 + 1  # an update is two change rows, the tombstone none
    assert any(line.startswith("source orders: read from topic shop.orders up to partition 0") for line in said)
    manifest = json.loads((pipeline.layout.staged("orders") / "manifest.json").read_text())
    assert manifest["tombstones"] == 1
    report_page = (pipeline.layout.root / "report.html").read_text()
    assert f"partition 0 \u2192 {ends[0]}, partition 1 \u2192 {ends[1]}" in report_page

    kafka.produce("shop.orders", created(order(9, 1, 90)))
    assert pipeline.run().verdict == "pass"
    assert table_rows(pipeline.layout.stream) == totals([*live, order(9, 1, 90)])
    manifest = json.loads((pipeline.layout.staged("orders") / "manifest.json").read_text())
    rerun = manifest["files"][-1]
    assert (rerun["end"] - rerun["start"], rerun["rows"]) == (1, 1)  # only the new offset was read
    assert point_of(pipeline)["rows"] == position["rows"] + 1


def test_a_join_of_a_topic_and_a_changelog_folder(kafka, tmp_path):
    kafka.create_topic("join.orders", partitions=2)
    kafka.produce("join.orders", created(order(1, 7, 5), order(2, 8, 3), order(3, 7, 4)))
    kafka.produce("join.orders", [("2", debezium("d", order(2, 8, 3), None))])
    write_changelog(
        tmp_path / "products",
        "001.json",
        [{"op": "+I", "pId": 7, "name": "tea"}, {"op": "+I", "pId": 8, "name": "cake"}],
    )
    products = {
        "path": "products",
        "format": "changelog-json",
        "schema": "pId BIGINT, name STRING",
        "primary_key": ["pId"],
    }
    sql = "SELECT o.order_id, p.name, o.income FROM orders o JOIN products p ON o.pId = p.pId"
    pipeline = opened(topic_spec(tmp_path, kafka, "join.orders", sql, more={"products": products}), tmp_path / "runs")

    assert pipeline.run().verdict == "pass"
    assert table_rows(pipeline.layout.stream) == [
        {"order_id": 1, "name": "tea", "income": 5},
        {"order_id": 3, "name": "tea", "income": 4},
    ]


def test_a_topics_watermark_is_per_partition_so_only_a_partitions_own_disorder_is_late(kafka, tmp_path):
    kafka.create_topic("timed.orders", partitions=2)

    def timed(order_id: int, at: str) -> tuple[str, str]:
        row = {"op": "+I", "order_id": order_id, "pId": 1, "income": order_id, "row_time": f"2026-11-21 09:{at}"}
        return str(order_id), json.dumps(row)

    kafka.produce("timed.orders", [timed(1, "00:10"), timed(2, "01:10"), timed(3, "02:10")], partition=0)
    # Staged after partition 0, whose watermark is past 09:02 by then: against one watermark for
    # the topic, orders 4 and 5 would be late; against partition 1's own, only order 7 is.
    kafka.produce("timed.orders", [timed(4, "00:20"), timed(5, "01:20"), timed(6, "02:20")], partition=1)
    kafka.produce("timed.orders", [timed(7, "00:30")], partition=1)
    sql = (
        "SELECT pId, SUM(income) AS total, window.start AS window_start FROM orders "
        "GROUP BY pId, window(row_time, '1 minute')"
    )
    spec = topic_spec(
        tmp_path,
        kafka,
        "timed.orders",
        sql,
        format="changelog-json",
        schema=f"{SCHEMA}, row_time TIMESTAMP",
        event_time="row_time",
        watermark="5 seconds",
    )
    spec.write_text(spec.read_text().replace("rows_per_batch: 3", "rows_per_batch: 1"))
    report = opened(spec, tmp_path / "runs").run()

    assert report.windows is not None
    assert report.windows.late_events == 1
    assert [w["window_start"] for w in report.windows.late_events_by_window] == ["2026-11-21 09:00:00"]
    assert report.verdict == "fail"  # a late event is a real difference, explained in the report


def test_a_bad_message_is_named_by_topic_partition_and_offset(kafka, tmp_path):
    kafka.create_topic("bad.orders", partitions=1)
    kafka.produce("bad.orders", created(order(1, 1, 5)) + [("2", "{not json"), ("3", debezium("t", None, None))])
    kafka.produce("bad.orders", created(order(4, 1, 2)))

    with pytest.raises(InputError) as failed:
        opened(topic_spec(tmp_path, kafka, "bad.orders"), tmp_path / "fail").stream()
    assert "kafka topic bad.orders partition 0 offset 1" in str(failed.value)
    assert "malformed JSON" in str(failed.value)

    said: list[str] = []
    spec = topic_spec(tmp_path, kafka, "bad.orders", name="quarantined", on_bad_rows="quarantine")
    pipeline = opened(spec, tmp_path / "runs", said)
    report = pipeline.run()
    assert report.verdict == "pass"
    assert report.quarantined_rows == 2
    assert table_rows(pipeline.layout.stream) == [{"pId": 1, "total": 7, "n": 2}]
    quarantined = table_rows(pipeline.layout.quarantine)
    assert [(q["file"], q["reason"][:13]) for q in quarantined] == [
        ("kafka topic bad.orders partition 0 offset 1", "malformed JSO"),
        ("kafka topic bad.orders partition 0 offset 2", "unknown op 't'"[:13]),
    ]
    assert any("read from the staged changelog, not the topic (messages were set aside" in line for line in said)


def test_a_logical_date_reads_up_to_the_offsets_at_its_end_and_a_backfill_rechecks_them(kafka, tmp_path):
    kafka.create_topic("dated.orders", partitions=2)
    kafka.produce("dated.orders", created(order(1, 1, 5), order(2, 2, 3)), at=datetime(2026, 11, 1, 12, tzinfo=UTC))
    kafka.produce("dated.orders", created(order(3, 1, 4)), at=datetime(2026, 11, 2, 9, tzinfo=UTC))
    pipeline = opened(topic_spec(tmp_path, kafka, "dated.orders"), tmp_path / "runs")

    assert pipeline.run(date(2026, 11, 1)).verdict == "pass"
    day_one = point_of(pipeline)
    assert day_one["rows"] == 2
    assert table_rows(pipeline.layout.stream) == totals([order(1, 1, 5), order(2, 2, 3)])
    assert pipeline.run(date(2026, 11, 2)).verdict == "pass"
    assert point_of(pipeline)["rows"] == 3
    assert sum(point_of(pipeline)["offsets"].values()) == sum(day_one["offsets"].values()) + 1

    backfill = pipeline.check(date(2026, 11, 1))  # the batch is recomputed at day one's offsets
    assert backfill.verdict == "pass"
    assert backfill.consistency_point["sources"]["orders"]["offsets"] == day_one["offsets"]


def test_retention_past_the_staged_start_makes_the_batch_read_the_staged_changelog(kafka, tmp_path):
    kafka.create_topic("retained.orders", partitions=1)
    kafka.produce("retained.orders", created(order(1, 1, 5), order(2, 1, 3), order(3, 2, 4)))
    said: list[str] = []
    pipeline = opened(topic_spec(tmp_path, kafka, "retained.orders"), tmp_path / "runs", said)
    assert pipeline.run().verdict == "pass"

    _delete_before(kafka, "retained.orders", 0, offset=2)
    pipeline.batch()
    assert pipeline.check().verdict == "pass"
    assert any("not the topic (retention deleted partition 0's offsets 0 to 1)" in line for line in said)

    kafka.produce("retained.orders", created(order(4, 2, 1), order(5, 2, 1)))
    _delete_before(kafka, "retained.orders", 0, offset=4)  # offset 3 deleted before it was read
    with pytest.raises(InputError, match="offsets 3 to 3 were deleted"):
        pipeline.stream()


def test_a_topic_compacted_after_the_stream_read_it_makes_the_batch_read_the_staged_changelog(kafka, tmp_path):
    quick = {"segment.ms": "100", "min.cleanable.dirty.ratio": "0.001", "min.compaction.lag.ms": "0"}
    kafka.create_topic("compacted.orders", partitions=1, config=quick)
    kafka.produce("compacted.orders", created(order(1, 1, 5), order(2, 1, 3)))
    kafka.produce("compacted.orders", [("1", debezium("u", order(1, 1, 5), order(1, 1, 9)))])
    said: list[str] = []
    pipeline = opened(topic_spec(tmp_path, kafka, "compacted.orders"), tmp_path / "runs", said)
    assert pipeline.run().verdict == "pass"

    _compact(kafka, "compacted.orders")  # order 1's create is gone; its update stays
    pipeline.batch()
    assert pipeline.check().verdict == "pass"
    assert any(
        "not the topic (partition 0 holds 2 messages in the consumed offsets, staging read 3 (compaction))" in line
        for line in said
    )


def test_a_broker_restarted_between_micro_batches_and_between_runs_gives_the_undisturbed_result(kafka, tmp_path):
    kafka.create_topic("restart.orders", partitions=2)
    kafka.produce("restart.orders", created(*[order(i, i % 2, i) for i in range(1, 7)]))
    pipeline = opened(topic_spec(tmp_path, kafka, "restart.orders"), tmp_path / "runs")
    restarts: list[int] = []

    def restart_once() -> None:  # after the first micro-batch: the batch step reads the restarted broker
        if not restarts:
            kafka.restart()
            restarts.append(1)

    run_stream(pipeline.plan, pipeline.settings, pipeline.layout, after_micro_batch=restart_once)
    pipeline.batch()
    assert restarts and pipeline.check().verdict == "pass"

    kafka.restart()  # between two runs: the next one reads the new offsets from the restarted broker
    kafka.produce("restart.orders", [("1", debezium("u", order(1, 1, 1), order(1, 0, 10)))])
    kafka.produce("restart.orders", created(order(7, 1, 7)))
    assert pipeline.run().verdict == "pass"

    undisturbed = opened(topic_spec(tmp_path, kafka, "restart.orders", name="once"), tmp_path / "once")
    assert undisturbed.run().verdict == "pass"
    assert table_rows(pipeline.layout.stream) == table_rows(undisturbed.layout.stream)
    assert point_of(pipeline)["offsets"] == point_of(undisturbed)["offsets"]


def test_an_unreachable_broker_is_one_line_and_exit_2_in_bounded_time(tmp_path):
    from jobs.cli.local_store import free_port

    settings = tmp_path / "settings.yaml"
    settings.write_text(f"kafka:\n  bootstrap_servers: 127.0.0.1:{free_port()}\n  timeout_seconds: 3\n")
    spec = tmp_path / "q.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "name": "q",
                "sql": TOTALS,
                "sources": {"orders": {"kafka": {"topic": "gone.orders"}, "format": "debezium-json", "schema": SCHEMA}},
            }
        )
    )
    started = time.monotonic()
    done = lockstep("run", spec, "--settings", settings, "--out", tmp_path / "runs", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "did not answer within 3 s" in lines[0] and "source orders" in lines[0]
    assert time.monotonic() - started < 60  # the timeout and the process's start, not Spark's retries


def _compact(kafka, topic: str) -> None:
    """Compact the topic now: its cleanup policy set to compact, a message to a key of its own
    rolling the segment, then wait until the first message is gone."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    entry = ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET)
    for future in admin.incremental_alter_configs(
        [ConfigResource("topic", topic, incremental_configs=[entry])]
    ).values():
        future.result(timeout=30)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        time.sleep(0.3)
        kafka.produce(topic, [("roll", None)])  # a tombstone of a key no source row has
        if _first_offset_present(kafka, topic) > 0:
            return
    raise AssertionError(f"{topic} was not compacted within a minute")


def _first_offset_present(kafka, topic: str) -> int:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": "test", "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        message = consumer.poll(5)
        return message.offset() if message is not None else -1
    finally:
        consumer.close()


def _delete_before(kafka, topic: str, partition: int, offset: int) -> None:
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    done = admin.delete_records([TopicPartition(topic, partition, offset)])
    for future in done.values():
        future.result(timeout=30)
