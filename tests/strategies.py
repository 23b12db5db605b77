"""Hypothesis strategies: random valid changelogs and random queries over them."""

from __future__ import annotations

from hypothesis import strategies as st

SCHEMA = "id BIGINT, g BIGINT, x BIGINT, y DOUBLE, s STRING"
GROUPS = st.one_of(st.none(), st.integers(0, 3))
XS = st.one_of(st.none(), st.integers(-5, 5))
YS = st.one_of(st.none(), st.sampled_from([0.5, 1.25, -2.0, 3.1, 1e-3]))
SS = st.one_of(st.none(), st.sampled_from(["a", "b", "c"]))

AGGREGATES = ["SUM(x)", "COUNT(*)", "COUNT(x)", "AVG(x)", "MIN(x)", "MAX(y)", "SUM(y)", "AVG(y)",
              "COUNT(DISTINCT s)", "MIN(s)", "MAX(x)", "SUM(DISTINCT x)"]
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
        if key not in live:
            live[key] = draw(rows(key))
            out.append({**live[key], "op": "+I"})
        elif draw(st.booleans()):
            new = draw(rows(key))
            out += [{**live[key], "op": "-U"}, {**new, "op": "+U"}]
            live[key] = new
        else:
            out.append({**live.pop(key), "op": "-D"})
    return out


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
