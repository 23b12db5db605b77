"""Stream equals batch for random changelogs on both sides of every join type, for
deduplication keeping the first or last row, for UNION ALL, and for join-then-aggregate (a
two-stage plan whose intermediate join table is a multiset)."""

import json
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from jobs.spec.model import Settings
from tests.integration.conftest import run_both, same_rows
from tests.strategies import SCHEMA, changelogs, examples, small_work_settings

JOIN_KINDS = ["JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL OUTER JOIN"]


@st.composite
def two_source_queries(draw) -> tuple[str, dict]:
    """(SQL, sink settings)."""
    shape = draw(st.sampled_from(["join", "join_aggregate", "dedup", "dedup_aggregate", "union"]))
    if shape == "join":
        extra = draw(st.sampled_from(["", " AND t.x > u.x"]))
        kind = draw(st.sampled_from(JOIN_KINDS))
        return (
            f"SELECT t.id, t.g, t.x, u.id AS uid, u.s FROM t {kind} u ON t.g = u.g{extra}",
            {"changelog_mode": "retract"},
        )
    if shape == "join_aggregate":
        kind = draw(st.sampled_from(["JOIN", "LEFT JOIN"]))
        return (
            f"SELECT t.g, COUNT(*) AS n, SUM(u.x) AS sx, MAX(u.s) AS ms FROM t {kind} u ON t.g = u.g GROUP BY t.g",
            {},
        )
    direction = draw(st.sampled_from(["ASC", "DESC"]))
    dedup = f"(SELECT id, g, x, ROW_NUMBER() OVER (PARTITION BY g ORDER BY id {direction}) AS rn FROM t) d WHERE rn = 1"
    if shape == "dedup":
        return f"SELECT g, id, x FROM {dedup}", {}
    if shape == "dedup_aggregate":
        return f"SELECT x, COUNT(*) AS n, MIN(id) AS first_id FROM {dedup} GROUP BY x", {}
    return (
        "SELECT g, SUM(x) AS sx, COUNT(*) AS n FROM (SELECT g, x FROM t UNION ALL SELECT g, x FROM u) v GROUP BY g",
        {},
    )


def write_case(folder: Path, t_events, u_events, sql: str, sink: dict, rows_per_batch: int) -> Path:
    sources = {}
    for name, events in (("t", t_events), ("u", u_events)):
        (folder / name).mkdir(parents=True)
        (folder / name / "000.json").write_text("".join(json.dumps(e) + "\n" for e in events))
        sources[name] = {"path": name, "format": "changelog-json", "schema": SCHEMA, "primary_key": ["id"]}
    spec = {"name": "prop", "sql": sql, "sources": sources, "stream": {"rows_per_batch": rows_per_batch}}
    if sink:
        spec["sink"] = sink
    path = folder / "prop.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def expanded(rows: list[dict]) -> list[dict]:
    """A retract sink's rows, each as many times as its copy count."""
    out = []
    for row in rows:
        copies = row.pop("__count", 1)
        out += [row] * copies
    return out


def _blank(op: str, key: int) -> dict:
    return {"id": key, "g": None, "x": None, "y": None, "s": None, "op": op}


# Found by this test in CI: no t row has a join key, so the join stage never emits a change and
# the aggregate stage read a changelog that was never staged.
NO_MATCH_UNDER_AGGREGATE = (
    [_blank("+I", 0), _blank("-D", 0), _blank("+I", 1), _blank("-D", 1)],
    [{"id": 0, "g": 0, "x": None, "y": 0.5, "s": None, "op": "+I"}],
    ("SELECT t.g, COUNT(*) AS n, SUM(u.x) AS sx, MAX(u.s) AS ms FROM t JOIN u ON t.g = u.g GROUP BY t.g", {}),
    3,
)


@pytest.mark.slow
@settings(max_examples=examples(9), deadline=None, suppress_health_check=list(HealthCheck))
@example(*NO_MATCH_UNDER_AGGREGATE, Settings())
@given(
    changelogs(max_events=10), changelogs(max_events=10), two_source_queries(), st.integers(3, 8), small_work_settings()
)
def test_stream_equals_batch_for_joins_dedup_and_union(spark, t_events, u_events, query, rows_per_batch, small_work):
    sql, sink = query
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        result = run_both(
            write_case(folder, t_events, u_events, sql, sink, rows_per_batch), folder / "runs", small_work
        )
        stream = expanded([dict(r) for r in result.stream])
        key = lambda r: json.dumps(r, sort_keys=True, default=str)  # noqa: E731
        assert same_rows(sorted(stream, key=key), sorted(result.batch, key=key)), (sql, stream, result.batch)
