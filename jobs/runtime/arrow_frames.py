"""Arrow tables handed to Spark as DataFrames, every row of them.

pyspark's createDataFrame(pa.Table) sends the table's record batches to the JVM as an Arrow
stream, and the JVM's reader stops at the first batch with no rows: the rows of every batch after
it are lost without a word (pyspark 4.2: a table of batches of 2, 0 and 2 rows gave a frame of 2
rows). Tables that are concatenated or filtered on the driver (a keyed state's live rows, a
micro-batch's rows for the sink) easily hold empty batches, so every Arrow table goes to Spark
through frame_of, without them.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession


def frame_of(spark: SparkSession, table: pa.Table) -> DataFrame:
    """`table` as a Spark DataFrame (a local relation), all of its rows."""
    batches = [batch for batch in table.to_batches() if batch.num_rows]
    return spark.createDataFrame(pa.Table.from_batches(batches, schema=table.schema))
