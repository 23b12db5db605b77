"""Random differential cases, one builder per query class, reproducible from (class, seed).

Each builder writes the query twice, in Spark SQL for lockstep and in Flink SQL for the oracle,
from the same choices; the two differ only where the dialects do (window functions). Constructs
whose meaning differs between Spark SQL and Flink SQL are not generated (docs/sql.md, "Semantics"):
AVG over integers (Flink keeps the integer type), integer division, casts from strings to
numbers, NULLs in an ordering column.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from tests.differential.case import Case, Column, Source
from tests.differential.changelogs import (
    CaseRandom,
    ChangelogBuilder,
    LateChanges,
    Timing,
    bigint,
    decimal,
    double,
    group,
    size,
)
from tests.differential.late_changes import MINUTE_MS, SessionLateness, WindowLateness

# (Spark SQL, Flink SQL) of an aggregate over the fact table t(id, g, k, x, y, d), and its alias.
AGGREGATES = [
    ("SUM(x)", "sx"),
    ("SUM(y)", "sy"),
    ("SUM(d)", "sd"),
    ("COUNT(*)", "n"),
    ("COUNT(x)", "nx"),
    ("COUNT(DISTINCT x)", "dx"),
    ("AVG(y)", "ay"),
    ("AVG(d)", "ad"),
    ("MIN(x)", "mnx"),
    ("MAX(x)", "mxx"),
    ("MIN(d)", "mnd"),
    ("MAX(y)", "mxy"),
    ("MAX(g)", "mxg"),
    ("SUM(DISTINCT x)", "sdx"),
]
FACT_COLUMNS = [
    Column("id", "BIGINT"),
    Column("g", "STRING"),
    Column("k", "BIGINT"),
    Column("x", "BIGINT"),
    Column("y", "DOUBLE"),
    Column("d", "DECIMAL(10,2)"),
]


def fact_values(rng: random.Random) -> dict:
    return {"g": group(rng), "k": bigint(rng, 1, 4), "x": bigint(rng), "y": double(rng), "d": decimal(rng)}


def fact_source(
    rng: random.Random, name: str = "t", keyed: bool = True, insert_only: bool = False, changes: int | None = None
) -> Source:
    changes = changes or size(rng)
    key = "id" if keyed else None
    columns = FACT_COLUMNS if keyed else FACT_COLUMNS[1:]
    builder = ChangelogBuilder(rng, [c.name for c in columns], fact_values, key, key_space=max(8, changes // 3))
    rows = builder.build(changes, insert_only=insert_only)
    return Source(name, list(columns), ["id"] if keyed else [], rows, insert_only=insert_only)


def _batches(rng: random.Random, sources: list[Source]) -> int:
    """Rows per micro-batch: between one and about eight micro-batches per run."""
    rows = max(sum(len(s.rows) for s in sources), 1)
    return max(1, rows // rng.randint(1, 8))


def _case(
    rng: random.Random,
    name: str,
    query_class: str,
    sql: str,
    sources: list[Source],
    flink_sql: str | None = None,
    sink: dict | None = None,
    rows_per_batch: int | None = None,
) -> Case:
    batches = rows_per_batch or _batches(rng, sources)
    return Case(name, query_class, sql, flink_sql or sql, sources, sink or {}, batches)


# -- group aggregates ------------------------------------------------------------------------------


def group_aggregate(rng: random.Random, name: str) -> Case:
    keys = rng.choice([["g"], ["k"], ["g", "k"]])
    aggregates = rng.sample(AGGREGATES, rng.randint(1, 4))
    where = rng.choice([None, None, "x > 10", "d IS NOT NULL", "g <> 'a'", "y < 50 OR x IS NULL"])
    having = rng.choice([None, None, "COUNT(*) > 1", "SUM(x) > 20"])
    select = ", ".join(keys + [f"{a} AS {alias}" for a, alias in aggregates])
    sql = f"SELECT {select} FROM t" + (f" WHERE {where}" if where else "") + f" GROUP BY {', '.join(keys)}"
    sql += f" HAVING {having}" if having else ""
    source = fact_source(rng, keyed=rng.random() < 0.8, insert_only=rng.random() < 0.1)
    return _case(rng, name, "group_aggregate", sql, [source])


def global_aggregate(rng: random.Random, name: str) -> Case:
    """No GROUP BY. Flink deletes the one row when the input empties and emits none for an empty
    input, where SQL (and lockstep, and its batch job) keeps a row of COUNT 0 and NULL sums: the
    changelogs therefore end with a live row (docs/sql.md, Semantics)."""
    aggregates = rng.sample(AGGREGATES, rng.randint(1, 4))
    sql = "SELECT " + ", ".join(f"{a} AS {alias}" for a, alias in aggregates) + " FROM t"
    source = fact_source(rng)
    if not _live_rows_left(source):
        source.rows.append(["+I", 10**6, "a", 1, 1, 1.0, "1.00"])
    return _case(rng, name, "global_aggregate", sql, [source])


def _live_rows_left(source: Source) -> bool:
    return sum(1 if row[0] in ("+I", "+U") else -1 for row in source.rows) > 0


def computed_sink_key(rng: random.Random, name: str) -> Case:
    """Seed 003: a sink keyed by an expression of the group keys, through the upsert materializer."""
    sql = (
        "SELECT CONCAT(COALESCE(g, '-'), '#', COALESCE(CAST(k AS STRING), '-')) AS gk, COUNT(*) AS n, "
        "SUM(x) AS sx FROM t GROUP BY g, k"
    )
    sink = {"primary_key": ["gk"], "upsert_materialize": rng.choice(["force", "auto"])}
    return _case(rng, name, "computed_sink_key", sql, [fact_source(rng)], sink=sink)


def projection(rng: random.Random, name: str) -> Case:
    items = rng.sample(
        [
            "g",
            "x + 1 AS x1",
            "COALESCE(x, 0) * 2 AS x2",
            "UPPER(g) AS ug",
            "d",
            "ABS(y) AS ay",
            "CASE WHEN x > 50 THEN 'big' ELSE 'small' END AS bucket",
            "CONCAT(g, '-', CAST(k AS STRING)) AS gk",
        ],
        rng.randint(1, 4),
    )
    where = rng.choice([None, "x > 0", "g = 'a' OR d > 100", "k IS NOT NULL AND y > 10"])
    sql = f"SELECT id, {', '.join(items)} FROM t" + (f" WHERE {where}" if where else "")
    return _case(rng, name, "projection", sql, [fact_source(rng)])


# -- windows --------------------------------------------------------------------------------------

TIMED_COLUMNS = [Column("id", "BIGINT"), Column("g", "STRING"), Column("x", "BIGINT"), Column("ts", "TIMESTAMP")]


def timed_source(
    rng: random.Random, late: LateChanges | None = None, most_changes: int = 1500, one_per_batch: bool = False
) -> tuple[Source, int]:
    """The source and lockstep's rows per micro-batch, chosen first: with `late` (changes behind
    the watermark in half of the cases), which changes are late depends on where micro-batches end.
    `one_per_batch`: lockstep's watermark moves after every row, as Flink's does."""
    watermark_ms = rng.choice([2000, 5000, 20000])
    changes = size(rng, 3, most_changes)
    batch_rows = 1 if one_per_batch else max(1, changes // rng.randint(1, 8))
    builder = ChangelogBuilder(
        rng,
        [c.name for c in TIMED_COLUMNS],
        lambda r: {"g": group(r, "ab"), "x": bigint(r)},
        "id",
        "ts",
        Timing(watermark_ms, batch_rows),
        key_space=max(8, changes // 3),
        late=late if rng.random() < 0.5 else None,
    )
    rows = builder.build(changes)
    source = Source("t", list(TIMED_COLUMNS), ["id"], rows, "ts", watermark_ms, late=builder.late_rows)
    return source, batch_rows


def window(rng: random.Random, name: str) -> Case:
    hopping = rng.random() < 0.4
    bounds = rng.choice([["ws", "we"], ["ws"], ["we"]])
    aggregates = rng.sample(
        [("COUNT(*)", "n"), ("SUM(x)", "sx"), ("MAX(x)", "mx"), ("COUNT(DISTINCT g)", "dg")], rng.randint(1, 3)
    )
    by_group = rng.random() < 0.6
    spark_bounds = {"ws": "window.start AS ws", "we": "window.end AS we"}
    flink_bounds = {"ws": "window_start AS ws", "we": "window_end AS we"}
    rest = (["g"] if by_group else []) + [f"{a} AS {alias}" for a, alias in aggregates]
    spark_window = "window(ts, '2 minutes', '1 minute')" if hopping else "window(ts, '1 minute')"
    flink_table = (
        "HOP(TABLE t, DESCRIPTOR(ts), INTERVAL '1' MINUTE, INTERVAL '2' MINUTE)"
        if hopping
        else "TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '1' MINUTE)"
    )
    spark_sql = f"SELECT {', '.join([spark_bounds[b] for b in bounds] + rest)} FROM t GROUP BY {spark_window}" + (
        ", g" if by_group else ""
    )
    flink_sql = (
        f"SELECT {', '.join([flink_bounds[b] for b in bounds] + rest)} FROM TABLE({flink_table}) "
        f"GROUP BY window_start, window_end" + (", g" if by_group else "")
    )
    sink = {"emit": rng.choice(["final", "early"])}
    query_class = f"{'hop' if hopping else 'tumble'}_window_{sink['emit']}"
    source, batch_rows = timed_source(rng, WindowLateness(2 * MINUTE_MS if hopping else MINUTE_MS, MINUTE_MS))
    return _case(rng, name, query_class, spark_sql, [source], flink_sql, sink, batch_rows)


def minute_windows(hopping: bool, table: str) -> tuple[str, str]:
    """A one-minute tumbling window, or a two-minute one hopping by a minute, over `table`'s ts:
    Spark's window(...) call and Flink's window TVF."""
    if hopping:
        return "window(ts, '2 minutes', '1 minute')", (
            f"HOP(TABLE {table}, DESCRIPTOR(ts), INTERVAL '1' MINUTE, INTERVAL '2' MINUTE)"
        )
    return "window(ts, '1 minute')", f"TUMBLE(TABLE {table}, DESCRIPTOR(ts), INTERVAL '1' MINUTE)"


def window_then_operator(rng: random.Random, name: str) -> Case:
    """A tumbling or hopping window's final rows going on to a Top-N per window (Flink's window
    Top-N) or to a group aggregate, which lockstep runs as a later stage. The Top-N orders by the
    group's latest id, unique in its window (Flink breaks ties by arrival), partitioned by the
    window's start and end (partitioned by its start alone, Flink keeps more than the N rows)."""
    hopping = rng.random() < 0.4
    spark_window, flink_table = minute_windows(hopping, "t")
    calls = "COUNT(*) AS n, SUM(x) AS sx, MAX(id) AS last_id"
    spark_windows = f"SELECT window.start AS ws, window.end AS we, g, {calls} FROM t GROUP BY {spark_window}, g"
    flink_windows = (
        f"SELECT window_start AS ws, window_end AS we, g, {calls} FROM TABLE({flink_table}) "
        "GROUP BY window_start, window_end, g"
    )
    if rng.random() < 0.6:
        top, direction = rng.randint(1, 2), rng.choice(["DESC", "ASC"])
        ranked = "SELECT ws, g, n, sx, ROW_NUMBER() OVER (PARTITION BY ws, we ORDER BY last_id {d}) AS rn FROM ({w}) w"
        query = "SELECT ws, g, n, sx FROM (" + ranked + f") r WHERE rn <= {top}"
        spark_sql = query.format(d=direction, w=spark_windows)
        flink_sql = query.format(d=direction, w=flink_windows)
        query_class = "window_top_n"
    else:
        outer = "SELECT g, COUNT(*) AS windows, MAX(n) AS peak, SUM(sx) AS total FROM ({w}) w GROUP BY g"
        spark_sql, flink_sql = outer.format(w=spark_windows), outer.format(w=flink_windows)
        query_class = "window_then_aggregate"
    source, batch_rows = timed_source(rng, WindowLateness(2 * MINUTE_MS if hopping else MINUTE_MS, MINUTE_MS))
    return _case(rng, name, query_class, spark_sql, [source], flink_sql, None, batch_rows)


