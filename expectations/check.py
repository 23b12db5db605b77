"""`lockstep check`: run the Great Expectations suites at the consistency point, publish Data Docs,
and write the Report (report.json, with the diagnosis, and its HTML page). The verdict is "pass"
only when every expectation holds.

The stream side is read at the sink version recorded by the stream step, so a check repeated
later judges the same consistency point. The data each suite validates:

    stream_result       the sink at the point, and with   unity, windows
                        emit: final the windows still
                        open (the stream's pending table)
    batch_result        the batch result                  batch_result
    change_feed         the sink's change feed, ordered   retraction
    stream_state        Spark's aggregation state         state (not on a past date)
    materializer_state  the materializer's live rows      materializer (not on a past date)
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from datetime import date

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import DoubleType, FloatType

from expectations.columns import Columns, Tolerance
from expectations.diagnosis import Evidence, diagnose
from expectations.differences import differences_section
from expectations.feed_order import order_feed
from expectations.listed_rows import listed_rows
from expectations.report.model import ExpectationOutcome, Report
from expectations.report.publish import publish
from expectations.sql import BATCH_VIEW, FEED_VIEW, STREAM_COMPARED_VIEW, STREAM_VIEW
from expectations.stages import compare_stages
from expectations.suites import SuiteSpec
from expectations.suites.batch_result import batch_result_suite
from expectations.suites.materializer import materializer_suite
from expectations.suites.retraction import ordered_feed, retraction_suite
from expectations.suites.state import state_suite
from expectations.suites.unity import DIFFERENCES, unity_suite
from expectations.validate import DATA_DOCS, Validated, build_data_docs, gx_context, validate
from expectations.window_check import WindowCheck, as_multiset
from jobs.changelog.columns import COUNT
from jobs.changelog.kinds import CDF_CHANGE_TYPES
from jobs.changelog.quarantine import read_quarantine
from jobs.changelog.staging import staged_changelog
from jobs.lookup.spark import lookup_figures
from jobs.plan import Plan, StagePlan
from jobs.plan.explain import explain
from jobs.plan.nodes import GroupAggregate
from jobs.point import ConsistencyPoint, read_point
from jobs.runtime.arrow_frames import frame_through_file
from jobs.runtime.delta import CHANGE_TYPE
from jobs.runtime.layout import RunLayout
from jobs.runtime.phases import Phases
from jobs.runtime.progress import Progress
from jobs.runtime.small_work import sized_for
from jobs.runtime.spark import spark_session
from jobs.runtime.tables import tables_for
from jobs.spec.model import Settings
from jobs.stream.offsets import committed_batches
from jobs.stream.operators.aggregate.on_spark_state import groups_recomputed
from jobs.stream.records import aggregation_state, materializer_rows, micro_batches, recorded_engine


@dataclass
class Sides:
    """The two results at the point, as the suites compare them (registered as temp views). Every
    batch row is judged: against the sink, or, with emit: final, against the windows the stream
    still holds open."""

    sink: DataFrame  # the stream's sink table at the point
    stream: DataFrame  # what the batch result is compared with: the sink and the open windows
    batch: DataFrame
    cols: Columns
    windows: WindowCheck | None
    open_windows: int = 0


def run_check(
    plan: Plan,
    settings: Settings,
    layout: RunLayout,
    progress: Progress | None = None,
    logical_date: date | None = None,
    steps: dict[str, float] | None = None,
    phases: Phases | None = None,
) -> Report:
    """Check the latest consistency point, or a logical date's, against the batch result in
    place (jobs/pipeline.py makes sure it was computed at that point). A past date (the stream has
    moved on) is re-checked by time travel: the sink and stage tables at that date's versions.
    The aggregation and materializer state exist only as of now, so their suites are left out
    of such a re-check. `steps`: the seconds of the steps before the check in one run, for the
    report's step_seconds; `phases`: the check's phases timed before this (loading GX)."""
    point = read_point(layout, logical_date)  # before Spark starts: a missing point is one line at once
    spark = spark_session(settings.spark)
    with sized_for(spark, point.total_rows(), settings.spark.small_work_rows):
        timed = phases or Phases()
        timed.spark = spark
        return _check(spark, plan, settings, layout, point, progress or Progress(quiet=True), steps, timed)


def _check(
    spark: SparkSession,
    plan: Plan,
    settings: Settings,
    layout: RunLayout,
    point: ConsistencyPoint,
    progress: Progress,
    steps: dict[str, float] | None,
    phases: Phases,
) -> Report:
    started = time.monotonic() - phases.seconds()  # with what was timed before it
    past = point.sink_version != read_point(layout).sink_version
    progress.say(f"check {plan.spec.name}: the sink at version {point.sink_version} against the batch result")
    with phases.timed("read both sides"):
        sides = _sides(spark, plan, layout, point, settings)
        feed = _ordered_change_feed(spark, plan, layout, point, sides.cols)
        data = {"stream_result": sides.stream, "batch_result": sides.batch, "change_feed": feed}
    specs = [
        unity_suite(sides.cols, sides.batch.columns),
        batch_result_suite(sides.cols),
        retraction_suite(sides.cols, final_windows=sides.windows.final_windows() if sides.windows else None),
    ]
    if sides.windows is not None:
        specs.append(sides.windows.suite(sides.cols))
    with phases.timed("state suites"):
        materializer = None if past else _add_state_suites(spark, plan, layout, sides.cols, data, specs)
    with phases.timed("row counts"):
        counts = {"stream_rows": sides.stream.count(), "batch_rows": sides.batch.count()}
    outcomes = _validate_all(layout, specs, data, counts, settings.check.sample_rows, progress, phases)
    # A past date's stage tables as they were then; the current point's as they are.
    tables = tables_for(plan.spec.sink.writer)
    with phases.timed("stage tables"):
        stages = compare_stages(spark, plan, layout, tables, point.stage_versions if past else None)
    evidence = Evidence(spark, plan, layout, point, sides.cols, sides.windows, stages, materializer)
    with phases.timed("diagnosis and figures"):
        report = Report(
            query=plan.spec.name,
            description=plan.spec.description,
            verdict="pass" if all(o.success for o in outcomes) else "fail",
            warnings=plan.warnings,
            stream_rows=counts["stream_rows"],
            batch_rows=counts["batch_rows"],
            **_difference_counts(outcomes),
            changelog=_changelog(feed),
            expectations=tuple(outcomes),
            consistency_point={"sink_version": point.sink_version, "sources": point.to_json()["sources"]},
            quarantined_rows=read_quarantine(layout.quarantine).num_rows,
            source_anomalies=read_quarantine(layout.anomalies).num_rows,
            rows_with_absent_fields=sum(staged_changelog(layout, t).absent_fields for t in plan.source_tables),
            micro_batches=micro_batches(layout, point.last_batch),
            sink={"path": "stream", "primary_key": list(plan.sink_key), "version": point.sink_version},
            data_docs=DATA_DOCS,
            plan=explain(plan),
            checked_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            diagnosis=diagnose(evidence, settings.check.sample_rows, agreed=_agree_row_for_row(outcomes)),
            differences=differences_section(sides.cols, outcomes),
            check_seconds=0.0,  # with check_phases and step_seconds below, once the figures are done
            logical_date=point.to_json()["logical_date"],
            rechecked_by_time_travel=past,
            windows=sides.windows.figures(spark, sides.cols, sides.open_windows) if sides.windows else None,
            stages=stages,
            materializer=_materializer_figures(plan, materializer),
            lookups=_lookups(plan, layout),
            skipped_expectations=tuple(
                {"suite": s.name, "name": name, "reason": reason} for s in specs for name, reason in s.skipped
            ),
            listed_rows=listed_rows(
                layout, sides.windows.late if sides.windows else None, settings.spark.session_time_zone
            ),
            check_phases=None,
            step_seconds=None,
        )
    if sides.windows is not None:
        sides.windows.release()
    # The page's own writing is the one part of the check that its figures leave out.
    seconds = round(time.monotonic() - started, 2)
    ran = None if steps is None else {**steps, "check": seconds}
    report = replace(report, check_seconds=seconds, check_phases=phases.to_json(), step_seconds=ran)
    publish(report.to_json(), layout.root)
    progress.say(
        f"check {plan.spec.name}: {report.verdict.upper()} "
        f"({sum(o.success for o in outcomes)}/{len(outcomes)} expectations hold)"
    )
    return report


def _sides(spark: SparkSession, plan: Plan, layout: RunLayout, point: ConsistencyPoint, settings: Settings) -> Sides:
    # Each expectation is a query or two over these: cached once, scanned from memory after.
    tables = tables_for(plan.spec.sink.writer)
    sink = tables.read(spark, layout.stream, point.sink_version).cache()
    batch = tables.read(spark, layout.batch)
    if plan.write_mode == "retract":
        batch = as_multiset(batch)
    batch = batch.cache()
    windowed = plan.window is not None or bool(plan.late_windows)
    windows = WindowCheck.of(spark, plan, layout, point) if windowed else None
    open_windows = windows.open_windows(spark, sink.columns) if windows else None
    stream = sink.unionByName(open_windows).cache() if open_windows is not None else sink
    batch.createOrReplaceTempView(BATCH_VIEW)
    sink.createOrReplaceTempView(STREAM_VIEW)
    stream.createOrReplaceTempView(STREAM_COMPARED_VIEW)
    return Sides(
        sink,
        stream,
        batch,
        _columns(plan, sink, settings),
        windows,
        open_windows.count() if open_windows is not None else 0,
    )


def _add_state_suites(
    spark: SparkSession, plan: Plan, layout: RunLayout, cols: Columns, data: dict, specs: list[SuiteSpec]
) -> DataFrame | None:
    """The state and materializer suites, on the state as of now; the materializer's rows."""
    last_stage = plan.final_stage  # the stage that writes the sink owns the checkpoint's state
    aggregate = last_stage.aggregate
    if aggregate is not None:
        suite = _state_suite(last_stage, aggregate)
        if groups_recomputed(last_stage, recorded_engine(layout) or "local"):
            specs.append(suite.unread("the spark engine keeps this aggregate's groups' rows, not their sums, as state"))
        elif committed_batches(layout.checkpoint):
            data["stream_state"] = aggregation_state(spark, aggregate, layout).cache()
            specs.append(suite)
        else:  # no row reached the aggregation: Spark ran no micro-batch and kept no state to read
            specs.append(suite.unread("no row reached the aggregation: Spark kept no state"))
    materializer = materializer_rows(spark, layout) if plan.materialize else None
    if materializer is not None:
        data["materializer_state"] = materializer.cache()
        specs.append(materializer_suite(cols))
    return materializer


