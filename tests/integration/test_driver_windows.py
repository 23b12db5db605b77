"""Windows assigned on the driver (jobs/stream/operators/window/driver_windows.py) must be Spark's window(): the
same (row, window) pairs, the late ones left out as the stream's Spark path leaves them out, for
tumbling and hopping windows (a slide that does not divide the size too), times before 1970,
on window boundaries and missing."""

from datetime import timedelta

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobs.changelog.columns import COUNT, WATERMARK, WINDOW_END, WINDOW_START
from jobs.changelog.frames import assign_windows, on_time
from jobs.plan.nodes import WindowSpec
from jobs.runtime.arrow_frames import frame_of
from jobs.stream.operators.window.driver_windows import on_time_windows
from tests.strategies import examples

WINDOWS = [
    WindowSpec("t", timedelta(minutes=1), timedelta(minutes=1), "1 minute", "1 minute"),
    WindowSpec("t", timedelta(minutes=10), timedelta(minutes=5), "10 minutes", "5 minutes"),
    WindowSpec("t", timedelta(seconds=10), timedelta(seconds=3), "10 seconds", "3 seconds"),
    WindowSpec("t", timedelta(days=1), timedelta(days=1), "1 day", "1 day"),
]
MINUTE = 60_000_000
TIMES = st.one_of(
    st.none(),
    st.integers(-3 * MINUTE, 3 * MINUTE),
    st.integers(-4, 4).map(lambda k: k * MINUTE),
    st.integers(-4, 4).map(lambda k: k * 3_000_000 - 1),
)
UTC = pa.timestamp("us", tz="UTC")


@st.composite
def staged_rows(draw) -> pa.Table:
    count = draw(st.integers(0, 10))
    times = [draw(TIMES) for _ in range(count)]
    marks = [
        draw(st.one_of(st.none(), st.integers(-2 * MINUTE, 2 * MINUTE), st.integers(-3, 3).map(lambda k: k * MINUTE)))
        for _ in range(count)
    ]
    return pa.table(
        {
            "id": pa.array(range(count), pa.int64()),
            "t": pa.array(times, pa.int64()).cast(UTC),
            COUNT: pa.array([1] * count, pa.int64()),
            WATERMARK: pa.array(marks, pa.int64()).cast(UTC),
        }
    )


def _pairs(table: pa.Table) -> list[tuple]:
    starts = table.column(WINDOW_START).cast(pa.int64()).to_pylist()
    ends = table.column(WINDOW_END).cast(pa.int64()).to_pylist()
    return sorted(zip(table.column("id").to_pylist(), starts, ends))


@settings(max_examples=examples(30), deadline=None, suppress_health_check=list(HealthCheck))
@given(rows=staged_rows(), window=st.sampled_from(WINDOWS))
def test_the_driver_assigns_the_windows_spark_assigns(spark, rows, window):
    on_driver = on_time_windows(rows, window)
    in_spark = assign_windows(frame_of(spark, rows), window.spark_sql()).where(on_time()).toArrow()
    assert _pairs(on_driver) == _pairs(in_spark)
    assert on_driver.column_names == ["id", "t", WINDOW_START, WINDOW_END, COUNT]
    assert on_driver.schema.field(WINDOW_START).type == in_spark.schema.field(WINDOW_START).type


def test_a_window_the_watermark_reached_is_closed_to_its_rows():
    at_30s = 30_000_000
    rows = pa.table(
        {
            "id": pa.array([1, 2, 3], pa.int64()),
            "t": pa.array([at_30s] * 3, pa.int64()).cast(UTC),
            COUNT: pa.array([1, 1, 1], pa.int64()),
            WATERMARK: pa.array([MINUTE, MINUTE - 1, None], pa.int64()).cast(UTC),
        }
    )
    assert _pairs(on_time_windows(rows, WINDOWS[0])) == [(2, 0, MINUTE), (3, 0, MINUTE)]
