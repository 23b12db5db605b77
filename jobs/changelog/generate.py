"""A deterministic synthetic changelog for the demo and the benchmark.

Orders (order_id, pId, income, order_time) arrive as a changelog-json stream of `events` logical
events: inserts of new orders, updates of live orders (as -U/+U pairs; a quarter of them move the
order to another product) and deletes of live orders, in the given shares. With the defaults:
300,000 events over 20,000 products, 25% updates, 15% deletes: about 375,000 changelog rows.
Order times spread over one day in arrival order, a few seconds out of order; an update keeps
its order's time (so it lands in the order's window, however old).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

SCHEMA = "order_id BIGINT, pId BIGINT, income BIGINT"
TIMED_SCHEMA = "order_id BIGINT, pId BIGINT, income BIGINT, order_time TIMESTAMP"
DAY_START = datetime(2026, 11, 21, tzinfo=UTC)


def generate_changelog(
    folder: Path,
    *,
    events: int = 300_000,
    groups: int = 20_000,
    update_share: float = 0.25,
    delete_share: float = 0.15,
    files: int = 10,
    seed: int = 7,
) -> int:
    """Write the changelog into `folder` (replacing what is there); return the number of rows."""
    rows = list(order_changes(events, groups, update_share=update_share, delete_share=delete_share, seed=seed))
    return write_parts(folder, rows, files)


def order_changes(
    events: int, groups: int, *, update_share: float = 0.25, delete_share: float = 0.15, seed: int = 7
) -> Iterator[dict]:
    """The changelog's rows one at a time, for a writer that streams them (the same rows as
    generate_changelog's for the same arguments)."""
    return _changes(events, groups, update_share, delete_share, random.Random(seed))


def write_parts(folder: Path, rows: list[dict], files: int) -> int:
    """Write `rows` as JSON lines into `files` part files in `folder`, replacing earlier parts."""
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("part-*.json"):
        old.unlink()
    per_file = -(-len(rows) // files)
    for index in range(files):
        chunk = rows[index * per_file : (index + 1) * per_file]
        text = "\n".join(json.dumps(r, separators=(",", ":")) for r in chunk)
        (folder / f"part-{index:05d}.json").write_text(text + "\n" if chunk else "")
    return len(rows)


def _changes(events, groups, update_share, delete_share, rng: random.Random):
    live: list[list] = []  # [order_id, pId, income, order_time]
    next_id = 0
    step = 86_400 / max(events, 1)
    for number in range(events):
        draw = rng.random()
        if live and draw < delete_share:
            yield _row(_take(live, rng), "-D")
        elif live and draw < delete_share + update_share:
            index = rng.randrange(len(live))
            before = live[index]
            after = [
                before[0],
                rng.randrange(groups) if rng.random() < 0.25 else before[1],
                rng.randrange(1, 1000),
                before[3],
            ]
            live[index] = after
            yield _row(before, "-U")
            yield _row(after, "+U")
        else:
            seconds = max(0.0, number * step + rng.uniform(-2, 2))
            row = [
                next_id,
                rng.randrange(groups),
                rng.randrange(1, 1000),
                (DAY_START + timedelta(seconds=seconds)).strftime("%Y-%m-%d %H:%M:%S.%f"),
            ]
            next_id += 1
            live.append(row)
            yield _row(row, "+I")


def _take(live: list, rng: random.Random) -> list[int]:
    index = rng.randrange(len(live))
    live[index], live[-1] = live[-1], live[index]
    return live.pop()


def _row(values: list, op: str) -> dict:
    return {"order_id": values[0], "pId": values[1], "income": values[2], "order_time": values[3], "op": op}
