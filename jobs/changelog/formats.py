"""Parse one changelog file into change rows: the source columns, the row kind and the line.

Formats:
- changelog-json: JSON lines, the columns plus "op" in +I, -U, +U, -D;
- debezium-json: JSON lines with "before", "after" and "op" in c, u, d, r; an update becomes
  -U (before) then +U (after), both from the same line;
- json: JSON lines of plain rows, each an insert (an append-only source).

Arrow's JSON reader parses a file a block of whole lines (64 MiB) at a time, as it is (it skips
blank lines itself; the lines are found as positions in the bytes, never a Python object per
line). When it rejects a block, its lines are bisected until each bad line is isolated, so a good
file costs one fast parse per block and a bad one a few more per bad line, and the values that do
parse are exactly what the fast path would have produced.
"""

from __future__ import annotations

import functools
import io
import json
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from jobs.changelog.columns import KIND, LINE
from jobs.changelog.kinds import SHORT_NAMES, RowKind
from jobs.changelog.schema import SourceSchema


@dataclass(frozen=True)
class BadRow:
    line: int
    reason: str
    raw: str


@dataclass(frozen=True)
class ParsedFile:
    """Change rows in file order (columns + __kind + __line) and the rows that could not be read."""

    rows: pa.Table
    bad: tuple[BadRow, ...]
    absent: int = 0  # rows accepted although a (nullable) field was missing: counted, not silent


# A row may be this long; Arrow's reader gets blocks that hold the longest line whole.
MAX_LINE_BYTES = 64 * 1024 * 1024
# A file is parsed this many bytes at a time (staging's memory is a few times this, not the file's).
BLOCK_BYTES = 64 * 1024 * 1024
SHOWN_CHARS = 80  # how much of a value or line a message quotes


def parse_file(path: Path, fmt: str, schema: SourceSchema) -> ParsedFile:
    """The whole file at once (its blocks put together): for callers that want one table."""
    blocks = list(parse_blocks(path, fmt, schema))
    return joined(blocks) if blocks else ParsedFile(_FORMATS[fmt](schema).empty(), ())


def parse_lines(data: bytes, fmt: str, schema: SourceSchema) -> ParsedFile:
    """Lines already in memory (a Kafka topic's messages, one per line) as one block; a blank
    line is numbered and skipped, as in a file."""
    return _parse_block(_Lines(data), _FORMATS[fmt](schema))


def joined(blocks: list[ParsedFile]) -> ParsedFile:
    """Consecutive blocks of a file as one."""
    return ParsedFile(
        pa.concat_tables([b.rows for b in blocks]),
        tuple(bad for b in blocks for bad in b.bad),
        sum(b.absent for b in blocks),
    )


def parse_blocks(
    path: Path,
    fmt: str,
    schema: SourceSchema,
    block_bytes: int | None = None,
    seen: Callable[[bytes], None] | None = None,
) -> Iterator[ParsedFile]:
    """The file's change rows a block of whole lines at a time (BLOCK_BYTES unless given), in
    order, line numbers counted from the file's start: staging holds one block's bytes and rows,
    not the whole file's. `seen` gets each block's bytes before it is parsed (staging hashes the
    file with them rather than reading it twice)."""
    reader = _FORMATS[fmt](schema)
    lines_before = 0
    for data in _line_blocks(path, block_bytes or BLOCK_BYTES):
        if seen is not None:
            seen(data)
        lines = _Lines(data)
        yield _numbered_from(_parse_block(lines, reader), lines_before)
        lines_before += lines.count


def _line_blocks(path: Path, block_bytes: int) -> Iterator[bytes]:
    """The file's bytes cut after a newline every `block_bytes` or so (a longer line stays whole;
    a newline byte never occurs inside a UTF-8 character, so no character is split). The part
    after the last newline is read again with the next block rather than carried over, which
    would copy every block once more."""
    with path.open("rb") as handle:
        while chunk := handle.read(block_bytes):
            cut = chunk.rfind(b"\n") + 1
            while not cut and (more := handle.read(block_bytes)):  # a line longer than a block
                chunk += more
                cut = chunk.rfind(b"\n") + 1
            if 0 < cut < len(chunk):
                handle.seek(cut - len(chunk), os.SEEK_CUR)
                chunk = chunk[:cut]
            yield chunk


