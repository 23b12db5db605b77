"""A join's streaming rule: both sides' changes in one frame, each tagged with its side and
carrying the other side's row type, with the operator that joins the touched keys' live rows,
on Spark's keyed state or lockstep's."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql.types import DataType

from jobs.changelog.columns import LIVE, SEQ
from jobs.plan.nodes import Join, TemporalJoin
from jobs.plan.window_rows import state_bounds
from jobs.stream.operators.driver_input import driver_input
from jobs.stream.operators.frames import Context, Streaming
from jobs.stream.operators.join.joined_rows import LEFT, RIGHT, tag_side
from jobs.stream.operators.join.on_lockstep_state import JoinOperator
from jobs.stream.operators.join.on_spark_state import JoinOnKeyedState
from jobs.stream.operators.join.point_in_time_rows import history_entries
from jobs.stream.operators.join.temporal import TemporalJoinOperator
from jobs.stream.operators.keyed_state import watermarked


def join(node: Join, ctx: Context) -> Streaming:
    left = ctx.frame(node.left).frame
    right = ctx.frame(node.right).frame
    if ctx.on_keyed_state:
        marked = watermarked(left, right) if state_bounds(node) is not None else None
        left, right = marked or (left, right)
        joined = JoinOnKeyedState(node, _types(left), _types(right), expiring=marked is not None)
        return Streaming(joined.stream(ctx.spark, _tagged(node, left, right)), operator=joined)
    tagged = _tagged(node, left, right)
    left_direct, right_direct = driver_input(node.left, left.schema), driver_input(node.right, right.schema)
    direct = (left_direct, right_direct) if left_direct and right_direct else None
    return Streaming(tagged, operator=JoinOperator(node, ctx.layout.operator_state, direct))


def temporal_join(node: TemporalJoin, ctx: Context) -> Streaming:
    """Both sides' changes in one frame as for a regular join. On Spark's keyed state the
    versioned table's changes go in as its history's rows; lockstep's operator reads them from
    the micro-batch's files, in order (a -U is not a version)."""
    left, right = ctx.frame(node.left).frame, ctx.frame(node.right).frame
    if ctx.on_keyed_state:
        marked = watermarked(left, right)
        left, right = marked or (left, right)
        history = history_entries(right, node)
        entry = (*node.right.output_names, LIVE, SEQ)
        tagged = tag_side(left, LEFT, node.left.output_names, RIGHT, _struct_ddl(history, entry))
        tagged = tagged.unionByName(tag_side(history, RIGHT, entry, LEFT, _struct_ddl(left, node.left.output_names)))
        joined = JoinOnKeyedState(node, _types(left), _types(history), expiring=marked is not None)
        return Streaming(joined.stream(ctx.spark, tagged), operator=joined)
    tagged = _tagged(node, left, right)
    operator = TemporalJoinOperator(node, ctx.layout.operator_state, right.schema, driver_input(node.left, left.schema))
    return Streaming(tagged, operator=operator)


def _tagged(node: Join, left: DataFrame, right: DataFrame) -> DataFrame:
    left_names, right_names = node.left.output_names, node.right.output_names
    tagged = tag_side(left, LEFT, left_names, RIGHT, _struct_ddl(right, right_names))
    return tagged.unionByName(tag_side(right, RIGHT, right_names, LEFT, _struct_ddl(left, left_names)))


def _types(frame: DataFrame) -> dict[str, DataType]:
    return {f.name: f.dataType for f in frame.schema.fields}


def _struct_ddl(frame: DataFrame, names: tuple[str, ...]) -> str:
    return ", ".join(f"`{n}`: {frame.schema[n].dataType.simpleString()}" for n in names)


RULES = {Join: join, TemporalJoin: temporal_join}
