"""A join's micro-batch brings both inputs' change rows back in one Spark job, each side's rows
packed in a struct, and sums each side on the driver: a row and its retraction must cancel there
as Spark's grouping would cancel them (-0.0 as 0.0, NaN as NaN), or the state would keep a row the
changelog deleted."""

from jobs.changelog.columns import COUNT, WEIGHT
from jobs.stream.operators.join.joined_rows import LEFT, RIGHT, SIDE, per_side, tag_side
from jobs.stream.operators.weighted_rows import NetChanges

LEFT_COLS, RIGHT_COLS = ("k", "v"), ("k", "name")


def tagged(spark, left_rows, right_rows):
    left = spark.createDataFrame(left_rows, f"k BIGINT, v DOUBLE, {WEIGHT} INT")
    right = spark.createDataFrame(right_rows, f"k BIGINT, name STRING, {WEIGHT} INT")
    return tag_side(left, LEFT, LEFT_COLS, RIGHT, "`k`: bigint, `name`: string").unionByName(
        tag_side(right, RIGHT, RIGHT_COLS, LEFT, "`k`: bigint, `v`: double")
    )


def net_changes_per_side(delta):
    """What a join's micro-batch does with its input first."""
    return per_side(NetChanges((SIDE, LEFT, RIGHT)).rows(delta), LEFT_COLS, RIGHT_COLS)


def test_a_row_and_its_retraction_cancel_on_each_side(spark):
    nan = float("nan")
    delta = tagged(
        spark,
        [(1, -0.0, 1), (1, 0.0, -1), (2, nan, 1), (2, nan, -1), (3, 1.5, 1), (3, 1.5, 1)],
        [(1, "a", 1), (1, "a", -1), (4, "b", -1)],
    )
    left, right = net_changes_per_side(delta)
    assert left.to_pylist() == [{"k": 3, "v": 1.5, COUNT: 2}]
    assert right.to_pylist() == [{"k": 4, "name": "b", COUNT: -1}]


def test_a_side_without_changes_is_an_empty_table_of_its_columns(spark):
    left, right = net_changes_per_side(tagged(spark, [(7, 2.0, 1)], []))
    assert left.num_rows == 1 and right.num_rows == 0
    assert right.column_names == [*RIGHT_COLS, COUNT]