def _validate_all(
    layout: RunLayout,
    specs: list[SuiteSpec],
    data: dict,
    counts: dict,
    sample_rows: int,
    progress: Progress,
    phases: Phases,
) -> list[ExpectationOutcome]:
    with phases.timed("GX context"):
        context = gx_context(layout.root)
    outcomes: list[ExpectationOutcome] = []
    pages: list = []  # the Data Docs identifiers of every suite's pages
    try:
        for spec in specs:
            if spec.expectations:  # a suite with nothing left to check here (its skips are reported)
                with phases.timed(f"suite {spec.name}"):
                    validated = _validate_one(context, spec, data[spec.asset], counts, sample_rows, progress)
                outcomes += validated.outcomes
                pages += validated.pages
    finally:
        for frame in data.values():
            frame.unpersist()
    with progress.waiting("  building Data Docs ..."), phases.timed("Data Docs"):
        build_data_docs(context, pages)
    return outcomes


def _validate_one(
    context, spec: SuiteSpec, frame: DataFrame, counts: dict, sample_rows: int, progress: Progress
) -> Validated:
    started = time.monotonic()
    with progress.waiting(f"  suite {spec.name}: {len(spec.expectations)} expectation(s) on {spec.asset} ..."):
        validated = validate(context, spec, frame, counts, sample_rows)
    held = sum(o.success for o in validated.outcomes)
    progress.say(f"  suite {spec.name}: {held}/{len(validated.outcomes)} hold ({time.monotonic() - started:.1f} s)")
    return validated


