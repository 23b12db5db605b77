"""The query spec (conf/queries/*.yaml) and the settings file (conf/settings.yaml).

Pydantic only at this edge: unknown keys are rejected (extra="forbid") and every model is frozen.
Paths in a spec are relative to the spec file; `load_spec` resolves them.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from jobs.errors import place
from jobs.spec.intervals import parse_interval

IDENTIFIER = r"^[A-Za-z_][A-Za-z0-9_]*$"
SCHEDULE_PRESETS = ("@once", "@continuous", "@hourly", "@daily", "@weekly", "@monthly", "@quarterly",
                    "@yearly", "@annually")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SourceSpec(Strict):
    """One changelog source: a folder of files read in name order, rows in file order; or, with
    format delta, an existing Delta table's change data feed, read version by version."""

    path: Path
    format: Literal["changelog-json", "debezium-json", "json", "delta"]
    schema_ddl: str = Field(alias="schema")
    primary_key: tuple[str, ...] = ()
    # fail: exit 2 at the first bad row. quarantine: set bad rows aside, counted in the report.
    # keep: malformed rows are quarantined, but rows that only break the changelog protocol (a
    # retraction of a row never inserted, an update without its before-image) are fed to both
    # jobs as they are, as Flink would, and listed as anomalies: the check attributes the
    # differences they cause to them.
    on_bad_rows: Literal["fail", "quarantine", "keep"] = "fail"
    # Event time and the allowed out-of-orderness: watermark = max event time seen - watermark.
    event_time: str | None = None
    watermark: str | None = None
    # true: the files are a finished changelog (a replay, a dated partition): at the end of the
    # input every window closes, as Flink ends a bounded source with the largest watermark; a
    # later change to a closed window is late. false: a pipeline that resumes tomorrow; windows
    # stay open until the watermark passes them.
    bounded: bool = True
    # date: the changelog arrives in daily folders, path/date=YYYY-MM-DD/*; a scheduled run for
    # logical date D reads the folders up to D.
    partitioned_by: Literal["date"] | None = None
    # format delta only: the version (or the commit time: the latest version committed at or
    # before it) whose snapshot starts the changelog, as inserts; the versions after it follow as
    # their change data feed. Neither: version 0.
    starting_version: int | None = Field(default=None, ge=0)
    starting_timestamp: datetime | None = None

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @field_validator("watermark")
    @classmethod
    def _watermark_is_an_interval(cls, value: str | None) -> str | None:
        if value is not None:
            parse_interval(value)
        return value

    @model_validator(mode="after")
    def _event_time_and_watermark_together(self) -> SourceSpec:
        if (self.event_time is None) != (self.watermark is None):
            raise ValueError("event_time and watermark go together: give both or neither")
        return self

    @model_validator(mode="after")
    def _starting_point_of_a_delta_table(self) -> SourceSpec:
        starts = self.starting_version is not None or self.starting_timestamp is not None
        if starts and self.format != "delta":
            raise ValueError("starting_version and starting_timestamp are for format: delta")
        if self.starting_version is not None and self.starting_timestamp is not None:
            raise ValueError("give starting_version or starting_timestamp, not both")
        if self.format == "delta" and self.partitioned_by is not None:
            raise ValueError("a delta source is read by version, not by date partition")
        return self

    @property
    def watermark_delay(self) -> timedelta | None:
        return parse_interval(self.watermark) if self.watermark is not None else None


class SinkSpec(Strict):
    # None: the query's upsert key (the group keys, or the source key for a projection).
    primary_key: tuple[str, ...] | None = None
    upsert_materialize: Literal["auto", "none", "force"] = "auto"
    # What the sink accepts: append (inserts only), upsert (by primary key) or retract (every
    # change, the table a multiset of rows with a count).
    # None: upsert when the sink names a primary key or the query's output has a unique key,
    # else retract (as Flink writes a retract changelog to a sink table without a primary key).
    changelog_mode: Literal["append", "upsert", "retract"] | None = None
    # Windowed queries only. final: a window's row is written once, when the watermark passes
    # its end (an append query). early: written and updated as changes arrive. None: final.
    emit: Literal["final", "early"] | None = None
    # Who writes the Delta tables (the sink, stage tables, the batch result) and reads their change
    # feeds: delta-rs, embedded in the driver, or delta-spark, Delta's Spark connector on the
    # executors (the cluster path). `--writer` overrides it. The default is the faster one on
    # one machine (README: Sink writers).
    writer: Literal["delta-rs", "delta-spark"] = "delta-rs"

    @property
    def through_spark(self) -> bool:
        """The tables are written, and their feeds read, by Delta's Spark connector."""
        return self.writer == "delta-spark"