def _parse_block(lines: _Lines, reader: _Reader) -> ParsedFile:
    tables, bad = _parse_whole(lines, reader)
    rows = pa.concat_tables(tables) if tables else reader.empty()
    rows, bad_kinds = reader.to_changes(rows)
    rows, missing, absent = reader.check_absent(rows, lines.text)
    return ParsedFile(rows, _with_raw_text(bad + bad_kinds + missing, lines.text), absent)


def _numbered_from(parsed: ParsedFile, lines_before: int) -> ParsedFile:
    """A block's rows and bad rows with line numbers in the file rather than in the block."""
    if not lines_before:
        return parsed
    line = pc.add(parsed.rows.column(LINE), pa.scalar(lines_before, pa.int32()))
    rows = parsed.rows.set_column(parsed.rows.schema.get_field_index(LINE), LINE, line)
    bad = tuple(BadRow(b.line + lines_before, b.reason, b.raw) for b in parsed.bad)
    return ParsedFile(rows, bad, parsed.absent)


class _Lines:
    """A block's lines as positions in its bytes: millions of lines are never split into a Python
    object per line unless they have to be taken apart (see _parse_whole)."""

    WHITESPACE = b" \t\n\r\x0b\x0c"  # what bytes.strip() strips: a line of only these is blank

    def __init__(self, data: bytes):
        self.data = data
        ends = _newlines(data)
        self.starts = np.concatenate([[0], ends + 1])
        self.stops = np.append(ends, len(data))

    @property
    def count(self) -> int:
        """Lines in the block; the empty rest after a final newline is not a line."""
        return len(self.starts) - (1 if self.data.endswith(b"\n") or not self.data else 0)

    def text(self, number: int) -> bytes:
        return self.data[self.starts[number - 1] : self.stops[number - 1]]

    def numbers(self) -> np.ndarray:
        """The numbers of the lines that are not blank, from 1."""
        lengths = self.stops - self.starts
        first = (
            np.frombuffer(self.data, np.uint8)[np.minimum(self.starts, max(len(self.data) - 1, 0))]
            if self.data
            else np.zeros(len(lengths), np.uint8)
        )
        content = (lengths > 0) & ~np.isin(first, np.frombuffer(self.WHITESPACE, np.uint8))
        for index in np.flatnonzero((lengths > 0) & ~content):  # starts with whitespace: look closer
            content[index] = bool(self.text(int(index) + 1).strip())
        return np.flatnonzero(content) + 1

    def longest(self) -> int:
        return int((self.stops - self.starts).max())

    def pairs(self, numbers: np.ndarray) -> list[tuple[int, bytes]]:
        return [(int(number), self.text(number)) for number in numbers]


def _newlines(data: bytes, chunk: int = 1 << 26) -> np.ndarray:
    """Positions of the newline bytes, a chunk at a time (a byte-wide mask of the whole file
    would briefly double its size in memory)."""
    buffer = np.frombuffer(data, np.uint8)
    # np.nonzero rather than np.flatnonzero: a tenth of the time on a 64 MiB block.
    found = [np.nonzero(buffer[at : at + chunk] == 10)[0] + at for at in range(0, len(buffer), chunk)]
    return np.concatenate(found) if found else np.zeros(0, np.int64)


def _parse_whole(lines: _Lines, reader: _Reader) -> tuple[list[pa.Table], list[BadRow]]:
    """One parse of the block as it is, when it is valid UTF-8 and Arrow reads one row per
    non-blank line; else the lines one by one: UTF-8 checked, blank ones left out, bisected."""
    numbers = lines.numbers()
    if len(numbers) and _is_utf8(lines.data):
        try:
            table = reader.read(lines.data, lines.longest())
        except pa.ArrowInvalid:
            table = None
        if table is not None and table.num_rows == len(numbers):
            return [table.append_column(LINE, pa.array(numbers, pa.int32()))], []
    good, undecodable = _utf8_lines(lines.pairs(numbers))
    tables, bad = _parse_bisect(good, reader)
    return tables, undecodable + bad


def _is_utf8(data: bytes) -> bool:
    """Arrow's validation of the bytes as one string: a tenth of the time of decoding them into
    a Python string that nothing reads."""
    offsets = pa.array([0, len(data)], pa.int64()).buffers()[1]
    try:
        pa.Array.from_buffers(pa.large_string(), 1, [None, offsets, pa.py_buffer(data)]).validate(full=True)
        return True
    except pa.ArrowInvalid:
        return False


