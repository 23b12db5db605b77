"""Why stream and batch differ: each differing row attributed to the first cause that explains it.

The differing rows are the keys missing from the stream, extra in it, or with different values.
Causes are tried in this order, each taking the rows it explains out of the rest:

    non_deterministic      the query calls rand(), current_timestamp(), ... (a plan warning):
                           its result cannot agree, so every difference is put down to it
    primary_key_violation  the sink key holds two different rows (the materializer's state or
                           the batch result): the key is not unique in the query's result
    source_anomalies       rows kept by `on_bad_rows: keep` that break the changelog protocol:
                           the keys those rows feed (the query re-run on their images alone)
    lookup_changed         lookup keys the service answered differently to the stream and to
                           the batch job (the dimension changed in between): the rows they feed
    late_events            windowed queries: the rows that agree once the batch result is
                           recomputed without the events the watermark left out
    diverging_stage        a multi-stage query whose intermediate table already differs from
                           its batch equivalent: the final difference follows from it
    unexplained            the rest: the most important line of a report

Figures and samples only: the verdict stays the expectations'.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import reduce

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from expectations.columns import Columns
from expectations.report.model import StageFigures
from expectations.sql import (
    BATCH_VIEW,
    MATERIALIZER_VIEW,
    STREAM_COMPARED_VIEW,
    differing_rows,
    duplicate_keys,
    keys_with_distinct_rows,
)
from expectations.window_check import WindowCheck
from jobs.changelog.columns import FILE, LINE
from jobs.changelog.frames import consumed_changes, source_snapshot
from jobs.changelog.quarantine import read_quarantine
from jobs.changelog.staging import staged_changelog
from jobs.lookup.tables import lookup_joins
from jobs.plan import Plan
from jobs.plan.nodes import ChangelogSource, LookupJoin
from jobs.point import ConsistencyPoint
from jobs.runtime.layout import RunLayout
from jobs.spark_sql import run_sql

EVERY_ROW = "every row"


@dataclass(frozen=True)
class Found:
    """What a cause explains: the rows whose key is in `keys` (or not in it, with `outside`), or
    every remaining row."""

    detail: str
    keys: DataFrame | str
    outside: bool = False


@dataclass
class Evidence:
    """Everything the causes look at."""

    spark: SparkSession
    plan: Plan
    layout: RunLayout
    point: ConsistencyPoint
    cols: Columns
    windows: WindowCheck | None
    stages: StageFigures | None
    materializer: DataFrame | None


def _agreed() -> dict:
    return {
        "differing_rows": 0,
        "explained_rows": 0,
        "unexplained_rows": 0,
        "causes": [],
        "summary": "stream and batch agree row for row",
    }


def diagnose(evidence: Evidence, sample_rows: int, agreed: bool = False) -> dict:
    """The differing rows by cause. `agreed`: the unity suite found no missing, extra or
    mismatched row, so no row differs (and no Spark job need count them again)."""
    if agreed:
        return _agreed()
    spark, cols = evidence.spark, evidence.cols
    differing = spark.sql(differing_rows(cols, STREAM_COMPARED_VIEW, BATCH_VIEW)).cache()
    total = differing.count()
    if total == 0:
        differing.unpersist()
        return _agreed()
    remaining, causes = differing, []
    for name, title, find in CAUSES:
        found = find(evidence)
        if found is None:
            continue
        explained, remaining = _split(remaining, found, cols.key)
        rows = explained.count()
        if rows:
            causes.append(_cause(name, title, rows, found.detail, explained, sample_rows))
    unexplained = remaining.count()
    if unexplained:
        causes.insert(
            0,
            _cause(
                "unexplained",
                "Unexplained",
                unexplained,
                "no known cause accounts for these rows: look here first",
                remaining,
                sample_rows,
            ),
        )
    differing.unpersist()
    return {
        "differing_rows": total,
        "explained_rows": total - unexplained,
        "unexplained_rows": unexplained,
        "causes": causes,
        "summary": _summary(total, causes),
    }


def _split(rows: DataFrame, found: Found, key: tuple[str, ...]) -> tuple[DataFrame, DataFrame]:
    """(rows the cause explains, rows left)."""
    if isinstance(found.keys, str):
        return rows, rows.limit(0)
    keys = found.keys.select(*[F.col(f"`{k}`").alias(f"__k{i}") for i, k in enumerate(key)]).distinct()
    match = reduce(
        lambda a, b: a & b, [rows[f"`{k}`"].eqNullSafe(keys[f"__k{i}"]) for i, k in enumerate(key)], F.lit(True)
    )
    inside, outside = rows.join(keys, match, "left_semi"), rows.join(keys, match, "left_anti")
    return (outside, inside) if found.outside else (inside, outside)


def _cause(name: str, title: str, rows: int, detail: str, explained: DataFrame, sample_rows: int) -> dict:
    sample = [r.asDict() for r in explained.limit(sample_rows).collect()]
    return {"cause": name, "title": title, "rows": rows, "detail": detail, "sample": sample}


def _summary(total: int, causes: list[dict]) -> str:
    parts = [
        f"{c['rows']:,} {'unexplained' if c['cause'] == 'unexplained' else 'explained by ' + c['title'].lower()}"
        for c in causes
    ]
    rows = "1 row differs" if total == 1 else f"{total:,} rows differ"
    return f"{rows}: " + "; ".join(parts)


# -- the causes ------------------------------------------------------------------------------------


def _non_deterministic(evidence: Evidence) -> Found | None:
    if not evidence.plan.warnings:
        return None
    return Found("the query cannot be checked for unity: " + "; ".join(evidence.plan.warnings), EVERY_ROW)


def _primary_key_violations(evidence: Evidence) -> Found | None:
    cols = evidence.cols
    if evidence.plan.write_mode != "upsert" or not cols.key:
        return None
    found = [evidence.spark.sql(duplicate_keys(cols, BATCH_VIEW))]
    if evidence.materializer is not None:
        evidence.materializer.createOrReplaceTempView(MATERIALIZER_VIEW)
        found.append(evidence.spark.sql(keys_with_distinct_rows(cols, MATERIALIZER_VIEW)))
    keys = reduce(DataFrame.unionByName, [f.select(*[f"`{k}`" for k in cols.key]) for f in found])
    violated = keys.distinct().count()
    if not violated:
        return None
    return Found(
        f"{violated:,} sink key(s) [{', '.join(cols.key)}] hold two or more different rows: "
        f"the key is not unique in the query's result",
        keys,
    )


def _source_anomalies(evidence: Evidence) -> Found | None:
    anomalies = read_quarantine(evidence.layout.anomalies)
    if anomalies.num_rows == 0:
        return None
    touched = [
        _keys_fed_by(
            evidence,
            source,
            _suspect_images(evidence.spark, evidence.layout, source, evidence.point.rows_consumed(source), anomalies),
        )
        for source in sorted(set(anomalies.column("source").to_pylist()))
    ]
    reasons = sorted(set(r.split(" for ")[0] for r in anomalies.column("reason").to_pylist()))
    return Found(
        f"{anomalies.num_rows:,} source changelog row(s) break the changelog protocol and were "
        f"kept (on_bad_rows: keep): {', '.join(reasons)}; these are the rows they feed",
        reduce(DataFrame.unionByName, touched),
    )


def _keys_fed_by(evidence: Evidence, source: str, rows: DataFrame) -> DataFrame:
    """The output keys that `rows` of `source` reach: the query re-run with that source holding
    only them (the other sources, and the lookups as the batch job saw them, whole)."""
    spark, plan = evidence.spark, evidence.plan
    tables = {
        s.table: source_snapshot(
            spark, staged_changelog(evidence.layout, s.table), evidence.point.rows_consumed(s.table)
        )
        for s in plan.sources
    }
    for node in lookup_joins(plan):
        tables[node.lookup] = spark.read.parquet(str(evidence.layout.lookup_answers(node.lookup, "batch")))
    result = run_sql(spark, plan, {**tables, source: rows})
    return result.select(*[f"`{k}`" for k in evidence.cols.key])


def _suspect_images(spark: SparkSession, layout: RunLayout, source: str, consumed: int, anomalies) -> DataFrame:
    """The row images a protocol-breaking change involves: with a primary key, every image its key
    ever had (a +U without its -U leaves the old image counted), else the row itself."""
    staged = staged_changelog(layout, source)
    changes = consumed_changes(spark, staged, consumed)
    mine = [
        (f, line)
        for s, f, line in zip(*(anomalies.column(c).to_pylist() for c in ("source", "file", "line")))
        if s == source
    ]
    marks = spark.createDataFrame(mine, f"`{FILE}` STRING, `{LINE}` INT")
    suspects = changes.join(marks, [FILE, LINE], "left_semi")
    key = list(staged.manifest["primary_key"])
    if key:
        suspects = changes.join(suspects.select(*key).distinct(), key, "left_semi")
    return suspects.select(*[f"`{c}`" for c in staged.schema.names]).distinct()


def _lookups_changed(evidence: Evidence) -> Found | None:
    """A lookup reads its service when a row arrives: keys whose answer to the stream differs from
    the batch job's (later) answer changed in between; the rows they feed are theirs."""
    touched, changed_keys = [], 0
    for node in lookup_joins(evidence.plan):
        changed = _changed_lookup_keys(evidence, node)
        if changed is None or not isinstance(node.input, ChangelogSource):
            continue  # rows reach the lookup through other operators: not traced
        changed_keys += changed.count()
        keys = changed.toDF(*node.input_keys)
        consumed = evidence.point.rows_consumed(node.input.table)
        rows = source_snapshot(evidence.spark, staged_changelog(evidence.layout, node.input.table), consumed).join(
            keys, list(node.input_keys), "left_semi"
        )
        touched.append(_keys_fed_by(evidence, node.input.table, rows))
    if not changed_keys:
        return None
    return Found(
        f"{changed_keys:,} lookup key(s) got a different answer in the stream than in the batch "
        f"job: the dimension changed between the two reads (not an engine error)",
        reduce(DataFrame.unionByName, touched),
    )


