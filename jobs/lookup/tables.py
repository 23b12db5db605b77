"""Lookups as tables: each lookup becomes a table named like it, holding the service's answers
for the distinct keys of the join's input (asked through the same engine as the stream, at batch
time), or no rows with the lookup's columns (the empty-input result that types the sink)."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructField, StructType

from jobs.lookup.from_spec import config_of
from jobs.lookup.spark import lookup_fields, lookup_table
from jobs.plan import Plan
from jobs.plan.nodes import LookupJoin
from jobs.plan.to_sql import to_sql


def lookup_joins(plan: Plan) -> list[LookupJoin]:
    return [n for n in plan.root.walk() if isinstance(n, LookupJoin)]


def lookup_tables(
    spark: SparkSession, plan: Plan, sources: dict[str, DataFrame], empty: bool = False
) -> dict[str, DataFrame]:
    """{lookup name: table} for the query's lookup joins; `empty`: no rows, only the schema."""
    nodes = lookup_joins(plan)
    if not nodes:
        return {}
    tables = {}
    for node in nodes:
        for name, frame in sources.items():
            frame.createOrReplaceTempView(name)
        keys = spark.sql(to_sql(node.input))
        config = config_of(node.lookup, plan.spec.lookups[node.lookup])
        if empty:
            fields = lookup_fields(node, config, keys.schema)
            schema = StructType([StructField(c, f.dataType, True) for c, f in zip(node.lookup_columns, fields)])
            tables[node.lookup] = spark.createDataFrame([], schema)
        else:
            tables[node.lookup] = lookup_table(spark, node, config, keys)
    return tables