def shorten(text: str, limit: int = SHOWN_CHARS) -> str:
    """A value or line as a message quotes it: its first characters, and how long it was."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


def _with_raw_text(bad: list[BadRow], text: Callable[[int], bytes]) -> tuple[BadRow, ...]:
    return tuple(
        BadRow(b.line, b.reason, b.raw or text(b.line).decode("utf-8", errors="replace"))
        for b in sorted(bad, key=lambda b: b.line)
    )


def _utf8_lines(lines: list[tuple[int, bytes]]) -> tuple[list[tuple[int, bytes]], list[BadRow]]:
    """The lines that are UTF-8, and a bad row for each that is not (Arrow would take its bytes
    into a string column unchecked, and fail later)."""
    good, bad = [], []
    for number, text in lines:
        try:
            text.decode("utf-8")
            good.append((number, text))
        except UnicodeDecodeError as exc:
            raw = text.decode("utf-8", errors="replace")
            bad.append(BadRow(number, f"not valid UTF-8 (byte 0x{text[exc.start]:02x} at column {exc.start + 1})", raw))
    return good, bad


def _parse_bisect(lines: list[tuple[int, bytes]], reader: _Reader) -> tuple[list[pa.Table], list[BadRow]]:
    if not lines:
        return [], []
    try:
        table = reader.read(b"\n".join(text for _, text in lines), max(len(text) for _, text in lines))
        if table.num_rows != len(lines):
            raise pa.ArrowInvalid("more than one JSON value on one line")
    except pa.ArrowInvalid as exc:
        if len(lines) == 1:
            number, text = lines[0]
            raw = text.decode("utf-8", errors="replace")
            return [], [BadRow(number, reader.diagnose(raw, str(exc)), raw)]
        middle = len(lines) // 2
        left_tables, left_bad = _parse_bisect(lines[:middle], reader)
        right_tables, right_bad = _parse_bisect(lines[middle:], reader)
        return left_tables + right_tables, left_bad + right_bad
    numbers = pa.array([number for number, _ in lines], pa.int32())
    return [table.append_column(LINE, numbers)], []


class _Reader:
    """What differs between formats: the JSON shape and how a JSON row becomes change rows."""

    def __init__(self, schema: SourceSchema):
        self.schema = schema
        self.json_schema = self._json_schema()

    def _json_schema(self) -> pa.Schema:
        raise NotImplementedError

    def to_changes(self, table: pa.Table) -> tuple[pa.Table, list[BadRow]]:
        raise NotImplementedError

    unknown_fields = "error"  # a misspelt field is a bad row, never a silent NULL

    def read(self, data: bytes, longest_line: int) -> pa.Table:
        if longest_line > MAX_LINE_BYTES:
            raise pa.ArrowInvalid(
                f"a line of {longest_line:,} bytes is longer than the {MAX_LINE_BYTES // 2**20} MiB a row may have"
            )
        return self._read_as(self.json_schema, data, longest_line)

    def _read_as(self, schema: pa.Schema, data: bytes, longest_line: int) -> pa.Table:
        options = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior=self.unknown_fields)
        block = pj.ReadOptions(block_size=max(1 << 20, 2 * longest_line + 2))
        return pj.read_json(pa.BufferReader(data), read_options=block, parse_options=options)  # no copy

    def check_absent(self, rows: pa.Table, text: Callable[[int], bytes]) -> tuple[pa.Table, list[BadRow], int]:
        """Rows whose JSON leaves a column out: a bad row when the column is NOT NULL, else
        counted. Only rows with a NULL can lack a field, so only those are read again."""
        nulls = [pc.is_null(rows.column(c.name)) for c in self.schema.columns]
        if not nulls or rows.num_rows == 0:
            return rows, [], 0
        suspects = rows.filter(functools.reduce(pc.or_, nulls)).column(LINE).to_pylist()
        bad, absent = [], 0
        for line in dict.fromkeys(suspects):
            missing = [c for c in self.schema.columns if c.name not in self.fields_of(text(line))]
            required = [c.name for c in missing if not c.nullable]
            if required:
                bad.append(BadRow(line, f"missing field {required[0]!r} (the column is NOT NULL)", ""))
            elif missing:
                absent += 1
        if bad:
            keep = pc.invert(pc.is_in(rows.column(LINE), value_set=pa.array([b.line for b in bad], pa.int32())))
            rows = rows.filter(keep)
        return rows, bad, absent

    def fields_of(self, line: bytes) -> set[str]:
        return set(json.loads(line))

    def empty(self) -> pa.Table:
        return self.json_schema.empty_table().append_column(LINE, pa.array([], pa.int32()))

    def change_rows(self, table: pa.Table, kinds: pa.Array) -> pa.Table:
        columns = {c.name: table.column(c.name) for c in self.schema.columns}
        columns[KIND] = kinds
        columns[LINE] = table.column(LINE)
        return pa.table(columns)

    def diagnose(self, raw: str, arrow_message: str) -> str:
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            if exc.msg == "Extra data":
                return f"more than one JSON value on one line (the second starts at column {exc.colno})"
            return f"malformed JSON: {exc.msg} at column {exc.colno}"
        except RecursionError:
            return "JSON nested too deep"
        if not isinstance(value, dict):
            return f"expected a JSON object, got {type(value).__name__}"
        unknown = [k for k in value if k not in self.json_schema.names] if self.unknown_fields == "error" else []
        if unknown:
            return f"unknown field {shorten(unknown[0], 40)!r} (the fields are: {', '.join(self.json_schema.names)})"
        types = {c.name: c.spark_type for c in self.schema.columns}
        return _first_bad_field(value, self.json_schema, types) or shorten(_clean(arrow_message), 200)


class _ChangelogJson(_Reader):
    def _json_schema(self) -> pa.Schema:
        return self.schema.arrow().append(pa.field("op", pa.string()))

    def to_changes(self, table):
        kinds = pc.index_in(table.column("op"), value_set=pa.array(SHORT_NAMES))
        ok = pc.fill_null(pc.is_valid(kinds), False)
        bad = [BadRow(line, _bad_op(op, "+I, -U, +U, -D"), "") for line, op in _rows_where(table, pc.invert(ok), "op")]
        good = table.filter(ok)
        return self.change_rows(good, pc.cast(kinds.filter(ok), pa.int8())), bad


class _PlainJson(_Reader):
    def _json_schema(self) -> pa.Schema:
        return self.schema.arrow()

    def to_changes(self, table):
        kinds = pa.array([RowKind.INSERT] * table.num_rows, pa.int8())
        return self.change_rows(table, kinds), []


class _DebeziumJson(_Reader):
    """c/r: +I(after); u: -U(before), +U(after); d: -D(before). Fields beside before, after and
    op (source, ts_ms) are Debezium's own and ignored. An envelope may come wrapped in
    {"schema": ..., "payload": {...}} (Debezium's JSON converter with schemas enabled): a line
    whose top level has no op is read from its payload; one with an op is not wrapped, and a
    payload beside that op is a field of its own, ignored like the others."""

    unknown_fields = "ignore"
    SIDES = ("before", "after", "op")

    def read(self, data: bytes, longest_line: int) -> pa.Table:
        """The envelopes' own fields first (a third less time than with a payload's fields too);
        the block again with the payload's only when some line has no op of its own."""
        plain = self._read_as(pa.schema([self.json_schema.field(side) for side in self.SIDES]), data, longest_line)
        if plain.column("op").null_count:
            return self._read_as(self.json_schema, data, longest_line)
        payload = self.json_schema.field("payload")
        return plain.append_column(payload, pa.nulls(plain.num_rows, payload.type))

    def fields_of(self, line: bytes) -> set[str]:
        value = json.loads(line)
        value = value["payload"] if isinstance(value.get("payload"), dict) else value
        images = [value.get(side) for side in ("before", "after") if isinstance(value.get(side), dict)]
        return set.intersection(*[set(image) for image in images]) if images else set()

    def _json_schema(self) -> pa.Schema:
        image = pa.struct(list(self.schema.arrow()))
        envelope = [("before", image), ("after", image), ("op", pa.string())]
        return pa.schema([*envelope, ("payload", pa.struct(envelope))])

    def to_changes(self, table):
        table = self._unwrapped(table)
        op = table.column("op")
        known = pc.fill_null(pc.is_in(op, value_set=pa.array(["c", "r", "u", "d"])), False)
        missing_before = pc.fill_null(
            pc.and_(pc.is_in(op, value_set=pa.array(["u", "d"])), pc.is_null(table.column("before"))), False
        )
        missing_after = pc.fill_null(
            pc.and_(pc.is_in(op, value_set=pa.array(["c", "r", "u"])), pc.is_null(table.column("after"))), False
        )
        ok = pc.and_(known, pc.invert(pc.or_(missing_before, missing_after)))
        rejected = table.filter(pc.invert(ok))
        bad = [
            BadRow(line, _debezium_problem(value, no_before), "")
            for line, value, no_before in zip(
                rejected.column(LINE).to_pylist(),
                rejected.column("op").to_pylist(),
                missing_before.filter(pc.invert(ok)).to_pylist(),
            )
        ]
        return self._expand(table.filter(ok) if bad else table), bad

    def _unwrapped(self, table: pa.Table) -> pa.Table:
        """Each row's envelope: its payload's where it has no op of its own, else its own fields."""
        payload = table.column("payload")
        if payload.null_count == len(payload):
            return table.select([*self.SIDES, LINE])
        wrapped = pc.and_(pc.is_valid(payload), pc.is_null(table.column("op")))
        sides = {side: pc.if_else(wrapped, pc.struct_field(payload, side), table.column(side)) for side in self.SIDES}
        return pa.table({**sides, LINE: table.column(LINE)})

    def _expand(self, table: pa.Table) -> pa.Table:
        op = table.column("op")
        has_before = pc.is_in(op, value_set=pa.array(["u", "d"]))
        has_after = pc.is_in(op, value_set=pa.array(["c", "r", "u"]))
        before = self._images(
            table, "before", has_before, pc.if_else(pc.equal(op, "u"), RowKind.UPDATE_BEFORE, RowKind.DELETE)
        )
        after = self._images(
            table, "after", has_after, pc.if_else(pc.equal(op, "u"), RowKind.UPDATE_AFTER, RowKind.INSERT)
        )
        return pa.concat_tables([before, after]).take(_interleaved(has_before, has_after))

    def _images(self, table: pa.Table, side: str, mask, kinds) -> pa.Table:
        picked = table.select([side, LINE]).filter(mask)
        columns = {c.name: pc.struct_field(picked.column(side), c.name) for c in self.schema.columns}
        columns[KIND] = pc.cast(kinds.filter(mask), pa.int8())
        columns[LINE] = picked.column(LINE)
        return pa.table(columns)


