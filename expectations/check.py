"""`lockstep check`: run the Great Expectations suites at the consistency point, publish Data Docs,
write report.json with the diagnosis and its HTML page (expectations/report), and return the
verdict ("pass" only when every expectation holds).

The stream side is read at the sink version recorded by the stream step, so a check repeated
later judges the same consistency point.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass
from datetime import date

import great_expectations as gx
from great_expectations.core.expectation_suite import ExpectationSuite
from great_expectations.data_context.types.base import ProgressBarsConfig
from great_expectations.util import convert_to_json_serializable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, FloatType, StructField, StructType

import pyarrow.parquet as pq

from expectations import queries, suites
from expectations.queries import BATCH_VIEW, FEED_VIEW, STREAM_VIEW, Columns
from expectations.windows import WindowCheck
from jobs.changelog.kinds import CDF_CHANGE_TYPES
from jobs.changelog.quarantine import read_quarantine
from jobs.plan import Plan, StagePlan
from jobs.runtime.delta import CHANGE_TYPE, COMMIT_VERSION, read_change_feed, read_snapshot
from jobs.runtime.layout import RunLayout
from jobs.runtime.progress import Progress
from jobs.runtime.spark import spark_session
from jobs.spec.model import Settings
from jobs.stream.aggregate import state_value_names
from jobs.point import ConsistencyPoint, read_point
from expectations.diagnosis import Evidence, diagnose
from expectations.differences import side_by_side
from expectations.report.publish import publish
from expectations.stages import compare_stages
from jobs.plan.explain import explain
from jobs.changelog.columns import COUNT, ORDINAL

DATA_DOCS = "gx/uncommitted/data_docs/local_site/index.html"
# Which expectation's unexpected rows count as which kind of difference in the report.
DIFFERENCES = {"missing_rows": "expect_no_rows_missing_from_stream",
               "extra_rows": "expect_no_extra_rows_in_stream",
               "mismatched_rows": "expect_no_mismatched_values"}


@dataclass(frozen=True)
class Outcome:
    suite: str
    name: str
    success: bool
    unexpected: int | None
    sample: list


def run_check(plan: Plan, settings: Settings, layout: RunLayout,
              progress: Progress | None = None, logical_date: date | None = None) -> dict:
    """Check the latest consistency point, or a logical date's, against the batch result in
    place (jobs/pipeline.py makes sure it was computed at that point). A past date (the stream has
    moved on) is re-checked by time travel: the sink and stage tables at that date's versions.
    The aggregation and materializer state exist only as of now, so their suites are left out
    of such a re-check."""
    progress = progress or Progress(quiet=True)
    started = time.monotonic()
    point = read_point(layout, logical_date)
    past = point.sink_version != read_point(layout).sink_version
    spark = spark_session(settings.spark)
    # Each expectation is a query or two over these: cached once, scanned from memory after.
    stream = read_snapshot(spark, layout.stream, point.sink_version).cache()
    batch_all = read_snapshot(spark, layout.batch)
    if plan.write_mode == "retract":
        batch_all = _as_multiset(batch_all)
    windows = WindowCheck.of(spark, plan, layout, point) if plan.window is not None else None
    batch = (windows.compared(batch_all) if windows else batch_all).cache()
    batch.createOrReplaceTempView(BATCH_VIEW)
    stream.createOrReplaceTempView(STREAM_VIEW)
    cols = _columns(plan, stream, settings)
    feed = read_change_feed(layout.stream)
    feed = feed.filter(feed.column(COMMIT_VERSION).to_numpy() <= point.sink_version)
    data = {"stream_result": stream, "batch_result": batch,
            "change_feed": _ordered_feed(spark, feed, cols, layout).cache()}
    specs = [suites.unity_suite(cols, batch.columns), suites.batch_suite(cols),
             suites.retraction_suite(cols, final_windows=bool(windows and windows.final))]
    if windows is not None:
        specs.append(windows.suite(cols))
    last_stage = plan.final_stage  # the stage that writes the sink owns the checkpoint's state
    if last_stage.aggregate is not None and not past:
        data["stream_state"] = _stream_state(spark, last_stage, layout).cache()
        specs.append(_state_suite(last_stage))
    materializer = _materializer_state(spark, layout) if plan.materialize and not past else None
    if materializer is not None:
        data["materializer_state"] = materializer.cache()
        specs.append(suites.materializer_suite(cols))
    counts = {"stream_rows": stream.count(), "batch_rows": batch.count()}
    context = _context(layout)
    outcomes = []
    try:
        for spec in specs:
            outcomes += _validate(context, spec, data[spec.asset], counts, settings.check.sample_rows)
    finally:
        for frame in data.values():
            frame.unpersist()
    context.build_data_docs()
    report = _report(plan, layout, point, counts, outcomes, feed)
    if windows is not None:
        report.update(windows.report(spark, cols, batch_all, batch))
    # A past date's stage tables as they were then; the current point's as they are.
    stages = compare_stages(spark, plan, layout, point.stage_versions if past else None)
    report.update(stages)
    if plan.materialize:
        report["materializer"] = {"reasons": plan.notes.materialize,
                                  "state_rows": materializer.count() if materializer is not None else 0}
    evidence = Evidence(spark, plan, layout, point, cols, windows, stages, materializer)
    report["diagnosis"] = diagnose(evidence, settings.check.sample_rows)
    report["differences"] = side_by_side(cols, report["samples"])
    if plan.spec.lookups:
        from jobs.lookup.spark import lookup_figures

        report["lookups"] = {name: lookup_figures(layout.lookup_answers(name, "stream").parent)
                             for name in plan.spec.lookups}
    report["check_seconds"] = round(time.monotonic() - started, 2)
    report["logical_date"] = point.to_json()["logical_date"]
    report["rechecked_by_time_travel"] = past
    publish(report, layout.root)
    progress.say(f"check {plan.spec.name}: {report['verdict'].upper()} "
                 f"({sum(o.success for o in outcomes)}/{len(outcomes)} expectations hold)")
    return report


def _ordered_feed(spark: SparkSession, feed, cols: Columns, layout: RunLayout) -> DataFrame:
    """The change feed (up to the consistency point) with each key's previous and next change.

    Handed to Spark as a Parquet file: createDataFrame from Arrow is far slower at this size."""
    path = layout.state / "check" / "change_feed.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(feed, path)
    spark.read.parquet(str(path)).createOrReplaceTempView(FEED_VIEW)
    return spark.sql(queries.ordered_feed(cols, FEED_VIEW))


def _materializer_state(spark: SparkSession, layout: RunLayout) -> DataFrame | None:
    """The materializer's live rows after the last micro-batch (its newest state file)."""
    files = sorted(layout.materializer.glob("state-*.parquet")) if layout.materializer.exists() else []
    return spark.read.parquet(str(files[-1])).drop(ORDINAL) if files else None


