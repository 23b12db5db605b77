"""lockstep's side of a differential case: the case as a spec and changelog files, `run` (stream,
batch and check) through the pipeline, and what came out: the verdict, the sink's rows and its
change feed's row kinds, or the one-line error lockstep gave."""

from __future__ import annotations

import json
import shutil
import traceback
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from deltalake import DeltaTable

from jobs.changelog.columns import COUNT
from jobs.cli.local_kafka import KafkaBroker
from jobs.errors import LockstepError
from jobs.pipeline import Pipeline
from jobs.plan import plan_query
from jobs.runtime.delta import read_change_feed
from jobs.runtime.progress import Progress
from jobs.spec import load_spec
from jobs.spec.model import Settings
from tests.differential.case import Case, Source

CDF_KINDS = {"insert": "+I", "update_preimage": "-U", "update_postimage": "+U", "delete": "-D"}


@dataclass
class LockstepOutcome:
    verdict: str | None = None  # pass / fail; None when lockstep did not get to a verdict
    columns: list[str] = field(default_factory=list)
    rows: list[dict] = field(default_factory=list)  # the sink table, a row per copy
    feed_kinds: dict[str, int] = field(default_factory=dict)
    error: str | None = None  # the one line lockstep printed (exit 2), or a crash
    crashed: bool = False  # a Python traceback: a bug whatever the input
    late_rows: list[int] = field(default_factory=list)  # the changes (their places) the stream left out
    late_explains: str | None = None  # how much of a difference the late events explain (all / part / none)


def write_case(case: Case, folder: Path, broker: KafkaBroker | None = None) -> Path:
    """The spec (and one folder of changelog files per source, or with source_kind kafka one
    topic per source on `broker`) lockstep reads."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    if case.source_kind == "kafka":
        assert broker is not None, f"{case.name} reads Kafka topics: give it a broker"
        sources = {s.name: _topic_source_spec(s, folder, broker) for s in case.sources}
    else:
        sources = {s.name: _source_spec(s, folder) for s in case.sources}
    spec = {
        "name": "q",
        "description": f"differential case {case.name}",
        "sql": case.spark_sql,
        "sources": sources,
        "stream": {"rows_per_batch": case.rows_per_batch, "state_store": case.state_store, "engine": case.engine},
    }
    if case.sink:
        spec["sink"] = case.sink
    path = folder / "q.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _source_spec(source: Source, folder: Path) -> dict:
    _write_changelog(source, folder / source.name)
    return {"path": source.name, **_source_spec_fields(source)}


def _source_spec_fields(source: Source) -> dict:
    spec: dict = {"format": "json" if source.insert_only else "changelog-json", "schema": source.schema_ddl()}
    if source.primary_key:
        spec["primary_key"] = source.primary_key
    if source.event_time:
        spec.update(event_time=source.event_time, watermark=f"{source.watermark_ms} milliseconds")
    return spec


def _topic_source_spec(source: Source, folder: Path, broker: KafkaBroker) -> dict:
    """The source's changelog produced to a new topic of one partition, its files' lines in order."""
    _write_changelog(source, folder / source.name)
    topic = f"differential.{uuid.uuid4().hex[:12]}.{source.name}"
    broker.create_topic(topic, partitions=1)
    lines = [line for path in sorted((folder / source.name).iterdir()) for line in path.read_text().splitlines()]
    broker.produce(topic, [(_key(line, source), line) for line in lines])
    spec = _source_spec_fields(source)
    spec["kafka"] = {"topic": topic, "bootstrap_servers": broker.bootstrap}
    return spec


def _key(line: str, source: Source) -> str | None:
    row = json.loads(line)
    return json.dumps([row[c] for c in source.primary_key]) if source.primary_key else None


def _write_changelog(source: Source, folder: Path) -> None:
    """One to three files (lockstep reads them in name order), never splitting a -U from its +U."""
    folder.mkdir(parents=True)
    names = [c.name for c in source.columns]
    lines = []
    for kind, *values in source.rows:
        row = dict(zip(names, values))
        if not source.insert_only:
            row["op"] = kind
        lines.append(json.dumps(row))
    cuts = sorted(
        {i for i in (len(lines) // 3, 2 * len(lines) // 3) if 0 < i < len(lines) and source.rows[i - 1][0] != "-U"}
    )
    for number, (start, end) in enumerate(zip([0, *cuts], [*cuts, len(lines)])):
        (folder / f"{number:03d}.json").write_text("".join(line + "\n" for line in lines[start:end]))


def run_lockstep(
    case: Case, folder: Path, settings: Settings | None = None, broker: KafkaBroker | None = None
) -> LockstepOutcome:
    spec_path = write_case(case, folder, broker)
    try:
        pipeline = Pipeline.of(
            plan_query(load_spec(spec_path)), settings or Settings(), folder / "runs", Progress(quiet=True)
        )
        report = pipeline.run()
    except LockstepError as exc:
        return LockstepOutcome(error=str(exc))
    except Exception as exc:  # a crash is a finding too: reported with where it happened
        where = traceback.extract_tb(exc.__traceback__)[-1]
        return LockstepOutcome(
            error=f"crash: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''} "
            f"({Path(where.filename).name}:{where.lineno})",
            crashed=True,
        )
    table = DeltaTable(str(pipeline.layout.stream)).to_pyarrow_table()
    feed = read_change_feed(pipeline.layout.stream)
    return LockstepOutcome(
        report.verdict,
        [c for c in table.column_names if c != COUNT],
        _copies(table.to_pylist()),
        dict(Counter(CDF_KINDS[k] for k in feed.column("_change_type").to_pylist())),
        late_rows=_late_rows(pipeline.layout.late_events),
        late_explains=(report.to_json().get("late_explanation") or {}).get("explains"),
    )


def _late_rows(late_events: Path) -> list[int]:
    """The places in its changelog (__seq, from 0) of each change left out for some window."""
    if not (late_events / "_delta_log").is_dir():
        return []
    return sorted(set(DeltaTable(str(late_events)).to_pyarrow_table().column("seq").to_pylist()))


def _copies(rows: list[dict]) -> list[dict]:
    """A retract-mode sink keeps each row once with its copy count: a row per copy instead."""
    out = []
    for row in rows:
        copies = row.pop(COUNT, 1)
        out += [row] * copies
    return out
