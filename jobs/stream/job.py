"""`lockstep stream`: stage the sources' new files, replay them through Spark Structured
Streaming in micro-batches, MERGE each micro-batch's change into the Delta sink, and record the
consistency point the batch job will compute on.

Incremental: the Spark checkpoint and the staged changelog live in the run folder, so a second
`lockstep stream` processes only files added since the first.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections import Counter
from functools import reduce
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

import pyarrow as pa
from pyspark.errors import PythonException, StreamingQueryException
from pyspark.sql import DataFrame, SparkSession

from jobs.changelog.frames import weight
from jobs.changelog.columns import COUNT, KIND, SEQ, WATERMARK, WEIGHT
from jobs.changelog.staging import StageResult, StagedChangelog, stage_source
from jobs.errors import LookupFailed, RunStateError
from jobs.changelog.feed import stage_change_feed
from jobs.changelog.schema import Column, SourceSchema
from jobs.plan.nodes import (Calc, ChangelogSource, Deduplicate, GroupAggregate, Join, LookupJoin, Node,
                             StageInput, UnionAll, WindowAggregate, WindowAssign)
from jobs.plan.planner import QueryPlan
from jobs.point import ConsistencyPoint, SourcePosition, latest_logical_date, write_point
from jobs.runtime.layout import RunLayout
from jobs.runtime.progress import Progress, counts
from jobs.runtime.spark import spark_session
from jobs.spark_sql import empty_sources, result_on_empty_input
from jobs.spec.model import Settings
from jobs.stream.aggregate import AggregateState, streaming_aggregate
from jobs.stream.batches import MicroBatch, batches_for
from jobs.stream.calc import apply_calc
from jobs.stream.keyed import LEFT, RIGHT, DedupOperator, JoinOperator, tag_side
from jobs.stream.multiset import ValueMultisets
from jobs.stream.offsets import batch_segments, consumed_rows, logged_files
from jobs.stream.sink import DeltaUpsertSink
from jobs.stream.windows import FinalWindowBatches, stream_window_assign, write_late_events

# Fault injection for the exactly-once tests: exit the process right after the sink commit of
# this micro-batch, before Spark records the batch as done (the moment a crash hurts most).
FAULT_AFTER_COMMIT = "LOCKSTEP_FAULT_AFTER_SINK_COMMIT"


@dataclass
class StreamResult:
    staged: list[StageResult]
    batches: int = 0
    input_rows: int = 0
    changelog: Counter = field(default_factory=Counter)
    seconds: float = 0.0
    sink_version: int = 0
    late_events: int = 0


def run_stream(plan: QueryPlan, settings: Settings, layout: RunLayout,
               progress: Progress | None = None, logical_date: date | None = None) -> StreamResult:
    """Stream the sources' new changelog files (with a logical date: the partitions up to it) into
    the sink, and record the consistency point (per logical date too, for later re-checks)."""
    progress = progress or Progress(quiet=True)
    for warning in plan.warnings:
        progress.say(f"warning: {warning}")
    result = StreamResult(staged=stage_sources(plan, layout, progress, until=logical_date))
    spark = spark_session(settings.spark)
    stages = plan.stages(schema_of=lambda node: _stage_schema(spark, plan, node))
    started = time.monotonic()
    for stage in stages:
        _stage_feeds(stage, layout)
        if len(stages) > 1:
            progress.say(f"stage {stage.stage.number}/{len(stages)}: {stage.name}")
        own = StreamResult(staged=[]) if stage.is_intermediate else result
        _run_stage(spark, stage, stage_layout(layout, stage), progress, own)
    result.seconds = time.monotonic() - started
    result.sink_version = DeltaUpsertSink(layout.stream, plan.sink_key, "").version()
    point = write_point(layout, consistency_point(plan, layout, result.sink_version, stages, logical_date))
    result.late_events = _late_events(spark, plan, layout, point)
    late = f"; {result.late_events:,} late (row, window) pairs left out" if result.late_events else ""
    progress.say(f"stream {plan.spec.name}: {result.batches} micro-batches, "
                 f"{result.input_rows:,} changelog rows in {result.seconds:.1f} s; "
                 f"sink changes {counts(result.changelog)}{late}")
    return result


def stream_until(plan: QueryPlan, settings: Settings, layout: RunLayout, progress: Progress,
                 logical_date: date) -> StreamResult | None:
    """The stream step of a scheduled run: stream up to the logical date, unless the stream has
    already moved beyond it (a re-run of a past date): then nothing is streamed, and the date is
    re-checked at its recorded consistency point by time travel (None)."""
    latest = latest_logical_date(layout)
    if latest is not None and latest > logical_date:
        if not layout.point_for(logical_date.isoformat()).exists():
            raise RunStateError(f"{logical_date} was never streamed and the stream is already at "
                                f"{latest}: `lockstep rebuild` replays every partition in date order",
                                where=str(layout.root))
        progress.say(f"stream {plan.spec.name}: already at {latest}, past {logical_date}; "
                     f"{logical_date} is re-checked at its consistency point by time travel")
        return None
    return run_stream(plan, settings, layout, progress, logical_date)


def stage_layout(layout: RunLayout, stage: QueryPlan) -> RunLayout:
    """Where a stage keeps its table and state: the query's folder for the stage that writes the
    sink, stages/<name>/ for an intermediate one."""
    return layout.for_stage(stage.name) if stage.is_intermediate else layout


def _run_stage(spark: SparkSession, plan: QueryPlan, layout: RunLayout, progress: Progress,
               result: StreamResult) -> None:
    initial = with_sink_columns(result_on_empty_input(spark, plan).toArrow(), plan)
    sink = DeltaUpsertSink(layout.stream, write_key(plan, initial), layout.app_id(plan.name))
    _ensure_sink(sink, initial, plan, layout)
    streaming = _streaming_frame(spark, plan.root.input, plan, layout)
    state = streaming.state
    multisets = ValueMultisets(layout.agg_values, state, sink.app_id) if state and state.has_slots else None
    output = spark.createDataFrame(initial.slice(0, 0)).schema
    batches = batches_for(plan, state, multisets, output, streaming.operator, layout)
    if _emits_final_windows(plan):
        batches = FinalWindowBatches(batches, layout.pending, plan.sink_key, sink.app_id)
        batches.create_pending(initial)
    handler = _MicroBatches(plan, sink, batches, layout, progress, spark, result)
    _run_query(streaming.frame, plan, layout, handler)


def _stage_schema(spark: SparkSession, plan: QueryPlan, node: Node) -> SourceSchema:
    """An intermediate table's columns: the stage's SQL run on empty sources."""
    from jobs.plan.to_sql import to_sql

    for name, frame in empty_sources(spark, plan).items():
        frame.createOrReplaceTempView(name)
    frame = spark.sql(to_sql(node))
    arrow = frame.toArrow().schema
    return SourceSchema(tuple(Column(f.name, spark_field.dataType.simpleString().upper(), f.type)
                              for f, spark_field in zip(arrow, frame.schema)))


def _stage_feeds(plan: QueryPlan, layout: RunLayout) -> None:
    """Stage the change data feed of every earlier stage this one reads."""
    for source in plan.sources:
        if isinstance(source, StageInput):
            stage_change_feed(layout.stage_table(source.table), layout.staged(source.table),
                              source.table, source.schema, source.primary_key)


def with_sink_columns(rows: pa.Table, plan: QueryPlan) -> pa.Table:
    """The sink's columns: the query's, all nullable, plus a retract sink's copy count."""
    rows = _nullable(rows)
    if plan.write_mode == "retract":
        rows = rows.append_column(pa.field(COUNT, pa.int64()),
                                  pa.array([1] * rows.num_rows, pa.int64()))
    return rows


