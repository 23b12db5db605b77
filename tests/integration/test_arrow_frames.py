"""Every row of an Arrow table reaches Spark (jobs/runtime/arrow_frames.py), whatever batches
the table is made of: pyspark's own createDataFrame stops at the first empty batch."""

import pyarrow as pa

from jobs.runtime.arrow_frames import frame_of


def _batches(*sizes: int) -> pa.Table:
    pieces, start = [], 0
    for size in sizes:
        pieces.append(pa.table({"k": pa.array(range(start, start + size), pa.int64())}))
        start += size
    return pa.concat_tables(pieces)


def test_rows_after_an_empty_batch_are_kept(spark):
    table = _batches(2, 0, 3, 0)
    assert [len(c) for c in table.column("k").chunks] == [2, 0, 3, 0]
    assert sorted(r.k for r in frame_of(spark, table).collect()) == list(range(5))


def test_a_table_of_empty_batches_or_none_is_an_empty_frame_of_its_columns(spark):
    for table in (_batches(0, 0), pa.table({"k": pa.array([], pa.int64())})):
        frame = frame_of(spark, table)
        assert frame.columns == ["k"] and frame.count() == 0
