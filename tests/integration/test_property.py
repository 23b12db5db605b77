"""The core property: for any valid changelog and any supported query, the stream equals the
batch, and the sink's change feed is a valid retract stream that replays to the sink table."""

import json
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from jobs.spec.model import Settings
from tests.integration.conftest import run_both, same_rows
from tests.strategies import SCHEMA, changelogs, examples, queries, small_work_settings


def write_case(folder: Path, events: list[dict], files: int, sql: str, key, rows_per_batch: int) -> Path:
    data = folder / "t"
    data.mkdir(parents=True)
    size = -(-len(events) // files)
    for i in range(files):
        chunk = events[i * size : (i + 1) * size]
        (data / f"{i:03d}.json").write_text("".join(json.dumps(e) + "\n" for e in chunk))
    spec = {
        "name": "prop",
        "sql": sql,
        "sources": {"t": {"path": "t", "format": "changelog-json", "schema": SCHEMA, "primary_key": ["id"]}},
        "stream": {"rows_per_batch": rows_per_batch},
    }
    if key is not None:
        spec["sink"] = {"primary_key": key}
    path = folder / "prop.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def replay(feed) -> list[dict]:
    """Apply the change feed in commit order, checking every retraction against what is live."""
    live: dict[str, dict] = {}
    rank = {"update_preimage": 0, "delete": 0, "insert": 1, "update_postimage": 1}
    rows = sorted(feed.to_pylist(), key=lambda r: (r["_commit_version"], rank[r["_change_type"]]))
    for row in rows:
        image = {k: v for k, v in row.items() if not k.startswith("_")}
        ident = json.dumps(image, sort_keys=True, default=str)
        if rank[row["_change_type"]] == 0:
            assert ident in live, f"ghost retraction {row}"
            del live[ident]
        else:
            live[ident] = image
    return list(live.values())


# Found by this test (as Hypothesis shrank it): group (3, 'c') appears in the last micro-batch,
# and its values, in an Arrow table with an empty batch before them, were dropped by pyspark's
# createDataFrame (arrow_frames.py). Fails without frame_of.
LOST_VALUES = [
    (6, None, None, None, "+I"),
    (0, None, None, None, "+I"),
    (5, None, 4, "a", "+I"),
    (5, None, 4, "a", "-U"),
    (5, 3, None, "a", "+U"),
    (4, None, -4, "a", "+I"),
    (3, 3, None, None, "+I"),
    (6, None, None, None, "-D"),
    (3, 3, None, None, "-D"),
    (2, None, -1, "a", "+I"),
    (0, None, None, None, "-D"),
    (2, None, -1, "a", "-U"),
    (2, None, None, "a", "+U"),
    (1, 2, None, "c", "+I"),
    (5, 3, None, "a", "-D"),
    (6, 0, 5, None, "+I"),
    (1, 2, None, "c", "-D"),
    (4, None, -4, "a", "-D"),
    (1, None, None, None, "+I"),
    (0, None, None, "c", "+I"),
    (4, 3, 0, "c", "+I"),
]
LOST_Y = {9: 0.5, 11: 0.5, 12: 0.001, 13: 1.25, 15: 1.25, 16: 1.25}  # y by event position


def _lost_values() -> list[dict]:
    return [
        {"id": i, "g": g, "x": x, "y": LOST_Y.get(n), "s": s, "op": op}
        for n, (i, g, x, s, op) in enumerate(LOST_VALUES)
    ]


@pytest.mark.slow
@settings(max_examples=examples(10), deadline=None, suppress_health_check=list(HealthCheck))
@given(changelogs(), queries, st.integers(1, 6), st.integers(1, 3), small_work_settings())
@example(
    _lost_values(),
    ("SELECT g, s, MAX(x) AS a0, SUM(DISTINCT x) AS a1, MIN(x) AS a2 FROM t GROUP BY g, s", None),
    5,
    3,
    Settings(),
)
def test_stream_equals_batch_for_random_changelogs_and_queries(spark, events, query, rows_per_batch, files, small_work):
    sql, key = query
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        result = run_both(write_case(folder, events, files, sql, key, rows_per_batch), folder / "runs", small_work)
        assert same_rows(result.stream, result.batch), (sql, result.stream, result.batch)
        replayed = sorted(replay(result.feed), key=lambda r: json.dumps(r, sort_keys=True, default=str))
        stream = sorted(result.stream, key=lambda r: json.dumps(r, sort_keys=True, default=str))
        assert replayed == stream