def _interleaved(has_before: pa.ChunkedArray, has_after: pa.ChunkedArray) -> np.ndarray:
    """The order that puts the before-images (first) and after-images of the lines back in line
    order, each line's -U before its +U: positions into the before rows followed by the after rows."""
    before, after = has_before.to_numpy().astype(np.int64), has_after.to_numpy().astype(np.int64)
    first = np.cumsum(before + after) - before - after  # each line's first output position
    order = np.empty(int(before.sum() + after.sum()), np.int64)
    order[first[before == 1]] = np.arange(int(before.sum()))
    order[(first + before)[after == 1]] = before.sum() + np.arange(int(after.sum()))
    return order


_FORMATS = {"changelog-json": _ChangelogJson, "debezium-json": _DebeziumJson, "json": _PlainJson}


def _rows_where(table: pa.Table, mask, column: str) -> list[tuple[int, object]]:
    picked = table.filter(mask)
    return list(zip(picked.column(LINE).to_pylist(), picked.column(column).to_pylist()))


def _debezium_problem(op: object, missing_before: bool) -> str:
    if op not in ("c", "r", "u", "d"):
        return _bad_op(op, "c, r, u, d")
    return f"op '{op}' needs a 'before' image" if missing_before else f"op '{op}' needs an 'after' image"


def _bad_op(value: object, expected: str) -> str:
    return "missing op" if value is None else f"unknown op {value!r} (expected one of {expected})"


def _first_bad_field(value: dict, schema: pa.Schema, types: dict[str, str], prefix: str = "") -> str | None:
    """Parse each field on its own to name the one whose value does not fit its type."""
    for field in schema:
        if field.name not in value or value[field.name] is None:
            continue
        item = value[field.name]
        if pa.types.is_struct(field.type) and isinstance(item, dict):
            nested = _first_bad_field(item, pa.schema(list(field.type)), types, f"{prefix}{field.name}.")
            if nested:
                return nested
            continue
        options = pj.ParseOptions(explicit_schema=pa.schema([field]), unexpected_field_behavior="ignore")
        try:
            pj.read_json(io.BytesIO(json.dumps({field.name: item}).encode()), parse_options=options)
        except pa.ArrowInvalid:
            wanted = types.get(field.name, str(field.type))
            return f"column '{prefix}{field.name}': value {shorten(json.dumps(item))} does not fit {wanted}"
    return None


def _clean(message: str) -> str:
    return re.sub(r"\s+in row \d+$", "", message.strip())
