"""lockstep's own aggregation state (jobs/stream/operators/aggregate/group_sums.py): per micro-batch the touched
groups' sums after it, exactly as Spark's streaming aggregation held them (a model of running
sums here), types included; groups whose rows were all retracted leave the state when it is
folded; with a state TTL, idle groups are forgotten as Flink forgets them; and a micro-batch's
sums made on the driver (driver_sums.py) are Spark's."""

import os
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from types import SimpleNamespace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_type, to_arrow_schema

from jobs.changelog.columns import COUNT, SLOT, TOUCHED, WEIGHT, WINDOW_END, WINDOW_START
from jobs.errors import InputError
from jobs.plan.nodes import AggCall
from jobs.runtime.arrow_frames import frame_of
from jobs.stream.operators.aggregate.driver_groups import finished_groups, finishes_on_driver
from jobs.stream.operators.aggregate.driver_sums import sums_on_driver
from jobs.stream.operators.aggregate.group_sums import GroupSums, groups_now
from jobs.stream.operators.aggregate.streaming import (
    AggregateState,
    nonnull_column,
    state_columns,
    streaming_aggregate,
    sum_column,
)
from jobs.stream.state.live_state import COMPACT_EVERY, PART_ROWS
from jobs.stream.state.row_counts import SumOverflow, summed_per_group
from jobs.stream.state.snapshot_parts import Snapshot
from tests.strategies import examples

CALLS = [AggCall("SUM", "d", False, "total"), AggCall("COUNT", "i", False, "n"), AggCall("COUNT", None, False, "rows")]
NODE = SimpleNamespace(group_keys=("g",), aggregates=CALLS, is_global=False, output_names=("g", "total", "n", "rows"))
INPUT = pa.schema([("g", pa.int64()), ("d", pa.decimal128(6, 2)), ("i", pa.int32()), (WEIGHT, pa.int32())])


def _state() -> AggregateState:
    return AggregateState(NODE, {"d": pa.decimal128(6, 2), "i": pa.int32()})


@st.composite
def micro_batches(draw) -> list[list[dict]]:
    """Micro-batches of changes to a few groups: inserts of new rows and retractions of live
    ones (NULL keys and values among them), so that groups empty and fill again."""
    live: list[dict] = []
    batches = []
    for _ in range(draw(st.integers(1, COMPACT_EVERY + 3))):
        batch = []
        for _ in range(draw(st.integers(1, 6))):
            if live and draw(st.booleans()):
                row = live.pop(draw(st.integers(0, len(live) - 1)))
                batch.append({**row, WEIGHT: -1})
            else:
                row = {
                    "g": draw(st.sampled_from([None, 1, 2, 3])),
                    "d": draw(st.sampled_from([None, Decimal("-1.25"), Decimal("0.00"), Decimal("9999.99")])),
                    "i": draw(st.sampled_from([None, 0, 7])),
                }
                live.append(row)
                batch.append({**row, WEIGHT: 1})
        batches.append(batch)
    return batches


def _model(rows: list[dict]) -> dict:
    """Per group: live rows, non-null d and i, sum of d (None while no d ever counted)."""
    groups: dict = {}
    for row in rows:
        count, d_n, d_sum, i_n = groups.get(row["g"], (0, 0, None, 0))
        w = row[WEIGHT]
        if row["d"] is not None:
            d_n, d_sum = d_n + w, (d_sum or 0) + w * row["d"]
        groups[row["g"]] = (count + w, d_n, d_sum, i_n + (w if row["i"] is not None else 0))
    return {g: _comparable(*v) for g, v in groups.items()}


def _comparable(count, d_n, d_sum, i_n) -> tuple:
    # While no d is counted, SUM(d) is NULL whatever the running sum: Spark's state keeps a sum of
    # 0.00 once values were retracted, a forgotten group starts from NULL.
    return count, d_n, d_sum if d_n else None, i_n


def _as_model(row: dict) -> tuple:
    return _comparable(row[COUNT], row[nonnull_column(0)], row[sum_column(0)], row[nonnull_column(1)])