def _as_multiset(batch: DataFrame) -> DataFrame:
    """The batch result as a retract sink holds it: each distinct row once, with its copies."""
    columns = [F.col(f"`{c}`") for c in batch.columns]
    return batch.groupBy(*columns).agg(F.count(F.lit(1)).alias(COUNT))


def _columns(plan: Plan, stream: DataFrame, settings: Settings) -> Columns:
    # A multiset sink's rows are identified by all their columns; the copy count is the value.
    key = plan.sink_key if plan.write_mode == "upsert" else tuple(c for c in stream.columns if c != COUNT)
    values = tuple(c for c in stream.columns if c not in key)
    floating = frozenset(f.name for f in stream.schema.fields
                         if isinstance(f.dataType, (DoubleType, FloatType)))
    return Columns(key, values, floating, settings.check.float_abs_tol, settings.check.float_rel_tol)


def _stream_state(spark: SparkSession, plan: StagePlan, layout: RunLayout) -> DataFrame:
    """Spark's aggregation state after the last micro-batch, value fields named as lockstep names
    them (Spark's state store calls every SUM buffer "sum")."""
    spark.streams.active  # starts the state store coordinator the state reader talks to
    state = spark.read.format("statestore").load(str(layout.checkpoint))
    names = state_value_names(plan.aggregate)
    value_type = state.schema["value"].dataType
    renamed = StructType([StructField(n, f.dataType) for n, f in zip(names, value_type.fields)])
    return state.select("key", F.col("value").cast(renamed).alias("value"))


def _state_suite(plan: StagePlan) -> suites.SuiteSpec:
    node = plan.aggregate
    # The aggregate's key and the sink's are the same key, column for column (a window by its
    # start on both sides).
    group_key = plan.notes.upsert_keys[node]
    sink_key = plan.notes.upsert_keys[plan.root.input]
    has_slots = any(not call.invertible for call in node.aggregates)
    return suites.state_suite(group_key, sink_key, has_slots, node.is_global)