def _ordered_change_feed(
    spark: SparkSession, plan: Plan, layout: RunLayout, point: ConsistencyPoint, cols: Columns
) -> DataFrame:
    """The sink's change feed up to the consistency point, read as its writer reads it, with each
    change's previous and next of its key: ordered in Arrow when the writer reads the feed into
    the driver (feed_order.py), else by Spark's window (ordered_feed). Each rule reads it once:
    an ordered file is scanned again per rule (cheaper than caching its nested images), the
    window's result is cached rather than computed per rule."""
    scratch = layout.state / "check" / "change_feed.parquet"
    feed = tables_for(plan.spec.sink.writer).change_feed(spark, layout.stream, point.sink_version)
    if isinstance(feed, pa.Table):
        ordered = order_feed(feed, cols)
        if ordered is not None:
            return frame_through_file(spark, ordered, scratch)
        feed = frame_through_file(spark, feed, scratch)
    feed.createOrReplaceTempView(FEED_VIEW)
    return spark.sql(ordered_feed(cols, FEED_VIEW)).cache()


def _columns(plan: Plan, stream: DataFrame, settings: Settings) -> Columns:
    # A multiset sink's rows are identified by all their columns; the copy count is the value.
    key = plan.sink_key if plan.write_mode == "upsert" else tuple(c for c in stream.columns if c != COUNT)
    values = tuple(c for c in stream.columns if c not in key)
    floating = frozenset(f.name for f in stream.schema.fields if isinstance(f.dataType, (DoubleType, FloatType)))
    return Columns(key, values, floating, Tolerance(settings.check.float_abs_tol, settings.check.float_rel_tol))