@settings(max_examples=examples(12), deadline=None, suppress_health_check=list(HealthCheck))
@given(batches=micro_batches(), part_rows=st.sampled_from([1, 2, PART_ROWS]))
def test_each_micro_batch_gives_the_touched_groups_running_sums_and_empty_groups_leave_the_state(
    spark, tmp_path_factory, batches, part_rows
):
    """Snapshots in parts of one or two groups too (snapshot_parts.py)."""
    directory = tmp_path_factory.mktemp("sums")
    sums, seen = GroupSums(_state(), directory, part_rows=part_rows), []
    for batch_id, batch in enumerate(batches):
        seen += batch
        after = sums.after(frame_of(spark, pa.Table.from_pylist(batch, schema=INPUT)), batch_id)
        model = _model(seen)
        assert {r["g"]: _as_model(r) for r in after.to_pylist()} == {g: model[g] for g in {r["g"] for r in batch}}
        # Spark's sums: COUNT and the non-null counts BIGINT, a DECIMAL(6,2)'s sum DECIMAL(16,2).
        assert after.schema.types[1:] == [pa.int64(), pa.int64(), pa.decimal128(16, 2), pa.int64()]
    live = {g: v for g, v in _model(seen).items() if v[0] != 0}
    now = groups_now(directory, ("g",), len(batches)).to_pylist()
    assert {r["g"]: _as_model(r) for r in now if r[COUNT] != 0} == live
    for snapshot in directory.glob("snapshot-*/part-*.parquet"):  # folded: no empty group kept
        assert 0 not in pq.read_table(snapshot).column(COUNT).to_pylist()


def test_a_group_emptied_before_a_fold_is_gone_from_the_state_after_it(spark, tmp_path):
    sums = GroupSums(_state(), tmp_path)
    rows = [{"g": 1, "d": Decimal("1.00"), "i": 1, WEIGHT: 1}, {"g": 2, "d": Decimal("2.00"), "i": 2, WEIGHT: 1}]
    sums.after(frame_of(spark, pa.Table.from_pylist(rows, schema=INPUT)), 0)
    emptied = [{**rows[0], WEIGHT: -1}]
    after = sums.after(frame_of(spark, pa.Table.from_pylist(emptied, schema=INPUT)), 1).to_pylist()
    assert [(r["g"], r[COUNT]) for r in after] == [(1, 0)]  # the emitter's delete
    for batch_id in range(2, COMPACT_EVERY + 1):
        sums.after(frame_of(spark, pa.Table.from_pylist([rows[1]], schema=INPUT)), batch_id)
    assert [p.name for p in tmp_path.glob("snapshot-*")]
    assert [r["g"] for r in groups_now(tmp_path, ("g",), COMPACT_EVERY + 1).to_pylist()] == [2]


def test_a_window_state_keeps_the_parts_of_closed_windows_as_they_were(spark, tmp_path):
    """The state is sorted by window first: a fold rewrites the parts of the windows its logs
    touch, and links the parts of earlier windows into the new snapshot unread."""
    node = SimpleNamespace(
        group_keys=("g", WINDOW_START, WINDOW_END),
        aggregates=[CALLS[2]],
        is_global=False,
        output_names=("g", WINDOW_START, WINDOW_END, "rows"),
    )
    sums = GroupSums(AggregateState(node, {}), tmp_path, part_rows=3)
    schema = pa.schema(
        [
            ("g", pa.int64()),
            (WINDOW_START, pa.timestamp("us", "UTC")),
            (WINDOW_END, pa.timestamp("us", "UTC")),
            (WEIGHT, pa.int32()),
        ]
    )
    batches = 2 * COMPACT_EVERY
    for b in range(batches):  # micro-batch b: one row per group in window b
        start = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(hours=b)
        rows = [{"g": g, WINDOW_START: start, WINDOW_END: start + timedelta(hours=1), WEIGHT: 1} for g in (3, 1, 2)]
        sums.after(frame_of(spark, pa.Table.from_pylist(rows, schema=schema)), b)
    first, second = (Snapshot(tmp_path / f"snapshot-{n:012d}", ()) for n in (COMPACT_EVERY, batches))
    kept = {os.stat(p).st_ino for (p,) in first.parts()} & {os.stat(p).st_ino for (p,) in second.parts()}
    # One window per part; all but the last linked (the last part's range takes the later windows).
    assert len(first.parts()) == COMPACT_EVERY and len(kept) == COMPACT_EVERY - 1
    now = groups_now(tmp_path, node.group_keys, batches)
    assert now.num_rows == 3 * batches and set(now.column(COUNT).to_pylist()) == {1}


