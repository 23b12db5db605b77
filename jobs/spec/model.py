"""The query spec (conf/queries/*.yaml) and the settings file (conf/settings.yaml).

Pydantic only at this edge: unknown keys are rejected (extra="forbid") and every model is frozen.
Paths in a spec are relative to the spec file; `load_spec` resolves them.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.json_schema import SkipJsonSchema

from jobs.errors import SpecError, place
from jobs.spec.intervals import parse_interval
from jobs.spec.locations import location

IDENTIFIER = r"^[A-Za-z_][A-Za-z0-9_]*$"
SCHEDULE_PRESETS = (
    "@once",
    "@continuous",
    "@hourly",
    "@daily",
    "@weekly",
    "@monthly",
    "@quarterly",
    "@yearly",
    "@annually",
)


class Strict(BaseModel):
    # Attribute docstrings are the JSON Schema's descriptions (`lockstep schema`), what an editor
    # shows beside a key.
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class KafkaSpec(Strict):
    """A Kafka topic whose messages are the changelog (docs/kafka.md): each partition read in
    offset order, the message key being the source's primary key."""

    topic: str = Field(min_length=1)
    """The topic, e.g. dbserver1.inventory.orders (Debezium's server.schema.table)."""
    bootstrap_servers: str | None = None
    """host:port[,host:port...]. Best left out: the settings' kafka section, the Airflow
    connection it names, or LOCKSTEP_KAFKA_BOOTSTRAP_SERVERS give it, so a spec does not name a
    cluster."""
    starting_offsets: Literal["earliest"] | dict[int, int] = "earliest"
    """Where the changelog starts: earliest (each partition's first retained offset), or an
    offset per partition ({0: 120, 1: 98}; a partition left out starts at its earliest).
    starting_timestamp is the other way to give it."""


class SourceSpec(Strict):
    """One changelog source: a folder of files read in name order, rows in file order; with
    format delta, an existing Delta table's change data feed, read version by version; or, with
    kafka, a topic read partition by partition in offset order."""

    path: Path | str | None = None
    """The folder of changelog files (or, with format delta, the Delta table), relative to the
    spec file; or an object store's s3a://bucket/prefix (docs/object-storage.md). Not with kafka."""
    kafka: KafkaSpec | None = None
    """The changelog is a Kafka topic's messages, in the given format (changelog-json,
    debezium-json or json); see docs/kafka.md."""
    format: Literal["changelog-json", "debezium-json", "json", "delta"]
    """changelog-json: JSON lines with an "op" of +I, -U, +U, -D. debezium-json: Debezium's
    before/after/op envelopes. json: plain rows, each an insert. delta: a Delta table's change
    data feed."""
    schema_ddl: str = Field(alias="schema")
    """The columns, as Spark DDL: "order_id BIGINT, pId BIGINT, income BIGINT"."""
    primary_key: tuple[str, ...] = ()
    """The source's key; without one the source is a multiset of rows."""
    on_bad_rows: Literal["fail", "quarantine", "keep"] = "fail"
    """fail: exit 2 at the first bad row. quarantine: set bad rows aside, counted in the report.
    keep: malformed rows are quarantined, but rows that only break the changelog protocol (a
    retraction of a row never inserted, an update without its before-image) are fed to both jobs
    as they are, as Flink would, and listed as anomalies."""
    event_time: str | None = None
    """The TIMESTAMP column windows use (with watermark)."""
    watermark: str | None = None
    """The allowed out-of-orderness, e.g. "5 seconds": watermark = max event time seen - this."""
    bounded: bool = True
    """true: the files are a finished changelog, and every window closes at its end, as Flink ends
    a bounded source. false: a pipeline that resumes; windows stay open until the watermark
    passes them."""
    partitioned_by: Literal["date"] | None = None
    """date: the files arrive in daily folders, path/date=YYYY-MM-DD/; a run for logical date D
    reads the folders up to D."""
    starting_version: int | None = Field(default=None, ge=0)
    """format delta only: the version whose snapshot starts the changelog, as inserts; the later
    versions follow as their change data feed. Default: version 0."""
    starting_timestamp: datetime | None = None
    """format delta: as starting_version, the latest version committed at or before this time.
    kafka: each partition starts at its first message of this time or later."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, use_attribute_docstrings=True)

    @field_validator("path", mode="before")
    @classmethod
    def _path_or_url(cls, value: object) -> object:
        return location(value) if isinstance(value, (str, Path)) else value

    @property
    def table_path(self) -> Path | str:
        """A Delta source's table: a local path, or an s3a:// URL."""
        if self.path is None:
            raise SpecError("a Kafka source has no Delta table", where=self.kafka.topic if self.kafka else None)
        return self.path

    @property
    def folder(self) -> Path:
        """The local folder (or Delta table) read: a source on an object store is read from its
        local copy, which the pipeline puts in `path` (jobs/store/sources.py)."""
        if self.path is None:
            raise SpecError("a Kafka source has no folder", where=self.kafka.topic if self.kafka else None)
        if isinstance(self.path, str):
            raise SpecError(f"{self.path} is read from a local copy, which was not made", where=self.path)
        return self.path

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
    def _a_path_or_a_topic(self) -> SourceSpec:
        if (self.path is None) == (self.kafka is None):
            raise ValueError("give a source either path (files or a Delta table) or kafka (a topic), not both")
        if self.kafka is not None and self.format == "delta":
            raise ValueError("a kafka source's format is changelog-json, debezium-json or json")
        if self.kafka is not None and self.partitioned_by is not None:
            raise ValueError("a kafka source is read by offset, not by date partition")
        if self.kafka is not None and self.starting_timestamp and self.kafka.starting_offsets != "earliest":
            raise ValueError("give kafka.starting_offsets or starting_timestamp, not both")
        return self

    @model_validator(mode="after")
    def _starting_point_of_a_delta_table(self) -> SourceSpec:
        if self.starting_version is not None and self.format != "delta":
            raise ValueError("starting_version is for format: delta")
        if self.starting_timestamp is not None and self.format != "delta" and self.kafka is None:
            raise ValueError("starting_timestamp is for format: delta and kafka sources")
        if self.starting_version is not None and self.starting_timestamp is not None:
            raise ValueError("give starting_version or starting_timestamp, not both")
        if self.format == "delta" and self.partitioned_by is not None:
            raise ValueError("a delta source is read by version, not by date partition")
        return self

    @property
    def watermark_delay(self) -> timedelta | None:
        return parse_interval(self.watermark) if self.watermark is not None else None


