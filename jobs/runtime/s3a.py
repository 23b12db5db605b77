"""Hadoop's S3A file system, through which Spark reads and writes s3a:// URLs: hadoop-aws and the
AWS SDK modules it uses, which scripts/s3a-jars.sh fetched into the virtual environment's
jars/s3a folder, handed to Spark through spark.jars when the session starts (nothing is resolved
at start-up). A store's endpoint and credentials are set per bucket on the running session's
Hadoop configuration when a step first reaches it (jobs/store/tables.py)."""

from __future__ import annotations

import sys
from pathlib import Path

from jobs.errors import SetupError
from jobs.runtime.delta_connector import jars_in, with_jars

JARS = Path(sys.prefix) / "jars" / "s3a"
# Spark's checkpoint file manager for object stores (spark-hadoop-cloud, fetched with S3A): a
# checkpoint file is written in place through an upload that only completes when it is closed,
# instead of a temporary file renamed (a copy and a delete on S3).
CHECKPOINT_FILE_MANAGER = "org.apache.spark.internal.io.cloud.AbortableStreamBasedCheckpointFileManager"


def checkpoints_on_a_store(folder: Path = JARS) -> dict[str, str]:
    """The Spark settings for checkpoints on an object store: its checkpoint file manager, when
    setup fetched it (Spark's own rename-based one otherwise)."""
    if not any(folder.glob("spark-hadoop-cloud_*.jar")):
        return {}
    return {"spark.sql.streaming.checkpointFileManagerClass": CHECKPOINT_FILE_MANAGER}


def with_s3a_jars(conf: dict[str, str], folder: Path = JARS) -> dict[str, str]:
    """`conf` with the S3A jars added to spark.jars, when setup fetched them."""
    return with_jars(conf, jars_in(folder))


def set_hadoop_conf(spark, conf: dict[str, str], needed_for: str) -> None:
    """Set `conf` on the session's Hadoop configuration (which the executors' tasks get), after
    checking that the session has the S3A jars."""
    if "hadoop-aws-" not in spark.conf.get("spark.jars", ""):
        raise SetupError(
            f"{needed_for} needs Hadoop's S3A file system, which is not installed: run `make setup` "
            f"(scripts/s3a-jars.sh fetches it with Maven)",
            where=str(JARS),
        )
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    for key, value in conf.items():
        hadoop.set(key, value)
