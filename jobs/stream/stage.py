"""One stage's streaming query: its table (created with the stage's result on empty input), its
streaming frame (rules.py), its emitter (emitters.py) and the foreachBatch handler (handler.py),
run until every staged segment is consumed."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext

import pyarrow as pa
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession
from pyspark.sql.pandas.types import from_arrow_type
from pyspark.sql.types import StructField, StructType

from jobs.changelog.columns import COUNT
from jobs.changelog.feed import stage_change_feed
from jobs.changelog.feed_watermarks import record_watermark
from jobs.changelog.schema import all_nullable
from jobs.changelog.staging import raise_watermark_floor
from jobs.errors import RunStateError
from jobs.plan import Plan, StagePlan
from jobs.runtime.layout import RunLayout
from jobs.runtime.progress import Progress
from jobs.runtime.small_work import sized_for
from jobs.runtime.tables import tables_for
from jobs.spark_sql import first_content
from jobs.store.tables import open_table
from jobs.stream.emitters import Emitter, emitter_for
from jobs.stream.handler import MicroBatchHandler, StreamCounts
from jobs.stream.offsets import committed_batches
from jobs.stream.operators.aggregate.multiset import ValueMultisets
from jobs.stream.operators.aggregate.state_store import state_store_for, store_in_effect
from jobs.stream.operators.keyed_state import rows_stay_on_executors
from jobs.stream.operators.materialize.on_spark_state import MaterializedRows
from jobs.stream.operators.window.on_spark_state import FinalWindowsTable
from jobs.stream.operators.window.windows import FinalWindowEmitter
from jobs.stream.records import engine_marker, recorded_engine
from jobs.stream.rules import Streaming, context, streaming_frame
from jobs.stream.spark_logs import forget_unplanned_finds
from jobs.stream.writers import TableWriter, open_writer


def stage_layout(layout: RunLayout, stage: StagePlan) -> RunLayout:
    """Where a stage keeps its table and state: the query's folder for the stage that writes the
    sink, stages/<name>/ for an intermediate one."""
    return layout.for_stage(stage.name) if stage.is_intermediate else layout


def run_stage(
    spark: SparkSession,
    plan: Plan,
    stage: StagePlan,
    layout: RunLayout,
    progress: Progress,
    totals: StreamCounts,
    small_work_rows: int,
    after_micro_batch: Callable[[], None] | None = None,
) -> None:
    """Stream the stage's new input (its sources' segments, or an earlier stage's new versions).
    Micro-batches all under `small_work_rows` rows run with Spark's settings for small work."""
    own = stage_layout(layout, stage)
    on_keyed_state = keep_engine(own, stage.spec.stream.engine) == "spark"
    # The spark engine's operators keep Spark's keyed state, which needs the RocksDB store.
    wanted = "rocksdb" if on_keyed_state else stage.spec.stream.state_store
    store = store_in_effect(own.aggregate_state, own.checkpoint, wanted)
    with progress.waiting("  opening the sink and the changelog feeds ..."):
        _stage_feeds(spark, stage, layout)
        if own.spark_root is not None and after_micro_batch is not None:
            # The executors work on the store, beside the working copy: what the query starts
            # from (the staged segments it lists, the engine marker) is committed first.
            after_micro_batch()
        initial = with_sink_columns(first_content(spark, plan, stage), stage)
        sink = open_writer(stage.spec.sink.writer, spark, own.stream, write_key(stage, initial), own.app_id(stage.name))
        _ensure_sink(sink, initial, stage, own)
        streaming = streaming_frame(stage.root.input, context(spark, stage, own, store))
        output = spark_schema(spark, initial)
        emitter = _emitter(stage, streaming, output, own, sink, initial, spark if on_keyed_state else None)
    if forget_unplanned_finds(own.checkpoint):
        progress.say("  the last run stopped between Spark's find of a segment and its micro-batch: found again")
    held_rows = getattr(streaming.operator, "held_rows", None)  # lockstep's own state's figure
    feeds_window = any(n.event_time for later in plan.stages for n in later.stage_inputs if n.table == stage.name)
    handler = MicroBatchHandler(
        stage, sink, emitter, own, progress, spark, totals, streaming.sums, after_micro_batch, held_rows, feeds_window
    )
    progress.say("  streaming query started: micro-batches follow as Spark commits them")
    # The streaming query's session is a copy of this one taken at its start: set before it.
    with (
        rows_stay_on_executors(spark) if on_keyed_state else nullcontext(),
        sized_for(spark, handler.largest_micro_batch, small_work_rows),
        state_store_for(
            spark, store, wanted, own.aggregate_state, progress, stateful=on_keyed_state or stage.aggregate is not None
        ),
    ):
        _run_query(streaming, stage, own, handler)
        if isinstance(emitter, (FinalWindowEmitter, FinalWindowsTable)) and _bounded(stage):
            _close_at_end_of_input(spark, emitter, stage, own, progress, totals)