def write_key(plan: QueryPlan, initial: pa.Table) -> tuple[str, ...]:
    """The columns the sink MERGE matches on: a retract sink's whole row, else the sink key."""
    if plan.write_mode == "retract":
        return tuple(n for n in initial.column_names if n != COUNT)
    return plan.sink_key


def _emits_final_windows(plan: QueryPlan) -> bool:
    return isinstance(plan.aggregate, WindowAggregate) and plan.aggregate.emit == "final"


def _late_events(spark: SparkSession, plan: QueryPlan, layout: RunLayout, point: ConsistencyPoint) -> int:
    assign = next((n for n in plan.root.walk() if isinstance(n, WindowAssign)), None)
    if assign is None:
        return 0
    source = plan.sources[0]
    consumed = point.rows_consumed(source.table)
    return write_late_events(spark, assign, _staged(layout, source), consumed, layout.late_events)


def stage_sources(plan: QueryPlan, layout: RunLayout, progress: Progress,
                  until: date | None = None) -> list[StageResult]:
    """Validate every source's new files first, then commit them all: a bad row in one source
    leaves the whole run folder untouched."""
    tables = list(dict.fromkeys(s.table for s in plan.real_sources))
    pending = [stage_source(t, plan.spec.sources[t], layout.staged(t), layout.quarantine,
                            rows_per_batch=plan.spec.stream.rows_per_batch, anomalies=layout.anomalies,
                            until=until)
               for t in tables]
    for staged, commit in pending:
        commit()
        note = f", {len(staged.quarantined)} quarantined" if staged.quarantined else ""
        if staged.anomalies:
            note += f", {len(staged.anomalies)} kept although they break the changelog protocol"
        progress.say(f"source {staged.source}: {len(staged.new_files)} new file(s), "
                     f"{staged.new_rows:,} new rows{note}, {staged.total_rows:,} in all")
    return [staged for staged, _ in pending]


