"""Under the spark engine the folder sources are staged by Spark tasks (jobs/stream/staging_tasks.py),
not in the driver: the same staged changelog, bad rows quarantined by the tasks and counted, a bad
row in fail mode raised on the driver as the one-line error naming its file and line, and nothing
committed for any source when one of them fails."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jobs.changelog.quarantine import read_quarantine
from jobs.changelog.staging import StagedChangelog
from jobs.errors import InputError
from jobs.plan import plan_query
from jobs.runtime.layout import RunLayout
from jobs.spec import load_spec, with_engine
from jobs.spec.model import Settings
from jobs.stream import staging_tasks
from jobs.stream.job import run_stream
from tests.conftest import change, orders_spec, write_changelog
from tests.integration.conftest import table_rows

pytestmark = pytest.mark.slow

SQL = "SELECT pId, SUM(income) AS total, COUNT(*) AS n FROM orders GROUP BY pId"
PRODUCTS = {"path": "products", "format": "changelog-json", "schema": "pId BIGINT, name STRING", "primary_key": ["pId"]}
JOIN_SQL = "SELECT o.order_id, p.name FROM orders o JOIN products p ON o.pId = p.pId"
ORDERS = [
    change("+I", 1, 7, 10),
    change("+I", 2, 8, 5),
    change("-U", 1, 7, 10),
    change("+U", 1, 8, 12),
    change("-D", 2, 8, 5),
    change("+I", 3, 7, 1),
]


def stream(spec: Path, out: Path, engine: str) -> RunLayout:
    plan = plan_query(with_engine(load_spec(spec), engine))
    layout = RunLayout.for_query(out, plan.spec.name)
    run_stream(plan, Settings(), layout)
    return layout


def test_the_executors_stage_what_the_driver_would(spark, tmp_path, monkeypatch):
    """The staged changelog and the sink are the local engine's; staging in the driver's process
    is made to fail, so the spark engine's run can only pass with staging done elsewhere."""
    write_changelog(tmp_path / "orders", "001.json", ORDERS[:4])
    write_changelog(tmp_path / "orders", "002.json", ORDERS[4:])
    spec = orders_spec(tmp_path, SQL, rows_per_batch=3)
    local = stream(spec, tmp_path / "local", "local")

    def not_here(*args, **kwargs):
        raise AssertionError("a source was staged in the driver's process")

    monkeypatch.setattr(staging_tasks, "stage_source", not_here)
    on_spark = stream(spec, tmp_path / "spark", "spark")
    mine, theirs = StagedChangelog(on_spark.staged("orders")), StagedChangelog(local.staged("orders"))
    assert mine.read(0, 10).to_pylist() == theirs.read(0, 10).to_pylist()
    assert [s["rows"] for s in mine.segments()] == [s["rows"] for s in theirs.segments()]
    assert len(mine.segments()) == 2  # 3 rows a micro-batch, the -U's +U in the same one
    assert table_rows(on_spark.stream) == table_rows(local.stream)
    assert not (on_spark.staged("orders") / "pending").exists()


def test_the_driver_stages_in_its_own_process_under_the_local_engine(tmp_path, monkeypatch):
    """The other half of the test above: the patch does stop staging in the driver."""
    write_changelog(tmp_path / "orders", "001.json", ORDERS)
    spec = orders_spec(tmp_path, SQL)
    monkeypatch.setattr(staging_tasks, "stage_source", lambda *a, **k: (_ for _ in ()).throw(AssertionError("here")))
    with pytest.raises(AssertionError, match="here"):
        stream(spec, tmp_path / "local", "local")


def test_tasks_quarantine_bad_rows_and_count_them(spark, tmp_path):
    rows = [*ORDERS[:2], {"order_id": "x", "op": "+I"}, change("-D", 9, 1, 1), *ORDERS[2:]]
    write_changelog(tmp_path / "orders", "001.json", rows)
    spec = orders_spec(tmp_path, SQL, source={"on_bad_rows": "quarantine"})
    layout = stream(spec, tmp_path / "runs", "spark")
    bad = read_quarantine(layout.quarantine).to_pylist()
    assert sorted(row["line"] for row in bad) == [3, 4]
    assert all(row["source"] == "orders" and row["file"] == "001.json" and row["raw"] for row in bad)
    manifest = json.loads((layout.staged("orders") / "manifest.json").read_text())
    assert manifest["quarantined"] == 2 and manifest["rows"] == len(ORDERS)


def test_a_bad_row_in_one_source_leaves_every_source_as_it_was(spark, tmp_path):
    """Fail mode: the task's InputError is raised on the driver naming file and line, and the
    other source, staged by its own task, is not committed either."""
    write_changelog(tmp_path / "orders", "001.json", [*ORDERS[:3], change("-D", 5, 1, 1)])
    write_changelog(tmp_path / "products", "001.json", [{"pId": 7, "name": "a", "op": "+I"}])
    spec = orders_spec(tmp_path, JOIN_SQL, more_sources={"products": PRODUCTS})
    with pytest.raises(InputError, match=r"001\.json:4"):
        stream(spec, tmp_path / "runs", "spark")
    layout = RunLayout.for_query(tmp_path / "runs", "q")
    for source in ("orders", "products"):
        assert not (layout.staged(source) / "manifest.json").exists(), source
        assert not list(layout.staged(source).glob("segments/*")), source
