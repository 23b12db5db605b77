"""lockstep's own Spark classes: the Spark engine's keyed state (jobs/stream/operators/keyed_state.py) and the
listener that sums the bytes tasks return to the driver. scripts/jvm-jars.sh builds them from
jobs/stream/jvm/ into the venv's jars/ folder; they reach the driver and every executor through
spark.jars, as the connector's jars do.
"""

from __future__ import annotations

from pathlib import Path

from jobs.errors import SetupError
from jobs.runtime.delta_connector import JARS, with_jars

STREAM_JAR = JARS / "lockstep-stream.jar"


def with_stream_jar(conf: dict[str, str], jar: Path = STREAM_JAR) -> dict[str, str]:
    """`conf` with the jar added to spark.jars, when setup built it."""
    return with_jars(conf, [jar] if jar.is_file() else [])


def require_stream_jar(spark, needed_for: str) -> None:
    """Fail in one line when the session was started without the jar."""
    if str(STREAM_JAR) not in spark.conf.get("spark.jars", ""):
        raise SetupError(
            f"{needed_for} needs lockstep's Spark classes, which are not built: run `make setup` "
            f"(scripts/jvm-jars.sh compiles them)",
            where=str(STREAM_JAR),
        )
