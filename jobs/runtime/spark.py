"""The one SparkSession of a process, configured from settings.

Starting Spark takes about 12 s on two cores, so `lockstep run` shares one session across its
stream, batch and check steps, and the tests share one across the whole run.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

from jobs.spec.model import SparkSettings

LOG_CONFIG = Path(__file__).with_name("log4j2.properties")
_session = None


def spark_session(settings: SparkSettings | None = None):
    global _session
    if _session is not None:
        return _session
    settings = settings or SparkSettings()
    # Python workers (the changelog source's readers) must run this interpreter, with lockstep
    # importable, not whatever `python3` is on the PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    java_opts = f"-Dlog4j.configurationFile=file:{LOG_CONFIG} -Dlog4j2.configurationFile=file:{LOG_CONFIG}"
    builder = (SparkSession.builder.master(settings.master).appName("lockstep")
               .config("spark.sql.shuffle.partitions", str(settings.shuffle_partitions))
               .config("spark.default.parallelism", str(settings.shuffle_partitions))
               .config("spark.driver.memory", settings.driver_memory)
               .config("spark.sql.session.timeZone", settings.session_time_zone)
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.execution.arrow.pyspark.enabled", "true")
               .config("spark.driver.extraJavaOptions", java_opts))
    for key, value in settings.extra.items():
        builder = builder.config(key, value)
    _session = builder.getOrCreate()
    logging.getLogger("py4j").setLevel(logging.WARNING)  # its shutdown chatter outlives stderr
    _session.sparkContext.setLogLevel("ERROR")
    return _session


def stop_session() -> None:
    global _session
    if _session is not None:
        _session.stop()
        _session = None