def _ensure_sink(sink: DeltaUpsertSink, rows: pa.Table, plan: QueryPlan, layout: RunLayout) -> None:
    if not sink.exists():
        what = "intermediate stage table" if plan.is_intermediate else "stream sink"
        sink.create(rows, description=f"lockstep {what} of {plan.spec.name}: {plan.name}")
        return
    from deltalake import DeltaTable

    existing = [f.name for f in pa.schema(DeltaTable(str(layout.stream)).schema().to_arrow())]
    if existing != rows.column_names:
        raise RunStateError(f"the sink has columns {existing} but the query now outputs "
                            f"{rows.column_names}; use a new --out folder", where=str(layout.stream))


def _nullable(table: pa.Table) -> pa.Table:
    """Every sink column nullable. Spark marks COUNT(*) NOT NULL, and delta-rs's MERGE checks that
    constraint even on source rows it does not write (a group created and emptied within one
    micro-batch arrives as a delete with NULL values)."""
    return table.cast(pa.schema([f.with_nullable(True) for f in table.schema]))


@dataclass
class _Streaming:
    frame: DataFrame  # what each micro-batch hands to foreachBatch
    state: AggregateState | None = None  # a group aggregate's (on Spark's state store)
    operator: DedupOperator | JoinOperator | None = None  # recomputes touched keys per micro-batch


def _streaming_frame(spark: SparkSession, node: Node, plan: QueryPlan, layout: RunLayout) -> _Streaming:
    """The streaming DataFrame up to and including the stateful operator."""
    if isinstance(node, ChangelogSource):
        return _Streaming(changelog_stream(spark, StagedChangelog(layout.staged(node.table))))
    if isinstance(node, Calc) and node.input.stateful:
        return _streaming_frame(spark, node.input, plan, layout)  # applied per micro-batch
    if isinstance(node, Join):
        return _join_frame(spark, node, plan, layout)
    if isinstance(node, UnionAll):
        frames = [_streaming_frame(spark, b, plan, layout).frame for b in node.branches]
        return _Streaming(reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), frames))
    child = _streaming_frame(spark, node.inputs[0], plan, layout)
    if isinstance(node, LookupJoin):
        from jobs.lookup.from_spec import config_of
        from jobs.lookup.spark import enrich_stream

        config = config_of(node.lookup, plan.spec.lookups[node.lookup])
        answers = layout.lookup_answers(node.lookup, "stream")
        return _Streaming(enrich_stream(child.frame, node, config, answers), child.state)
    if isinstance(node, Calc):
        carried = [c for c in (WEIGHT, SEQ, KIND, WATERMARK) if c in child.frame.columns]
        return _Streaming(apply_calc(child.frame, node, carried), child.state)
    if isinstance(node, WindowAssign):
        return _Streaming(stream_window_assign(child.frame, node), child.state)
    if isinstance(node, GroupAggregate):
        state = AggregateState.of(node, child.frame)
        return _Streaming(streaming_aggregate(child.frame, state), state)
    if isinstance(node, Deduplicate):
        ddl = _ddl(child.frame, node.input.output_names)
        return _Streaming(child.frame, operator=DedupOperator(node, layout.operator_state, ddl))
    raise TypeError(f"no streaming rule for {type(node).__name__}")