def test_sums_group_as_spark_groups_and_keep_their_types():
    rows = pa.table(
        {
            "k": pa.array([0.0, -0.0, float("nan"), float("nan"), None, None], pa.float64()),
            "s": pa.array([Decimal("1.10"), Decimal("2.20"), None, Decimal("3.00"), None, None], pa.decimal128(16, 2)),
            COUNT: pa.array([1, 1, 1, 1, 1, -1], pa.int64()),
        }
    )
    summed = summed_per_group(rows, ("k",))
    assert summed.schema == rows.schema
    got = {
        ("nan" if v != v else v): (s, c)
        for v, s, c in zip(*[summed.column(n).to_pylist() for n in summed.column_names])
    }
    assert got == {0.0: (Decimal("3.30"), 2), "nan": (Decimal("3.00"), 2), None: (None, 0)}


def test_a_sum_beyond_its_type_fails_as_spark_does_naming_the_aggregate(spark, tmp_path):
    big = pa.table({"k": [1, 1], COUNT: pa.array([2**62, 2**62], pa.int64())})
    with pytest.raises(SumOverflow):
        summed_per_group(big, ("k",))
    wide = pa.schema([("g", pa.int64()), ("d", pa.decimal128(38, 0)), ("i", pa.int32()), (WEIGHT, pa.int32())])
    state = AggregateState(NODE, {"d": pa.decimal128(38, 0), "i": pa.int32()})
    sums = GroupSums(state, tmp_path)
    # Each micro-batch's own sum fits DECIMAL(38,0); their running sum does not.
    six = frame_of(spark, pa.Table.from_pylist([{"g": 1, "d": Decimal("9" * 37), "i": 1, WEIGHT: 1}] * 6, schema=wide))
    sums.after(six, 0)
    assert groups_now(tmp_path, ("g",), 1).column(sum_column(0)).to_pylist() == [Decimal(6 * (10**37 - 1))]
    with pytest.raises(InputError, match=r"SUM\(d\) AS total"):
        sums.after(six, 1)


HOUR = 3_600_000


