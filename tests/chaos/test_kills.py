"""kill -9 at random moments: a stream of 20 micro-batches is killed again and again and restarted
with the same command; when it has finished, every table (the sink, an intermediate stage, the
open windows, their change feeds) is what an uninterrupted run left. Two queries: a two-stage
deduplication then COUNT(DISTINCT), and final tumbling windows with late events and the windows
still open closed at the end of the input. And two writers started together: one runs, the other is
refused at once.

CHAOS_KILLS (default 1, the sample `make test` runs) sets how many kills a run takes; `make chaos`
runs ten.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from tests.conftest import orders_spec, write_changelog, write_spec
from tests.integration.test_cli import start_lockstep

KILLS = int(os.environ.get("CHAOS_KILLS", "1"))
SPEC = """
name: q
sql: |
  SELECT company, COUNT(DISTINCT order_id) AS orders FROM (
    SELECT order_id, company FROM (
      SELECT order_id, company, ROW_NUMBER() OVER (PARTITION BY order_id ORDER BY seq DESC) AS rn FROM shipments
    ) WHERE rn = 1
  ) GROUP BY company
sources:
  shipments:
    path: shipments
    format: json
    schema: "order_id BIGINT, company STRING, seq BIGINT"
stream:
  rows_per_batch: 2
"""


WINDOWS = (
    "SELECT pId, SUM(income) AS total, window.start AS window_start, window.end AS window_end "
    "FROM orders GROUP BY pId, window(row_time, '1 minute')"
)
TIMED = {
    "schema": "order_id BIGINT, pId BIGINT, income BIGINT, row_time TIMESTAMP",
    "event_time": "row_time",
    "watermark": "5 seconds",
}
# Each query's tables, under the run folder, compared after the kills.
TABLES = {
    "dedup_then_distinct": ("q/stream", "q/stages/stage1_dedup/stream"),
    "windows": ("q/stream", "q/_state/pending"),
}


def dedup_then_distinct_spec(folder: Path, rows: int = 40) -> Path:
    """40 rows make 20 micro-batches, each through both stages: a long enough run to kill inside."""
    rng = random.Random(7)
    changes = [{"order_id": rng.randint(1, 12), "company": rng.choice("abc"), "seq": seq} for seq in range(rows)]
    write_changelog(folder / "shipments", "001.json", changes)
    return write_spec(folder, SPEC)


def _windows_spec(folder: Path, rows: int = 40) -> Path:
    """A keyed changelog of orders, a few seconds apart: updates and deletes retract rows of
    windows still open, and of windows the watermark has passed (late, left out and counted)."""
    rng, live, changes = random.Random(7), {}, []
    moment = datetime(2026, 11, 21, 9, 0, 0)
    while len(changes) < rows:
        moment += timedelta(seconds=rng.randint(3, 20))
        order = rng.randint(1, 8)
        new = {
            "order_id": order,
            "pId": rng.randint(1, 3),
            "income": rng.randint(1, 20),
            "row_time": moment.strftime("%Y-%m-%d %H:%M:%S"),
        }
        if order not in live:
            changes.append({**new, "op": "+I"})
            live[order] = new
        elif rng.random() < 0.3:
            changes.append({**live.pop(order), "op": "-D"})
        else:
            changes += [{**live[order], "op": "-U"}, {**new, "op": "+U"}]
            live[order] = new
    write_changelog(folder / "orders", "001.json", changes)
    return orders_spec(folder, WINDOWS, source=TIMED, sink={"emit": "final"})


SPECS = {"dedup_then_distinct": dedup_then_distinct_spec, "windows": _windows_spec}


def _stream(spec: Path, out: Path) -> subprocess.Popen:
    return start_lockstep("stream", spec, "--out", out, "--quiet")


def tables_and_feeds(out: Path | str, tables: tuple[str, ...], storage_options: dict | None = None) -> dict:
    """Each table's rows and its change feed, as multisets (a MERGE writes a commit's rows in no
    fixed order). `out` is a runs folder, or an object store's URL read with `storage_options`."""
    found = {}
    for table in tables:
        delta = DeltaTable(f"{out}/{table}", storage_options=storage_options)
        rows = Counter(tuple(sorted(r.items())) for r in delta.to_pyarrow_table().to_pylist())
        feed = Counter(
            (r["_change_type"], r["_commit_version"], *sorted((k, v) for k, v in r.items() if not k.startswith("_")))
            for r in pa.table(delta.load_cdf(starting_version=0).read_all()).to_pylist()
        )
        found[table] = (rows, feed)
    return found


def committed_batches(out: Path) -> int:
    """Micro-batches committed so far, over every stage's checkpoint."""
    return sum(1 for _ in out.glob("**/_state/checkpoint/commits/[0-9]*"))


def _kill_at_a_random_moment(process: subprocess.Popen, out: Path, rng: random.Random) -> bool:
    """Kill -9 after 1 to 6 more micro-batches have committed and a fraction of the next one has
    run, or (one time in seven) 0 to 10 s from the start: staging, the JVM's start, the first
    micro-batch. The moment follows the run's progress, not the clock: a faster stream must not
    finish before its kill. False when the run ended first."""
    ahead = rng.randint(0, 6)
    target = committed_batches(out) + ahead
    while committed_batches(out) < target:
        if process.poll() is not None:
            return False
        time.sleep(0.02)
    time.sleep(rng.uniform(0, 0.5) if ahead else rng.uniform(0, 10))
    if process.poll() is not None:
        return False
    process.send_signal(signal.SIGKILL)
    process.wait()
    return True


@pytest.mark.slow
@pytest.mark.parametrize("query", sorted(SPECS))
def test_kill_9_at_random_moments_changes_nothing_in_the_end(tmp_path, query):
    spec = SPECS[query](tmp_path)
    # The uninterrupted run, for reference, goes beside the killed ones (they share the spec
    # only): on two cores the two finish sooner together than one after the other.
    clean = _stream(spec, tmp_path / "clean")
    rng = random.Random(int(os.environ.get("CHAOS_SEED", "11")))
    kills = 0
    while kills < KILLS:
        if not _kill_at_a_random_moment(_stream(spec, tmp_path / "killed"), tmp_path / "killed", rng):
            break  # it finished before this kill: the rest of the run is the restart check
        kills += 1
    finish = _stream(spec, tmp_path / "killed")
    assert finish.wait(600) == 0, finish.stderr.read()
    assert clean.wait(600) == 0, clean.stderr.read()
    assert kills >= 1
    assert tables_and_feeds(tmp_path / "killed", TABLES[query]) == tables_and_feeds(tmp_path / "clean", TABLES[query])


@pytest.mark.slow
def test_two_writers_started_together_one_runs_and_one_is_refused(tmp_path):
    # The run lock is taken before the JVM starts (about 10 s), so the loser meets it even when the
    # winner has only four micro-batches to do.
    spec = dedup_then_distinct_spec(tmp_path, rows=8)
    clean = _stream(spec, tmp_path / "clean")  # the reference, in a folder of its own, meanwhile
    first, second = _stream(spec, tmp_path / "runs"), _stream(spec, tmp_path / "runs")
    codes = sorted([first.wait(600), second.wait(600)])
    refused = next(p for p in (first, second) if p.returncode == 2)
    assert codes == [0, 2] and "the run folder is in use by pid" in refused.stderr.read()
    assert clean.wait(600) == 0
    tables = TABLES["dedup_then_distinct"]
    assert tables_and_feeds(tmp_path / "runs", tables) == tables_and_feeds(tmp_path / "clean", tables)
