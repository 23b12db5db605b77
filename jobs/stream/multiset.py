"""The value-multiset table: for MIN, MAX and DISTINCT aggregates, every live value per group.

Spark's streaming aggregation counts each (group, slot, value); its update output gives the new
count of every value touched in a micro-batch. Those counts are MERGEd into this Delta table
(a count of zero deletes the value), and the touched groups' MIN / MAX / COUNT(DISTINCT) are then
recomputed from it. Setting counts, not adding to them, makes a replayed micro-batch harmless;
the transaction id makes it a no-op.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from deltalake.transaction import CommitProperties, Transaction
from pyspark.sql import DataFrame, SparkSession

from jobs.changelog.columns import COUNT
from jobs.runtime.delta import is_committed
from jobs.stream.aggregate import AggregateState
from jobs.stream.calc import null_safe_equal


class ValueMultisets:
    def __init__(self, path: Path, state: AggregateState, app_id: str):
        self.path, self.state, self.app_id = str(path), state, f"{app_id}-values"
        self._schema: pa.Schema | None = None

    def apply(self, counts: pa.Table, batch_id: int) -> None:
        """MERGE new counts (slot key columns + __count) into the table."""
        self._schema = counts.schema
        if not DeltaTable.is_deltatable(self.path):
            write_deltalake(self.path, counts.schema.empty_table(), mode="error")
        table = DeltaTable(self.path)
        if is_committed(table, self.app_id, batch_id) or counts.num_rows == 0:
            return
        match = " AND ".join(f"(t.`{k}` IS NOT DISTINCT FROM s.`{k}`)" for k in self.state.slot_key)
        columns = {f"`{c}`": f"s.`{c}`" for c in counts.column_names}
        (table.merge(counts, predicate=match, source_alias="s", target_alias="t",
                     commit_properties=CommitProperties(
                         app_transactions=[Transaction(self.app_id, batch_id)]))
         .when_matched_delete(predicate=f"s.{COUNT} <= 0")
         .when_matched_update(updates={f"`{COUNT}`": f"s.`{COUNT}`"})
         .when_not_matched_insert(updates=columns, predicate=f"s.{COUNT} > 0")
         .execute())

    def live_values(self, spark: SparkSession, touched: DataFrame) -> DataFrame:
        """The live values of the touched groups, as a Spark DataFrame (call after apply)."""
        files = DeltaTable(self.path).file_uris()
        if not files:
            return spark.createDataFrame(self._schema.empty_table())
        values = spark.read.parquet(*files).alias("a")
        return values.join(touched.alias("b"), null_safe_equal("a", "b", self.state.keys), "left_semi")
