"""`lockstep_changelog`: a Spark streaming source over a staged changelog (Python Data Source API).

Offsets are positions in the staged changelog ({"seq": n}). Each micro-batch takes at most
`rows_per_batch` rows (Spark's ReadMaxRows read limit), and never ends right after a -U, so an
update's before- and after-image land in the same micro-batch. Rows come out as Arrow batches
with their weight (+1/-1), position and kind.

Options: `staged` (the staged changelog folder), `rows_per_batch`, `partitions`.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from jobs.changelog.kinds import RowKind
from jobs.changelog.schema import KIND, SEQ, WEIGHT
from jobs.changelog.staging import StagedChangelog


class ChangelogDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "lockstep_changelog"

    def schema(self) -> str:
        return StagedChangelog(Path(self.options["staged"])).schema.stream_ddl()

    def streamReader(self, schema) -> DataSourceStreamReader:
        return ChangelogStreamReader(self.options)


class SeqRange(InputPartition):
    def __init__(self, staged: str, start: int, end: int):
        super().__init__((start, end))
        self.staged, self.start, self.end = staged, start, end


class ChangelogStreamReader(DataSourceStreamReader):
    def __init__(self, options):
        self.staged = options["staged"]
        self.rows_per_batch = int(options["rows_per_batch"])
        self.partition_count = int(options.get("partitions", "2"))
        self.changelog = StagedChangelog(Path(self.staged))
        self._kinds = None

    def initialOffset(self) -> dict:
        return {"seq": 0}

    def getDefaultReadLimit(self):
        return ReadMaxRows(self.rows_per_batch)

    def reportLatestOffset(self) -> dict:
        return {"seq": self.changelog.total_rows}

    def latestOffset(self, start: dict, limit) -> dict:
        total = self.changelog.total_rows
        if isinstance(limit, ReadAllAvailable):
            return {"seq": total}
        return {"seq": self._extend_past_update_before(min(total, start["seq"] + limit.max_rows))}

    def _extend_past_update_before(self, end: int) -> int:
        kinds = self._all_kinds()
        while 0 < end < len(kinds) and kinds[end - 1] == RowKind.UPDATE_BEFORE:
            end += 1
        return end

    def _all_kinds(self) -> list[int]:
        if self._kinds is None:
            self._kinds = self.changelog.read(0, self.changelog.total_rows, [KIND]).column(KIND).to_pylist()
        return self._kinds

    def partitions(self, start: dict, end: dict):
        lo, hi = start["seq"], end["seq"]
        if lo >= hi:
            return []
        step = max(1, -(-(hi - lo) // self.partition_count))
        return [SeqRange(self.staged, s, min(s + step, hi)) for s in range(lo, hi, step)]

    def read(self, partition: SeqRange):
        changelog = StagedChangelog(Path(partition.staged))
        names = list(changelog.schema.names)
        rows = changelog.read(partition.start, partition.end, names + [KIND, SEQ])
        weights = pc.if_else(pc.is_in(rows.column(KIND), value_set=pa.array(
            [RowKind.UPDATE_BEFORE, RowKind.DELETE], pa.int8())), -1, 1).cast(pa.int32())
        out = pa.table({**{n: rows.column(n) for n in names}, WEIGHT: weights,
                        SEQ: rows.column(SEQ), KIND: rows.column(KIND)})
        yield from out.to_batches()

    def commit(self, end: dict) -> None:
        pass
