"""A fuzzer over changelog lines: valid lines, some mutated at random (bytes flipped or dropped,
fields renamed, dropped or retyped, values swapped for others, lines glued together, invalid
UTF-8). Two-sided: every line left as it was must load, holding exactly what it says; every
mutated line must come out as either a bad row with its line number and a reason, or a row
holding exactly what the line says (a field the line leaves out is NULL and counted). Never a
traceback, never a silent change, never a good line refused."""

from __future__ import annotations

import json
import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobs.changelog.formats import parse_file
from jobs.changelog.schema import parse_schema

SCHEMA = parse_schema("order_id BIGINT, pId BIGINT, income DOUBLE, note STRING", where="fuzz")
COLUMNS = [c.name for c in SCHEMA.columns]


def _valid(draw) -> dict:
    return {
        "order_id": draw(st.integers(-(2**40), 2**40)),
        "pId": draw(st.one_of(st.none(), st.integers(0, 9))),
        "income": draw(st.one_of(st.none(), st.floats(-1e9, 1e9, allow_nan=False))),
        "note": draw(st.one_of(st.none(), st.text(max_size=12))),
        "op": draw(st.sampled_from(["+I", "-U", "+U", "-D"])),
    }


MUTATIONS = ["flip", "drop", "rename", "remove", "retype", "glue", "utf8", "truncate"]


def _mutate(draw, line: bytes, row: dict) -> bytes:
    kind = draw(st.sampled_from(MUTATIONS))
    if kind == "flip" and line:
        at = draw(st.integers(0, len(line) - 1))
        return line[:at] + bytes([draw(st.integers(32, 126))]) + line[at + 1 :]
    if kind == "drop" and line:
        at = draw(st.integers(0, len(line) - 1))
        return line[:at] + line[at + 1 :]
    if kind in ("rename", "remove", "retype"):
        field = draw(st.sampled_from(COLUMNS + ["op"]))
        changed = dict(row)
        value = changed.pop(field)
        if kind == "rename":
            changed[field.upper() if field != field.upper() else field + "_"] = value
        elif kind == "retype":
            changed[field] = draw(st.sampled_from(["x", [1], {"a": 1}, True, 1.5, "1e3"]))
        return json.dumps(changed).encode()
    if kind == "glue":
        return line + line
    if kind == "utf8":
        return line[:-1] + b"\xc3\x28" + line[-1:]
    if kind == "truncate" and len(line) > 1:
        return line[: draw(st.integers(1, len(line) - 1))]
    return line


@st.composite
def changelog_files(draw) -> list[tuple[bytes, bool]]:
    """(line, mutated): a valid line, mutated or not (about one in three is left as it is)."""
    lines = []
    for _ in range(draw(st.integers(1, 12))):
        row = _valid(draw)
        line, mutated = json.dumps(row).encode(), draw(st.integers(0, 2)) > 0
        lines.append((_mutate(draw, line, row) if mutated else line, mutated))
    return lines


def _same(expected, actual) -> bool:
    if isinstance(expected, float) or isinstance(actual, float):
        return (expected is None) == (actual is None) and (expected is None or math.isclose(expected, actual))
    return expected == actual


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=changelog_files())
def test_every_good_line_loads_and_every_other_is_a_located_bad_row_or_exactly_what_it_says(tmp_path, lines):
    path = tmp_path / "fuzz.json"
    path.write_bytes(b"\n".join(line for line, _ in lines) + b"\n")
    parsed = parse_file(path, "changelog-json", SCHEMA)
    bad = {b.line: b.reason for b in parsed.bad}
    assert all(reason and "\n" not in reason for reason in bad.values())
    rows = {r["__line"]: r for r in parsed.rows.to_pylist()}
    assert not set(bad) & set(rows)
    absent = 0
    for number, (line, mutated) in enumerate(lines, start=1):
        assert mutated or number not in bad, f"line {number} is a valid change, refused: {bad.get(number)}: {line!r}"
        if number in bad:
            continue
        assert number in rows, f"line {number} neither loaded nor reported: {line!r}"
        value = json.loads(line)
        for column in COLUMNS:
            assert _same(value.get(column), rows[number][column]), (line, column)
        absent += any(column not in value for column in COLUMNS)
    assert parsed.absent == absent
