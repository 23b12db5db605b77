import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.changelog.formats import parse_blocks, parse_file
from jobs.changelog.schema import parse_schema
from jobs.errors import SpecError

SCHEMA = parse_schema("order_id BIGINT, pId BIGINT, income BIGINT", where="test")


def write(tmp_path, lines, name="f.json"):
    path = tmp_path / name
    path.write_text("\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n")
    return path


def kinds_and_lines(parsed):
    return list(zip(parsed.rows.column("__kind").to_pylist(), parsed.rows.column("__line").to_pylist()))


def test_changelog_json_rows_keep_file_order_kinds_and_line_numbers(tmp_path):
    path = write(
        tmp_path,
        [
            {"order_id": 1, "pId": 1, "income": 5, "op": "+I"},
            "",
            {"order_id": 1, "pId": 1, "income": 5, "op": "-U"},
            {"order_id": 1, "pId": 1, "income": 7, "op": "+U"},
            {"order_id": 1, "pId": 1, "income": 7, "op": "-D"},
        ],
    )
    parsed = parse_file(path, "changelog-json", SCHEMA)
    assert parsed.bad == ()
    assert kinds_and_lines(parsed) == [(0, 1), (1, 3), (2, 4), (3, 5)]
    assert parsed.rows.column("income").to_pylist() == [5, 5, 7, 7]


@pytest.mark.parametrize(
    "line, reason",
    [
        ('{"order_id": 2, "pId": 1, "income": 5, "op": "+X"}', "unknown op '+X'"),
        ('{"order_id": 2, "pId": 1, "income": 5}', "missing op"),
        ('{"order_id": 2, "pId": "one", "income": 5, "op": "+I"}', "column 'pId': value \"one\" does not fit BIGINT"),
        ('{"order_id": 2, "pId": 1, "income": 5.5, "op": "+I"}', "column 'income': value 5.5 does not fit BIGINT"),
        ('{"order_id": 2, "pId": 1', "malformed JSON"),
        ("[1, 2]", "expected a JSON object"),
    ],
)
def test_each_bad_line_is_named_with_its_line_and_reason_and_good_lines_survive(tmp_path, line, reason):
    good = {"order_id": 1, "pId": 1, "income": 5, "op": "+I"}
    path = write(tmp_path, [good, line, good])
    parsed = parse_file(path, "changelog-json", SCHEMA)
    assert [b.line for b in parsed.bad] == [2]
    assert reason in parsed.bad[0].reason
    assert parsed.bad[0].raw == line
    assert kinds_and_lines(parsed) == [(0, 1), (0, 3)]


def test_debezium_update_becomes_update_before_then_after_from_the_same_line(tmp_path):
    image = {"order_id": 1, "pId": 1, "income": 5}
    path = write(
        tmp_path,
        [
            {"before": None, "after": image, "op": "c"},
            {"before": image, "after": {**image, "income": 9}, "op": "u"},
            {"before": {**image, "income": 9}, "after": None, "op": "d"},
            {"before": None, "after": {**image, "order_id": 2}, "op": "r"},
        ],
    )
    parsed = parse_file(path, "debezium-json", SCHEMA)
    assert kinds_and_lines(parsed) == [(0, 1), (1, 2), (2, 2), (3, 3), (0, 4)]
    assert parsed.rows.column("income").to_pylist() == [5, 5, 9, 9, 5]


def test_debezium_rows_missing_their_image_are_bad(tmp_path):
    path = write(
        tmp_path,
        [
            {"before": None, "after": None, "op": "d"},
            {"before": None, "after": None, "op": "u"},
            {"before": None, "after": None, "op": "x"},
        ],
    )
    reasons = [b.reason for b in parse_file(path, "debezium-json", SCHEMA).bad]
    assert reasons == [
        "op 'd' needs a 'before' image",
        "op 'u' needs a 'before' image",
        "unknown op 'x' (expected one of c, r, u, d)",
    ]


def _wrapped(envelope: dict) -> dict:
    return {"schema": {"type": "struct", "optional": False}, "payload": envelope}


