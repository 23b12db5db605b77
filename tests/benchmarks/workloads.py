"""Generated sources for the benchmark's join and dedup workloads (deterministic, like
jobs/changelog/generate.py, whose orders changelog is the join's left side).

- products: a changelog-json stream keyed by pId over `keys` products: each event picks a
  product at random and inserts it if it is not live, else deletes it (a fifth of the time) or
  renames it (a -U/+U pair). At steady state about 5/6 of the products are live, so roughly
  two thirds of the events are updates and one sixth each inserts and deletes.
- order events: an insert-only json stream of (order_id, company, seq) where every one of
  `orders` ids appears at least once and the rest repeat ids at random, each repeat with a
  possibly different company; seq is the arrival position, so the latest repeat wins a dedup.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

from jobs.changelog.generate import write_parts

PRODUCTS_SCHEMA = "pId BIGINT, name STRING"
ORDER_EVENTS_SCHEMA = "order_id BIGINT, company STRING, seq BIGINT"
COMPANIES = [f"company_{n:02d}" for n in range(20)]


def generate_products(
    folder: Path,
    *,
    events: int = 200_000,
    keys: int = 20_000,
    delete_share: float = 0.2,
    files: int = 10,
    seed: int = 11,
) -> int:
    """Write the products changelog into `folder` (replacing its parts); return the row count."""
    return write_parts(folder, list(product_changes(events, keys, delete_share, seed)), files)


def generate_order_events(
    folder: Path, *, events: int = 200_000, orders: int = 50_000, files: int = 10, seed: int = 13
) -> int:
    """Write the order events into `folder` (replacing its parts); return the row count."""
    return write_parts(folder, order_events(events, orders, seed), files)


def order_events(events: int, orders: int, seed: int = 13) -> list[dict]:
    rng = random.Random(seed)
    ids = list(range(orders)) + [rng.randrange(orders) for _ in range(events - orders)]
    rng.shuffle(ids)
    return [{"order_id": order_id, "company": rng.choice(COMPANIES), "seq": seq} for seq, order_id in enumerate(ids)]


def product_changes(events: int, keys: int, delete_share: float = 0.2, seed: int = 11) -> Iterator[dict]:
    """The products changelog's rows one at a time (generate_products writes the same)."""
    rng = random.Random(seed)
    live: dict[int, str] = {}
    for number in range(events):
        key = rng.randrange(keys)
        name = f"product-{key}-v{number}"
        if key not in live:
            live[key] = name
            yield {"pId": key, "name": name, "op": "+I"}
        elif rng.random() < delete_share:
            yield {"pId": key, "name": live.pop(key), "op": "-D"}
        else:
            yield {"pId": key, "name": live[key], "op": "-U"}
            live[key] = name
            yield {"pId": key, "name": name, "op": "+U"}