def _join_frame(spark: SparkSession, node: Join, plan: QueryPlan, layout: RunLayout) -> _Streaming:
    left = _streaming_frame(spark, node.left, plan, layout).frame
    right = _streaming_frame(spark, node.right, plan, layout).frame
    left_ddl, right_ddl = _ddl(left, node.left.output_names), _ddl(right, node.right.output_names)
    tagged = tag_side(left, LEFT, node.left.output_names, RIGHT, _struct_ddl(right, node.right.output_names))
    tagged = tagged.unionByName(tag_side(right, RIGHT, node.right.output_names, LEFT,
                                         _struct_ddl(left, node.left.output_names)))
    return _Streaming(tagged, operator=JoinOperator(node, layout.operator_state, left_ddl, right_ddl))


def _ddl(frame: DataFrame, names: tuple[str, ...]) -> str:
    return ", ".join(f"`{n}` {frame.schema[n].dataType.simpleString()}" for n in names)


def _struct_ddl(frame: DataFrame, names: tuple[str, ...]) -> str:
    return ", ".join(f"`{n}`: {frame.schema[n].dataType.simpleString()}" for n in names)


def changelog_stream(spark: SparkSession, staged: StagedChangelog) -> DataFrame:
    """The staged changelog as a stream, one segment (micro-batch) per trigger, each row with its
    weight: +1 for +I and +U, -1 for -U and -D."""
    segments = (spark.readStream.schema(staged.segment_ddl()).option("maxFilesPerTrigger", 1)
                .parquet(str(staged.segment_dir)))
    watermark = [WATERMARK] if staged.event_time else []
    return segments.select(*staged.schema.names, weight().alias(WEIGHT), SEQ, KIND, *watermark)


def _run_query(frame: DataFrame, plan: QueryPlan, layout: RunLayout, handler: _MicroBatches) -> None:
    mode = "update" if plan.aggregate is not None else "append"
    query = (frame.writeStream.outputMode(mode).queryName(f"lockstep_{plan.name}")
             .option("checkpointLocation", str(layout.checkpoint))
             .foreachBatch(handler).start())
    try:
        query.processAllAvailable()
    except StreamingQueryException:
        if handler.error is not None:
            raise handler.error from None
        raise
    finally:
        query.stop()
    handler.record_state_sizes(query.recentProgress)


class _MicroBatches:
    """The foreachBatch function: compute the micro-batch's changes, MERGE them, report."""

    def __init__(self, plan, sink, batches, layout: RunLayout, progress: Progress, spark, result):
        self.plan, self.sink, self.batches, self.layout = plan, sink, batches, layout
        self.progress, self.spark, self.result = progress, spark, result
        self.error: Exception | None = None
        self.staged = [_staged(layout, s) for s in plan.sources]
        self.total = sum(staged.total_rows for staged in self.staged)

    def __call__(self, frame: DataFrame, batch_id: int) -> None:
        try:
            self._process(frame, batch_id)
        except Exception as exc:
            # Kept so the caller can raise it as it was: Spark would wrap it in a Java trace.
            self.error = worker_error(exc)
            raise


    def _process(self, frame: DataFrame, batch_id: int) -> None:
        started = time.monotonic()
        batch = self._micro_batch(batch_id)
        start, end = batch.start, batch.end
        # A micro-batch read twice (value multisets, then results) is cached so the stateful
        # plan runs once; read once, caching would only cost.
        reused = self.batches.reads_twice
        if reused:
            frame.persist()
        try:
            changes = self.batches.changes(self.spark, frame, batch)
            merged = self.sink.write(changes, batch_id, self.plan.write_mode)
            self.batches.after_sink_commit(batch)
        finally:
            if reused:
                frame.unpersist()
        if os.environ.get(FAULT_AFTER_COMMIT) == str(batch_id) and not merged.skipped_replay:
            os._exit(70)
        seconds = time.monotonic() - started
        self.result.batches += 1
        self.result.input_rows += batch.rows
        self.result.changelog.update(merged.changelog())
        entry = {"batch": batch_id, "start_seq": start, "end_seq": end, "rows": batch.rows,
                 "changelog": merged.changelog(), "seconds": round(seconds, 3),
                 "replayed": merged.skipped_replay}
        _append_log(self.layout, entry)
        replay = " (replayed: already committed, skipped)" if merged.skipped_replay else ""
        share = f" ({100 * batch.consumed / self.total:.0f}%)" if self.total else ""
        self.progress.say(f"  batch {batch_id}: {batch.rows:,} rows, {batch.consumed:,} of {self.total:,}{share}, "
                          f"sink {counts(merged.changelog())}, {seconds:.2f} s{replay}")

    def _micro_batch(self, batch_id: int) -> MicroBatch:
        """The changelog rows this micro-batch covers (summed over sources), the watermark after
        it; and a check that each source's segment follows the one the previous batch read."""
        start = end = rows = consumed = 0
        watermark = None
        for index, staged in enumerate(self.staged):
            taken = logged_files(self.layout.checkpoint, index)
            consumed += consumed_rows(taken, batch_id, staged)
            segments = batch_segments(taken, batch_id, staged)
            if not segments:
                continue
            lo = segments[0]["first_seq"]
            hi = segments[-1]["first_seq"] + segments[-1]["rows"]
            if batch_id > 0:
                previous = consumed_rows(taken, batch_id - 1, staged)
                if lo != previous:
                    raise RunStateError(f"micro-batch {batch_id} read rows from {lo} but the "
                                        f"changelog continues at {previous}", where=str(staged.directory))
            start, end, rows = start + lo, end + hi, rows + hi - lo
            marks = [s["watermark_after"] for s in segments if s.get("watermark_after") is not None]
            watermark = max(marks + ([watermark] if watermark is not None else []), default=None)
        return MicroBatch(batch_id, start, end, watermark, rows, consumed)

    def record_state_sizes(self, progress_entries) -> None:
        sizes = {}
        for entry in progress_entries:
            operators = entry.stateOperators or []
            if operators:
                sizes[entry.batchId] = sum(op.numRowsTotal for op in operators)
        if sizes:
            with open(self.layout.state / "state_rows.json", "w") as out:
                json.dump(sizes, out)


