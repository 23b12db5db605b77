"""Rows with counts, summed on the driver exactly as Spark's aggregation would sum them.

A keyed operator's micro-batch works on the micro-batch's net changes and the touched keys' live
rows, which the driver has anyway (the changes come back by toArrow, the state is read by
Arrow). Summing them there, rather than in Spark aggregations, takes a shuffle out of the job that
reads the micro-batch and two per input out of the job that computes the difference.

The grouping must be Spark's: two rows are one when every column is equal, a null equal to a
null, -0.0 equal to 0.0 and any NaN equal to any NaN (Spark normalises floating grouping keys
so, NormalizeFloatingNumbers), and the summed rows carry the normalised values, as Spark's
aggregation outputs them.

A group aggregate's sums (summed_per_group) are summed so too, every column in its own type, as
Spark's SUM: NULLs skipped, a sum leaving its type an error (Spark's ANSI arithmetic).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from jobs.changelog.columns import COUNT, TOUCHED, WEIGHT
from jobs.changelog.live_columnar import key_codes
from jobs.changelog.schema import all_nullable


def compares_as_spark(t: pa.DataType) -> bool:
    """Whether Arrow orders and equates every value of this type exactly as Spark does: integers,
    decimals, strings (byte by byte, Spark's default collation), booleans, dates, timestamps and
    binary. Not floating values (Arrow sorts NaN beside the nulls and its min / max skip it;
    Spark orders NaN above every number), not nested ones (Arrow has no order for them). The
    driver ranks (operators/deduplicate/top_rows.py), joins (operators/join/join_rows.py) and takes MIN / MAX (operators/aggregate/multiset.py) of such
    values; anything else goes to Spark."""
    return (
        pa.types.is_integer(t)
        or pa.types.is_decimal(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_boolean(t)
        or pa.types.is_date(t)
        or pa.types.is_timestamp(t)
        or pa.types.is_binary(t)
    )


def keys_among(rows: pa.Table, others: pa.Table, keys: tuple[str, ...]) -> np.ndarray:
    """Per row of `rows`, whether its `keys` equal some row's of `others` (key_positions). No
    keys: every row when `others` has any."""
    if not keys:
        return np.full(rows.num_rows, others.num_rows > 0)
    return key_positions(rows, others, keys) >= 0


def key_positions(rows: pa.Table, others: pa.Table, keys: tuple[str, ...]) -> np.ndarray:
    """Per row of `rows`, the position of the (last) row of `others` whose `keys` equal its own,
    column for column as Spark groups them (a null equal to a null, -0.0 to 0.0, a NaN to a NaN),
    or -1. (The nullability is dropped on both sides: toArrow keeps a NOT NULL column's, and
    Arrow concatenates only equal schemas.)"""
    mine, theirs = (all_nullable(table.select(list(keys))) for table in (rows, others))
    codes = row_codes(spark_normalized(pa.concat_tables([mine, theirs])))
    position = np.full(int(codes.max()) + 1 if len(codes) else 0, -1, np.int64)
    position[codes[rows.num_rows :]] = np.arange(others.num_rows)
    return position[codes[: rows.num_rows]]


def live_rows(rows: pa.Table) -> pa.Table:
    """Per distinct row (every column but COUNT), the sum of its counts, for the rows whose sum
    is above zero: the live rows. Same schema as `rows`."""
    return _summed(rows, lambda sums: sums > 0)


def net_rows(rows: pa.Table) -> pa.Table:
    """Per distinct row, the sum of its counts (weights), for the rows whose changes do not
    cancel out. Same schema as `rows`."""
    return _summed(rows, lambda sums: sums != 0)


def difference(after: pa.Table, before: pa.Table) -> pa.Table:
    """after - before as weighted rows: both hold rows with their COUNT of copies; per distinct
    row, the copies gained (WEIGHT +n) or lost (-n), rows in both equally often left out. WEIGHT
    is an int, as keyed.Difference's."""
    lost = before.set_column(before.schema.get_field_index(COUNT), COUNT, pc.negate(before.column(COUNT)))
    net = net_rows(pa.concat_tables([after, lost.cast(after.schema)]))
    return net.drop_columns([COUNT]).append_column(pa.field(WEIGHT, pa.int32()), pc.cast(net.column(COUNT), pa.int32()))


def _summed(rows: pa.Table, kept) -> pa.Table:
    if rows.num_rows == 0:
        return rows
    values = spark_normalized(rows.drop_columns([COUNT]))
    codes = row_codes(values)
    sums = np.zeros(int(codes.max()) + 1, np.int64)
    np.add.at(sums, codes, rows.column(COUNT).to_numpy())
    first = _first_rows(codes, len(sums))
    rows_kept = np.flatnonzero(kept(sums))
    columns = [*values.take(first[rows_kept]).columns, pa.array(sums[rows_kept], pa.int64())]
    return pa.Table.from_arrays(columns, schema=rows.schema)


def _first_rows(codes: np.ndarray, groups: int) -> np.ndarray:
    """Each code's first row, codes being 0..groups-1 (in one pass: np.unique's sort was most
    of a 4 M-row micro-batch's grouping)."""
    first = np.empty(groups, np.int64)
    first[codes[::-1]] = np.arange(len(codes) - 1, -1, -1)  # the last write per code wins
    return first


class SumOverflow(ArithmeticError):
    """A running sum left its type (Spark's ANSI arithmetic fails on it too)."""

    def __init__(self, column: str, type_: pa.DataType):
        super().__init__(column)
        self.column, self.type = column, type_


def summed_per_group(rows: pa.Table, keys: tuple[str, ...]) -> pa.Table:
    """Per group of `keys` (grouped as Spark groups), the sum of every other column (its maximum
    for TOUCHED), NULLs skipped and all-NULL summing to NULL, as Spark's SUM. Same schema as
    `rows`; raises SumOverflow where a sum does not fit its column's type."""
    if rows.num_rows == 0:
        return rows
    key_rows = spark_normalized(rows.select(list(keys)))
    codes = row_codes(key_rows) if keys else np.zeros(rows.num_rows, np.int64)
    groups = int(codes.max()) + 1
    columns = {k: key_rows.column(k).take(_first_rows(codes, groups)) for k in keys}
    sizes = np.bincount(codes, minlength=groups)
    for name in rows.column_names:
        if name not in keys:
            columns[name] = _group_sums(rows.column(name), rows.schema.field(name), codes, sizes)
    return pa.table([columns[f.name] for f in rows.schema], schema=rows.schema)


def _group_sums(column: pa.ChunkedArray, field: pa.Field, codes: np.ndarray, sizes: np.ndarray) -> pa.Array:
    """One column's sums (TOUCHED: maxima) per group code, NULL where a group has no value;
    `sizes` are the groups' row counts."""
    groups = len(sizes)
    valid = (
        sizes
        if column.null_count == 0
        else np.bincount(codes, weights=column.is_valid().to_numpy(zero_copy_only=False), minlength=groups)
    )
    if not (pa.types.is_integer(field.type) or pa.types.is_floating(field.type)):
        return _exact_sums(column, field, codes, groups)  # decimals
    filled = pc.fill_null(column, 0).to_numpy()
    if field.name == TOUCHED:
        values = np.full(groups, np.iinfo(np.int64).min)
        np.maximum.at(values, codes, filled)
    elif pa.types.is_floating(field.type):
        values = np.bincount(codes, weights=filled.astype(np.float64), minlength=groups)
    elif _sums_fit_int64(filled, codes, groups):
        values = np.zeros(groups, np.int64)
        np.add.at(values, codes, filled.astype(np.int64))
    else:
        return _exact_sums(column, field, codes, groups)
    return _narrowed(pa.array(values, mask=valid == 0), field)


def _sums_fit_int64(values: np.ndarray, codes: np.ndarray, groups: int) -> bool:
    """Whether every group's sum of absolute values stays far inside int64: then no sum
    overflows, and numpy's int64 sums are exact."""
    magnitudes = np.bincount(codes, weights=np.abs(values.astype(np.float64)), minlength=groups)
    return bool(magnitudes.max(initial=0) < 2.0**62)


def _exact_sums(column: pa.ChunkedArray, field: pa.Field, codes: np.ndarray, groups: int) -> pa.Array:
    """Sums in a decimal wide enough that none overflows (Arrow's own integer and decimal sums
    wrap around silently), checked against the column's type when narrowed back."""
    wide = pa.decimal256(40, 0) if pa.types.is_integer(field.type) else pa.decimal256(76, field.type.scale)
    table = pa.table({"g": codes, "v": column.cast(wide)})
    summed = table.group_by("g", use_threads=False).aggregate([("v", "sum")])
    order = np.argsort(summed.column("g").to_numpy())
    return _narrowed(summed.column("v_sum").take(order), field)


def _narrowed(column: pa.Array | pa.ChunkedArray, field: pa.Field) -> pa.Array:
    try:
        return column.cast(field.type)
    except pa.ArrowInvalid:
        raise SumOverflow(field.name, field.type) from None


def spark_normalized(table: pa.Table) -> pa.Table:
    """Floating columns with -0.0 as 0.0 and every NaN as one NaN (Arrow's dictionary encoding
    tells NaNs with different payloads apart; Spark does not). Floats inside list or struct
    columns keep their bytes here; row_codes compares them normalised."""
    return pa.Table.from_arrays(
        [_normalized(c) if pa.types.is_floating(c.type) else c for c in table.columns], schema=table.schema
    )


def _normalized(column: pa.ChunkedArray) -> pa.ChunkedArray:
    signless = pc.add(column, pa.scalar(0.0, column.type))  # -0.0 + 0.0 is 0.0
    return pc.if_else(pc.is_nan(signless), pa.scalar(math.nan, column.type), signless)


def row_codes(values: pa.Table) -> np.ndarray:
    """One integer per row, equal exactly when the rows are equal in every column (a null equal
    to a null). Floating columns are compared as stored: normalise them first."""
    flat = [pa.array(_nested_codes(c)) if pa.types.is_nested(c.type) else c for c in values.columns]
    return key_codes(pa.table(flat, names=values.column_names), nulls_match=True)


def _nested_codes(column: pa.ChunkedArray) -> np.ndarray:
    """Codes of a list, struct or map column, which Arrow cannot dictionary-encode: its values
    made hashable on the Python side, floats inside them normalised as Spark does."""
    return pd.factorize(pd.Series([_hashable(v) for v in column.to_pylist()], dtype=object), use_na_sentinel=False)[
        0
    ].astype(np.int64)


_NAN = ("NaN",)  # one key for every NaN: float('nan') is not equal to itself


def _hashable(value):
    if isinstance(value, float):
        return _NAN if math.isnan(value) else value + 0.0
    if isinstance(value, dict):
        return tuple((k, _hashable(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return tuple(_hashable(v) for v in value)
    return value