def test_with_a_ttl_an_idle_group_is_forgotten_and_starts_again_from_nothing(spark, tmp_path):
    sums = GroupSums(_state(), tmp_path, ttl=timedelta(hours=1))

    def step(batch_id: int, rows: list[dict], now_ms: int) -> dict:
        frame = frame_of(spark, pa.Table.from_pylist(rows, schema=INPUT))
        return {r["g"]: _as_model(r) for r in sums.after(frame, batch_id, now_ms).to_pylist()}

    one = {"g": 1, "d": Decimal("5.00"), "i": 1}
    two = {"g": 2, "d": Decimal("1.00"), "i": None}
    assert step(0, [{**one, WEIGHT: 1}, {**two, WEIGHT: 1}], 0) == {
        1: (1, 1, Decimal("5.00"), 1),
        2: (1, 1, Decimal("1.00"), 0),
    }
    assert step(1, [{**two, WEIGHT: 1}], HOUR // 2) == {2: (2, 2, Decimal("2.00"), 0)}
    # Group 1 has been idle for more than an hour: a new row starts it again from nothing.
    assert step(2, [{**one, WEIGHT: 1}], 2 * HOUR) == {1: (1, 1, Decimal("5.00"), 1)}
    # Its forgotten rows are retracted in the state for good, whenever the logs are folded.
    for batch_id in range(3, COMPACT_EVERY + 2):
        step(batch_id, [{**one, WEIGHT: 1}, {**one, WEIGHT: -1}], 2 * HOUR + batch_id)
    assert [p.name for p in tmp_path.glob("snapshot-*")]
    assert {r["g"]: r[COUNT] for r in groups_now(tmp_path, ("g",), COMPACT_EVERY + 2).to_pylist()} == {1: 1}
    # A retraction that finds only forgotten state is ignored, as Flink ignores it, and counted.
    assert step(COMPACT_EVERY + 2, [{**one, WEIGHT: -1}], 4 * HOUR) == {}
    assert sums.ignored_groups == 1


DRIVER_CALLS = [
    AggCall("SUM", "i", False, "si"),
    AggCall("AVG", "d", False, "ad"),
    AggCall("SUM", "x", False, "sx"),
    AggCall("COUNT", "f", False, "nf"),
    AggCall("SUM", "f", False, "sf"),
    AggCall("COUNT", None, False, "n"),
]
DRIVER_INPUT = pa.schema(
    [
        ("k", pa.float64()),
        ("s", pa.string()),
        ("i", pa.int32()),
        ("d", pa.decimal128(6, 2)),
        ("x", pa.float64()),
        ("f", pa.float32()),
        (WEIGHT, pa.int32()),
    ]
)


@st.composite
def weighted_rows(draw) -> pa.Table:
    rows = [
        {
            "k": draw(st.sampled_from([None, 0.0, -0.0, float("nan"), 2.5])),
            "s": draw(st.sampled_from([None, "a", "é"])),
            "i": draw(st.sampled_from([None, -3, 2_000_000_000])),
            "d": draw(st.sampled_from([None, Decimal("-1.25"), Decimal("9999.99")])),
            "x": draw(st.sampled_from([None, 0.1, -2.0, float("inf")])),
            "f": draw(st.sampled_from([None, 1.5])),
            WEIGHT: draw(st.sampled_from([1, -1])),
        }
        for _ in range(draw(st.integers(0, 12)))
    ]
    return pa.Table.from_pylist(rows, schema=DRIVER_INPUT)


# MIN, MAX and DISTINCT: each row spread over value slots (-0.0, NaN among MAX(k)'s values).
SLOT_CALLS = [
    *DRIVER_CALLS,
    AggCall("MIN", "i", False, "mi"),
    AggCall("MAX", "k", False, "mk"),
    AggCall("COUNT", "s", True, "ds"),
]


@pytest.mark.parametrize("calls", [DRIVER_CALLS, SLOT_CALLS], ids=["sums", "value slots"])
@settings(max_examples=examples(20), deadline=None, suppress_health_check=list(HealthCheck))
@given(rows=weighted_rows())
def test_the_driver_sums_a_micro_batch_as_spark_sums_it(spark, calls, rows):
    node = SimpleNamespace(group_keys=("k", "s"), aggregates=calls, is_global=False)
    state = AggregateState(
        node, {c: from_arrow_type(DRIVER_INPUT.field(c).type) for c in ("k", "s", "i", "d", "x", "f")}
    )
    in_spark = streaming_aggregate(frame_of(spark, rows), state).withColumn(TOUCHED, F.lit(7).cast("bigint"))
    schema = to_arrow_schema(in_spark.schema, timezone="UTC")
    weights = rows.column(WEIGHT).cast(pa.int64())
    on_driver = sums_on_driver(rows.drop_columns([WEIGHT]).append_column(COUNT, weights), state, schema, 7)
    assert on_driver.schema.equals(schema.remove_metadata())

    def by_group(table: pa.Table) -> dict:
        # NaN is not equal to itself: compared by its text; sums of doubles to the last bits.
        return {
            repr(tuple(r[k] for k in state.state_key)): {
                c: (round(v, 9) if isinstance(v, float) and v == v else repr(v)) for c, v in r.items()
            }
            for r in table.to_pylist()
        }

    assert by_group(on_driver) == by_group(in_spark.toArrow())


FINISH_SQL = (
    "SELECT pId, SUM(income) AS total, COUNT(*) AS n, AVG(qty) AS a, COUNT(income) AS c, SUM(qty) AS q "
    "FROM orders GROUP BY pId"
)


@st.composite
def touched_groups(draw, state: AggregateState) -> pa.Table:
    """Groups' sums after a micro-batch, as group_sums gives them: counts of 0-3, sums of any."""
    columns = {"pId": [], COUNT: []}
    for name, _, _ in state_columns(state.node):
        columns[name] = []
    for pid in draw(st.lists(st.sampled_from([None, 1, 2, 3, 4]), unique=True)):
        count = draw(st.integers(0, 3))
        columns["pId"].append(pid)
        columns[COUNT].append(count)
        for name, kind, arg in state_columns(state.node):
            if kind == "nonnull":
                columns[name].append(draw(st.integers(0, count)))
            elif arg == "income":
                columns[name].append(draw(st.sampled_from([None, 0.0, -2.5, float("nan"), 1e300])))
            else:
                columns[name].append(draw(st.sampled_from([None, 0, -7, 2**40])))
    types = {
        "pId": pa.int64(),
        COUNT: pa.int64(),
        **{
            n: (pa.float64() if arg == "income" and kind == "sum" else pa.int64())
            for n, kind, arg in state_columns(state.node)
        },
    }
    return pa.table({n: pa.array(v, types[n]) for n, v in columns.items()})


def _finishing(tmp_path):
    from pyspark.sql.types import DoubleType, IntegerType, LongType, StructField, StructType

    from jobs.plan import plan_query
    from jobs.spec import load_spec
    from jobs.stream.emitters import AggregateEmitter
    from tests.conftest import orders_spec

    spec = orders_spec(tmp_path, FINISH_SQL, source={"schema": "order_id BIGINT, pId BIGINT, income DOUBLE, qty INT"})
    stage = plan_query(load_spec(spec)).final_stage
    state = AggregateState(stage.aggregate, {"income": DoubleType(), "qty": IntegerType()})
    output = StructType(
        [
            StructField(n, t)
            for n, t in [
                ("pId", LongType()),
                ("total", DoubleType()),
                ("n", LongType()),
                ("a", DoubleType()),
                ("c", LongType()),
                ("q", LongType()),
            ]
        ]
    )
    return state, AggregateEmitter(stage, state, None, output), output


def test_the_driver_finishes_the_groups_as_spark_finalises_them(spark, tmp_path):
    state, emitter, output = _finishing(tmp_path)
    assert finishes_on_driver(state, emitter.post)

    def comparable(rows: list[dict]) -> dict:
        return {r["pId"]: {k: ("nan" if isinstance(v, float) and v != v else v) for k, v in r.items()} for r in rows}

    @settings(max_examples=examples(20), deadline=None, suppress_health_check=list(HealthCheck))
    @given(groups=touched_groups(state))
    def check(groups):
        on_driver = finished_groups(groups, state, emitter.post, output)
        in_spark = emitter._finished(spark, frame_of(spark, groups), SimpleNamespace(id=0), ())
        assert comparable(on_driver.to_pylist()) == comparable([r.asDict() for r in in_spark.collect()])

    check()


SLOTS_SQL = "SELECT pId, COUNT(*) AS n, MAX(qty) AS top, COUNT(DISTINCT qty) AS d FROM orders GROUP BY pId"


@st.composite
def slotted_groups(draw) -> tuple[pa.Table, pa.Table]:
    """Touched groups' sums with value slots (slot 0 the group's count, slots 1 and 2 some
    values' counts) and the MIN / MAX / DISTINCT results the multisets give for some of them."""
    pids = draw(st.lists(st.sampled_from([None, 1, 2, 3]), unique=True))
    rows = [{"pId": p, SLOT: 0, "__v1": None, "__v2": None, COUNT: draw(st.integers(0, 3))} for p in pids]
    rows += [
        {"pId": p, SLOT: s, "__v1": v if s == 1 else None, "__v2": v if s == 2 else None, COUNT: 1}
        for p in pids
        for s, v in draw(st.lists(st.tuples(st.sampled_from([1, 2]), st.integers(0, 9)), max_size=3))
    ]
    groups = pa.Table.from_pylist(
        rows,
        schema=pa.schema(
            [("pId", pa.int64()), (SLOT, pa.int32()), ("__v1", pa.int32()), ("__v2", pa.int32()), (COUNT, pa.int64())]
        ),
    )
    valued = draw(st.lists(st.sampled_from(pids), unique=True)) if pids else []
    values = pa.Table.from_pylist(
        [{"pId": p, "top": draw(st.sampled_from([None, 4])), "d": draw(st.integers(0, 3))} for p in valued],
        schema=pa.schema([("pId", pa.int64()), ("top", pa.int32()), ("d", pa.int64())]),
    )
    return groups, values


def test_the_driver_finishes_min_max_and_distinct_as_spark_finalises_them(spark, tmp_path):
    from pyspark.sql.types import IntegerType, LongType, StructField, StructType

    from jobs.plan import plan_query
    from jobs.spec import load_spec
    from jobs.stream.emitters import AggregateEmitter
    from jobs.stream.operators.aggregate.streaming import finalize
    from tests.conftest import orders_spec

    spec = orders_spec(tmp_path, SLOTS_SQL, source={"schema": "order_id BIGINT, pId BIGINT, income DOUBLE, qty INT"})
    stage = plan_query(load_spec(spec)).final_stage
    state = AggregateState(stage.aggregate, {"qty": IntegerType()})
    assert state.has_slots and finishes_on_driver(state, None)
    output = StructType(
        [
            StructField(n, t)
            for n, t in [("pId", LongType()), ("n", LongType()), ("top", IntegerType()), ("d", LongType())]
        ]
    )
    emitter = AggregateEmitter(stage, state, None, output)

    @settings(max_examples=examples(20), deadline=None, suppress_health_check=list(HealthCheck))
    @given(touched=slotted_groups())
    def check(touched):
        groups, values = touched
        on_driver = finished_groups(groups, state, emitter.post, output, (), values)
        in_spark = finalize(frame_of(spark, groups), state, frame_of(spark, values), emitter._results)
        in_spark = in_spark.select(*emitter._output_columns(()))
        key = lambda r: repr(r["pId"])  # noqa: E731
        assert sorted(on_driver.to_pylist(), key=key) == sorted([r.asDict() for r in in_spark.collect()], key=key)

    check()