def _context(layout: RunLayout):
    context = gx.get_context(mode="file", project_root_dir=str(layout.root))
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    return context


def _validate(context, spec: suites.SuiteSpec, frame: DataFrame, counts: dict,
              sample_rows: int) -> list[Outcome]:
    source = context.data_sources.add_or_update_spark("lockstep")
    asset = next((a for a in source.assets if a.name == spec.asset), None) or \
        source.add_dataframe_asset(spec.asset)
    definition = next((d for d in asset.batch_definitions if d.name == "whole"), None) or \
        asset.add_batch_definition_whole_dataframe("whole")
    suite = context.suites.add_or_update(ExpectationSuite(name=spec.name, expectations=list(spec.expectations)))
    validation = context.validation_definitions.add_or_update(
        gx.ValidationDefinition(name=spec.name, data=definition, suite=suite))
    checkpoint = context.checkpoints.add_or_update(gx.Checkpoint(
        name=spec.name, validation_definitions=[validation], result_format={"result_format": "COMPLETE"},
        actions=[]))  # Data Docs are built once, after the last suite
    result = checkpoint.run(batch_parameters={"dataframe": frame}, expectation_parameters=counts)
    outcomes = []
    for run in result.run_results.values():
        for item in run.results:
            outcomes.append(_outcome(spec.name, convert_to_json_serializable(item.to_json_dict()),
                                     sample_rows))
    return outcomes


def _outcome(suite: str, result: dict, sample_rows: int) -> Outcome:
    details = result.get("result") or {}
    observed = details.get("observed_value")
    rows = (details.get("details") or {}).get("unexpected_rows") or []
    # Only the unexpected-rows expectations observe a count of offending rows.
    counts_rows = "unexpected_rows_query" in result["expectation_config"]["kwargs"]
    unexpected = observed if counts_rows and isinstance(observed, int) else None
    if result.get("exception_info", {}).get("raised_exception"):
        rows = [{"exception": result["exception_info"]["exception_message"]}]
    return Outcome(suite, result["expectation_config"]["type"], bool(result["success"]), unexpected,
                   [dict(r) for r in rows[:sample_rows]])


def _report(plan: Plan, layout: RunLayout, point: ConsistencyPoint, counts: dict, outcomes: list[Outcome],
            feed) -> dict:
    by_name = {o.name: o for o in outcomes}
    differences = {field: (by_name[name].unexpected or 0) if name in by_name else 0
                   for field, name in DIFFERENCES.items()}
    changes = Counter(feed.column(CHANGE_TYPE).to_pylist())
    verdict = "pass" if all(o.success for o in outcomes) else "fail"
    return {
        "query": plan.spec.name,
        "description": plan.spec.description,
        "verdict": verdict,
        "warnings": list(plan.warnings),
        **counts,
        **differences,
        "changelog": {kind.short: changes.get(name, 0) for name, kind in CDF_CHANGE_TYPES.items()},
        "expectations": [{"suite": o.suite, "name": o.name, "success": o.success,
                          "unexpected_rows": o.unexpected} for o in outcomes],
        "samples": {o.name: o.sample for o in outcomes if not o.success and o.sample},
        "consistency_point": {"sink_version": point.sink_version, "sources": point.to_json()["sources"]},
        "quarantined_rows": read_quarantine(layout.quarantine).num_rows,
        "source_anomalies": read_quarantine(layout.anomalies).num_rows,
        "micro_batches": _micro_batches(layout, point.last_batch),
        "sink": {"path": "stream", "primary_key": list(plan.sink_key), "version": point.sink_version},
        "data_docs": DATA_DOCS,
        "plan": explain(plan),
        "checked_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def _micro_batches(layout: RunLayout, last_batch: int | None) -> list[dict]:
    """The micro-batches up to the consistency point's last one."""
    if not layout.batches_log.exists() or last_batch is None:
        return []
    latest = {}
    for line in layout.batches_log.read_text().splitlines():
        entry = json.loads(line)
        if entry["batch"] <= last_batch:
            latest[entry["batch"]] = entry
    sizes_file = layout.state / "state_rows.json"
    sizes = json.loads(sizes_file.read_text()) if sizes_file.exists() else {}
    for batch, entry in latest.items():
        entry["state_rows"] = sizes.get(str(batch))
    return [latest[b] for b in sorted(latest)]
