"""Exactly-once: a stream job killed right after a sink commit, before Spark records the
micro-batch as done, is restarted; Spark replays that micro-batch, the sink recognises its
transaction id and skips it, and the run ends with the same table and change feed as a run that
was never interrupted."""

from collections import Counter

from deltalake import DeltaTable

from jobs.plan import plan_query
from jobs.runtime.layout import RunLayout
from jobs.spec import load_spec
from jobs.spec.model import Settings
from jobs.stream.handler import FAULT_AFTER_COMMIT
from jobs.stream.job import run_stream
from tests.conftest import change, orders_spec, write_changelog
from tests.integration.conftest import run_both, table_rows
from tests.integration.test_cli import lockstep

EVENTS = [change("+I", 1, 1, 5), change("+I", 2, 1, 3), change("+I", 3, 2, 8),
          change("-U", 1, 1, 5), change("+U", 1, 2, 1), change("-D", 2, 1, 3),
          change("+I", 4, 1, 9), change("-U", 3, 2, 8), change("+U", 3, 2, 2),
          change("+I", 5, 3, 7), change("-D", 5, 3, 7), change("+I", 6, 1, 4)]


def feed_content(path):
    feed = DeltaTable(str(path)).load_cdf(starting_version=0).read_all()
    import pyarrow as pa

    table = pa.table(feed)
    return Counter((str(r["_change_type"]), r["pId"], r["total"], r["lo"]) for r in table.to_pylist())


def test_a_crash_after_a_sink_commit_changes_nothing_on_restart(spark, tmp_path):
    write_changelog(tmp_path / "orders", "001.json", EVENTS)
    spec = orders_spec(tmp_path, "SELECT pId, SUM(income) AS total, MIN(income) AS lo FROM orders "
                                 "GROUP BY pId", rows_per_batch=2)
    clean = run_both(spec, tmp_path / "clean")

    crashed = lockstep("stream", spec, "--out", tmp_path / "crashed", "--quiet", cwd=tmp_path,
                       env={FAULT_AFTER_COMMIT: "2"})
    assert crashed.returncode == 70, crashed.stderr
    layout = RunLayout.for_query(tmp_path / "crashed", "q")
    sink = DeltaTable(str(layout.stream))
    assert sink.transaction_version(layout.app_id("q")) == 2
    assert not (layout.checkpoint / "commits" / "2").exists()  # Spark never recorded batch 2

    run_stream(plan_query(load_spec(spec)), Settings(), layout)

    assert table_rows(layout.stream) == clean.stream
    assert feed_content(layout.stream) == feed_content(clean.layout.stream)
    log = [line for line in layout.batches_log.read_text().splitlines() if '"batch": 2,' in line]
    assert len(log) == 1 and '"replayed": true' in log[0]  # the crashed run never logged it