class CacheSpec(Strict):
    max_rows: int = Field(default=0, ge=0)  # 0: no cache
    ttl: str = "10 minutes"


class LookupSpec(Strict):
    """An external dimension service the SQL joins like a table (JOIN <name> ON ... = <name>.<key>)."""

    kind: Literal["http"]
    url: str  # with {key column} placeholders, e.g. http://127.0.0.1:8765/customers/{customer_id}
    key: tuple[str, ...] = Field(min_length=1)
    output: str  # Spark DDL of the columns the service answers, e.g. "name STRING, tier STRING"
    capacity: int = Field(default=100, ge=1)  # requests in flight per Spark task
    timeout: str = "2 seconds"
    retries: int = Field(default=2, ge=0)
    order: Literal["ordered", "unordered"] = "ordered"
    cache: CacheSpec = CacheSpec()
    # fail: a lookup that still fails after the retries fails the micro-batch, naming the key.
    # null: the row gets nulls, counted in the report.
    on_lookup_error: Literal["fail", "null"] = "fail"

    @field_validator("on_lookup_error", mode="before")
    @classmethod
    def _bare_null_means_null(cls, value: object) -> object:
        # YAML reads an unquoted `null` as None: the user meant the policy named "null".
        return "null" if value is None else value

    @field_validator("timeout")
    @classmethod
    def _timeout_is_an_interval(cls, value: str) -> str:
        parse_interval(value)
        return value


StateStore = Literal["lockstep", "memory", "rocksdb"]  # stream.state_store's values (get_args for a CLI's choices)