@pytest.mark.parametrize("with_wrapped_line", [False, True])
def test_debezium_reads_a_payload_only_where_the_line_has_no_op_of_its_own(tmp_path, with_wrapped_line):
    """A line with its own op is not wrapped: a payload beside it is ignored like Debezium's
    other fields, whether or not another line of the block is wrapped (and read again)."""
    image = {"order_id": 1, "pId": 1, "income": 5}
    decoy = {"before": None, "after": {**image, "income": 99}, "op": "c"}
    lines = [{"before": None, "after": image, "op": "c", "payload": decoy}]
    if with_wrapped_line:
        lines.append(_wrapped({"before": image, "after": {**image, "income": 7}, "op": "u"}))
    parsed = parse_file(write(tmp_path, lines), "debezium-json", SCHEMA)
    assert parsed.bad == ()
    expected = [(0, 1), (1, 2), (2, 2)] if with_wrapped_line else [(0, 1)]
    assert kinds_and_lines(parsed) == expected
    assert parsed.rows.column("income").to_pylist() == ([5, 5, 7] if with_wrapped_line else [5])


def test_debezium_wrapped_and_plain_envelopes_mix_in_line_order(tmp_path):
    image = {"order_id": 1, "pId": 1, "income": 5}
    path = write(
        tmp_path,
        [
            _wrapped({"before": None, "after": image, "op": "c"}),
            {"before": image, "after": {**image, "income": 9}, "op": "u"},
            _wrapped({"before": {**image, "income": 9}, "after": None, "op": "d"}),
            _wrapped({"before": None, "after": None, "op": "d"}),
        ],
    )
    parsed = parse_file(path, "debezium-json", SCHEMA)
    assert kinds_and_lines(parsed) == [(0, 1), (1, 2), (2, 2), (3, 3)]
    assert parsed.rows.column("income").to_pylist() == [5, 5, 9, 9]
    assert [(b.line, b.reason) for b in parsed.bad] == [(4, "op 'd' needs a 'before' image")]


def test_plain_json_rows_are_all_inserts(tmp_path):
    path = write(tmp_path, [{"order_id": 1, "pId": 1, "income": 5}, {"order_id": 2, "pId": 2, "income": 6}])
    assert kinds_and_lines(parse_file(path, "json", SCHEMA)) == [(0, 1), (0, 2)]


def test_timestamps_and_decimals_parse_from_json_strings(tmp_path):
    schema = parse_schema("id BIGINT, ts TIMESTAMP, price DECIMAL(10,2)", where="test")
    path = write(
        tmp_path,
        [
            {"id": 1, "ts": "2026-11-21 09:01:30", "price": "3.25", "op": "+I"},
            {"id": 2, "ts": "2026-11-21T10:00:00+01:00", "price": 1.5, "op": "+I"},
        ],
    )
    rows = parse_file(path, "changelog-json", schema).rows.to_pylist()
    assert [r["ts"].isoformat() for r in rows] == ["2026-11-21T09:01:30+00:00", "2026-11-21T09:00:00+00:00"]
    assert [str(r["price"]) for r in rows] == ["3.25", "1.50"]


@pytest.mark.parametrize(
    "ddl, message",
    [
        ("id BIGINT, id STRING", "declared twice"),
        ("__w INT", "reserved"),
        ("id ARRAY<INT>", "not supported"),
        ("id BIGINT (", "does not parse"),
    ],
)
def test_bad_schemas_are_spec_errors(ddl, message):
    with pytest.raises(SpecError, match=message):
        parse_schema(ddl, where="q.yaml: sources.orders.schema")


def _bad(parsed):
    return [(b.line, b.reason) for b in parsed.bad]


def test_a_line_that_is_not_utf8_is_a_bad_row_and_the_others_still_load(tmp_path):
    path = tmp_path / "f.json"
    path.write_bytes(
        b'{"order_id": 1, "pId": 1, "income": 5, "op": "+I"}\n'
        b'{"order_id": 2, "pId": 1, "income": 5, "op": "+I", "x": "\xff"}\n'
    )
    parsed = parse_file(path, "changelog-json", SCHEMA)
    assert _bad(parsed) == [(2, "not valid UTF-8 (byte 0xff at column 58)")]
    assert parsed.rows.column("order_id").to_pylist() == [1]


