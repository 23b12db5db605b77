"""The spark engine against the local one: the same changelogs, the same queries, the same sink
row for row and the same stream-equals-batch result; its micro-batches bring no changelog or
state row to the driver; and a run folder keeps the engine it started with."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import yaml

from jobs.changelog.columns import COUNT
from jobs.errors import RunStateError, SpecError
from jobs.plan import plan_query
from jobs.runtime.layout import RunLayout
from jobs.spec import load_spec, with_engine
from jobs.spec.model import Settings
from jobs.stream.handler import FAULT_AFTER_COMMIT
from jobs.stream.job import run_stream
from tests.conftest import ROOT, orders_spec, write_changelog
from tests.integration.conftest import run_both, same_rows, table_rows
from tests.integration.test_cli import lockstep

pytestmark = pytest.mark.slow

QUERIES = {
    "dedup_first": """SELECT order_id, pId, income FROM (SELECT *, ROW_NUMBER() OVER
        (PARTITION BY pId ORDER BY order_id) AS rn FROM orders) WHERE rn = 1""",
    "top_2": """SELECT pId, order_id, income, rn FROM (SELECT *, ROW_NUMBER() OVER
        (PARTITION BY pId ORDER BY order_id DESC) AS rn FROM orders) WHERE rn <= 2""",
    "min_max_distinct": """SELECT pId, MIN(income) AS lo, MAX(income) AS hi,
        COUNT(DISTINCT income) AS incomes, COUNT(*) AS n FROM orders GROUP BY pId""",
    "inner_join": """SELECT o.order_id, o.income, p.name FROM orders o
        JOIN products p ON o.pId = p.pId""",
    "full_join": """SELECT o.order_id, o.income, p.pId AS product, p.name FROM orders o
        FULL JOIN products p ON o.pId = p.pId""",
    "anti_join": """SELECT p.pId, p.name FROM products p
        WHERE NOT EXISTS (SELECT 1 FROM orders o WHERE o.pId = p.pId)""",
}


def orders_changelog(rng: random.Random, orders: int, products: int) -> list[dict]:
    """Inserts, updates that move an order between products, and deletes."""
    live: dict[int, dict] = {}
    rows = []
    for order_id in range(orders):
        row = {"order_id": order_id, "pId": rng.randrange(products), "income": rng.randrange(-5, 50)}
        rows.append({**row, "op": "+I"})
        live[order_id] = row
        if live and rng.random() < 0.5:
            old = live[rng.choice(list(live))]
            if rng.random() < 0.3:
                rows.append({**old, "op": "-D"})
                del live[old["order_id"]]
            else:
                new = {**old, "pId": rng.randrange(products), "income": rng.randrange(-5, 50)}
                rows += [{**old, "op": "-U"}, {**new, "op": "+U"}]
                live[old["order_id"]] = new
    return rows


def products_changelog(rng: random.Random, products: int) -> list[dict]:
    rows = [{"pId": p, "name": f"p{p % 7}", "op": "+I"} for p in range(0, products + 6, 2)]
    for p in range(0, products, 6):
        rows += [{"pId": p, "name": f"p{p % 7}", "op": "-U"}, {"pId": p, "name": f"q{p % 5}", "op": "+U"}]
    return rows + [{"pId": p, "name": f"q{p % 5}", "op": "-D"} for p in range(0, products, 12)]


def write_sources(folder: Path, seed: int, orders: int, products: int) -> None:
    rng = random.Random(seed)
    write_changelog(folder / "orders", "part-0.json", orders_changelog(rng, orders, products))
    write_changelog(folder / "products", "part-0.json", products_changelog(rng, products))


def spec_for(folder: Path, sql: str, engine: str, rows_per_batch: int) -> Path:
    """The query over both sources; a full join's rows kept with their copy counts (a retract
    sink: its output has no key), every other join's behind the upsert materializer."""
    products = {
        "path": "products",
        "format": "changelog-json",
        "schema": "pId BIGINT, name STRING",
        "primary_key": ["pId"],
    }
    return orders_spec(
        folder,
        sql,
        rows_per_batch=rows_per_batch,
        sink={"changelog_mode": "retract"} if "FULL JOIN" in sql else None,
        stream={"engine": engine},
        name=f"q_{engine}",
        more_sources={"products": products},
    )


# The differential sample (tests/differential) runs every query class on both engines against
# Flink; these compare the engines directly on the rest: a retract sink, an anti join, ranking.
SIDE_BY_SIDE = ["min_max_distinct", "full_join", "anti_join", "top_2"]


@pytest.mark.parametrize("query", SIDE_BY_SIDE)
def test_the_spark_engine_writes_the_sink_the_local_engine_writes(spark, tmp_path, query):
    write_sources(tmp_path, seed=sorted(QUERIES).index(query), orders=60, products=9)
    local = run_both(spec_for(tmp_path, QUERIES[query], "local", 40), tmp_path / "runs")
    on_spark = run_both(spec_for(tmp_path, QUERIES[query], "spark", 40), tmp_path / "runs")
    assert local.stream, "the case must leave rows in the sink"
    assert same_rows(on_spark.stream, local.stream), f"{query}: {on_spark.stream} != {local.stream}"
    assert same_rows(copies(on_spark.stream), on_spark.batch)
    assert (on_spark.layout.state / "engine").read_text().strip() == "spark"