def keep_engine(layout: RunLayout, engine: str) -> str:
    """The engine a stage's run folder is streamed by: recorded before its first micro-batch and
    kept, since neither engine reads the other's state. A folder streamed before engines were
    recorded was streamed by the local engine."""
    recorded = recorded_engine(layout)
    if recorded is not None and recorded != engine:
        raise RunStateError(
            f"this run folder is streamed by the {recorded} engine, which keeps its own state; "
            f"stream.engine {engine} needs a new --out folder",
            where=str(layout.root),
        )
    if recorded is None:
        engine_marker(layout).parent.mkdir(parents=True, exist_ok=True)
        engine_marker(layout).write_text(engine + "\n")
    return engine


def _bounded(stage: StagePlan) -> bool:
    """Every source is a finished changelog (sources are bounded by default): a stage that reads
    an earlier stage's rows ends when the sources under it do."""
    return all(source.bounded for source in stage.spec.sources.values())


def _close_at_end_of_input(
    spark: SparkSession,
    emitter: FinalWindowEmitter | FinalWindowsTable,
    stage: StagePlan,
    layout: RunLayout,
    progress: Progress,
    totals: StreamCounts,
) -> None:
    """Every open window closes: the watermark floor is raised first (a crash after it leaves the
    windows to close on the next run), then the windows are written, each once."""
    end = emitter.latest_open_end()
    done = committed_batches(layout.checkpoint)
    if end is None or not done:
        return
    for node in stage.inputs:
        raise_watermark_floor(layout.staged(node.table), end)
    sink = open_writer(stage.spec.sink.writer, spark, layout.stream, stage.sink_key, f"{layout.app_id(stage.name)}-end")
    merged = emitter.close_all(sink, done[-1])
    if stage.is_intermediate:
        record_watermark(layout.state, sink.version(), end)
    totals.changelog.update(merged.changelog())
    progress.say(f"  end of input (bounded source): {merged.inserted:,} open window(s) closed")


def _materialized_rows(
    spark: SparkSession, stage: StagePlan, layout: RunLayout, output: StructType, sink: TableWriter
) -> MaterializedRows | None:
    """The spark engine's upsert materializer, when the sink needs one."""
    if not (stage.materialize and stage.write_mode == "upsert"):
        return None
    return MaterializedRows(spark, layout.materializer_table, stage.sink_key, output, sink.app_id)


def _emitter(
    stage: StagePlan,
    streaming,
    output,
    layout: RunLayout,
    sink: TableWriter,
    initial: pa.Table,
    keyed_state: SparkSession | None = None,
) -> Emitter:
    """The stage's emitter; on the spark engine (`keyed_state`: its session) with its
    materializer and open windows kept by Spark."""
    state = streaming.state
    multisets = ValueMultisets(layout.agg_values, state) if state and state.has_slots else None
    materialized = _materialized_rows(keyed_state, stage, layout, output, sink) if keyed_state else None
    emitter = emitter_for(
        stage, state, multisets, output, streaming.operator, layout, sums=streaming.sums, materialized=materialized
    )
    if stage.window is not None and stage.window.emit == "final":
        if keyed_state is not None:
            emitter = FinalWindowsTable(keyed_state, emitter, layout.pending, stage.sink_key, sink.app_id)
        else:
            emitter = FinalWindowEmitter(emitter, layout.pending, stage.sink_key, sink.app_id)
        emitter.create_pending(initial)
    return emitter


