"""The batch job's source snapshot (jobs/changelog/frames.py, source_snapshot): read from the live
rows staging keeps when every staged row is consumed and obeys the protocol, and then the same
multiset as the consumed changes' weights summed; otherwise summed from the changes."""

import random
from collections import Counter

import pytest

from jobs.changelog.frames import consumed_changes, live_rows, source_snapshot
from jobs.changelog.staging import StagedChangelog, stage_source
from jobs.spec.model import SourceSpec, StreamSpec
from tests.conftest import change, write_changelog


def _valid_changes(rng: random.Random, keyed: bool, count: int) -> list[dict]:
    """Random changes a table keyed by order_id (or a multiset) could have produced, with
    updates, deletes, keys deleted and inserted again, NULL values and (keyless) duplicate copies."""
    live: dict[int, tuple] = {}
    copies: Counter = Counter()
    changes = []
    for _ in range(count):
        order = rng.randrange(40)
        image = (rng.choice([1, 2, None]), rng.choice([5, 7, None]))
        if keyed and order in live and rng.random() < 0.6:
            kind = rng.choice(["update", "-D"])
            changes.append(change("-U" if kind == "update" else "-D", order, *live.pop(order)))
            if kind == "update":
                changes.append(change("+U", order, *image))
                live[order] = image
        elif keyed and order not in live:
            changes.append(change("+I", order, *image))
            live[order] = image
        elif not keyed and copies and rng.random() < 0.4:
            row = rng.choice(sorted(copies, key=repr))
            changes.append(change(rng.choice(["-U", "-D"]), *row))
            copies[row] -= 1
            copies += Counter()  # drops a row without copies left
        elif not keyed:
            row = (order % 5, *image)
            changes.append(change("+I", *row))
            copies[row] += 1
    return changes


def _staged(tmp_path, changes: list[dict], keyed: bool, on_bad_rows: str = "fail") -> StagedChangelog:
    spec = SourceSpec(
        path=tmp_path / "orders",
        format="changelog-json",
        schema="order_id BIGINT, pId BIGINT, income BIGINT",
        primary_key=("order_id",) if keyed else (),
        on_bad_rows=on_bad_rows,
    )
    write_changelog(tmp_path / "orders", "a.json", changes)
    _, commit = stage_source(
        "orders", spec, tmp_path / "staged", tmp_path / "quarantine", batch_size=StreamSpec(rows_per_batch=50)
    )
    commit()
    return StagedChangelog(tmp_path / "staged")


def _rows(frame) -> Counter:
    return Counter(tuple(row) for row in frame.collect())


@pytest.mark.parametrize("keyed", [True, False], ids=["keyed", "keyless"])
def test_the_live_rows_staging_kept_are_the_snapshot_the_weights_give(spark, tmp_path, keyed):
    changes = _valid_changes(random.Random(3 if keyed else 4), keyed, 400)
    staged = _staged(tmp_path, changes, keyed)
    total = staged.total_rows
    assert staged.live_rows_at(total) is not None  # the snapshot is read from the live rows
    summed = live_rows(consumed_changes(spark, staged, total), list(staged.schema.names))
    snapshot = _rows(source_snapshot(spark, staged, total))
    assert sum(snapshot.values()) > 10 and (keyed or max(snapshot.values()) > 1)
    assert snapshot == _rows(summed)


def test_a_point_inside_the_staged_rows_a_store_or_a_kept_protocol_break_sums_the_changes(spark, tmp_path):
    changes = [change("+I", 1, 1, 5), change("+I", 2, 1, 7), change("-D", 1, 1, 5)]
    staged = _staged(tmp_path / "inside", changes, keyed=True)
    assert staged.live_rows_at(2) is None and staged.live_rows_at(3) is not None
    # A run folder on a store: Spark reads the segments at their keys, the live rows are not there.
    on_store = StagedChangelog(staged.directory, spark_directory="s3a://runs/q/_state/staged/orders")
    assert on_store.live_rows_at(3) is None
    assert _rows(source_snapshot(spark, staged, 2)) == Counter({(1, 1, 5): 1, (2, 1, 7): 1})
    # A delete of a row never inserted, kept: the live rows would drop order 3, the weights
    # leave 3's insert and delete cancelled and the earlier delete below zero.
    kept = [change("-D", 3, 1, 9), change("+I", 3, 1, 9), change("+I", 4, 2, 1)]
    staged = _staged(tmp_path / "kept", kept, keyed=True, on_bad_rows="keep")
    assert staged.manifest["protocol_breaks"] == 1 and staged.live_rows_at(staged.total_rows) is None
    assert _rows(source_snapshot(spark, staged, staged.total_rows)) == Counter({(4, 2, 1): 1})
