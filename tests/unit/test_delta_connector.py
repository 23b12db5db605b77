"""Delta's Spark connector jars: the release the Python package is, or one line saying what to run."""

import importlib.metadata

import pytest

from jobs.errors import SetupError
from jobs.runtime.delta_connector import connector_conf, connector_jars

PYTHON_RELEASE = importlib.metadata.version("delta-spark")


def jars_of(folder, release):
    folder.mkdir(exist_ok=True)
    for name in (f"delta-spark_4.2_2.13-{release}.jar", f"delta-storage-{release}.jar"):
        (folder / name).write_bytes(b"")
    return folder


def test_no_jars_fetched_starts_spark_without_the_connector(tmp_path):
    assert connector_jars(tmp_path / "missing") == []
    assert connector_conf([], partitions=4) == {}


def test_jars_of_the_python_package_release_are_loaded_with_delta_extension(tmp_path):
    jars = connector_jars(jars_of(tmp_path / "jars", PYTHON_RELEASE))
    conf = connector_conf(jars, partitions=4)
    assert conf["spark.jars"].count(".jar") == 2
    assert conf["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension"
    assert conf["spark.databricks.delta.snapshotPartitions"] == "4"


def test_jars_of_another_release_are_refused_naming_both_and_the_folder(tmp_path):
    folder = jars_of(tmp_path / "jars", "3.0.0")
    with pytest.raises(SetupError) as refused:
        connector_jars(folder)
    message = str(refused.value)
    assert "3.0.0" in message and PYTHON_RELEASE in message and "make setup" in message
    assert str(folder) in message