class StreamSpec(Strict):
    # Unset: micro-batches are cut by size, about `megabytes_per_batch` of staged rows each, so a
    # replay takes a few large micro-batches. A number: exactly that many rows per micro-batch
    # (tests set small ones to get many boundaries). Fewer, larger micro-batches cost less than
    # their sum, not only the fixed cost of each: a group touched in every micro-batch is updated
    # (aggregation state, sink MERGE, a keyed operator's state files) once instead of each time.
    # 256 MiB (about 4 M of the race's rows) replayed the race's 6 M-row group aggregate in 30-33 s
    # against 44-46 s at 64 MiB, in no more memory; larger gained little more (30-32 s at 512), and
    # a keyed operator holds its micro-batch on the driver and in the driver's heap, so the
    # micro-batch is kept to a sixteenth of the default 4 GiB heap; a smaller heap wants a smaller
    # one (README, the race: micro-batch size).
    rows_per_batch: int | None = Field(default=None, ge=1)
    megabytes_per_batch: int = Field(default=256, ge=1)
    # Where a group aggregate's or a window's state is kept (jobs/stream/state_store.py):
    # lockstep keeps its sums per group in its own files, read by key, and forgets a group whose
    # rows were all retracted; memory and rocksdb are Spark's streaming aggregation with its
    # state stores, which keep every group ever seen (rocksdb on disk: a state larger than
    # memory).
    state_store: StateStore = "lockstep"
    # Forget a group's aggregation state once it has not changed for this long, as Flink's
    # table.exec.state.ttl (e.g. "1 day"); off by default. The stream's result may then differ
    # from the batch's, and the report says so. Only with state_store: lockstep.
    state_ttl: str | None = None

    @field_validator("state_ttl")
    @classmethod
    def _ttl_is_an_interval(cls, value: str | None) -> str | None:
        if value is not None and parse_interval(value) <= timedelta(0):
            raise ValueError("must be a positive interval, e.g. '1 day'")
        return value

    @model_validator(mode="after")
    def _ttl_needs_lockstep_state(self) -> StreamSpec:
        if self.state_ttl is not None and self.state_store != "lockstep":
            raise ValueError(f"state_ttl needs state_store: lockstep (Spark's {self.state_store} "
                             f"store keeps every group)")
        return self

    @property
    def ttl(self) -> timedelta | None:
        return parse_interval(self.state_ttl) if self.state_ttl is not None else None

    def rows_for(self, rows: int, nbytes: int) -> int:
        """Rows per micro-batch for staged rows of this many rows and bytes."""
        if self.rows_per_batch is not None:
            return self.rows_per_batch
        return max(1, self.megabytes_per_batch * 2**20 * rows // max(nbytes, 1))


class QuerySpec(Strict):
    name: str = Field(pattern=IDENTIFIER)
    description: str = ""
    sql: str
    sources: dict[str, SourceSpec] = Field(min_length=1)
    lookups: dict[str, LookupSpec] = {}
    sink: SinkSpec = SinkSpec()
    stream: StreamSpec = StreamSpec()
    # The DAG's schedule: an Airflow preset (@daily) or a five-field cron; None: triggered only.
    schedule: str | None = None
    # Set by the loader, not by the YAML: where the spec came from and where its SQL starts,
    # so that errors in the SQL can name the YAML line.
    spec_path: Path = Path("<memory>")
    sql_line: int = 1
    key_lines: dict[str, int] = {}  # the YAML line of each key, by dotted path (sources.orders.schema)

    def place_of(self, *keys: str) -> str:
        """`file:line` of a key of the spec (`place_of("sources", "orders", "schema")`)."""
        dotted = ".".join(keys)
        line = self.key_lines.get(dotted)
        return f"{place(self.spec_path, line)}: {dotted}" if line else f"{self.spec_path}: {dotted}"

    @field_validator("schedule")
    @classmethod
    def _schedule_is_a_preset_or_cron(cls, value: str | None) -> str | None:
        if value is not None and value not in SCHEDULE_PRESETS and len(value.split()) != 5:
            raise ValueError(f"{value!r} is neither a preset ({', '.join(SCHEDULE_PRESETS)}) nor a "
                             f"five-field cron expression")
        return value

    @property
    def partitioned(self) -> bool:
        return any(s.partitioned_by for s in self.sources.values())

    @field_validator("sources", "lookups")
    @classmethod
    def _names_are_identifiers(cls, tables: dict) -> dict:
        """Source and lookup names are SQL table names and folder names: identifiers only."""
        for name in tables:
            if not name.isidentifier():
                raise ValueError(f"name {name!r} is not a SQL identifier")
        return tables


class SparkSettings(Strict):
    master: str = "local[2]"
    shuffle_partitions: int = Field(default=2, ge=1)
    driver_memory: str = "4g"
    executor_memory: str = "1g"  # per executor, on a cluster (--master spark://...)
    # Timestamps without a zone are read and shown in this zone, so a run gives the same
    # result on any machine.
    session_time_zone: str = "UTC"
    # A micro-batch, batch job or check over fewer input rows than this runs without whole-stage
    # code generation and adaptive execution (jobs/runtime/small_work.py); 0 never switches them.
    small_work_rows: int = Field(default=10_000, ge=0)
    # A stream step whose sources' files total fewer MiB than this starts the driver JVM with its
    # quick compiler alone (jobs/runtime/jit.py: seconds sooner on small input, slower once warm);
    # 0 never.
    quick_jit_below_mib: int = Field(default=256, ge=0)
    extra: dict[str, str] = {}


class CheckSettings(Strict):
    # Floating columns (AVG, SUM over DOUBLE) may differ in the last bits between an incremental
    # and a one-shot computation: |a - b| <= abs_tol + rel_tol * max(|a|, |b|).
    float_abs_tol: float = Field(default=1e-9, ge=0)
    float_rel_tol: float = Field(default=1e-9, ge=0)
    sample_rows: int = Field(default=20, ge=1)


class Settings(Strict):
    runs_dir: Path = Path("runs")
    spark: SparkSettings = SparkSettings()
    check: CheckSettings = CheckSettings()
    settings_path: Path = Path("<defaults>")
