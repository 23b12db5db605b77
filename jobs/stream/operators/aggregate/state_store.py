"""Where a stage's aggregation state is kept: `stream.state_store`.

- lockstep (the default): lockstep's own files (group_sums.py): per group the sums, a compacted
  snapshot sorted by group and short logs, read by key on the driver; a group whose rows were
  all retracted leaves the state, and `stream.state_ttl` forgets idle groups. No Spark state.
- memory (Spark's HDFS-backed store, Spark's default): the state is a hash map on the JVM heap per
  partition, with a file of changes per micro-batch. Each micro-batch starts from a copy of the
  whole map, so its cost grows with the state (measured: a micro-batch updating 1 % of 1,000,000
  groups costs 1-3 s in a running query, 0.7 s at 100,000 groups), and a restarted query
  reads the state back from its files. Fastest to build a state: replays of large files.
- rocksdb (Spark's RocksDB store): the state is on local disk, a micro-batch touches only the
  keys it changes, and each commit saves the new files of a snapshot. About 1.5x slower to build
  a large state, several times faster for small changes to it
  (tests/benchmarks/bench_incremental.py; figures in docs/benchmarks.md).

Spark records the store in the checkpoint when the query first runs and keeps it for the life of
that checkpoint, whatever the settings later say; lockstep's own state is marked by its folder,
made before the first micro-batch. A run folder keeps the store it started with.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pyspark.sql import SparkSession

from jobs.runtime.progress import Progress
from jobs.runtime.session_conf import settings_for
from jobs.stream.offsets import recorded_conf

PROVIDER_CONF = "spark.sql.streaming.stateStore.providerClass"
PACKAGE = "org.apache.spark.sql.execution.streaming.state"
LOCKSTEP = "lockstep"
PROVIDERS = {"memory": f"{PACKAGE}.HDFSBackedStateStoreProvider", "rocksdb": f"{PACKAGE}.RocksDBStateStoreProvider"}


def recorded_store(checkpoint: Path) -> str | None:
    """The store a checkpoint's query keeps (recorded at its first micro-batch), by its spec name;
    None for a checkpoint without offsets yet."""
    conf = recorded_conf(checkpoint)
    if conf is None:
        return None
    provider = conf.get(PROVIDER_CONF)
    return next((name for name, cls in PROVIDERS.items() if cls == provider), provider)


def store_in_effect(aggregate_state: Path, checkpoint: Path, wanted: str) -> str:
    """The store a stage's state is kept in: the one its run folder started with (lockstep's
    folder, or the one Spark's checkpoint records), for a new folder the spec's."""
    if aggregate_state.exists():
        return LOCKSTEP
    return recorded_store(checkpoint) or wanted


@contextmanager
def state_store_for(
    spark: SparkSession, store: str, wanted: str, aggregate_state: Path, progress: Progress, stateful: bool
) -> Iterator[None]:
    """Run the block (a stage's streaming query) with `store` (store_in_effect's); says so when
    the spec asks for another and the stage keeps state (a stateful stage: an aggregate or a
    window)."""
    if stateful and store != wanted:
        progress.say(
            f"  stream.state_store is {wanted}, but this run folder's state is kept in "
            f"{store} since its first run and stays there (a new --out folder starts with {wanted})"
        )
    if store == LOCKSTEP:
        if stateful:
            aggregate_state.mkdir(parents=True, exist_ok=True)
        yield
        return
    with settings_for(spark, {PROVIDER_CONF: PROVIDERS.get(store, store)}):
        yield