def window_over_stage(rng: random.Random, name: str) -> Case:
    """A window over an earlier operator's rows, by the event time they keep: cascading windows
    (a one-minute window's rows windowed again by window_time), a window over a deduplication by
    event time, or a window over an interval join. A deduplication's retraction of a row whose
    window has closed is late for the window, as in Flink; lockstep's watermark moves after every
    row here, so both judge each retraction at the same watermark."""
    shape = rng.random()
    if shape >= 0.8:
        return _window_over_interval_join(rng, name)
    if shape < 0.4:
        size_minutes = rng.choice([2, 3])
        hopping = rng.random() < 0.3
        spark_outer = (
            f"window(wt, '{size_minutes} minutes', '1 minute')" if hopping else f"window(wt, '{size_minutes} minutes')"
        )
        flink_outer = (
            f"HOP(TABLE m, DESCRIPTOR(wt), INTERVAL '1' MINUTE, INTERVAL '{size_minutes}' MINUTE)"
            if hopping
            else f"TUMBLE(TABLE m, DESCRIPTOR(wt), INTERVAL '{size_minutes}' MINUTE)"
        )
        calls = "SUM(n) AS total, MAX(n) AS peak, COUNT(*) AS minutes, SUM(sx) AS sx"
        spark_sql = (
            f"SELECT window.start AS ws, g, {calls} FROM (SELECT window_time(window) AS wt, g, COUNT(*) AS n, "
            f"SUM(x) AS sx FROM t GROUP BY window(ts, '1 minute'), g) m GROUP BY {spark_outer}, g"
        )
        flink_sql = (
            "WITH m AS (SELECT window_time AS wt, g, COUNT(*) AS n, SUM(x) AS sx FROM TABLE(TUMBLE(TABLE t, "
            "DESCRIPTOR(ts), INTERVAL '1' MINUTE)) GROUP BY window_start, window_end, window_time, g) "
            f"SELECT window_start AS ws, g, {calls} FROM TABLE({flink_outer}) GROUP BY window_start, window_end, g"
        )
        source, batch_rows = timed_source(rng, WindowLateness(MINUTE_MS, MINUTE_MS))
        return _case(rng, name, "cascading_windows", spark_sql, [source], flink_sql, None, batch_rows)
    direction = rng.choice(["ASC", "DESC"])
    deduplicated = (
        f"SELECT id, g, x, ts FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY g ORDER BY ts {direction}) AS rn "
        "FROM t) r WHERE rn = 1"
    )
    # Ten-second windows close while a group's latest row is still replaced: late retractions.
    seconds = rng.choice([10, 60])
    calls = "COUNT(*) AS n, SUM(x) AS sx, MAX(id) AS last_id"
    spark_sql = f"SELECT window.start AS ws, {calls} FROM ({deduplicated}) d GROUP BY window(ts, '{seconds} seconds')"
    flink_sql = (
        f"WITH d AS ({deduplicated}) SELECT window_start AS ws, {calls} FROM TABLE(TUMBLE(TABLE d, "
        f"DESCRIPTOR(ts), INTERVAL '{seconds}' SECOND)) GROUP BY window_start, window_end"
    )
    source, batch_rows = timed_source(rng, most_changes=60, one_per_batch=True)
    return _case(rng, name, "window_over_deduplicate", spark_sql, [source], flink_sql, None, batch_rows)


