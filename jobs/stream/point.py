"""The consistency point a stream step leaves (jobs/point.py), read off the stages' checkpoints:
how many changelog rows of each source the micro-batches committed so far had read, the watermark
after them, and the Delta version of every table the stages wrote."""

from __future__ import annotations

from dataclasses import replace
from datetime import date

from jobs.changelog.kafka_source import consumed_offsets
from jobs.changelog.staging import StagedChangelog, watermark_at
from jobs.plan import Plan
from jobs.plan.nodes import ChangelogSource
from jobs.point import ConsistencyPoint, SourcePosition
from jobs.runtime.delta import is_delta_table, table_version
from jobs.runtime.layout import RunLayout
from jobs.stream.offsets import committed_batches, consumed_by
from jobs.stream.source import staged_input
from jobs.stream.stage import stage_layout


def consistency_point(plan: Plan, layout: RunLayout, logical_date: date | None) -> ConsistencyPoint:
    """A source's consumption is read from the checkpoint of the stage that reads it."""
    sources: dict[str, SourcePosition] = {}
    last_batch: int | None = None
    for stage in plan.stages:
        checkpoint = stage_layout(layout, stage).checkpoint
        done = committed_batches(checkpoint)
        last_batch = done[-1] if done else None
        for index, node in enumerate(stage.inputs):
            if not isinstance(node, ChangelogSource):
                continue  # an earlier stage's table: its versions are recorded below
            staged = staged_input(layout, node)
            rows = consumed_by(checkpoint, index, last_batch, staged) if last_batch is not None else 0
            previous = sources.get(node.table)
            rows = rows if previous is None else min(rows, previous.rows)  # a source read twice (self-join)
            sources[node.table] = _position(staged, rows)
    versions = {s.name: table_version(layout.stage_table(s.name)) for s in plan.intermediate_stages}
    open_windows = table_version(layout.pending) if is_delta_table(layout.pending) else None
    return ConsistencyPoint(
        plan.spec.name,
        table_version(layout.stream),
        last_batch,
        sources,
        versions,
        logical_date,
        open_windows_version=open_windows,
    )


def _position(staged: StagedChangelog, rows: int) -> SourcePosition:
    position = SourcePosition(rows, watermark_at(staged, rows), bool(staged.event_time))
    topic = staged.manifest.get("topic")
    if topic is None:
        return position
    return replace(position, topic=topic, offsets=consumed_offsets(staged.manifest, rows))
