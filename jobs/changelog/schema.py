"""Source schemas: a Spark DDL string ("order_id BIGINT, ts TIMESTAMP") as typed columns.

Parsed with sqlglot so that `lockstep explain` and spec validation never need a Spark session.
Each column knows its Spark SQL type (for the streaming source schema) and its Arrow type
(for parsing changelog files).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import sqlglot
from sqlglot import exp

from jobs.changelog.columns import KIND, RESERVED_PREFIX, SEQ, WEIGHT
from jobs.errors import SpecError

_T = exp.DataType.Type
_SIMPLE = {
    _T.BIGINT: ("BIGINT", pa.int64()),
    _T.INT: ("INT", pa.int32()),
    _T.SMALLINT: ("SMALLINT", pa.int16()),
    _T.TINYINT: ("TINYINT", pa.int8()),
    _T.DOUBLE: ("DOUBLE", pa.float64()),
    _T.FLOAT: ("FLOAT", pa.float32()),
    _T.TEXT: ("STRING", pa.string()),
    _T.VARCHAR: ("STRING", pa.string()),
    _T.BOOLEAN: ("BOOLEAN", pa.bool_()),
    _T.DATE: ("DATE", pa.date32()),
    # Spark's TIMESTAMP is an instant: Arrow stores it in UTC, Spark shows it in the session zone.
    _T.TIMESTAMP: ("TIMESTAMP", pa.timestamp("us", tz="UTC")),
    _T.TIMESTAMPLTZ: ("TIMESTAMP", pa.timestamp("us", tz="UTC")),
    _T.TIMESTAMPTZ: ("TIMESTAMP", pa.timestamp("us", tz="UTC")),
    _T.TIMESTAMPNTZ: ("TIMESTAMP_NTZ", pa.timestamp("us")),
}


@dataclass(frozen=True)
class Column:
    name: str
    spark_type: str
    arrow_type: pa.DataType
    nullable: bool = True  # NOT NULL in the DDL: a row without a value for it is a bad row


@dataclass(frozen=True)
class SourceSchema:
    columns: tuple[Column, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(col.name for col in self.columns)

    def column(self, name: str) -> Column | None:
        """Case-insensitive lookup, as Spark resolves column names."""
        return next((c for c in self.columns if c.name.lower() == name.lower()), None)

    def arrow(self) -> pa.Schema:
        return pa.schema([pa.field(c.name, c.arrow_type) for c in self.columns])

    def spark_ddl(self) -> str:
        return ", ".join(f"`{c.name}` {c.spark_type}" for c in self.columns)

    def stream_ddl(self) -> str:
        """The streaming source's schema: the columns plus weight, position and kind."""
        return f"{self.spark_ddl()}, `{WEIGHT}` INT, `{SEQ}` BIGINT, `{KIND}` TINYINT"


def all_nullable(table: pa.Table) -> pa.Table:
    """The same columns with every field nullable (types and schema metadata kept)."""
    return table.cast(pa.schema([f.with_nullable(True) for f in table.schema], metadata=table.schema.metadata))


def epoch_micros(column: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """Timestamps as microseconds since the epoch (one without a zone read as UTC)."""
    return column.cast(pa.timestamp("us", tz=column.type.tz)).cast(pa.int64())


def schema_of_arrow(schema: pa.Schema, names: tuple[str, ...]) -> SourceSchema:
    """The columns `names` of an Arrow schema (a Delta table's), typed as Spark types them."""
    columns = []
    for name in names:
        arrow_type = schema.field(name).type
        if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type) or arrow_type == pa.string_view():
            arrow_type = pa.string()
        columns.append(Column(name, _spark_type_of(arrow_type), arrow_type))
    return SourceSchema(tuple(columns))


def _spark_type_of(arrow_type: pa.DataType) -> str:
    if pa.types.is_decimal(arrow_type):
        return f"DECIMAL({arrow_type.precision},{arrow_type.scale})"
    spark = next((s for s, a in _SIMPLE.values() if a == arrow_type), None)
    if spark is None:
        raise TypeError(f"no Spark type for the Arrow type {arrow_type}")
    return spark


def parse_schema(ddl: str, *, where: str) -> SourceSchema:
    try:
        create = sqlglot.parse_one(f"CREATE TABLE t ({ddl})", read="spark")
    except sqlglot.errors.ParseError as exc:
        raise SpecError(f"schema does not parse as Spark DDL: {_first_error(exc)}", where=where) from None
    except RecursionError:
        raise SpecError("schema is nested too deep", where=where) from None
    defs = [d for d in create.this.expressions if isinstance(d, exp.ColumnDef)]
    if not defs:
        raise SpecError("schema declares no columns", where=where)
    columns = tuple(_column(d, where) for d in defs)
    _check_names(columns, where)
    return SourceSchema(columns)


def _column(definition: exp.ColumnDef, where: str) -> Column:
    column = _typed_column(definition, where)
    not_null = any(
        isinstance(c.args.get("kind"), exp.NotNullColumnConstraint) for c in definition.args.get("constraints") or []
    )
    return Column(column.name, column.spark_type, column.arrow_type, nullable=not not_null)


def _typed_column(definition: exp.ColumnDef, where: str) -> Column:
    name, dtype = definition.name, definition.args.get("kind")
    if dtype is None:
        raise SpecError(f"column {name!r} has no type", where=where)
    if dtype.this == _T.DECIMAL:
        precision, scale = _decimal_args(dtype, where)
        return Column(name, f"DECIMAL({precision},{scale})", pa.decimal128(precision, scale))
    if dtype.this not in _SIMPLE:
        raise SpecError(
            f"column {name!r}: type {dtype.sql('spark')} is not supported in a changelog source", where=where
        )
    spark_type, arrow_type = _SIMPLE[dtype.this]
    return Column(name, spark_type, arrow_type)


def _decimal_args(dtype: exp.DataType, where: str) -> tuple[int, int]:
    if not all(p.name.isdigit() for p in dtype.expressions):
        raise SpecError(f"{dtype.sql('spark')}: DECIMAL takes whole numbers, DECIMAL(precision, scale)", where=where)
    params = [int(p.name) for p in dtype.expressions]
    precision = params[0] if params else 10
    scale = params[1] if len(params) > 1 else 0
    return precision, scale


def unsafe_name_problem(name: str) -> str | None:
    """Why a column name cannot be used, if it cannot: names reach HTML pages (the report, the
    Great Expectations Data Docs, which do not escape them), so markup characters are refused."""
    bad = sorted({c for c in name if c in UNSAFE_NAME_CHARACTERS or ord(c) < 32})
    if bad:
        shown = ", ".join(repr(c) for c in bad)
        return f"column name {name[:40]!r} contains {shown}: names may not hold markup or control characters"
    return None


UNSAFE_NAME_CHARACTERS = frozenset("<>&\"'`")


def _check_names(columns: tuple[Column, ...], where: str) -> None:
    seen: set[str] = set()
    for col in columns:
        problem = unsafe_name_problem(col.name)
        if problem:
            raise SpecError(problem, where=where)
        if col.name.startswith(RESERVED_PREFIX):
            raise SpecError(f"column {col.name!r}: names starting with '__' are reserved", where=where)
        if col.name.lower() in seen:
            raise SpecError(f"column {col.name!r} is declared twice", where=where)
        seen.add(col.name.lower())


def _first_error(exc: sqlglot.errors.ParseError) -> str:
    errors = getattr(exc, "errors", None) or []
    return errors[0].get("description", str(exc)) if errors else str(exc).splitlines()[0]
