"""A keyed operator's input read on the driver from the staged segment files
(jobs/stream/operators/driver_input.py) must be the rows Spark's stream hands over for the same files: the
same values in the same Spark types, each with its weight (+1 for +I and +U, -1 for -U and -D);
and only a staged changelog, or a SELECT that picks its columns, is read that way."""

from decimal import Decimal

import pyarrow.compute as pc
import sqlglot
from pyspark.sql.pandas.types import from_arrow_type

from jobs.changelog.columns import COUNT
from jobs.changelog.frames import weight
from jobs.changelog.staging import StagedChangelog, stage_source
from jobs.plan.nodes import Calc, ChangelogSource
from jobs.spec.model import SourceSpec, StreamSpec
from jobs.stream.operators.driver_input import driver_input
from jobs.stream.source import changelog_stream
from tests.conftest import write_changelog

SCHEMA = "id BIGINT, name STRING, amount DECIMAL(10,2), at TIMESTAMP"


def _rows():
    def row(op, i, name, amount, at):
        return {"op": op, "id": i, "name": name, "amount": amount, "at": at}

    return [
        row("+I", 1, "a", "1.50", "2026-01-01 10:00:00"),
        row("+I", 2, None, None, None),
        row("-U", 1, "a", "1.50", "2026-01-01 10:00:00"),
        row("+U", 1, "é", "-2.25", "2026-01-02 00:00:01"),
        row("-D", 2, None, None, None),
        row("+I", 3, "c", "0.00", "2026-01-03 23:59:59"),
    ]


def _staged(tmp_path) -> StagedChangelog:
    spec = SourceSpec(path=tmp_path / "src", format="changelog-json", schema=SCHEMA, primary_key=("id",))
    write_changelog(tmp_path / "src", "a.json", _rows())
    _, commit = stage_source(
        "t", spec, tmp_path / "staged", tmp_path / "quarantine", batch_size=StreamSpec(rows_per_batch=4)
    )
    commit()
    return StagedChangelog(tmp_path / "staged")


def _source(staged: StagedChangelog) -> ChangelogSource:
    return ChangelogSource("t", staged.schema, "changelog-json", ("id",))


def test_the_driver_reads_what_spark_streams(spark, tmp_path):
    staged = _staged(tmp_path)
    files = tuple(staged.directory / s["file"] for s in staged.segments())
    assert len(files) == 2  # the rows span two segments, as two micro-batches would
    source = _source(staged)
    stream = changelog_stream(spark, staged)
    direct = driver_input(source, stream.schema)
    on_driver = direct.rows({"t": files})
    batch = spark.read.schema(staged.segment_ddl()).parquet(*map(str, files))
    in_spark = batch.select(*source.output_names, weight().cast("bigint").alias(COUNT)).toArrow()
    assert [from_arrow_type(f.type) for f in on_driver.schema] == [from_arrow_type(f.type) for f in in_spark.schema]
    key = [(c, "ascending") for c in on_driver.column_names]
    assert on_driver.sort_by(key).to_pylist() == in_spark.cast(on_driver.schema).sort_by(key).to_pylist()
    assert sorted(on_driver.column(COUNT).to_pylist()) == [-1, -1, 1, 1, 1, 1]
    ones = on_driver.filter(pc.equal(on_driver.column("id"), 1))
    assert ones.column("amount").to_pylist().count(Decimal("1.50")) == 2  # +I and its -U


def test_only_a_staged_changelog_or_a_pick_of_its_columns_is_read_on_the_driver(spark, tmp_path):
    staged = _staged(tmp_path)
    source = _source(staged)
    schema = changelog_stream(spark, staged).schema

    def calc(select: str, where: str | None = None) -> Calc:
        parsed = sqlglot.parse_one(f"SELECT {select} FROM t" + (f" WHERE {where}" if where else ""), read="spark")
        return Calc(
            source,
            tuple((e.alias_or_name, e.unalias()) for e in parsed.expressions),
            parsed.args["where"].this if where else None,
        )

    renamed = calc("id AS k, name")
    picked = driver_input(renamed, spark.createDataFrame([], "k BIGINT, name STRING").schema)
    assert (picked.columns, picked.names) == (("id", "name"), ("k", "name"))
    assert driver_input(source, schema) is not None
    computed = calc("id + 1 AS k, name")
    assert driver_input(computed, spark.createDataFrame([], "k BIGINT, name STRING").schema) is None
    filtered = calc("id AS k, name", "id > 1")
    assert driver_input(filtered, spark.createDataFrame([], "k BIGINT, name STRING").schema) is None
