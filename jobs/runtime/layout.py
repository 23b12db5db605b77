"""Where a query's run keeps what: one folder per query under the runs folder.

runs/<query>/
  stream/          the streaming sink: Delta table, change data feed on
  batch/           the batch result: Delta table
  quarantine/      rows set aside by `on_bad_rows: quarantine` (Delta table)
  anomalies/       rows kept by `on_bad_rows: keep` that break the changelog protocol (Delta table)
  late_events/     windowed queries: the (row, window) pairs left out as late (Delta table)
  report.json      the check's verdict and figures
  gx/              the Great Expectations project; Data Docs under gx/uncommitted/data_docs
  _state/          what the stream needs to continue: staged changelogs, Spark checkpoint,
                   an aggregate's sums per group and value multisets, keyed operators' live
                   rows, open windows (emit: final), the consistency point
  stages/<stage>/  multi-stage queries: each intermediate stage's own stream/ (its Delta
                   table, change data feed on) and _state/ (see jobs/plan/stages.py)
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class RunLayout:
    root: Path
    staging: Path | None = None  # where staged changelogs live: a stage shares its query's
    # On a cluster with the run folder on an object store (jobs/pipeline.py): the run folder's
    # URL (a jobs.store.paths.StorePath), where the executors read and write what Spark does:
    # the checkpoint, the Delta tables Spark writes, the staged segments it reads. `top` is the
    # query's working folder, whose relative paths map onto it. None: Spark uses the folder.
    spark_root: Any = None
    top: Path | None = None

    def for_stage(self, name: str) -> RunLayout:
        return replace(self, root=self.root / "stages" / name, staging=self.staging or self.state / "staged")

    def for_spark(self, path: Path) -> Any:
        """Where Spark's executors reach a path of the run folder: the path itself, or its place
        under the run folder's URL."""
        if self.spark_root is None:
            return path
        assert self.top is not None, "a layout with a spark_root knows its top folder"
        return self.spark_root / path.relative_to(self.top).as_posix()

    def stage_table(self, name: str) -> Any:
        return self.for_stage(name).stream

    @classmethod
    def for_query(cls, runs_dir: Path, name: str) -> RunLayout:
        return cls(Path(runs_dir) / name)

    def relative(self, path: Any) -> str:
        """A path of the run folder (in the working folder or at Spark's place) relative to it."""
        if isinstance(path, Path):
            return path.relative_to(self.root).as_posix()
        return str(path).removeprefix(str(self.for_spark(self.root)) + "/")

    @property
    def stream(self) -> Any:
        return self.for_spark(self.root / "stream")

    @property
    def batch(self) -> Any:
        return self.for_spark(self.root / "batch")

    @property
    def quarantine(self) -> Path:
        return self.root / "quarantine"

    @property
    def anomalies(self) -> Path:
        return self.root / "anomalies"

    @property
    def late_events(self) -> Any:
        return self.for_spark(self.root / "late_events")

    @property
    def pending(self) -> Any:
        """emit: final: the open windows' Delta table (jobs/stream/operators/window/)."""
        return self.for_spark(self.state / "pending")

    @property
    def report(self) -> Path:
        return self.root / "report.json"

    @property
    def gx(self) -> Path:
        return self.root / "gx"

    @property
    def state(self) -> Path:
        return self.root / "_state"

    @property
    def checkpoint(self) -> Any:
        return self.for_spark(self.state / "checkpoint")

    @property
    def aggregate_state(self) -> Path:
        """A group aggregate's sums per group, when lockstep keeps them (stream.state_store:
        lockstep); its existence marks the run folder as keeping them so."""
        return self.state / "aggregate"

    @property
    def agg_values(self) -> Path:
        return self.state / "agg_values"

    @property
    def consistency(self) -> Path:
        return self.state / "consistency.json"

    def lookup_answers(self, lookup: str, side: str) -> Any:
        """What a lookup's service answered the stream (a Parquet file per Spark task and
        micro-batch) or the batch job (one file), for the check to compare."""
        return self.for_spark(self.state / "lookups" / lookup / side)

    @property
    def points(self) -> Path:
        """The consistency point of each logical date the stream ran for."""
        return self.state / "points"

    def point_for(self, logical_date: str) -> Path:
        return self.points / f"{logical_date}.json"

    @property
    def batches_log(self) -> Path:
        return self.state / "batches.jsonl"

    def staged(self, source: str) -> Path:
        return (self.staging or self.state / "staged") / source

    @property
    def operator_state(self) -> Path:
        return self.state / "operator"

    @property
    def late_changes(self) -> Path:
        """A session aggregate's record of the changes it left out as late
        (jobs/stream/operators/session/lateness.py)."""
        return self.state / "late_changes"

    @property
    def materializer(self) -> Path:
        return self.state / "materializer"

    @property
    def materializer_table(self) -> Any:
        """The spark engine's materializer: a Delta table of the live rows
        (jobs/stream/operators/materialize/on_spark_state.py)."""
        return self.for_spark(self.state / "materializer_table")

    def app_id(self, query: str) -> str:
        """The sink's transaction application id: stable for the life of the checkpoint.

        Spark numbers micro-batches from 0 for a new checkpoint, so the id changes with it.
        """
        path = self.state / "app_id"
        if not path.exists() or not self.checkpoint.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"lockstep-{query}-{uuid.uuid4().hex[:12]}")
        return path.read_text().strip()
