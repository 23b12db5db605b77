"""Exactly-once: a stream job killed right after a sink commit, before Spark records the
micro-batch as done, is restarted; Spark replays that micro-batch, the sink recognises its
transaction id and skips it, and the run ends with the same table and change feed as a run that
was never interrupted."""

import json
from collections import Counter

from deltalake import DeltaTable

from jobs.changelog.staging import StagedChangelog
from jobs.plan import plan_query
from jobs.runtime.layout import RunLayout
from jobs.runtime.progress import Progress
from jobs.spec import load_spec
from jobs.spec.model import Settings
from jobs.stream.handler import FAULT_AFTER_COMMIT
from jobs.stream.job import run_stream
from jobs.stream.source import stage_sources
from tests.conftest import change, orders_spec, write_changelog
from tests.integration.conftest import run_both, table_rows
from tests.integration.test_cli import lockstep

EVENTS = [
    change("+I", 1, 1, 5),
    change("+I", 2, 1, 3),
    change("+I", 3, 2, 8),
    change("-U", 1, 1, 5),
    change("+U", 1, 2, 1),
    change("-D", 2, 1, 3),
    change("+I", 4, 1, 9),
    change("-U", 3, 2, 8),
    change("+U", 3, 2, 2),
    change("+I", 5, 3, 7),
    change("-D", 5, 3, 7),
    change("+I", 6, 1, 4),
]


def feed_content(path):
    feed = DeltaTable(str(path)).load_cdf(starting_version=0).read_all()
    import pyarrow as pa

    table = pa.table(feed)
    return Counter((str(r["_change_type"]), r["pId"], r["total"], r["lo"]) for r in table.to_pylist())


def test_a_crash_after_a_sink_commit_changes_nothing_on_restart(spark, tmp_path):
    write_changelog(tmp_path / "orders", "001.json", EVENTS)
    spec = orders_spec(
        tmp_path, "SELECT pId, SUM(income) AS total, MIN(income) AS lo FROM orders GROUP BY pId", rows_per_batch=2
    )
    clean = run_both(spec, tmp_path / "clean")

    crashed = lockstep(
        "stream", spec, "--out", tmp_path / "crashed", "--quiet", cwd=tmp_path, env={FAULT_AFTER_COMMIT: "2"}
    )
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


def test_a_segment_logged_by_spark_before_a_kill_is_read_alone_after_the_restart(spark, tmp_path):
    # Spark's file source logs a segment it found before the micro-batch's offset is recorded; a
    # kill between the two leaves that log entry unplanned. The restarted run reads its segment in
    # a micro-batch of its own, as an uninterrupted run does. The kill's on-disk state is made
    # here: a first run, new input staged, and the entry Spark would have logged for the next
    # segment; beside it, the same two runs uninterrupted.
    write_changelog(tmp_path / "orders", "001.json", EVENTS[:6])
    spec = orders_spec(
        tmp_path, "SELECT pId, SUM(income) AS total, MIN(income) AS lo FROM orders GROUP BY pId", rows_per_batch=2
    )
    plan = plan_query(load_spec(spec))
    killed, clean = (RunLayout.for_query(tmp_path / name, "q") for name in ("killed", "clean"))
    for layout in (killed, clean):
        run_stream(plan, Settings(), layout)
    write_changelog(tmp_path / "orders", "002.json", EVENTS[6:])
    stage_sources(plan, killed, Progress(quiet=True))
    staged = StagedChangelog(killed.staged("orders"))
    _log_as_spark_would(killed.checkpoint / "sources" / "0", 3, staged.directory / staged.segments()[3]["file"])

    for layout in (killed, clean):
        run_stream(plan, Settings(), layout)

    assert table_rows(killed.stream) == table_rows(clean.stream)
    assert feed_content(killed.stream) == feed_content(clean.stream)
    read = [json.loads(line) for line in killed.batches_log.read_text().splitlines()]
    segments = [(s["first_seq"], s["first_seq"] + s["rows"]) for s in staged.segments()]
    assert [(b["start_seq"], b["end_seq"]) for b in read] == segments


def _log_as_spark_would(folder, entry: int, segment) -> None:
    found = {"path": f"file://{segment}", "timestamp": int(segment.stat().st_mtime * 1000), "batchId": entry}
    (folder / str(entry)).write_text("v1\n" + json.dumps(found))