def _state_suite(stage: StagePlan, node: GroupAggregate) -> SuiteSpec:
    key = stage.notes.upsert_keys[node]
    assert key is not None, "an aggregate is keyed by its group keys (upsert_keys)"
    has_slots = any(not call.invertible for call in node.aggregates)
    return state_suite(key, stage.group_key_columns(), has_slots, node.is_global)


def _difference_counts(outcomes: list[ExpectationOutcome]) -> dict[str, int]:
    by_name = {o.name: o for o in outcomes}
    return {
        field: (by_name[rule.expectation_type].unexpected_rows or 0) if rule.expectation_type in by_name else 0
        for field, rule in DIFFERENCES.items()
    }


def _agree_row_for_row(outcomes: list[ExpectationOutcome]) -> bool:
    """Whether the unity suite ran all three of its comparisons and none found a row: a row
    that differs is missing from one side, or on both with other values."""
    by_name = {o.name: o for o in outcomes}
    return all(
        rule.expectation_type in by_name and by_name[rule.expectation_type].unexpected_rows == 0
        for rule in DIFFERENCES.values()
    )


def _changelog(feed: DataFrame) -> dict[str, int]:
    changes = {row[0]: row[1] for row in feed.groupBy(CHANGE_TYPE).count().collect()}
    return {kind.short: changes.get(name, 0) for name, kind in CDF_CHANGE_TYPES.items()}


def _materializer_figures(plan: Plan, materializer: DataFrame | None) -> dict | None:
    if not plan.materialize:
        return None
    return {
        "reasons": list(plan.notes.materialize),
        "state_rows": materializer.count() if materializer is not None else 0,
    }


def _lookups(plan: Plan, layout: RunLayout) -> dict | None:
    if not plan.spec.lookups:
        return None
    return {name: lookup_figures(layout.lookup_answers(name, "stream").parent) for name in plan.spec.lookups}
