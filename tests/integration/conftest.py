"""Helpers for tests that run the real stream and batch jobs on the shared SparkSession."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from jobs.batch.job import run_batch
from jobs.plan import plan_query
from jobs.runtime.delta import read_change_feed
from jobs.runtime.layout import RunLayout
from jobs.spec import load_spec
from jobs.spec.model import Settings
from jobs.stream.job import run_stream
from jobs.stream.state.live_state import LiveState


@dataclass
class Outcome:
    layout: RunLayout
    stream: list[dict]
    batch: list[dict]
    feed: pa.Table


def run_both(spec_path: Path, out: Path, settings: Settings | None = None) -> Outcome:
    settings = settings or Settings()
    plan = plan_query(load_spec(spec_path))
    layout = RunLayout.for_query(out, plan.spec.name)
    run_stream(plan, settings, layout)
    run_batch(plan, settings, layout)
    return Outcome(layout, table_rows(layout.stream), table_rows(layout.batch), read_change_feed(layout.stream))


def state_rows(folder: Path) -> int:
    """How many live rows an operator's state (jobs/stream/state/live_state.py) holds now."""
    like = pq.read_schema(next(folder.glob("batch-*.parquet")))
    return LiveState(folder, ()).rows_before(10**9, None, like).num_rows


def table_rows(path: Path | str, storage_options: dict | None = None) -> list[dict]:
    """A Delta table's rows in a fixed order: at a local path, at a StorePath, or at a store's URL
    read with `storage_options`."""
    table = DeltaTable(str(path), storage_options=storage_options or getattr(path, "storage_options", None))
    return sorted(table.to_pyarrow_table().to_pylist(), key=_order)


def _order(row: dict):
    return [(v is None, str(type(v)), v if v is not None else 0) for v in row.values()]


def same_rows(left: list[dict], right: list[dict], tol: float = 1e-9) -> bool:
    if len(left) != len(right):
        return False
    return all(_same_row(a, b, tol) for a, b in zip(left, right))


def _same_row(a: dict, b: dict, tol: float) -> bool:
    if a.keys() != b.keys():
        return False
    for key in a:
        x, y = a[key], b[key]
        if isinstance(x, float) and isinstance(y, float):
            if not (math.isclose(x, y, rel_tol=tol, abs_tol=tol) or (math.isnan(x) and math.isnan(y))):
                return False
        elif x != y:
            return False
    return True


def feed_steps(feed: pa.Table, columns: list[str]) -> list[tuple]:
    """The change feed as (commit, kind, values...) in commit order, retractions first."""
    kind = {"update_preimage": "-U", "delete": "-D", "insert": "+I", "update_postimage": "+U"}
    rank = {"-U": 0, "-D": 0, "+I": 1, "+U": 1}
    rows = [(r["_commit_version"], kind[r["_change_type"]], *[r[c] for c in columns]) for r in feed.to_pylist()]
    return sorted(rows, key=lambda r: (r[0], rank[r[1]], str(r[2:])))


@pytest.fixture
def out(tmp_path):
    return tmp_path / "runs"