class SinkSpec(Strict):
    primary_key: tuple[str, ...] | None = None
    """The sink's key. Default: the query's upsert key (the group keys, or the source key for a
    projection), else its unique key."""
    upsert_materialize: Literal["auto", "none", "force"] = "auto"
    """Flink's table.exec.sink.upsert-materialize: auto adds the materializer when the sink's key
    does not contain the upsert key."""
    changelog_mode: Literal["append", "upsert", "retract"] | None = None
    """append: inserts only (a query that updates is rejected). upsert: MERGE by primary key.
    retract: every row with its copy count. Default: upsert when there is a key, else retract."""
    emit: Literal["final", "early"] | None = None
    """Windowed queries. final (default): a window's row is written once, when the watermark
    passes its end. early: written and updated as changes arrive."""
    writer: Literal["delta-rs", "delta-spark"] = "delta-rs"
    """Who writes the Delta tables and reads their change feeds: delta-rs, embedded in the
    driver (fastest on one machine), or delta-spark, Delta's Spark connector on the executors.
    --writer overrides it."""


class CacheSpec(Strict):
    max_rows: int = Field(default=0, ge=0)
    """Rows kept per worker; 0: no cache."""
    ttl: str = "10 minutes"
    """How long an answer is kept."""


class LookupSpec(Strict):
    """An external dimension service the SQL joins like a table (JOIN <name> ON ... = <name>.<key>)."""

    kind: Literal["http"]
    """The service's protocol."""
    url: str
    """GET with {key column} placeholders, e.g. http://127.0.0.1:8765/customers/{customer_id}: 200
    answers a JSON object, 404 no row."""
    key: tuple[str, ...] = Field(min_length=1)
    """The key columns the SQL's ON clause equates."""
    output: str
    """Spark DDL of the columns the service answers, e.g. "name STRING, tier STRING"."""
    capacity: int = Field(default=100, ge=1)
    """Requests in flight per Spark task."""
    timeout: str = "2 seconds"
    """Per attempt."""
    retries: int = Field(default=2, ge=0)
    """Extra attempts, with a short backoff."""
    order: Literal["ordered", "unordered"] = "ordered"
    """ordered: rows leave in input order. unordered: as answers complete, but never ahead of an
    earlier retraction."""
    cache: CacheSpec = CacheSpec()
    """A per-worker LRU cache of answers."""
    on_lookup_error: Literal["fail", "null"] = "fail"
    """fail: a lookup that still fails after the retries fails the micro-batch, naming the key.
    null: the row gets nulls, counted in the report."""

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


Engine = Literal["local", "spark"]  # stream.engine's values
StateStore = Literal["lockstep", "memory", "rocksdb"]  # stream.state_store's values (get_args for a CLI's choices)


