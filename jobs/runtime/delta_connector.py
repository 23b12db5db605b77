"""Delta's Spark connector (delta-spark): the io.delta jars scripts/delta-jars.sh fetched into the
virtual environment's jars/ folder, handed to Spark through spark.jars when the session starts.

Nothing is resolved at start-up (no spark.jars.packages): the jars are files on disk, the same
release as the delta-spark Python package, which the session refuses to mix. Without the jars the
session still starts (the delta-rs writer needs no JVM connector); what needs them says so.
"""

from __future__ import annotations

import importlib.metadata
import re
import sys
from pathlib import Path

from jobs.errors import SetupError

JARS = Path(sys.prefix) / "jars"
_STORAGE_JAR = re.compile(r"delta-storage-(.+)\.jar$")


def connector_jars(folder: Path = JARS) -> list[Path]:
    """The connector's jars, checked against the Python package; [] when setup fetched none."""
    jars = sorted(folder.glob("delta-*.jar")) if folder.is_dir() else []
    if not jars:
        return []
    versions = {m.group(1) for m in map(_STORAGE_JAR.search, (j.name for j in jars)) if m}
    python = importlib.metadata.version("delta-spark")
    if versions != {python}:
        raise SetupError(
            f"Delta's Spark connector jars are {', '.join(sorted(versions)) or 'incomplete'} "
            f"but the delta-spark Python package is {python}: run `make setup`",
            where=str(folder),
        )
    return jars


def jars_in(folder: Path) -> list[Path]:
    """The jars a setup script fetched into `folder`; none when it did not."""
    return sorted(folder.glob("*.jar")) if folder.is_dir() else []


def with_jars(conf: dict[str, str], jars: list[Path]) -> dict[str, str]:
    """`conf` with `jars` added to spark.jars after those it names."""
    if not jars:
        return conf
    present = [j for j in conf.get("spark.jars", "").split(",") if j]
    return {**conf, "spark.jars": ",".join([*present, *map(str, jars)])}


def connector_conf(jars: list[Path], partitions: int) -> dict[str, str]:
    """Spark settings that load the connector: the jars, Delta's SQL extension and catalog, and
    the log's snapshot state in `partitions` partitions (Delta's default, 50, makes every
    small table's log replay 50 tasks: seconds per MERGE on two cores)."""
    if not jars:
        return {}
    return {
        "spark.jars": ",".join(str(j) for j in jars),
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.databricks.delta.snapshotPartitions": str(partitions),
    }


def require_connector(spark, needed_for: str) -> None:
    """Fail in one line when `needed_for` (the delta-spark writer, a Delta source) needs the
    connector and the session was started without it."""
    if "DeltaSparkSessionExtension" not in spark.conf.get("spark.sql.extensions", ""):
        raise SetupError(
            f"{needed_for} needs Delta's Spark connector, which is not installed: run "
            f"`make setup` (it fetches the io.delta jars with Maven)",
            where=str(JARS),
        )
