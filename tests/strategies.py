"""Hypothesis strategies: random valid changelogs and random queries over them."""

from __future__ import annotations

import os

from hypothesis import strategies as st

from jobs.spec.model import Settings, SparkSettings

# `make property SCALE=10` runs the stream-equals-batch properties on ten times the examples that
# `make test` runs (a fixed sample, sized to keep the whole suite under its time budget).
SCALE = float(os.environ.get("LOCKSTEP_PROPERTY_SCALE", "1"))


def examples(n: int) -> int:
    """`n` examples, times the scale the run asks for."""
    return max(1, round(n * SCALE))


def small_work_settings():
    """The run's settings: Spark's settings for small work (every test case is small) or, with
    `small_work_rows` 0, whole-stage code generation and adaptive execution as on large input;
    the stream must equal the batch either way."""
    return st.sampled_from([Settings(), Settings(spark=SparkSettings(small_work_rows=0))])


SCHEMA = "id BIGINT, g BIGINT, x BIGINT, y DOUBLE, s STRING"
GROUPS = st.one_of(st.none(), st.integers(0, 3))
XS = st.one_of(st.none(), st.integers(-5, 5))
YS = st.one_of(st.none(), st.sampled_from([0.5, 1.25, -2.0, 3.1, 1e-3]))
SS = st.one_of(st.none(), st.sampled_from(["a", "b", "c"]))

AGGREGATES = [
    "SUM(x)",
    "COUNT(*)",
    "COUNT(x)",
    "AVG(x)",
    "MIN(x)",
    "MAX(y)",
    "SUM(y)",
    "AVG(y)",
    "COUNT(DISTINCT s)",
    "MIN(s)",
    "MAX(x)",
    "SUM(DISTINCT x)",
]
FILTERS = ["x > 0", "y IS NOT NULL", "s <> 'b'", "x + 1 < 4"]


@st.composite
def rows(draw, key: int) -> dict:
    return {"id": key, "g": draw(GROUPS), "x": draw(XS), "y": draw(YS), "s": draw(SS)}


@st.composite
def changelogs(draw, max_events: int = 25) -> list[dict]:
    """Inserts, updates (as -U/+U) and deletes over a few keys, groups emptied and refilled."""
    live: dict[int, dict] = {}
    out: list[dict] = []
    for _ in range(draw(st.integers(1, max_events))):
        key = draw(st.integers(0, 6))
        out += _change(draw, live, key, draw(rows(key)))
    return out


def _change(draw, live: dict[int, dict], key: int, row: dict) -> list[dict]:
    """Insert `row` if its key is not live; else update the live row to it, or delete it."""
    if key not in live:
        live[key] = row
        return [{**row, "op": "+I"}]
    if draw(st.booleans()):
        before, live[key] = live[key], row
        return [{**before, "op": "-U"}, {**row, "op": "+U"}]
    return [{**live.pop(key), "op": "-D"}]


@st.composite
def aggregate_queries(draw) -> tuple[str, list[str] | None]:
    """(SQL, sink key) for a random group aggregate; sink key [] for a global one."""
    keys = draw(st.sampled_from([["g"], ["g", "s"], []]))
    aggs = draw(st.lists(st.sampled_from(AGGREGATES), min_size=1, max_size=4, unique=True))
    select = keys + [f"{a} AS a{i}" for i, a in enumerate(aggs)]
    sql = f"SELECT {', '.join(select)} FROM t"
    if draw(st.booleans()):
        sql += f" WHERE {draw(st.sampled_from(FILTERS))}"
    if keys:
        sql += f" GROUP BY {', '.join(keys)}"
        if draw(st.booleans()):
            sql += " HAVING COUNT(*) > 1"
    return sql, (None if keys else [])


@st.composite
def projection_queries(draw) -> tuple[str, list[str] | None]:
    sql = "SELECT id, g, x + 1 AS x1, s FROM t"
    if draw(st.booleans()):
        sql += f" WHERE {draw(st.sampled_from(FILTERS))}"
    return sql, None


queries = st.one_of(aggregate_queries(), aggregate_queries(), projection_queries())


TIMED_SCHEMA = "id BIGINT, g BIGINT, x BIGINT, ts TIMESTAMP"
WINDOWS = ["window(ts, '1 minute')", "window(ts, '2 minutes', '1 minute')", "window(ts, '30 seconds')"]
WINDOW_AGGREGATES = ["SUM(x)", "COUNT(*)", "MAX(x)", "COUNT(DISTINCT g)", "AVG(x)"]


@st.composite
def timed_changelogs(draw, max_events: int = 24) -> list[dict]:
    """Events whose times mostly move forward (jitter of a few seconds, sometimes a big step),
    with updates and deletes of live rows: some land in windows the watermark already closed."""
    live: dict[int, dict] = {}
    out: list[dict] = []
    clock = 0
    for _ in range(draw(st.integers(1, max_events))):
        clock += draw(st.sampled_from([0, 5, 10, 20, 45, 70]))
        key = draw(st.integers(0, 6))
        # A few seconds of jitter on the minute: near a minute's start it steps a minute back.
        minute = (clock + draw(st.integers(-4, 4))) // 60 % 60
        row = {
            "id": key,
            "g": draw(st.integers(0, 2)),
            "x": draw(st.integers(-3, 9)),
            "ts": f"2026-11-21 09:{minute:02d}:{clock % 60:02d}",
        }
        out += _change(draw, live, key, row)
    return out


@st.composite
def window_queries(draw) -> tuple[str, str]:
    window = draw(st.sampled_from(WINDOWS))
    aggs = draw(st.lists(st.sampled_from(WINDOW_AGGREGATES), min_size=1, max_size=3, unique=True))
    select = ["g", "window.start AS ws"] + [f"{a} AS a{i}" for i, a in enumerate(aggs)]
    where = " WHERE x > 0" if draw(st.booleans()) else ""
    return (f"SELECT {', '.join(select)} FROM t{where} GROUP BY g, {window}", draw(st.sampled_from(["final", "early"])))