class StreamSpec(Strict):
    # Fewer, larger micro-batches cost less than their sum, not only the fixed cost of each: a
    # group touched in every micro-batch is updated (aggregation state, sink MERGE, a keyed
    # operator's state files) once instead of each time. 256 MiB (about 4 M of the race's rows)
    # replayed its 6 M-row group aggregate a third faster than 64 MiB in no more memory; 512 MiB
    # gained little more, and a keyed operator holds its micro-batch in the driver's heap, so the
    # default keeps it to a sixteenth of the default 4 GiB heap.
    rows_per_batch: int | None = Field(default=None, ge=1)
    """Exactly this many changelog rows per micro-batch, instead of cutting by size (small values
    give many micro-batch boundaries, as a test wants)."""
    megabytes_per_batch: int = Field(default=256, ge=1)
    """Micro-batch size when replaying files: about this many MiB of staged rows each."""
    engine: Engine = "local"
    """Who keeps the stateful operators' state and runs them. local: lockstep's own state files,
    read and folded on the driver (fastest on one machine). spark: Spark's keyed state on the
    executors (RocksDB), so a cluster adds capacity; it writes with delta-spark. --engine
    overrides it; see docs/engines.md for the operators each runs."""
    state_store: StateStore = "lockstep"
    """Where a group aggregate's or a window's state is kept. lockstep: its own files, read by
    key, forgetting a group whose rows were all retracted. memory, rocksdb: Spark's streaming
    aggregation and its state stores, which keep every group ever seen."""
    state_ttl: str | None = None
    """Forget a group's aggregation state once it has not changed for this long (Flink's
    table.exec.state.ttl), e.g. "1 day"; off by default. The stream may then differ from the
    batch, and the report says so. Only with state_store: lockstep."""

    @field_validator("state_ttl")
    @classmethod
    def _ttl_is_an_interval(cls, value: str | None) -> str | None:
        if value is not None and parse_interval(value) <= timedelta(0):
            raise ValueError("must be a positive interval, e.g. '1 day'")
        return value

    @model_validator(mode="after")
    def _ttl_needs_lockstep_state(self) -> StreamSpec:
        if self.state_ttl is not None and self.state_store != "lockstep":
            raise ValueError(
                f"state_ttl needs state_store: lockstep (Spark's {self.state_store} store keeps every group)"
            )
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
    """A lockstep query: Spark SQL over CDC changelog sources, run as a stream and as a batch job
    and checked for agreement."""

    name: str = Field(pattern=IDENTIFIER)
    """Identifier: names the run folder, the sink and the Airflow DAG."""
    description: str = ""
    sql: str
    """One SELECT, Spark SQL, over the sources (and lookups) by name."""
    sources: dict[str, SourceSpec] = Field(min_length=1)
    """The changelogs, by the table name the SQL uses."""
    lookups: dict[str, LookupSpec] = {}
    """External dimension services the SQL joins like tables."""
    sink: SinkSpec = SinkSpec()
    stream: StreamSpec = StreamSpec()
    schedule: str | None = None
    """The DAG's schedule: an Airflow preset (@daily) or a five-field cron; none: triggered only."""
    # Set by the loader, not by the YAML: where the spec came from and where its SQL starts,
    # so that errors in the SQL can name the YAML line.
    spec_path: SkipJsonSchema[Path] = Path("<memory>")
    sql_line: SkipJsonSchema[int] = 1
    key_lines: SkipJsonSchema[dict[str, int]] = {}  # the YAML line of each key, by dotted path

    def place_of(self, *keys: str) -> str:
        """`file:line` of a key of the spec (`place_of("sources", "orders", "schema")`)."""
        dotted = ".".join(keys)
        line = self.key_lines.get(dotted)
        return f"{place(self.spec_path, line)}: {dotted}" if line else f"{self.spec_path}: {dotted}"

    @field_validator("schedule")
    @classmethod
    def _schedule_is_a_preset_or_cron(cls, value: str | None) -> str | None:
        if value is not None and value not in SCHEDULE_PRESETS and len(value.split()) != 5:
            raise ValueError(
                f"{value!r} is neither a preset ({', '.join(SCHEDULE_PRESETS)}) nor a five-field cron expression"
            )
        return value

    @property
    def partitioned(self) -> bool:
        return any(s.partitioned_by for s in self.sources.values())

    @model_validator(mode="before")
    @classmethod
    def _spark_engine_writes_through_spark(cls, data: object) -> object:
        """stream.engine: spark writes with delta-spark unless sink.writer says otherwise, which
        is an error: delta-rs writes from the driver, where the engine brings no rows."""
        if not isinstance(data, dict) or _field(data.get("stream"), "engine") != "spark":
            return data
        sink = data.get("sink") or {}
        writer = _field(sink, "writer")
        if writer not in (None, "delta-spark"):
            raise ValueError(
                f"stream.engine spark writes its tables with delta-spark on the executors; "
                f"sink.writer {writer} writes from the driver"
            )
        if writer is None:
            sink = (
                sink.model_copy(update={"writer": "delta-spark"})
                if isinstance(sink, SinkSpec)
                else {**sink, "writer": "delta-spark"}
            )
            return {**data, "sink": sink}
        return data

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
    """Spark's master: local[N], or spark://host:7077 for a standalone cluster (--master)."""
    shuffle_partitions: int = Field(default=2, ge=1)
    driver_memory: str = "4g"
    executor_memory: str = "1g"
    """Per executor, on a cluster."""
    session_time_zone: str = "UTC"
    """Timestamps without a zone are read and shown in this zone: the same windows on any machine."""
    small_work_rows: int = Field(default=10_000, ge=0)
    """A micro-batch, batch job or check over fewer input rows runs without whole-stage code
    generation and adaptive execution, which cost more than the work on a few rows; 0: never."""
    quick_jit_below_mib: int = Field(default=1024, ge=0)
    """A stream step whose sources' files total fewer MiB starts the driver JVM with its quick
    compiler alone: seconds sooner on small input, slower once warm; 0: never."""
    extra: dict[str, str] = {}
    """Any other Spark conf, e.g. {"spark.sql.ansi.enabled": "true"}."""

    @property
    def on_cluster(self) -> bool:
        """The master runs executors of its own (spark://, yarn, k8s://), not local[N]."""
        return not self.master.startswith("local")


