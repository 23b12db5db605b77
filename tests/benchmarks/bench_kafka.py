"""A Kafka source's throughput against the same changelog in files, in one run.

The synthetic changelog (jobs/changelog/generate.py, N events) is written as files and produced
to a topic of two partitions on a local broker (jobs/cli/local_kafka.py), keyed by order_id. The
same group aggregate then runs over each, on one SparkSession warmed by a small run of each kind
first, into fresh run folders: the stream step (staging, then the micro-batches) and the batch
step (from the files: the staged changelog; from the topic: the topic itself, read again up to
the point's offsets and parsed on the executors). Printed: seconds and changelog rows per second
of staging, of the stream step and of the batch step, per source kind.

    python -m tests.benchmarks.bench_kafka [--events 300000] [--partitions 2]
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

import yaml

from jobs.changelog.generate import TIMED_SCHEMA, generate_changelog
from jobs.cli.local_kafka import KafkaBroker
from jobs.pipeline import Pipeline
from jobs.plan import plan_query
from jobs.runtime.progress import Progress
from jobs.spec import load_settings, load_spec

SQL = "SELECT pId, SUM(income) AS total, COUNT(*) AS orders FROM orders GROUP BY pId"


def spec_file(folder: Path, name: str, source: dict) -> Path:
    spec = {
        "name": name,
        "sql": SQL,
        "sources": {
            "orders": {**source, "format": "changelog-json", "schema": TIMED_SCHEMA, "primary_key": ["order_id"]}
        },
        "stream": {"rows_per_batch": 100_000},
    }
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def produce(broker: KafkaBroker, topic: str, folder: Path, partitions: int) -> tuple[int, float]:
    broker.create_topic(topic, partitions=partitions)
    started = time.monotonic()
    lines = [line for path in sorted(folder.iterdir()) for line in path.read_text().splitlines() if line]
    broker.produce(topic, [(str(json.loads(line)["order_id"]), line) for line in lines])
    return len(lines), time.monotonic() - started


def measure(spec: Path, settings, out: Path) -> dict:
    pipeline = Pipeline.of(plan_query(load_spec(spec)), settings, out, Progress(quiet=True))
    started = time.monotonic()
    result = pipeline.stream()
    stream_seconds = time.monotonic() - started
    started = time.monotonic()
    pipeline.batch()
    batch_seconds = time.monotonic() - started
    assert result is not None
    return {
        "rows": result.input_rows,
        "staging": stream_seconds - result.seconds,
        "stream": stream_seconds,
        "batch": batch_seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=300_000, help="logical events of the changelog")
    parser.add_argument("--partitions", type=int, default=2, help="partitions of the topic")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-kafka-"))
    try:
        with KafkaBroker(work / "kafka") as broker:
            settings = load_settings()
            settings = settings.model_copy(
                update={"kafka": settings.kafka.model_copy(update={"bootstrap_servers": broker.bootstrap})}
            )
            generate_changelog(work / "warm", events=2_000)
            produce(broker, "warm", work / "warm", args.partitions)
            for name, source in (("warm_files", {"path": "warm"}), ("warm_topic", {"kafka": {"topic": "warm"}})):
                measure(spec_file(work, name, source), settings, work / "runs")
            rows = generate_changelog(work / "orders", events=args.events)
            produced, produce_seconds = produce(broker, "orders", work / "orders", args.partitions)
            print(
                f"changelog: {rows:,} rows; produced to a topic of {args.partitions} partition(s) in "
                f"{produce_seconds:.1f} s ({produced / produce_seconds:,.0f} messages/s)",
                flush=True,
            )
            files = measure(spec_file(work, "files", {"path": "orders"}), settings, work / "runs")
            topic = measure(spec_file(work, "topic", {"kafka": {"topic": "orders"}}), settings, work / "runs")
        print(table({"files": files, "topic": topic}))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def table(figures: dict[str, dict]) -> str:
    header = f"{'source':<8} {'rows':>9} {'staging s':>10} {'rows/s':>9} {'stream s':>9} {'rows/s':>9} {'batch s':>8}"
    lines = [header, "-" * len(header)]
    for kind, f in figures.items():
        lines.append(
            f"{kind:<8} {f['rows']:>9,} {f['staging']:>10.1f} {f['rows'] / f['staging']:>9,.0f} "
            f"{f['stream']:>9.1f} {f['rows'] / f['stream']:>9,.0f} {f['batch']:>8.1f}"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
