"""Lookup joins in Spark: each partition's rows are enriched in Arrow batches by the async engine
(jobs/lookup/engine.py), never one blocking request at a time.

The stream applies it with mapInArrow to the changelog rows, retractions included: a -U/-D is
enriched by looking its key up again (or from the cache) the way its +I was, so it retracts the
row emitted before as long as the dimension did not change in between; when it did, the
retraction carries the new value, and the check reports the difference as a lookup that changed
(docs/lookups.md). The batch side asks the same service for every distinct key of the join's input
and registers the answers as a table named like the lookup.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import StructField, StructType, _parse_datatype_string

from jobs.changelog.columns import WEIGHT
from jobs.errors import LockstepError, WorkerFailure
from jobs.lookup.config import LookupConfig
from jobs.lookup.engine import AsyncLookup
from jobs.plan.nodes import LookupJoin
from jobs.store.files import RunPath, read_parquet_folder, write_parquet

STATS = "stream_stats"  # beside the stream's answers: the engine's counters per batch
_ENGINES: dict[LookupConfig, AsyncLookup] = {}  # one per Python worker and lookup: keeps its cache


def _engine(config: LookupConfig) -> AsyncLookup:
    if config not in _ENGINES:
        _ENGINES[config] = AsyncLookup(config)
    return _ENGINES[config]


def lookup_fields(node: LookupJoin, config: LookupConfig, input_schema: StructType) -> list[StructField]:
    """The lookup table's columns as Spark fields: key columns typed like the input columns they
    are equated to, output columns as the spec declares them."""
    types = [input_schema[k].dataType for k in node.input_keys]
    types += [_parse_datatype_string(t) for _, t in config.output]
    return [StructField(name, t, True) for name, t in zip(node.lookup_output, types)]


def enrich_stream(frame: DataFrame, node: LookupJoin, config: LookupConfig, answers: RunPath) -> DataFrame:
    """`answers`: a folder where each task writes the answers it got (key and output columns), so
    the check can tell a dimension that changed between stream and batch from an engine error."""
    fields = lookup_fields(node, config, frame.schema)
    schema = StructType(frame.schema.fields + fields)
    arrow_fields = [pa.field(f.name, to_arrow_type(f.dataType)) for f in fields]
    inner, input_keys = node.kind == "inner", node.input_keys
    output_names = [name for name, _ in config.output]

    def enrich(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        engine = _engine(config)
        for batch in batches:
            before = engine.stats.as_dict()
            try:
                enriched = _enriched(batch, engine, input_keys, output_names, arrow_fields, inner)
            except LockstepError as exc:  # crosses to the driver typed, see jobs/errors.py
                raise WorkerFailure(exc) from None
            _record(answers, enriched.select([f.name for f in arrow_fields]))
            _record_stats(answers.parent / STATS, before, engine.stats.as_dict())
            yield enriched

    return frame.mapInArrow(enrich, schema)


def _enriched(batch: pa.RecordBatch, engine: AsyncLookup, input_keys, output_names, fields, inner: bool):
    keys = list(zip(*(batch.column(k).to_pylist() for k in input_keys)))
    retracts = (
        [w < 0 for w in batch.column(WEIGHT).to_pylist()] if WEIGHT in batch.schema.names else [False] * batch.num_rows
    )
    answered = engine.run(keys, retracts)
    if inner:
        answered = [(i, row) for i, row in answered if row is not None]
    order = pa.array([i for i, _ in answered], pa.int64())
    taken = batch.take(order)
    key_columns = [[keys[i][j] for i, _ in answered] for j in range(len(input_keys))]
    values = [[(row or {}).get(name) for _, row in answered] for name in output_names]
    arrays = [pa.array(column, f.type) for column, f in zip(key_columns + values, fields)]
    return pa.RecordBatch.from_arrays(list(taken.columns) + arrays, schema=pa.schema(list(taken.schema) + fields))


def _record_stats(folder: RunPath, before: dict, after: dict) -> None:
    """This batch's share of the engine's counters (requests, cache hits, retries, timeouts, rows
    given nulls), for the report: the engine lives in a Spark worker, not on the driver."""
    figures = {name: after[name] - before.get(name, 0) for name in after if name != "max_in_flight"}
    figures["max_in_flight"] = after.get("max_in_flight", 0)
    folder.mkdir(parents=True, exist_ok=True)
    write_parquet(pa.Table.from_pylist([figures]), folder / f"part-{uuid.uuid4().hex}.parquet")


def lookup_figures(folder: RunPath) -> dict:
    """The summed counters of a lookup's stream side (see _record_stats); {} if none."""
    stats = folder / STATS
    if not stats.is_dir():
        return {}
    rows = read_parquet_folder(stats).to_pylist()
    summed = {name: sum(r.get(name) or 0 for r in rows) for name in rows[0] if name != "max_in_flight"}
    return {**summed, "max_in_flight": max(r.get("max_in_flight") or 0 for r in rows)}


def _record(folder: RunPath, answers: pa.RecordBatch) -> None:
    if answers.num_rows:
        folder.mkdir(parents=True, exist_ok=True)
        write_parquet(pa.Table.from_batches([answers]), folder / f"part-{uuid.uuid4().hex}.parquet")


def lookup_table(spark: SparkSession, node: LookupJoin, config: LookupConfig, keys_frame: DataFrame) -> DataFrame:
    """The batch side's view of the lookup: the service's answer for every distinct key of the
    join's input (keys without a dimension row are absent, as a table would have them)."""
    distinct = keys_frame.select(*[f"`{k}`" for k in node.input_keys]).distinct().dropna()
    keys = [tuple(r) for r in distinct.collect()]
    answered = AsyncLookup(config).run(keys, [False] * len(keys))
    fields = lookup_fields(node, config, keys_frame.schema)
    rows = [
        tuple(keys[i]) + tuple(row.get(name) for name, _ in config.output) for i, row in answered if row is not None
    ]
    names = StructType([StructField(c, f.dataType, True) for c, f in zip(node.lookup_columns, fields)])
    return spark.createDataFrame(rows, names)