class CheckSettings(Strict):
    # Floating columns (AVG, SUM over DOUBLE) may differ in the last bits between an incremental
    # and a one-shot computation.
    float_abs_tol: float = Field(default=1e-9, ge=0)
    """Floating columns agree when |a - b| <= abs_tol + rel_tol * max(|a|, |b|)."""
    float_rel_tol: float = Field(default=1e-9, ge=0)
    """See float_abs_tol."""
    sample_rows: int = Field(default=20, ge=1)
    """Differing rows kept per expectation in report.json."""


class StoreSettings(Strict):
    """The object store of s3a:// run folders (docs/object-storage.md). Each field left out is
    taken from the Airflow connection named, then from the environment (AWS_ENDPOINT_URL,
    AWS_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)."""

    endpoint: str | None = None
    """The S3 API's URL, e.g. http://127.0.0.1:8333; AWS's regional endpoint when nothing gives one."""
    region: str | None = None
    """The signing region (us-east-1 when nothing gives one)."""
    access_key_id: str | None = None
    secret_access_key: str | None = None
    """Prefer the environment or an Airflow connection to a secret in a file."""
    airflow_connection: str | None = None
    """An Airflow connection of type aws: login, password, extra's endpoint_url and region_name."""
    lease_seconds: int = Field(default=60, ge=2)
    """A writer's lease on a run folder lasts this long unless renewed (every third of it); a
    crashed writer's lease expires after it, and the next writer takes the folder."""
    work_dir: Path = Path("~/.cache/lockstep/store")
    """Where a step keeps its working copy of an s3a:// run folder (docs/object-storage.md)."""


class KafkaSettings(Strict):
    """The Kafka cluster of kafka sources that do not name one (docs/kafka.md). Left out, the
    bootstrap servers come from the Airflow connection named, then LOCKSTEP_KAFKA_BOOTSTRAP_SERVERS."""

    bootstrap_servers: str | None = None
    """host:port[,host:port...]"""
    airflow_connection: str | None = None
    """An Airflow connection whose host (and port), or extra's bootstrap_servers, give the servers."""
    timeout_seconds: float = Field(default=10, gt=0)
    """How long a broker may take to answer before a step stops with exit 2."""


class Settings(Strict):
    """lockstep's settings file (conf/settings.yaml, --settings or LOCKSTEP_SETTINGS)."""

    runs_dir: Path | str = Path("runs")
    """Where runs are written when --out is not given (LOCKSTEP_RUNS_DIR overrides it): a folder,
    or an object store's s3a://bucket/prefix."""
    spark: SparkSettings = SparkSettings()
    check: CheckSettings = CheckSettings()
    store: StoreSettings = StoreSettings()
    kafka: KafkaSettings = KafkaSettings()
    settings_path: SkipJsonSchema[Path] = Path("<defaults>")  # set by the loader

    @field_validator("runs_dir", mode="before")
    @classmethod
    def _location(cls, value: object) -> object:
        return location(value) if isinstance(value, (str, Path)) else value


def _field(section: object, name: str) -> object:
    """A section's value as given: from the YAML's mapping, or a model's explicitly set field."""
    if isinstance(section, dict):
        return section.get(name)
    if isinstance(section, BaseModel) and name in section.model_fields_set:
        return getattr(section, name)
    return None
