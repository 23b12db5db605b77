"""A differential case: one query, written for lockstep (Spark SQL and a spec) and for Flink
(Flink SQL), and the changelogs of its sources. Plain JSON-ready data, so the Flink runner (in its
own environment) and saved regression cases read it without importing anything from lockstep.

Column types are a small shared vocabulary: BIGINT, DOUBLE, DECIMAL(10,2), STRING and TIMESTAMP
(millisecond precision, UTC, written as ISO strings without a zone). Decimals are strings.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

KINDS = ("+I", "-U", "+U", "-D")


@dataclass
class Column:
    name: str
    type: str

    @property
    def spark_type(self) -> str:
        return self.type  # the vocabulary is Spark's DDL already


@dataclass
class Source:
    name: str
    columns: list[Column]
    primary_key: list[str]
    rows: list[list]  # [kind, value, ...] in changelog order
    event_time: str | None = None
    watermark_ms: int | None = None
    insert_only: bool = False  # a plain json source: every row an insert
    late: list[int] = field(default_factory=list)  # the changes (by index) the watermark drops

    def final_rows(self) -> list[list]:
        """The rows the changelog leaves, as inserts, in event-time order (else changelog order);
        the changes the watermark drops are left out."""
        live: list[list] = []
        dropped = set(self.late)
        for i, (kind, *values) in enumerate(self.rows):
            if i in dropped:
                continue
            if kind in ("+I", "+U"):
                live.append(values)
            else:
                live.remove(values)
        if self.event_time:
            position = [c.name for c in self.columns].index(self.event_time)
            live.sort(key=lambda values: values[position])
        return [["+I", *values] for values in live]

    def schema_ddl(self) -> str:
        return ", ".join(f"{c.name} {c.spark_type}" for c in self.columns)


@dataclass
class Case:
    name: str  # <query class>-<seed>, unique in a run
    query_class: str
    spark_sql: str
    flink_sql: str
    sources: list[Source]
    sink: dict = field(default_factory=dict)  # the lockstep spec's sink section
    rows_per_batch: int = 1000
    state_store: str = "lockstep"  # the spec's stream.state_store (make differential STATE_STORE=rocksdb)
    engine: str = "local"  # the spec's stream.engine (make differential ENGINE=spark)
    # What the final sink table is compared with: "flink" (Flink SQL's streaming result), or
    # "batch" where Flink's streaming semantics differ from the SQL's on purpose (docs/sql.md).
    reference: str = "flink"
    # Where lockstep reads the changelogs: "files" (a folder per source), or "kafka" (a topic of one
    # partition per source, produced line by line, so that the order is the files' and Flink's).
    source_kind: str = "files"

    @property
    def size(self) -> int:
        return sum(len(s.rows) for s in self.sources)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> Case:
        sources = [Source(**{**s, "columns": [Column(**c) for c in s["columns"]]}) for s in data["sources"]]
        return cls(**{**data, "sources": sources})

    def for_flink(self) -> dict:
        """What the Flink runner reads. With reference "batch", each source is its final rows,
        inserted in event-time order: Flink then computes what a batch query over them would."""
        return {
            "flink_sql": self.flink_sql,
            "sources": {
                s.name: {
                    "columns": [asdict(c) for c in s.columns],
                    "primary_key": s.primary_key,
                    "rows": s.rows if self.reference == "flink" else s.final_rows(),
                    "event_time": s.event_time,
                    "watermark_ms": s.watermark_ms,
                }
                for s in self.sources
            },
        }

    def write(self, path: Path) -> Path:
        path.write_text(json.dumps(self.to_json(), indent=1))
        return path
