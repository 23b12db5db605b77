"""Where the operators run Spark, who runs the stream and who writes the tables: the operator's
own arguments, else the Airflow Variables lockstep_spark_master / lockstep_sink_writer /
lockstep_stream_engine, else the connection
lockstep_spark, else the settings file. Airflow reads these from AIRFLOW_VAR_* and AIRFLOW_CONN_*
environment variables as from its database."""

import pytest

from operators_lib.lockstep_operators import LockstepStreamOperator
from tests.conftest import ROOT

SPEC = str(ROOT / "conf" / "queries" / "income_per_product.yaml")


def pipeline_of(**arguments):
    return LockstepStreamOperator(task_id="stream", spec_path=SPEC, runs_dir="runs", **arguments)._pipeline()


@pytest.fixture(autouse=True)
def no_airflow_settings(monkeypatch):
    for name in (
        "AIRFLOW_VAR_LOCKSTEP_SPARK_MASTER",
        "AIRFLOW_VAR_LOCKSTEP_SINK_WRITER",
        "AIRFLOW_VAR_LOCKSTEP_STREAM_ENGINE",
        "AIRFLOW_CONN_LOCKSTEP_SPARK",
    ):
        monkeypatch.delenv(name, raising=False)


def test_without_airflow_settings_the_settings_file_decides():
    pipeline = pipeline_of()
    assert pipeline.settings.spark.master == "local[2]" and pipeline.plan.spec.sink.writer == "delta-rs"
    assert pipeline.plan.spec.stream.engine == "local"


def test_a_connection_names_the_cluster(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_LOCKSTEP_SPARK", "spark://10.1.2.3:7078")
    assert pipeline_of().settings.spark.master == "spark://10.1.2.3:7078"


def test_a_lockstep_connection_names_its_master_by_host_and_port_or_in_its_extra(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_LOCKSTEP_SPARK", "lockstep://spark-master.internal:7079")
    assert pipeline_of().settings.spark.master == "spark://spark-master.internal:7079"
    monkeypatch.setenv("AIRFLOW_CONN_LOCKSTEP_SPARK", '{"conn_type": "lockstep", "extra": {"master": "local[1]"}}')
    assert pipeline_of().settings.spark.master == "local[1]"


def test_a_variable_wins_over_the_connection_and_the_operator_over_both(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_LOCKSTEP_SPARK", "spark://10.1.2.3:7078")
    monkeypatch.setenv("AIRFLOW_VAR_LOCKSTEP_SPARK_MASTER", "spark://10.9.9.9:7077")
    monkeypatch.setenv("AIRFLOW_VAR_LOCKSTEP_SINK_WRITER", "delta-spark")
    assert pipeline_of().settings.spark.master == "spark://10.9.9.9:7077"
    assert pipeline_of().plan.spec.sink.writer == "delta-spark"
    chosen = pipeline_of(master="local[1]", writer="delta-rs")
    assert chosen.settings.spark.master == "local[1]" and chosen.plan.spec.sink.writer == "delta-rs"


def test_an_unknown_writer_is_a_spec_error_naming_the_choices(monkeypatch):
    from jobs.errors import SpecError

    monkeypatch.setenv("AIRFLOW_VAR_LOCKSTEP_SINK_WRITER", "delta-go")
    with pytest.raises(SpecError, match="writer 'delta-go' is not one of delta-rs, delta-spark"):
        pipeline_of()


def test_the_engine_variable_picks_the_spark_engine_and_its_writer_unless_the_operator_says(monkeypatch):
    monkeypatch.setenv("AIRFLOW_VAR_LOCKSTEP_STREAM_ENGINE", "spark")
    spec = pipeline_of().plan.spec
    assert (spec.stream.engine, spec.sink.writer) == ("spark", "delta-spark")
    assert pipeline_of(engine="local").plan.spec.stream.engine == "local"


def test_the_spark_engine_with_the_driver_writer_is_a_spec_error(monkeypatch):
    from jobs.errors import SpecError

    with pytest.raises(SpecError, match="engine spark writes its tables with delta-spark"):
        pipeline_of(engine="spark", writer="delta-rs")