@pytest.mark.parametrize("emit, aggregate", [("early", "SUM"), ("final", "SUM"), ("final", "MAX")])
def test_windows_are_the_same_on_both_engines(spark, tmp_path, emit, aggregate):
    spec = yaml.safe_load((ROOT / "conf" / "queries" / "seed_004_windows.yaml").read_text())
    spec["sources"]["orders"]["path"] = str(ROOT / "conf" / "queries" / "data" / "timed_orders")
    spec["sink"]["emit"] = emit
    spec["sql"] = spec["sql"].replace("SUM(income)", f"{aggregate}(income)")
    sinks = {}
    for engine in ("local", "spark"):
        spec["name"], spec["stream"]["engine"] = f"windows_{engine}", engine
        path = tmp_path / f"{engine}.yaml"
        path.write_text(yaml.safe_dump(spec))
        sinks[engine] = run_both(path, tmp_path / "runs").stream
    assert sinks["local"], "the case must leave windows in the sink"
    assert same_rows(sinks["spark"], sinks["local"])


def copies(rows: list[dict]) -> list[dict]:
    """A retract sink's rows, each as many times as its copy count, as the batch has them."""
    if not rows or COUNT not in rows[0]:
        return rows
    return [{k: v for k, v in row.items() if k != COUNT} for row in rows for _ in range(row[COUNT])]


def result_bytes_per_batch(spark, spec: Path, out: Path) -> float:
    """The bytes Spark's tasks returned to the driver during the stream step, per micro-batch."""
    listener = spark._jvm.lockstep.stream.ResultBytes.listen(spark.sparkContext._jsc.sc())
    plan = plan_query(load_spec(spec))
    result = run_stream(plan, Settings(), RunLayout.for_query(out, plan.spec.name))
    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty()
    spark.sparkContext._jsc.sc().removeSparkListener(listener)
    assert result.batches == 8
    return listener.bytes() / result.batches


def test_the_spark_engine_brings_no_row_to_the_driver(spark, tmp_path):
    """Eight micro-batches of a full join, over a small and over a ten times larger changelog:
    what the tasks return to the driver (commit messages, metrics: about 270 KB per micro-batch)
    does not grow with the rows; rows brought back (a collect, a broadcast join) would add tens of
    bytes per row, hundreds of kilobytes here. (The same holds behind the materializer, at three
    times the cost: inner_join.)"""
    query = "full_join"
    per_batch = {}
    for orders in (1_000, 10_000):
        folder = tmp_path / str(orders)
        write_sources(folder, seed=1, orders=orders, products=orders // 10)
        rows = sum(1 for _ in (folder / "orders" / "part-0.json").open()) + sum(
            1 for _ in (folder / "products" / "part-0.json").open()
        )
        spec = spec_for(folder, QUERIES[query], "spark", rows_per_batch=-(-rows // 8))
        per_batch[orders] = result_bytes_per_batch(spark, spec, folder / "runs")
    assert per_batch[10_000] < per_batch[1_000] * 1.05 + 8_192, per_batch


def test_a_crash_after_a_sink_commit_leaves_the_spark_engines_sink_and_materializer_as_a_clean_run(spark, tmp_path):
    write_sources(tmp_path, seed=5, orders=20, products=6)
    spec = spec_for(tmp_path, QUERIES["inner_join"], "spark", 12)
    clean = run_both(spec, tmp_path / "clean")
    crashed = lockstep(
        "stream", spec, "--out", tmp_path / "crashed", "--quiet", cwd=tmp_path, env={FAULT_AFTER_COMMIT: "2"}
    )
    assert crashed.returncode == 70, crashed.stderr
    layout = RunLayout.for_query(tmp_path / "crashed", "q_spark")
    assert not (layout.checkpoint / "commits" / "2").exists()  # Spark never recorded batch 2
    run_stream(plan_query(load_spec(spec)), Settings(), layout)
    assert table_rows(layout.stream) == clean.stream
    assert table_rows(layout.materializer_table) == table_rows(clean.layout.materializer_table)


def test_a_run_folder_keeps_the_engine_it_started_with(spark, tmp_path):
    write_sources(tmp_path, seed=3, orders=10, products=3)
    spec = load_spec(spec_for(tmp_path, QUERIES["dedup_first"], "local", 40))
    layout = RunLayout.for_query(tmp_path / "runs", spec.name)
    run_stream(plan_query(spec), Settings(), layout)
    with pytest.raises(RunStateError, match="streamed by the local engine"):
        run_stream(plan_query(with_engine(spec, "spark")), Settings(), layout)


def test_what_the_spark_engine_does_not_run_is_refused_before_it_runs(tmp_path):
    projection = spec_for(tmp_path, "SELECT order_id, pId FROM orders", "spark", 10)
    text = yaml.safe_load(projection.read_text())
    text["sink"] = {"primary_key": ["pId"]}  # not the upsert key: the materializer, over a projection
    projection.write_text(yaml.safe_dump(text))
    with pytest.raises(SpecError, match="stream.engine spark does not run the upsert materializer over a projection"):
        plan_query(load_spec(projection))
    del text["sink"]
    projection.write_text(yaml.safe_dump(text))
    assert plan_query(load_spec(projection)).spec.stream.engine == "spark"
    assert plan_query(load_spec(spec_for(tmp_path, QUERIES["top_2"], "spark", 10))).spec.stream.engine == "spark"
