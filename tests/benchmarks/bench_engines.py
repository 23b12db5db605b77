"""Three ways to keep a changelog operator's keyed state on Spark's executors, side by side on
the same files, for a group aggregate (SUM and COUNT per product over the orders changelog) and
an inner join (orders with products on pId), each micro-batch MERGEd into a Delta sink by Delta's
Spark connector:

- native: Spark's own streaming aggregation over weighted rows (update mode, RocksDB state);
  the aggregate only (Spark's streaming joins cannot retract);
- live-rows: a JVM StatefulProcessor (transformWithState, RocksDB) keeping each key's live rows,
  handing each micro-batch the touched keys' rows before it and its net changes; the operator's
  before and after results are computed by Spark's batch operators and their difference MERGEd;
- delta-state: the live rows as a Delta table, joined with each micro-batch's touched keys and
  MERGEd, all on the executors.

Each result is checked against the batch answer. Prints seconds, rows/s and the bytes Spark's
tasks returned to the driver.

    python -m tests.benchmarks.bench_engines [--sizes 300000,1200000] [--master local[2]]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.changelog.generate import generate_changelog
from jobs.runtime.delta_connector import connector_conf, connector_jars
from jobs.runtime.stream_jar import STREAM_JAR
from tests.benchmarks.workloads import generate_products

ORDERS = "order_id BIGINT, pId BIGINT, income BIGINT, order_time TIMESTAMP, op STRING"
PRODUCTS = "pId BIGINT, name STRING, op STRING"
FILES = 10  # micro-batches: one file each
JAR = STREAM_JAR  # built by scripts/jvm-jars.sh (make setup)


def session(master: str) -> SparkSession:
    jars = [str(j) for j in connector_jars()] + [str(JAR)]
    builder = SparkSession.builder.master(master).appName("bench_engines")
    for key, value in {**connector_conf(connector_jars(), partitions=2), "spark.jars": ",".join(jars)}.items():
        builder = builder.config(key, value)
    return (
        builder.config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", "4g")
        .config(
            "spark.sql.streaming.stateStore.providerClass",
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
        )
        .getOrCreate()
    )


def weighted(frame: DataFrame) -> DataFrame:
    return frame.withColumn("__w", F.when(F.col("op").isin("+I", "+U"), 1).otherwise(-1).cast("long")).drop("op")


def stream(spark: SparkSession, folder: Path, schema: str) -> DataFrame:
    return weighted(spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).json(str(folder)))


def merge_into(spark: SparkSession, changes: DataFrame, sink: Path, key: list[str]) -> None:
    """Upsert the rows whose __alive is true, delete the others, by key."""
    from delta.tables import DeltaTable

    if not DeltaTable.isDeltaTable(spark, str(sink)):
        changes.where("__alive").drop("__alive").limit(0).write.format("delta").save(str(sink))
    on = " AND ".join(f"t.{k} <=> s.{k}" for k in key)
    (
        DeltaTable.forPath(spark, str(sink))
        .alias("t")
        .merge(changes.alias("s"), on)
        .whenMatchedDelete("NOT s.__alive")
        .whenMatchedUpdateAll("s.__alive")
        .whenNotMatchedInsertAll("s.__alive")
        .execute()
    )


# -- the group aggregate ------------------------------------------------------------------


def aggregate(rows: DataFrame) -> DataFrame:
    return rows.groupBy("pId").agg(F.sum("__w").alias("n"), F.sum(F.col("income") * F.col("__w")).alias("total"))


def difference(before: DataFrame, after: DataFrame, key: list[str]) -> DataFrame:
    """The after rows that are new or changed (alive), and the keys only before (dead)."""
    gone = before.join(after, key, "left_anti").select(*key).withColumn("__alive", F.lit(False))
    changed = after.exceptAll(before).withColumn("__alive", F.lit(True))
    return changed.unionByName(gone, allowMissingColumns=True)


def agg_native(spark, orders: Path, work: Path) -> None:
    def sink(batch: DataFrame, _id: int) -> None:
        merge_into(spark, batch.withColumn("__alive", F.col("n") > 0), work / "sink", ["pId"])

    frame = aggregate(stream(spark, orders, ORDERS).select("pId", "income", "__w"))
    _run(frame.writeStream.outputMode("update"), sink, work)


def agg_live_rows(spark, orders: Path, work: Path) -> None:
    changes = stream(spark, orders, ORDERS).select("pId", "income", "__w")

    def sink(batch: DataFrame, _id: int) -> None:
        batch.persist()
        before = batch.where("__phase = 0").drop("__phase")
        after = batch.groupBy("pId", "income").agg(F.sum("__w").alias("__w")).where("__w > 0")
        merge_into(spark, difference(aggregate(before), aggregate(after), ["pId"]), work / "sink", ["pId"])
        batch.unpersist()

    _run(_live_rows(spark, changes, 1).writeStream.outputMode("append"), sink, work)


def agg_delta_state(spark, orders: Path, work: Path) -> None:
    state = work / "state"

    def sink(batch: DataFrame, _id: int) -> None:
        delta = batch.groupBy("pId", "income").agg(F.sum("__w").alias("__w")).where("__w != 0").persist()
        before = _state_of(spark, state, delta, ["pId"], ["pId", "income"])
        after = before.unionByName(delta).groupBy("pId", "income").agg(F.sum("__w").alias("__w")).where("__w > 0")
        merge_into(spark, difference(aggregate(before), aggregate(after), ["pId"]), work / "sink", ["pId"])
        _merge_state(spark, state, delta, ["pId", "income"])
        delta.unpersist()

    _run(stream(spark, orders, ORDERS).select("pId", "income", "__w").writeStream, sink, work)


# -- the inner join -------------------------------------------------------------------------

JOINED = ["order_id", "pId", "income", "name"]


def join(rows: DataFrame) -> DataFrame:
    left = rows.where("__side = 0").select("pId", "order_id", "income", F.col("__w").alias("__lw"))
    right = rows.where("__side = 1").select("pId", "name", F.col("__w").alias("__rw"))
    joined = left.join(right, "pId")
    return joined.select(*JOINED, (F.col("__lw") * F.col("__rw")).alias("__w"))


def _sides(spark, orders: Path, products: Path) -> DataFrame:
    left = stream(spark, orders, ORDERS).select(
        "pId",
        F.lit(0).cast("byte").alias("__side"),
        "order_id",
        "income",
        F.lit(None).cast("string").alias("name"),
        "__w",
    )
    right = stream(spark, products, PRODUCTS).select(
        "pId",
        F.lit(1).cast("byte").alias("__side"),
        F.lit(None).cast("long").alias("order_id"),
        F.lit(None).cast("long").alias("income"),
        "name",
        "__w",
    )
    return left.unionByName(right)


def _joined_difference(before: DataFrame, after: DataFrame) -> DataFrame:
    """Per joined row (keyed by order_id: one product per order), the new image or a delete."""
    old = join(before).where("__w > 0").drop("__w")
    new = join(after).where("__w > 0").drop("__w")
    return difference(old, new, ["order_id"])


def join_live_rows(spark, orders: Path, products: Path, work: Path) -> None:
    def sink(batch: DataFrame, _id: int) -> None:
        batch.persist()
        cols = ["pId", "__side", "order_id", "income", "name"]
        before = batch.where("__phase = 0").drop("__phase")
        after = batch.groupBy(*cols).agg(F.sum("__w").alias("__w")).where("__w > 0")
        merge_into(spark, _joined_difference(before, after), work / "sink", ["order_id"])
        batch.unpersist()

    _run(_live_rows(spark, _sides(spark, orders, products), 1).writeStream.outputMode("append"), sink, work)


def join_delta_state(spark, orders: Path, products: Path, work: Path) -> None:
    state, cols = work / "state", ["pId", "__side", "order_id", "income", "name"]

    def sink(batch: DataFrame, _id: int) -> None:
        delta = batch.groupBy(*cols).agg(F.sum("__w").alias("__w")).where("__w != 0").persist()
        before = _state_of(spark, state, delta, ["pId"], cols)
        after = before.unionByName(delta).groupBy(*cols).agg(F.sum("__w").alias("__w")).where("__w > 0")
        merge_into(spark, _joined_difference(before, after), work / "sink", ["order_id"])
        _merge_state(spark, state, delta, cols)
        delta.unpersist()

    _run(_sides(spark, orders, products).writeStream, sink, work)


# -- shared -----------------------------------------------------------------------------------


def _live_rows(spark: SparkSession, changes: DataFrame, key_width: int) -> DataFrame:
    return DataFrame(spark._jvm.lockstep.stream.LiveRows.apply(changes._jdf, key_width), spark)


def _state_of(spark, state: Path, delta: DataFrame, key: list[str], cols: list[str]) -> DataFrame:
    """The live rows (with copies as __w) of the keys `delta` touches."""
    from delta.tables import DeltaTable

    if not DeltaTable.isDeltaTable(spark, str(state)):
        delta.limit(0).write.format("delta").save(str(state))
    touched = delta.select(*key).distinct()
    return spark.read.format("delta").load(str(state)).join(touched, key, "left_semi").select(*cols, "__w")


def _merge_state(spark, state: Path, delta: DataFrame, cols: list[str]) -> None:
    from delta.tables import DeltaTable

    on = " AND ".join(f"t.{c} <=> s.{c}" for c in cols)
    (
        DeltaTable.forPath(spark, str(state))
        .alias("t")
        .merge(delta.alias("s"), on)
        .whenMatchedDelete("t.__w + s.__w = 0")
        .whenMatchedUpdate(set={"__w": "t.__w + s.__w"})
        .whenNotMatchedInsertAll()
        .execute()
    )


def _run(writer, sink, work: Path) -> None:
    query = (
        writer.foreachBatch(sink)
        .option("checkpointLocation", str(work / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()


_LISTENER = []


def result_sizes(spark: SparkSession) -> int:
    """Bytes the tasks of this application returned to the driver so far (a JVM listener)."""
    if not _LISTENER:
        _LISTENER.append(spark._jvm.lockstep.stream.ResultBytes.listen(spark.sparkContext._jsc.sc()))
    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty()
    return _LISTENER[0].bytes()


def expected_aggregate(spark, orders: Path) -> DataFrame:
    rows = weighted(spark.read.schema(ORDERS).json(str(orders)))
    return aggregate(rows.select("pId", "income", "__w")).where("n > 0")


def expected_join(spark, orders: Path, products: Path) -> DataFrame:
    left = (
        weighted(spark.read.schema(ORDERS).json(str(orders)))
        .groupBy("order_id", "pId", "income")
        .agg(F.sum("__w").alias("w"))
        .where("w > 0")
    )
    right = (
        weighted(spark.read.schema(PRODUCTS).json(str(products)))
        .groupBy("pId", "name")
        .agg(F.sum("__w").alias("w"))
        .where("w > 0")
    )
    return left.join(right, "pId").select(*JOINED)


def same(spark, sink: Path, expected: DataFrame) -> bool:
    actual = spark.read.format("delta").load(str(sink)).select(*expected.columns)
    return actual.exceptAll(expected).isEmpty() and expected.exceptAll(actual).isEmpty()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="300000,1200000")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--runs", default="agg_native,agg_live_rows,agg_delta_state,join_live_rows,join_delta_state")
    args = parser.parse_args(argv)
    spark = session(args.master)
    work = Path(tempfile.mkdtemp(prefix="bench_engines-"))
    runs = {
        "agg_native": agg_native,
        "agg_live_rows": agg_live_rows,
        "agg_delta_state": agg_delta_state,
        "join_live_rows": join_live_rows,
        "join_delta_state": join_delta_state,
    }
    print(f"{'run':<18} {'events':>9} {'rows':>10} {'seconds':>8} {'rows/s':>9} {'to driver MiB':>13} {'correct':>7}")
    for size in map(int, args.sizes.split(",")):
        orders, products = work / f"orders-{size}", work / f"products-{size}"
        rows = generate_changelog(orders, events=size, files=FILES)
        product_rows = generate_products(products, events=size // 4, files=FILES)
        for name in args.runs.split(","):
            out = work / f"{name}-{size}"
            is_join = name.startswith("join")
            before_bytes, started = result_sizes(spark), time.monotonic()
            runs[name](spark, orders, products, out) if is_join else runs[name](spark, orders, out)
            seconds = time.monotonic() - started
            sent = (result_sizes(spark) - before_bytes) / 2**20
            expected = expected_join(spark, orders, products) if is_join else expected_aggregate(spark, orders)
            n = rows + (product_rows if is_join else 0)
            print(
                f"{name:<18} {size:>9,} {n:>10,} {seconds:>8.1f} {n / seconds:>9,.0f} {sent:>13.2f} "
                f"{'yes' if same(spark, out / 'sink', expected) else 'NO':>7}",
                flush=True,
            )
            shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
