from pathlib import Path

import pytest

from jobs.errors import SpecError
from jobs.spec import load_settings, load_spec, with_master, with_overrides
from tests.conftest import write_spec

VALID = """
name: income_per_product
sql: |
  SELECT pId, SUM(income) AS total
  FROM orders GROUP BY pId
sources:
  orders:
    path: data/orders
    format: changelog-json
    schema: "order_id BIGINT, pId BIGINT, income BIGINT"
    primary_key: [order_id]
"""


def test_a_valid_spec_resolves_paths_against_its_own_folder_and_knows_where_its_sql_starts(tmp_path):
    spec = load_spec(write_spec(tmp_path, VALID))
    assert spec.sources["orders"].path == (tmp_path / "data/orders").resolve()
    assert spec.sql_line == 3
    assert spec.sink.upsert_materialize == "auto" and spec.sink.primary_key is None
    assert spec.stream.rows_per_batch is None and spec.stream.megabytes_per_batch == 256
    assert spec.stream.state_store == "lockstep" and spec.stream.ttl is None


def test_a_state_ttl_is_an_interval_and_its_consequence_a_warning_of_the_plan(tmp_path):
    from datetime import timedelta

    from jobs.plan import plan_query

    spec = load_spec(write_spec(tmp_path, VALID + "stream:\n  state_ttl: 36 hours\n"))
    assert spec.stream.ttl == timedelta(hours=36)
    assert any("stream.state_ttl is 36 hours" in w and "may differ" in w for w in plan_query(spec).warnings)
    with_max = VALID.replace("SUM(income) AS total", "MAX(income) AS top") + "stream:\n  state_ttl: 1 day\n"
    with pytest.raises(
        SpecError, match=r"q.yaml: stream.state_ttl applies to SUM, COUNT and AVG only, not to MAX\(income\)"
    ):
        plan_query(load_spec(write_spec(tmp_path, with_max, name="q.yaml")))


@pytest.mark.parametrize(
    "change, message",
    [
        (("    format: changelog-json", "    formt: changelog-json"), r"q.yaml:8: sources.orders.formt: unknown key"),
        (("    format: changelog-json", "    format: csv"), r"q.yaml:8: sources.orders.format: must be one of"),
        (("name: income_per_product", "name: income per product"), r"q.yaml:1: name:"),
        (
            ("    primary_key: [order_id]", "    primary_key: [order_id]\nstream:\n  rows_per_batch: 0"),
            r"q.yaml:12: stream.rows_per_batch:",
        ),
        (
            ("    primary_key: [order_id]", "    primary_key: [order_id]\nsink:\n  upsert_materialize: sometimes"),
            r"q.yaml:12: sink.upsert_materialize: must be one of 'auto', 'none' or 'force'",
        ),
        (
            ("name: income_per_product", "name: income_per_product\nschedule: daily"),
            r"q.yaml:2: schedule: 'daily' is neither a preset \(@once",
        ),
        (
            ("    primary_key: [order_id]", "    primary_key: [order_id]\n    partitioned_by: hour"),
            r"q.yaml:11: sources.orders.partitioned_by: must be one of 'date' \(got 'hour'\)",
        ),
        (
            (
                "    primary_key: [order_id]",
                "    primary_key: [order_id]\nlookups:\n  ../etc:\n    kind: http\n"
                '    url: http://127.0.0.1/{k}\n    key: [k]\n    output: "v STRING"',
            ),
            r"q.yaml:11: lookups: name '../etc' is not a SQL identifier",
        ),
        (
            ("    primary_key: [order_id]", "    primary_key: [order_id]\nstream:\n  state_ttl: 1 fortnight"),
            r"q.yaml:12: stream.state_ttl:",
        ),
        (
            (
                "    primary_key: [order_id]",
                "    primary_key: [order_id]\nstream:\n  state_store: rocksdb\n  state_ttl: 1 day",
            ),
            r"q.yaml:11: stream: state_ttl needs state_store: lockstep",
        ),
    ],
)
def test_spec_errors_name_the_file_the_line_and_the_key(tmp_path, change, message):
    path = write_spec(tmp_path, VALID.replace(*change), name="q.yaml")
    with pytest.raises(SpecError, match=message):
        load_spec(path)