def _append_log(layout: RunLayout, entry: dict) -> None:
    with open(layout.batches_log, "a") as out:
        out.write(json.dumps(entry) + "\n")


def consistency_point(plan: QueryPlan, layout: RunLayout, sink_version: int, stages: list[QueryPlan],
                      logical_date: date | None) -> ConsistencyPoint:
    """What the stream had consumed when it stopped: the batch job computes on exactly this.
    A source's consumption is read from the checkpoint of the stage that reads it."""
    sources, last_batch = {}, None
    for stage in stages:
        checkpoint = stage_layout(layout, stage).checkpoint
        commits = checkpoint / "commits"
        done = sorted(int(p.name) for p in commits.iterdir() if p.name.isdigit()) if commits.exists() else []
        last_batch = done[-1] if done else None
        for index, source in enumerate(stage.sources):
            if isinstance(source, StageInput):
                continue
            staged = _staged(layout, source)
            rows = consumed_rows(logged_files(checkpoint, index), done[-1], staged) if done else 0
            previous = sources.get(source.table)
            rows = rows if previous is None else min(rows, previous.rows)  # a source read twice (self-join)
            sources[source.table] = SourcePosition(rows, _watermark_at(staged, rows), bool(staged.event_time))
    versions = {s.name: DeltaUpsertSink(layout.stage_table(s.name), (), "").version() for s in stages[:-1]}
    return ConsistencyPoint(plan.spec.name, sink_version, last_batch, sources, versions, logical_date)


def _watermark_at(staged: StagedChangelog, rows: int) -> int | None:
    """The watermark after the last consumed segment (microseconds), for sources with event time."""
    if not staged.event_time:
        return None
    done = [s for s in staged.segments() if s["first_seq"] + s["rows"] <= rows]
    return done[-1].get("watermark_after") if done else None


def _staged(layout: RunLayout, source: ChangelogSource) -> StagedChangelog:
    return StagedChangelog(layout.staged(source.table))


def worker_error(exc: Exception) -> Exception:
    """A lockstep error raised in a Spark Python worker (a lookup that failed) reaches the driver
    as a PythonException holding its text: turn it back into the one-line error it was."""
    if not isinstance(exc, PythonException):
        return exc
    match = re.search(r"jobs\.errors\.LookupFailed: (.*)", str(exc))
    return LookupFailed(match.group(1).strip()) if match else exc