def test_two_json_values_on_one_line_are_a_bad_row_not_a_crash(tmp_path):
    path = write(
        tmp_path,
        [
            '{"order_id": 1, "pId": 1, "income": 5, "op": "+I"}{"order_id": 2, "pId": 1, "income": 5, "op": "+I"}',
            {"order_id": 3, "pId": 1, "income": 5, "op": "+I"},
        ],
    )
    parsed = parse_file(path, "changelog-json", SCHEMA)
    assert _bad(parsed) == [(1, "more than one JSON value on one line (the second starts at column 51)")]
    assert kinds_and_lines(parsed) == [(0, 2)]


def test_a_misspelt_field_is_a_bad_row_never_a_silent_null(tmp_path):
    parsed = parse_file(write(tmp_path, [{"order_id": 1, "pId": 1, "Income": 5, "op": "+I"}]), "changelog-json", SCHEMA)
    assert _bad(parsed) == [(1, "unknown field 'Income' (the fields are: order_id, pId, income, op)")]


def test_a_missing_field_is_null_and_counted_unless_the_column_is_not_null(tmp_path):
    lines = [{"order_id": 1, "pId": 1, "op": "+I"}, {"order_id": 2, "pId": 1, "income": None, "op": "+I"}]
    parsed = parse_file(write(tmp_path, lines), "changelog-json", SCHEMA)
    assert parsed.bad == () and parsed.absent == 1  # an explicit null is not an absent field
    strict = parse_schema("order_id BIGINT, pId BIGINT, income BIGINT NOT NULL", where="test")
    parsed = parse_file(write(tmp_path, lines), "changelog-json", strict)
    assert _bad(parsed) == [(1, "missing field 'income' (the column is NOT NULL)")]
    assert parsed.rows.column("order_id").to_pylist() == [2]


def test_a_long_value_loads_and_a_message_quotes_only_its_start(tmp_path):
    schema = parse_schema("order_id BIGINT, note STRING, n BIGINT", where="test")
    big = "x" * 3_000_000
    path = write(
        tmp_path,
        [
            {"order_id": 1, "note": "a", "op": "+I"},
            {"order_id": 2, "note": big, "op": "+I"},
            {"order_id": 3, "note": "b", "n": big, "op": "+I"},
        ],
    )
    parsed = parse_file(path, "changelog-json", schema)
    assert (
        parsed.rows.column("order_id").to_pylist() == [1, 2] and len(parsed.rows.column("note")[1].as_py()) == 3_000_000
    )
    ((line, reason),) = _bad(parsed)
    assert line == 3 and "does not fit BIGINT" in reason and len(reason) < 200 and "3,000,002 characters" in reason


# Debezium lines as a model reads them, one at a time: which change rows each gives, or why it is bad.
_OPS = st.sampled_from(["c", "r", "u", "d", "x", None])


def _modelled(op, before, after) -> tuple[list[tuple[int, int]], str | None]:
    """(kind, income) per change row of one line, or the line's reason to be bad."""
    if op not in ("c", "r", "u", "d"):
        return [], f"unknown op {op!r} (expected one of c, r, u, d)" if op is not None else "missing op"
    if op in ("u", "d") and before is None:
        return [], f"op '{op}' needs a 'before' image"
    if op in ("c", "r", "u") and after is None:
        return [], f"op '{op}' needs an 'after' image"
    kinds = {"c": [(0, after)], "r": [(0, after)], "u": [(1, before), (2, after)], "d": [(3, before)]}[op]
    return [(kind, image) for kind, image in kinds], None


