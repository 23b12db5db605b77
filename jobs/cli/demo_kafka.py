"""`lockstep demo --local-kafka` (make demo-kafka): the demo with its changelogs on Kafka topics.

A local Kafka broker (jobs/cli/local_kafka.py) is started for the demo and stopped after it.
Each changelog folder the queries read is produced to a topic of its own, a file after another in
name order and a line after another, as a CDC connector would write it: keyed by the source's
primary key (the Java client's partitioner), over two partitions when the source has a key and
one when it has none (a keyless changelog's retractions must stay in order behind their rows). A
file in a date=YYYY-MM-DD folder is stamped with that day's noon. The specs then read the topics
(kafka: {topic}), and the run folders are local, as in the plain demo.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable
from datetime import UTC, date, datetime, time
from pathlib import Path

from jobs.cli.local_kafka import KafkaBroker
from jobs.runtime.progress import Progress
from jobs.spec.model import KafkaSpec, QuerySpec, Settings, SourceSpec

TOPIC_PREFIX = "lockstep-demo."


def run_on_local_kafka(args, settings: Settings, specs: list[Path], progress: Progress, run_all: Callable) -> int:
    workdir = Path(tempfile.mkdtemp(prefix="lockstep-local-kafka-"))
    out = args.out or settings.runs_dir
    try:
        with KafkaBroker(workdir / "kafka") as broker:
            progress.say(f"local Kafka broker (KRaft) on {broker.bootstrap}")
            kafka = settings.kafka.model_copy(update={"bootstrap_servers": broker.bootstrap})
            settings = settings.model_copy(update={"kafka": kafka})
            rows = run_all(args, settings, specs, out, progress, _OnTopics(broker, args.queries.resolve(), progress))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"\ntopics: {TOPIC_PREFIX}<folder>; reports: {out}/index.html. The broker stopped with the demo.")
    verdicts = {r["verdict"] for r in rows}
    return 2 if "error" in verdicts else (1 if "fail" in verdicts else 0)


class _OnTopics:
    """A spec whose changelog folders are read from topics (each folder produced once)."""

    def __init__(self, broker: KafkaBroker, queries: Path, progress: Progress):
        self.broker, self.queries, self.progress = broker, queries, progress
        self.topics: dict[Path, str] = {}

    def __call__(self, spec: QuerySpec) -> QuerySpec:
        sources = {
            name: self._on_topic(source) if source.format != "delta" else source
            for name, source in spec.sources.items()
        }
        return spec.model_copy(update={"sources": sources})

    def _on_topic(self, source: SourceSpec) -> SourceSpec:
        topic = self._topic(source)
        return source.model_copy(update={"path": None, "kafka": KafkaSpec(topic=topic), "partitioned_by": None})

    def _topic(self, source: SourceSpec) -> str:
        folder = source.folder
        if folder not in self.topics:
            relative = folder.relative_to(self.queries) if folder.is_relative_to(self.queries) else Path(folder.name)
            topic = TOPIC_PREFIX + ".".join(relative.parts)
            self.broker.create_topic(topic, partitions=2 if source.primary_key else 1)
            produced = 0
            for path, day in _files(folder):
                messages = [(_key(line, source), line) for line in path.read_text().splitlines() if line.strip()]
                self.broker.produce(topic, messages, at=datetime.combine(day, time(12), UTC) if day else None)
                produced += len(messages)
            self.progress.say(f"produced {produced:,} messages of {folder} to topic {topic}")
            self.topics[folder] = topic
        return self.topics[folder]


def _files(folder: Path) -> list[tuple[Path, date | None]]:
    """The folder's changelog files in the order a source reads them, with their date partition."""
    files = sorted(
        (p for p in folder.rglob("*") if p.is_file() and not any(part.startswith((".", "_")) for part in p.parts)),
        key=lambda p: p.relative_to(folder).as_posix(),
    )
    return [(p, _partition_date(p.relative_to(folder))) for p in files]


def _partition_date(relative: Path) -> date | None:
    for part in relative.parts[:-1]:
        if part.startswith("date="):
            return date.fromisoformat(part.removeprefix("date="))
    return None


def _key(line: str, source: SourceSpec) -> str | None:
    """The message key a CDC connector gives a change: its primary key's values (None for a
    keyless source, or a line that is not a JSON object)."""
    if not source.primary_key:
        return None
    try:
        value = json.loads(line)
    except json.JSONDecodeError:
        return None
    if not isinstance(value, dict):
        return None
    if source.format == "debezium-json":
        envelope = value["payload"] if isinstance(value.get("payload"), dict) else value
        value = envelope.get("after") or envelope.get("before") or {}
    return json.dumps([value.get(column) for column in source.primary_key])