def _changed_lookup_keys(evidence: Evidence, node: LookupJoin) -> DataFrame | None:
    """Keys whose stream and batch answers differ (key columns of the lookup, as values)."""
    stream_dir = evidence.layout.lookup_answers(node.lookup, "stream")
    batch_dir = evidence.layout.lookup_answers(node.lookup, "batch")
    if not stream_dir.exists() or not batch_dir.exists():
        return None
    spark, columns = evidence.spark, list(node.lookup_columns)
    stream = spark.read.parquet(str(stream_dir)).toDF(*columns).distinct()
    batch = spark.read.parquet(str(batch_dir)).select(*columns).distinct()
    key = columns[: len(node.input_keys)]
    return stream.exceptAll(batch).unionByName(batch.exceptAll(stream)).select(*key).distinct()


def _late_events(evidence: Evidence) -> Found | None:
    windows = evidence.windows
    if windows is None or windows.late.count() == 0:
        return None
    still = windows.still_differing(evidence.spark, evidence.cols)
    return Found(
        "the watermark left these events out of the stream; without them the batch result agrees on these rows",
        still,
        outside=True,
    )


def _diverging_stage(evidence: Evidence) -> Found | None:
    stages = evidence.stages
    first = stages.first_diverging_stage if stages else None
    if not stages or not first:
        return None
    stage = next(s for s in stages.stages if s["stage"] == first)
    return Found(
        f"intermediate stage {first} already differs from its batch equivalent "
        f"({stage['missing_rows']:,} missing, {stage['extra_rows']:,} extra rows): the final "
        f"difference follows from it",
        EVERY_ROW,
    )


CAUSES: list[tuple[str, str, Callable[[Evidence], Found | None]]] = [
    ("non_deterministic", "A non-deterministic expression", _non_deterministic),
    ("primary_key_violation", "A primary-key violation at the sink", _primary_key_violations),
    ("source_anomalies", "Source changelog anomalies", _source_anomalies),
    ("lookup_changed", "Lookups whose answer changed between stream and batch", _lookups_changed),
    ("late_events", "Late events dropped by the watermark", _late_events),
    ("diverging_stage", "An intermediate stage that diverges first", _diverging_stage),
]