@settings(max_examples=150, deadline=None)
@given(
    lines=st.lists(
        st.tuples(
            _OPS, st.one_of(st.none(), st.integers(0, 9)), st.one_of(st.none(), st.integers(0, 9)), st.booleans()
        ),
        max_size=25,
    )
)
def test_debezium_lines_become_the_change_rows_a_line_by_line_reading_gives(lines, tmp_path_factory):
    """Any mix of ops (unknown and missing ones too), present and missing images, wrapped and
    bare envelopes: the rows, their kinds and line numbers, and the bad lines with their reasons."""
    texts, expected_rows, expected_bad = [], [], []
    for number, (op, before, after, wrapped) in enumerate(lines, start=1):
        image = {
            k: None if v is None else {"order_id": number, "pId": 1, "income": v}
            for k, v in (("before", before), ("after", after))
        }
        envelope = {**image, **({"op": op} if op is not None else {})}
        texts.append(json.dumps(_wrapped(envelope) if wrapped and op is not None else envelope))
        rows, reason = _modelled(op, before, after)
        expected_rows += [(kind, number, income) for kind, income in rows]
        expected_bad += [(number, reason)] if reason else []
    path = tmp_path_factory.mktemp("debezium") / "f.json"
    path.write_text("\n".join(texts) + "\n")
    parsed = parse_file(path, "debezium-json", SCHEMA)
    rows = parsed.rows
    found = zip(rows.column("__kind").to_pylist(), rows.column("__line").to_pylist(), rows.column("income").to_pylist())
    assert list(found) == expected_rows
    assert [(b.line, b.reason) for b in parsed.bad] == expected_bad


# Blank lines (by bytes.strip(): spaces, tabs, CR, VT, FF) are skipped and every row keeps its own
# line number, whether Arrow reads the file at once or it is taken apart line by line (a bad line
# elsewhere in the file, or a blank line Arrow itself would not skip).
_BLANKS = st.sampled_from(["", " ", "\t", "\r", "  \r", "\x0c", "\x0b "])


@settings(max_examples=150, deadline=None)
@given(
    entries=st.lists(st.one_of(_BLANKS, st.integers(0, 99)), max_size=30),
    crlf=st.booleans(),
    one_bad_line=st.booleans(),
)
def test_rows_keep_their_line_numbers_among_blank_lines(entries, crlf, one_bad_line, tmp_path_factory):
    lines = [
        e if isinstance(e, str) else json.dumps({"order_id": e, "pId": 1, "income": e, "op": "+I"}) for e in entries
    ] + (["{not json"] if one_bad_line else [])
    path = tmp_path_factory.mktemp("blanks") / "f.json"
    path.write_bytes(("\r\n" if crlf else "\n").join(lines).encode())
    parsed = parse_file(path, "changelog-json", SCHEMA)
    expected = [(n, e) for n, e in enumerate(entries, start=1) if not isinstance(e, str)]
    assert list(zip(parsed.rows.column("__line").to_pylist(), parsed.rows.column("income").to_pylist())) == expected
    assert [b.line for b in parsed.bad] == ([len(lines)] if one_bad_line else [])


@pytest.mark.parametrize("block_bytes", [1, 40, 97, 1 << 20])
def test_a_file_parsed_in_blocks_gives_the_rows_and_bad_rows_of_one_parse_with_file_line_numbers(tmp_path, block_bytes):
    image = {"order_id": 1, "pId": 1, "income": 5}
    lines = [
        {"before": None, "after": image, "op": "c"},
        "",
        "   ",
        {"before": image, "after": {**image, "income": 9}, "op": "u"},
        '{"before": null, "after": {"order_id": 2, "pId": 1',
        "",
        {"before": None, "after": {"order_id": 3, "income": 1}, "op": "c"},  # pId left out
        {"before": {**image, "income": 9}, "after": None, "op": "d"},
    ]
    path = write(tmp_path, lines)
    one_parse = parse_file(path, "debezium-json", SCHEMA)
    blocks = list(parse_blocks(path, "debezium-json", SCHEMA, block_bytes))
    if block_bytes == 1:
        assert len(blocks) == len(lines)  # each block one line: a line is never cut
    else:
        assert (len(blocks) > 1) == (block_bytes < path.stat().st_size)
    assert [row for b in blocks for row in b.rows.to_pylist()] == one_parse.rows.to_pylist()
    assert kinds_and_lines(one_parse) == [(0, 1), (1, 4), (2, 4), (0, 7), (3, 8)]
    assert [(b.line, b.raw) for block in blocks for b in block.bad] == [(5, lines[4])]
    assert sum(b.absent for b in blocks) == one_parse.absent == 1