def _stage_feeds(spark: SparkSession, stage: StagePlan, layout: RunLayout) -> None:
    """Stage the change data feed of every earlier stage this one reads (`layout`: the query's),
    through Spark when the stage tables' writer reads with Delta's connector."""
    through = spark if tables_for(stage.spec.sink.writer).uses_connector else None
    for node in stage.stage_inputs:
        stage_change_feed(
            layout.stage_table(node.table),
            layout.staged(node.table),
            node.table,
            node.columns,
            node.primary_key,
            spark=through,
            spark_directory=layout.for_spark(layout.staged(node.table)),
            event_time=node.event_time,
            upstream_state=layout.for_stage(node.table).state,
        )


def with_sink_columns(rows: pa.Table, stage: StagePlan) -> pa.Table:
    """The table's columns: the query's, all nullable, plus a retract table's copy count."""
    # Spark marks COUNT(*) NOT NULL, and delta-rs's MERGE checks that constraint even on source
    # rows it does not write (a group created and emptied within one micro-batch arrives as a
    # delete with NULL values).
    rows = all_nullable(rows)
    if stage.write_mode == "retract":
        rows = rows.append_column(pa.field(COUNT, pa.int64()), pa.array([1] * rows.num_rows, pa.int64()))
    return rows


def spark_schema(spark: SparkSession, rows: pa.Table) -> StructType:
    """The schema spark.createDataFrame(rows) gives, without handing Spark the rows: on the cold
    JVM before the first micro-batch that took 0.3 s."""
    ntz = spark.conf.get("spark.sql.timestampType") == "TIMESTAMP_NTZ"
    return StructType([StructField(f.name, from_arrow_type(f.type, ntz), nullable=f.nullable) for f in rows.schema])


def write_key(stage: StagePlan, initial: pa.Table) -> tuple[str, ...]:
    """The columns the MERGE matches on: a retract table's whole row, else the sink key."""
    if stage.write_mode == "retract":
        return tuple(n for n in initial.column_names if n != COUNT)
    return stage.sink_key


def _ensure_sink(sink: TableWriter, rows: pa.Table, stage: StagePlan, layout: RunLayout) -> None:
    if not sink.exists():
        what = "intermediate stage table" if stage.is_intermediate else "stream sink"
        sink.create(rows, description=f"lockstep {what} of {stage.spec.name}: {stage.name}")
        return
    existing = [f.name for f in pa.schema(open_table(layout.stream).schema().to_arrow())]
    if existing != rows.column_names:
        raise RunStateError(
            f"the sink has columns {existing} but the query now outputs {rows.column_names}; use a new --out folder",
            where=str(layout.stream),
        )


def _run_query(streaming: Streaming, stage: StagePlan, layout: RunLayout, handler: MicroBatchHandler) -> None:
    # Spark's streaming aggregation hands over the groups it updated; every other frame is the
    # micro-batch's rows.
    mode = "update" if streaming.spark_aggregation else "append"
    query = (
        streaming.frame.writeStream.outputMode(mode)
        .queryName(f"lockstep_{stage.name}")
        .option("checkpointLocation", str(layout.checkpoint))
        .foreachBatch(handler)
        .start()
    )
    try:
        query.processAllAvailable()
    except StreamingQueryException:
        if handler.error is not None:
            raise handler.error from None
        raise
    finally:
        query.stop()
    handler.record_progress(query.recentProgress)