def test_a_missing_required_key_is_named(tmp_path):
    path = write_spec(tmp_path, VALID.replace("name: income_per_product\n", ""), name="q.yaml")
    with pytest.raises(SpecError, match="name: required key is missing"):
        load_spec(path)


def test_invalid_yaml_names_the_line(tmp_path):
    path = write_spec(tmp_path, VALID + "  - broken: [\n", name="q.yaml")
    with pytest.raises(SpecError, match=r"q.yaml:\d+: invalid YAML"):
        load_spec(path)


def test_settings_default_when_no_file_and_reject_unknown_keys(tmp_path):
    assert load_settings(None).spark.master.startswith("local")
    path = write_spec(tmp_path, "spark:\n  cores: 8\n", name="settings.yaml")
    with pytest.raises(SpecError, match="settings.yaml:2: spark.cores: unknown key"):
        load_settings(path)


@pytest.mark.parametrize("written", ["null", "'null'", "fail"])
def test_on_lookup_error_null_is_the_policy_whether_or_not_yaml_reads_it_as_a_null(tmp_path, written):
    lookup = (
        "\nlookups:\n  customers:\n    kind: http\n    url: http://127.0.0.1:1/c/{k}\n"
        f'    key: [k]\n    output: "name STRING"\n    on_lookup_error: {written}\n'
    )
    spec = load_spec(write_spec(tmp_path, VALID + lookup))
    assert spec.lookups["customers"].on_lookup_error == written.strip("'")


def test_settings_come_from_the_flag_then_the_variable_then_conf_settings_yaml(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LOCKSTEP_SETTINGS", raising=False)
    monkeypatch.delenv("LOCKSTEP_RUNS_DIR", raising=False)
    write_spec(tmp_path / "conf", "runs_dir: from_conf\n", name="settings.yaml")
    by_variable = write_spec(tmp_path, "runs_dir: from_variable\n", name="variable.yaml")
    by_flag = write_spec(tmp_path, "runs_dir: from_flag\n", name="flag.yaml")
    assert load_settings(None).runs_dir == Path("from_conf")
    monkeypatch.setenv("LOCKSTEP_SETTINGS", str(by_variable))
    assert load_settings(None).runs_dir == Path("from_variable")
    assert load_settings(by_flag).runs_dir == Path("from_flag")
    monkeypatch.setenv("LOCKSTEP_RUNS_DIR", "/elsewhere/runs")
    assert load_settings(by_flag).runs_dir == Path("/elsewhere/runs")


def test_a_settings_file_the_variable_names_must_exist(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LOCKSTEP_SETTINGS", str(tmp_path / "missing.yaml"))
    with pytest.raises(SpecError, match=r"missing.yaml: settings file not found \(named by LOCKSTEP_SETTINGS\)"):
        load_settings(None)


def test_make_test_draws_the_same_hypothesis_examples_every_run():
    from hypothesis import settings

    assert settings.default.derandomize and settings.default.database is None


@pytest.mark.parametrize(
    ("extra", "command_line", "on_cluster", "engine", "writer"),
    [
        ("", {}, False, "local", "delta-rs"),  # local[N]: the local engine
        ("", {}, True, "spark", "delta-spark"),  # a cluster master: the spark engine, its writer
        ("stream:\n  engine: local\n", {}, True, "local", "delta-rs"),  # the spec chose
        ("", {"engine": "local"}, True, "local", "delta-rs"),  # the command chose
        ("sink:\n  writer: delta-rs\n", {}, True, "local", "delta-rs"),  # a driver-side writer chosen
        ("", {"writer": "delta-rs"}, True, "local", "delta-rs"),
        ("", {"engine": "spark"}, False, "spark", "delta-spark"),  # spark anywhere, when asked
    ],
)
def test_a_cluster_master_chooses_the_spark_engine_when_nothing_else_chose(
    tmp_path, extra, command_line, on_cluster, engine, writer
):
    spec = with_overrides(load_spec(write_spec(tmp_path, VALID + extra)), on_cluster=on_cluster, **command_line)
    assert (spec.stream.engine, spec.sink.writer) == (engine, writer)


def test_a_settings_master_knows_whether_it_is_a_cluster(tmp_path):
    masters = ["local[2]", "local", "spark://127.0.0.1:7077", "yarn", "k8s://https://host:6443"]
    on_cluster = [with_master(load_settings(None), m).spark.on_cluster for m in masters]
    assert on_cluster == [False, False, True, True, True]