def _window_over_interval_join(rng: random.Random, name: str) -> Case:
    """An interval join's rows windowed by the left's event time, over two sources on time: the
    join holds its watermark back by its bounds, so no joined row is late for the window."""
    before, after = rng.choice([2, 10, 30]), rng.choice([0, 10, 30])
    joined = "SELECT a.id, a.ts, a.v, b.v AS bv FROM a JOIN b ON a.k = b.k AND a.ts BETWEEN {bounds}"
    spark_joined = joined.format(bounds=f"b.ts - INTERVAL {before} SECONDS AND b.ts + INTERVAL {after} SECONDS")
    flink_joined = joined.format(bounds=f"b.ts - INTERVAL '{before}' SECOND AND b.ts + INTERVAL '{after}' SECOND")
    calls = "COUNT(*) AS n, SUM(bv) AS sbv, MAX(v) AS mv"
    spark_sql = f"SELECT window.start AS ws, {calls} FROM ({spark_joined}) j GROUP BY window(ts, '1 minute')"
    flink_sql = (
        f"WITH j AS ({flink_joined}) SELECT window_start AS ws, {calls} FROM TABLE(TUMBLE(TABLE j, "
        "DESCRIPTOR(ts), INTERVAL '1' MINUTE)) GROUP BY window_start, window_end"
    )
    changes = size(rng, 3, 400)
    sources = [timed_side(rng, "a", changes), timed_side(rng, "b", max(3, changes // rng.randint(1, 3)))]
    return _case(rng, name, "window_over_interval_join", spark_sql, sources, flink_sql)


def window_rank(rng: random.Random, name: str) -> Case:
    """A Top-N per window over a window's rows without an aggregate (Flink's window Top-N over
    the window TVF), over an insert-only source with late inserts. Ordered by a value unique in
    the source: Flink breaks ties by arrival."""
    hopping = rng.random() < 0.3
    spark_window, flink_table = minute_windows(hopping, "t")
    top, direction = rng.randint(1, 3), rng.choice(["DESC", "ASC"])
    partition = rng.choice(["", ", k"])
    rows = f"SELECT {spark_window}.start AS ws, {spark_window}.end AS we, id, k, v FROM t"
    ranked = (
        f"SELECT ws, id, k, v, ROW_NUMBER() OVER (PARTITION BY ws, we{partition} ORDER BY v {direction}) AS rn "
        f"FROM ({rows}) w"
    )
    spark_sql = f"SELECT ws, id, k, v FROM ({ranked}) r WHERE rn <= {top}"
    flink_ranked = (
        f"SELECT window_start AS ws, id, k, v, ROW_NUMBER() OVER (PARTITION BY window_start, window_end{partition} "
        f"ORDER BY v {direction}) AS rn FROM TABLE({flink_table})"
    )
    flink_sql = f"SELECT ws, id, k, v FROM ({flink_ranked}) r WHERE rn <= {top}"
    lateness = WindowLateness(2 * MINUTE_MS if hopping else MINUTE_MS, MINUTE_MS, inserts_only=True)
    source, batch_rows = timed_inserts(rng, lateness)
    return _case(rng, name, "window_rank", spark_sql, [source], flink_sql, None, batch_rows)


def window_join(rng: random.Random, name: str) -> Case:
    """Two windows' rows joined on both windows' start and end and a key (Flink's window join),
    INNER or OUTER, over two insert-only sources on time (Flink judges a window join's lateness
    by the smaller of its inputs' watermarks, lockstep by each side's own: docs/sql.md)."""
    hopping = rng.random() < 0.3
    kind = rng.choice(["INNER", "LEFT", "RIGHT", "FULL"])

    def flink_rows(table: str) -> str:
        return f"SELECT window_start AS ws, window_end AS we, k, v FROM TABLE({minute_windows(hopping, table)[1]})"

    def spark_rows(table: str) -> str:
        window = minute_windows(hopping, table)[0]
        return f"SELECT {window}.start AS ws, {window}.end AS we, k, v FROM {table}"

    query = (
        "SELECT l.ws AS lws, l.k AS lk, l.v AS lv, r.ws AS rws, r.k AS rk, r.v AS rv FROM ({a}) l {kind} JOIN ({b}) r "
        "ON l.ws = r.ws AND l.we = r.we AND l.k = r.k"
    )
    spark_sql = query.format(a=spark_rows("a"), b=spark_rows("b"), kind=kind)
    flink_sql = query.format(a=flink_rows("a"), b=flink_rows("b"), kind=kind)
    sources = [timed_side(rng, "a", size(rng, 3, 300)), timed_side(rng, "b", size(rng, 3, 300))]
    return _case(rng, name, f"window_join_{kind.lower()}", spark_sql, sources, flink_sql)


def timed_inserts(rng: random.Random, late: LateChanges) -> tuple[Source, int]:
    """An insert-only source with event time, and lockstep's rows per micro-batch; `late`
    inserts in half of the cases. Values of v are unique."""
    watermark_ms = rng.choice([2000, 5000, 20000])
    changes = size(rng, 3, 800)
    batch_rows = max(1, changes // rng.randint(1, 8))
    counter, values = iter(range(1, 10**9)), iter(rng.sample(range(1, 10**6), 2 * changes + 10))
    builder = ChangelogBuilder(
        rng,
        [c.name for c in TIMED_SIDE_COLUMNS],
        lambda r: {"id": next(counter), "k": bigint(r, 1, 5), "v": next(values)},
        None,
        "ts",
        Timing(watermark_ms, batch_rows),
        late=late if rng.random() < 0.5 else None,
    )
    rows = builder.build(changes, insert_only=True)
    source = Source(
        "t", list(TIMED_SIDE_COLUMNS), [], rows, "ts", watermark_ms, late=builder.late_rows, insert_only=True
    )
    return source, batch_rows


def session_window(rng: random.Random, name: str) -> Case:
    """Session windows, compared with Flink's sessions over the final rows (reference "batch"):
    Flink's streaming sessions never split when a bridging event is deleted (docs/sql.md, Semantics)."""
    gap = rng.choice([2, 5])
    by_group = rng.random() < 0.6
    bounds = rng.choice([["s", "e"], ["s"], ["e"]])
    aggregates = rng.sample([("COUNT(*)", "n"), ("SUM(x)", "sx"), ("MAX(x)", "mx")], rng.randint(1, 2))
    spark_bounds = {"s": "session_window.start AS s", "e": "session_window.end AS e"}
    flink_bounds = {"s": "window_start AS s", "e": "window_end AS e"}
    rest = (["g"] if by_group else []) + [f"{a} AS {alias}" for a, alias in aggregates]
    spark_sql = (
        f"SELECT {', '.join([spark_bounds[b] for b in bounds] + rest)} FROM t "
        f"GROUP BY session_window(ts, '{gap} seconds')" + (", g" if by_group else "")
    )
    partition = " PARTITION BY g" if by_group else ""
    flink_sql = (
        f"SELECT {', '.join([flink_bounds[b] for b in bounds] + rest)} FROM TABLE(SESSION(TABLE t{partition}, "
        f"DESCRIPTOR(ts), INTERVAL '{gap}' SECOND)) GROUP BY window_start, window_end" + (", g" if by_group else "")
    )
    emit = rng.choice(["final", "early"])
    source, batch_rows = timed_source(rng, SessionLateness(gap * 1000, "g" if by_group else None))
    case = _case(rng, name, f"session_window_{emit}", spark_sql, [source], flink_sql, {"emit": emit}, batch_rows)
    case.reference = "batch"
    return case


# -- deduplication and Top-N ----------------------------------------------------------------------

SEQUENCED_COLUMNS = [Column("id", "BIGINT"), Column("g", "STRING"), Column("seq", "BIGINT"), Column("x", "BIGINT")]


def sequenced_source(rng: random.Random, insert_only: bool = False) -> Source:
    """A source whose `seq` is unique: the ordering column of a deduplication, so no ties."""
    counter = iter(range(1, 10**9))
    changes = size(rng, 3, 1500)
    builder = ChangelogBuilder(
        rng,
        [c.name for c in SEQUENCED_COLUMNS],
        lambda r: {"g": group(r), "seq": next(counter), "x": bigint(r)},
        "id",
        key_space=max(8, changes // 3),
    )
    return Source("t", list(SEQUENCED_COLUMNS), ["id"], builder.build(changes, insert_only), insert_only=insert_only)


def _ranked(rng: random.Random, top: int, keep_group: bool = False) -> tuple[str, str, list[str]]:
    """The ranking subquery, its filter, and the columns it selects."""
    direction = rng.choice(["ASC", "DESC"])
    # Seed 000 ranks by a column its SELECT leaves out (and may partition by one, too).
    columns = rng.choice(
        [["id", "g", "seq", "x"], ["*"], ["id", "g", "x"]] + ([] if keep_group else [["id", "seq", "x"]])
    )
    inner = f"SELECT {', '.join(columns)}, ROW_NUMBER() OVER (PARTITION BY g ORDER BY seq {direction}) AS rn FROM t"
    selected = ["id", "g", "seq", "x"] if columns == ["*"] else columns
    return inner, "rn = 1" if top == 1 else f"rn <= {top}", selected


def deduplicate(rng: random.Random, name: str) -> Case:
    inner, condition, selected = _ranked(rng, 1)
    outer = selected if rng.random() < 0.5 else [c for c in selected if c != "seq"]
    sql = f"SELECT {', '.join(outer)} FROM ({inner}) r WHERE {condition}"
    return _case(rng, name, "deduplicate", sql, [sequenced_source(rng, insert_only=rng.random() < 0.3)])


def deduplicate_then_aggregate(rng: random.Random, name: str) -> Case:
    inner, condition, _ = _ranked(rng, 1, keep_group=True)
    sql = (
        f"SELECT g, COUNT(DISTINCT id) AS ids, SUM(x) AS sx FROM (SELECT id, g, x FROM ({inner}) r "
        f"WHERE {condition}) d GROUP BY g"
    )
    return _case(rng, name, "deduplicate_then_aggregate", sql, [sequenced_source(rng)])


def top_n(rng: random.Random, name: str) -> Case:
    inner, condition, selected = _ranked(rng, rng.randint(2, 3))
    sql = f"SELECT {', '.join(selected)}, rn FROM ({inner}) r WHERE {condition}"
    return _case(rng, name, "top_n", sql, [sequenced_source(rng)])


def order_by_limit(rng: random.Random, name: str) -> Case:
    """ORDER BY ... LIMIT n, a global Top-N: of the rows, or of an aggregate's groups. The ordering
    column is unique (`seq`, or a group's MAX(seq)), so no tie decides which rows are kept."""
    direction, limit = rng.choice(["ASC", "DESC"]), rng.randint(1, 4)
    if rng.random() < 0.5:
        columns = rng.choice([["id", "g", "x"], ["id", "seq", "x"], ["g", "x"]])
        sql = f"SELECT {', '.join(columns)} FROM t ORDER BY seq {direction} LIMIT {limit}"
    else:
        sql = (
            "SELECT g, COUNT(*) AS n, MAX(seq) AS last_seq FROM t GROUP BY g "
            f"ORDER BY last_seq {direction} LIMIT {limit}"
        )
    return _case(rng, name, "order_by_limit", sql, [sequenced_source(rng)])


# -- joins and UNION ALL --------------------------------------------------------------------------

SIDE_COLUMNS = [Column("id", "BIGINT"), Column("k", "BIGINT"), Column("v", "BIGINT"), Column("w", "DOUBLE")]


def side_source(rng: random.Random, name: str, changes: int) -> Source:
    builder = ChangelogBuilder(
        rng,
        [c.name for c in SIDE_COLUMNS],
        lambda r: {"k": bigint(r, 1, 6), "v": bigint(r), "w": double(r)},
        "id",
        key_space=max(6, changes // 3),
    )
    return Source(name, list(SIDE_COLUMNS), ["id"], builder.build(changes))


def _two_sides(rng: random.Random) -> list[Source]:
    changes = size(rng, 3, 800)
    return [side_source(rng, "a", changes), side_source(rng, "b", max(3, changes // rng.randint(1, 3)))]


def join(rng: random.Random, name: str) -> Case:
    kind = rng.choice(["INNER", "LEFT", "RIGHT", "FULL"])
    extra = rng.choice(["", "", " AND a.v < b.v"])
    sql = f"SELECT a.id AS aid, b.id AS bid, a.k AS ak, a.v AS av, b.w AS bw FROM a {kind} JOIN b ON a.k = b.k{extra}"
    sink = rng.choice([{}, {"changelog_mode": "retract"}])
    return _case(rng, name, f"join_{kind.lower()}", sql, _two_sides(rng), sink=sink)


def join_then_aggregate(rng: random.Random, name: str) -> Case:
    kind = rng.choice(["INNER", "LEFT"])
    sql = (
        f"SELECT a.k AS k, COUNT(*) AS n, COUNT(b.id) AS matched, SUM(b.v) AS sv FROM a {kind} JOIN b "
        f"ON a.k = b.k GROUP BY a.k"
    )
    return _case(rng, name, "join_then_aggregate", sql, _two_sides(rng))


def semi_join(rng: random.Random, name: str) -> Case:
    """IN (SELECT ...), EXISTS and NOT EXISTS: semi and anti joins."""
    inner_filter = rng.choice(["", " AND b.v > 0"])
    form = rng.choice(["in", "exists", "not_exists"])
    predicate = {
        "in": f"k IN (SELECT k FROM b WHERE v IS NOT NULL{inner_filter.replace('b.', '')})",
        "exists": f"EXISTS (SELECT 1 FROM b WHERE b.k = a.k{inner_filter})",
        "not_exists": f"NOT EXISTS (SELECT 1 FROM b WHERE b.k = a.k{inner_filter})",
    }[form]
    sql = f"SELECT id, k, v FROM a WHERE {predicate}"
    return _case(rng, name, f"semi_join_{form}", sql, _two_sides(rng))


def union_all(rng: random.Random, name: str) -> Case:
    sides = _two_sides(rng)
    if rng.random() < 0.5:
        sql = "SELECT id, k, v FROM a UNION ALL SELECT id, k, v FROM b"
        return _case(rng, name, "union_all", sql, sides, sink={"changelog_mode": "retract"})
    sql = "SELECT k, COUNT(*) AS n, SUM(v) AS sv FROM (SELECT k, v FROM a UNION ALL SELECT k, v FROM b) u GROUP BY k"
    return _case(rng, name, "union_all", sql, sides)


def interval_join(rng: random.Random, name: str) -> Case:
    """a.ts BETWEEN b.ts - INTERVAL ... AND b.ts + INTERVAL ... over two insert-only sources with
    event time: Flink's interval join (its inputs must be append-only). INNER only: a LEFT one's
    changelog differs on purpose (docs/sql.md: lockstep emits an unmatched row at once and
    retracts it on a match, Flink emits it once the watermark passes), its final table does not."""
    changes = size(rng, 3, 600)
    sides = [timed_side(rng, "a", changes), timed_side(rng, "b", max(3, changes // rng.randint(1, 3)))]
    before, after = rng.choice([2, 5, 10]), rng.choice([0, 3, 10])
    spark_bounds = f"b.ts - INTERVAL {before} SECONDS AND b.ts + INTERVAL {after} SECONDS"
    flink_bounds = f"b.ts - INTERVAL '{before}' SECOND AND b.ts + INTERVAL '{after}' SECOND"
    select = "SELECT a.id AS aid, b.id AS bid, a.k AS k, a.v AS av, b.v AS bv FROM a "
    condition = "ON a.k = b.k AND a.ts BETWEEN "
    spark_sql = f"{select}JOIN b {condition}{spark_bounds}"
    flink_sql = f"{select}JOIN b {condition}{flink_bounds}"
    return _case(rng, name, "interval_join_inner", spark_sql, sides, flink_sql)


TIMED_SIDE_COLUMNS = [Column("id", "BIGINT"), Column("k", "BIGINT"), Column("v", "BIGINT"), Column("ts", "TIMESTAMP")]


def timed_side(rng: random.Random, name: str, changes: int) -> Source:
    """An insert-only side with event time, on time (the watermark never passes a row)."""
    watermark_ms = rng.choice([2000, 5000])
    counter = iter(range(1, 10**9))
    builder = ChangelogBuilder(
        rng,
        [c.name for c in TIMED_SIDE_COLUMNS],
        lambda r: {"id": next(counter), "k": bigint(r, 1, 5), "v": bigint(r)},
        None,
        "ts",
        Timing(watermark_ms),
    )
    rows = builder.build(changes, insert_only=True)
    return Source(name, list(TIMED_SIDE_COLUMNS), [], rows, "ts", watermark_ms, insert_only=True)


VERSIONED_COLUMNS = [Column("k", "BIGINT"), Column("rate", "BIGINT"), Column("ts", "TIMESTAMP")]


def versioned_source(rng: random.Random, name: str, changes: int) -> Source:
    """A versioned table: a rate per key k, inserted, updated (a new version at a later time, or
    at its own time, which replaces it) and deleted, every change on time."""
    watermark_ms = rng.choice([2000, 5000])
    builder = ChangelogBuilder(
        rng,
        [c.name for c in VERSIONED_COLUMNS],
        lambda r: {"rate": bigint(r)},
        "k",
        "ts",
        Timing(watermark_ms),
        key_space=5,
    )
    return Source(name, list(VERSIONED_COLUMNS), ["k"], builder.build(changes), "ts", watermark_ms)


def temporal_join(rng: random.Random, name: str) -> Case:
    """JOIN r FOR SYSTEM_TIME AS OF a.ts: each row of an insert-only side with the version of its
    key at its time. Flink's change feed has inserts only (it waits for the watermark), lockstep's
    corrects a row when an earlier version comes after it: the final tables are compared."""
    changes = size(rng, 3, 600)
    sides = [timed_side(rng, "a", changes), versioned_source(rng, "r", max(3, changes // rng.randint(1, 3)))]
    kind = rng.choice(["INNER", "LEFT"])
    join = f"FROM a {kind} JOIN r FOR SYSTEM_TIME AS OF a.ts ON a.k = r.k"
    if rng.random() < 0.3:
        sql = f"SELECT a.k AS k, COUNT(*) AS n, COUNT(r.rate) AS rated, SUM(r.rate) AS sr {join} GROUP BY a.k"
        return _case(rng, name, "temporal_join_then_aggregate", sql, sides)
    sql = f"SELECT a.id AS aid, a.k AS k, a.v AS av, r.rate AS rate, r.ts AS rts {join}"
    return _case(rng, name, f"temporal_join_{kind.lower()}", sql, sides)


# -- OVER aggregations and LAG ---------------------------------------------------------------------

OVER_AGGREGATES = ["SUM(v)", "COUNT(*)", "COUNT(v)", "MIN(v)", "MAX(v)"]


def over_event_time(rng: random.Random, name: str) -> Case:
    """OVER ordered by event time over an insert-only source: ROWS or RANGE frames, or LAG. Rows
    of one time are left out after the first: Flink orders them by arrival, Spark in no order."""
    source = timed_side(rng, "t", size(rng, 3, 800))
    seen: set = set()
    source.rows = [row for row in source.rows if not (row[-1] in seen or seen.add(row[-1]))]
    partition = rng.choice(["PARTITION BY k ", ""])
    lag = rng.random() < 0.3
    if lag:
        offset = rng.choice(["", ", 2"])
        calls = [f"LAG(v{offset})"] + rng.sample(OVER_AGGREGATES, rng.randint(0, 2))
        frames = ("", "")
    else:
        calls = rng.sample(OVER_AGGREGATES, rng.randint(1, 3))
        rows, seconds = rng.randint(0, 4), rng.choice([3, 10, 30])
        frames = rng.choice(
            [
                (f" ROWS BETWEEN {rows} PRECEDING AND CURRENT ROW",) * 2,
                (
                    f" RANGE BETWEEN INTERVAL {seconds} SECONDS PRECEDING AND CURRENT ROW",
                    f" RANGE BETWEEN INTERVAL '{seconds}' SECOND PRECEDING AND CURRENT ROW",
                ),
                (" ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW",) * 2,
            ]
        )
    query_class = "over_lag" if lag else f"over_{'rows' if 'ROWS' in frames[0] else 'range'}"

    where = rng.choice(["", "", "", " WHERE v > 0"])

    def query(frame: str) -> str:
        windows = [f"{partition}ORDER BY ts{'' if call.startswith('LAG') else frame}" for call in calls]
        items = [f"{call} OVER ({window}) AS o{i}" for i, (call, window) in enumerate(zip(calls, windows))]
        return f"SELECT id, k, v, {', '.join(items)} FROM t{where}"

    spark_sql, flink_sql = query(frames[0]), query(frames[1])
    return _case(rng, name, query_class, spark_sql, [source], flink_sql)


def over_running(rng: random.Random, name: str) -> Case:
    """OVER ordered by a unique column over a changelog: a running aggregate with an unbounded
    frame, each row's values changing as rows before it come and go (no LAG: ordered so, Flink's
    job fails)."""
    insert_only = rng.random() < 0.3
    calls = rng.sample(["SUM(x)", "COUNT(*)", "MAX(x)", "MIN(d)"], rng.randint(1, 2))
    partition = rng.choice(["PARTITION BY g ", "PARTITION BY k ", ""])
    items = [f"{call} OVER ({partition}ORDER BY id) AS o{i}" for i, call in enumerate(calls)]
    sql = f"SELECT id, g, x, {', '.join(items)} FROM t"
    source = fact_source(rng, changes=size(rng, 3, 600), insert_only=insert_only)
    return _case(rng, name, "over_running", sql, [source])


# -- common table expressions ----------------------------------------------------------------------


def common_table_expressions(rng: random.Random, name: str) -> Case:
    """WITH ... AS over each kind of step: an aggregate filtered after it, a deduplication read by
    an aggregate, a filtered side of a join, and one name read by a later one and by the query."""
    shape = rng.choice(["aggregate", "dedup", "join", "chained"])
    if shape == "aggregate":
        sql = (
            "WITH totals AS (SELECT g, COUNT(*) AS n, SUM(x) AS sx FROM t GROUP BY g) "
            f"SELECT g, n, sx FROM totals WHERE {rng.choice(['n > 1', 'sx > 20', 'sx IS NULL OR n < 3'])}"
        )
        return _case(rng, name, "common_table_expressions", sql, [fact_source(rng)])
    if shape == "dedup":
        inner, condition, _ = _ranked(rng, 1, keep_group=True)
        sql = f"WITH ranked AS ({inner}) SELECT g, COUNT(*) AS n, SUM(x) AS sx FROM ranked WHERE {condition} GROUP BY g"
        return _case(rng, name, "common_table_expressions", sql, [sequenced_source(rng)])
    if shape == "join":
        sql = (
            "WITH big AS (SELECT id, k, v FROM a WHERE v > 20) "
            "SELECT big.id AS aid, b.id AS bid, big.v AS av, b.w AS bw FROM big JOIN b ON big.k = b.k"
        )
        return _case(rng, name, "common_table_expressions", sql, _two_sides(rng))
    sql = (
        "WITH per_k AS (SELECT k, COUNT(*) AS n FROM a GROUP BY k), busy AS (SELECT k FROM per_k WHERE n > 1) "
        "SELECT busy.k AS k, per_k.n AS n FROM busy JOIN per_k ON busy.k = per_k.k"
    )
    return _case(rng, name, "common_table_expressions", sql, _two_sides(rng)[:1])


def set_operations(rng: random.Random, name: str) -> Case:
    """UNION, INTERSECT and EXCEPT (distinct): a row is in the result while the sides hold it as
    the operation says, and leaves it when a retraction takes it from one."""
    operation = rng.choice(["UNION", "INTERSECT", "EXCEPT"])
    columns = rng.choice([["k"], ["k", "MOD(v, 4) AS m"]])
    left = f"SELECT {', '.join(columns)} FROM a" + rng.choice(["", " WHERE v > 30"])
    right = f"SELECT {', '.join(columns)} FROM b" + rng.choice(["", " WHERE w < 0.5"])
    return _case(rng, name, f"set_operations_{operation.lower()}", f"{left} {operation} {right}", _two_sides(rng))


BUILDERS: dict[str, Callable[[random.Random, str], Case]] = {
    "group_aggregate": group_aggregate,
    "global_aggregate": global_aggregate,
    "computed_sink_key": computed_sink_key,
    "projection": projection,
    "window": window,
    "session_window": session_window,
    "deduplicate": deduplicate,
    "deduplicate_then_aggregate": deduplicate_then_aggregate,
    "top_n": top_n,
    "join": join,
    "join_then_aggregate": join_then_aggregate,
    "semi_join": semi_join,
    "union_all": union_all,
    "common_table_expressions": common_table_expressions,
    "set_operations": set_operations,
    "order_by_limit": order_by_limit,
    "interval_join": interval_join,
    "temporal_join": temporal_join,
    "over_event_time": over_event_time,
    "over_running": over_running,
    "window_then_operator": window_then_operator,
    "window_over_stage": window_over_stage,
    "window_rank": window_rank,
    "window_join": window_join,
}


def generate(builder: str, seed: int, max_rows: int = 3000) -> Case:
    """The case of a builder and a seed: the same on every machine."""
    return BUILDERS[builder](CaseRandom(f"{builder}:{seed}:{max_rows}", max_rows), f"{builder}-{seed}")
