"""The one SparkSession of a process, configured from settings.

Starting Spark takes about 10 s on two cores (5-6 s with the class archive setup writes, see
jvm_classes.py), so `lockstep run` shares one session across its stream, batch and check steps,
and the tests share one across the whole run. The stream step starts it in the background
(start_in_background) while it stages the sources, which on a large file takes as long again.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import Future
from pathlib import Path

from jobs.runtime import jvm_classes
from jobs.runtime.delta_connector import connector_conf, connector_jars
from jobs.runtime.jit import input_bytes, jit_options
from jobs.runtime.kafka import with_kafka_jars
from jobs.runtime.local_fs import local_fs_conf
from jobs.runtime.progress import Progress
from jobs.runtime.s3a import with_s3a_jars
from jobs.runtime.stream_jar import with_stream_jar
from jobs.spec.model import QuerySpec, SparkSettings

LOG_CONFIG = Path(__file__).with_name("log4j2.properties")
_session = None
_jvm_log: Path | None = None
_started_log: Path | None = None  # the log the running JVM was started with
_started_memory: str | None = None  # and its heap (spark.driver_memory)
_starting: _BackgroundStart | None = None  # a session being started by start_in_background
LOGS = "logs"  # the runs folder's folder of JVM logs: <runs>/logs/<query>.spark.log
CHECKPOINT_FILES = "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"


def log_jvm_to(path: Path | None) -> None:
    """Send the JVM's own output (Spark's log at WARN, the JVM's warnings, Java stack traces) to
    `path` instead of the terminal. Takes effect for a session not yet started; the CLI sets it
    to its run folder's spark.log, so that a terminal shows lockstep's lines only."""
    global _jvm_log
    _jvm_log = path


def jvm_log() -> Path | None:
    """Where the running session's JVM writes its output (None: to this process's stderr)."""
    return _started_log if _session is not None else None


def out_of_memory() -> str | None:
    """What to tell a user whose driver JVM ran out of heap, if its log records that. Such a JVM
    dies or fails its tasks, and the Python side is left with a refused connection or a lost task
    to report, neither of which says what to change."""
    log = jvm_log()
    return out_of_memory_in(log, _started_memory) if log is not None else None


def out_of_memory_in(log: Path, driver_memory: str | None) -> str | None:
    """The advice for the first OutOfMemoryError a JVM log holds, or None."""
    if not log.exists():
        return None
    with log.open(errors="replace") as lines:
        error = next((line for line in lines if "java.lang.OutOfMemoryError" in line), None)
    if error is None:
        return None
    cause = error.split("java.lang.", 1)[1].strip()
    return (
        f"the Spark driver ran out of memory ({cause}; spark.driver_memory {driver_memory}): "
        f"give it more in the settings, or keep a large aggregation state on disk with the "
        f"spec's stream.state_store: rocksdb"
    )


def spark_session(settings: SparkSettings | None = None, progress: Progress | None = None):
    """The process's one SparkSession, started on first use (with a line before and after: the
    JVM takes seconds to start, and nothing else shows meanwhile), or the one start_in_background
    is starting, once it is up."""
    if _starting is not None:
        return _adopt_background_start(_starting, progress)
    if _session is not None:
        return _session
    if progress is None:
        return _start(settings)
    started = time.monotonic()
    with progress.waiting(f"starting Spark ({(settings or SparkSettings()).master}) ..."):
        session = _start(settings)
    progress.say(f"Spark started in {time.monotonic() - started:.1f} s")
    return session


class _BackgroundStart:
    """A session started on a thread of its own, which then waits for as long as the process
    lives: the JVM's parent-death signal fires when the thread that started it ends, not the
    process, and the JVM outlives a stopped session (pyspark keeps one gateway per process and
    starts the next session on it: a JVM killed with the thread left the next session a dead
    gateway, and the differential run's fresh session every 50 cases crashed)."""

    def __init__(self, settings: SparkSettings | None, spec: QuerySpec | None):
        self.session: Future = Future()
        self.settings = settings or SparkSettings()
        self.jit = jit_options(input_bytes(spec) if spec else None, self.settings.quick_jit_below_mib)
        self.started = time.monotonic()
        self.finished: float | None = None
        # Imported here, not on the thread: two threads importing pyspark.sql at once can each
        # see the other's half-initialised module (an ImportError naming SQLContext).
        import pyspark.java_gateway  # noqa: F401
        from pyspark.sql import SparkSession  # noqa: F401

        threading.Thread(target=self._run, name="lockstep-spark-start", daemon=True).start()

    def _run(self) -> None:
        try:
            session = _start(self.settings, self.jit)
        except BaseException as exc:  # handed to the thread that asks for the session
            self.session.set_exception(exc)
            return
        self.finished = time.monotonic()
        self.session.set_result(session)
        threading.Event().wait()  # never set: this thread is the JVM's parent until the process ends


def start_in_background(settings: SparkSettings | None = None, spec: QuerySpec | None = None) -> None:
    """Start the process's session on another thread while this one goes on (the race's 6 M-row
    file: staging 16 s, and the JVM's start, 6-9 s, now inside it); spark_session waits for it. A
    failure to start is raised there. Nothing happens when a session is up or starting.
    The size of `spec`'s sources, when given, chooses the JVM's compilers (jobs/runtime/jit.py);
    it is measured only when a session is started here."""
    global _starting
    if _session is None and _starting is None:
        _starting = _BackgroundStart(settings, spec)


def _adopt_background_start(start: _BackgroundStart, progress: Progress | None):
    """The background start's session, waited for with a spinner, and made this thread's active
    session too (the JVM keeps one per thread). The start's failure is raised here."""
    global _starting
    _starting = None
    asked = time.monotonic()
    if progress is None or start.session.done():
        session = start.session.result()
    else:
        with progress.waiting(f"starting Spark ({start.settings.master}) ..."):
            session = start.session.result()
    if progress is not None:
        assert start.finished is not None, "_run sets it before the session's result"
        waited = time.monotonic() - asked
        progress.say(
            f"Spark started in {start.finished - start.started:.1f} s, in the background"
            + (f"; waited {waited:.1f} s for it" if waited >= 0.1 else "")
            + (
                f"; input under {start.settings.quick_jit_below_mib} MiB: the JVM compiles with C1 alone"
                if start.jit
                else ""
            )
        )
    session._jvm.SparkSession.setActiveSession(session._jsparkSession)
    return session


def _start(settings: SparkSettings | None, jit: str = ""):
    global _session, _started_log, _started_memory
    settings = settings or SparkSettings()
    _launch_jvm_our_way()
    # Python workers (the changelog source's readers) must run this interpreter, with lockstep
    # importable, not whatever `python3` is on the PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    # The parallel collector: the 6 M-row race's driver JVM peaked at 1.5-1.6 GB with it against
    # 2.1-2.2 GB with G1 (the default), in the same time; lockstep's work is throughput, not
    # pause-sensitive. GCTimeRatio=4 lets it spend up to a fifth of the time collecting (its
    # default: 1 %) before it grows the heap, which may still grow to driver_memory when the work
    # needs it (the race, docs/benchmarks.md: peak memory).
    java_opts = (
        f"-Dlog4j.configurationFile=file:{LOG_CONFIG} -Dlog4j2.configurationFile=file:{LOG_CONFIG} "
        f"-Dlockstep.log.level={'warn' if _jvm_log else 'error'} -XX:+UseParallelGC -XX:GCTimeRatio=4 "
        f"{jvm_classes.java_options()} {jit}"
    ).strip()
    builder = (
        SparkSession.builder.master(settings.master)
        .appName("lockstep")
        .config("spark.sql.shuffle.partitions", str(settings.shuffle_partitions))
        .config("spark.default.parallelism", str(settings.shuffle_partitions))
        .config("spark.driver.memory", settings.driver_memory)
        .config("spark.sql.session.timeZone", settings.session_time_zone)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        # The in-memory state store keeps this many committed versions of each partition's
        # map besides the one a micro-batch builds (Spark's default: 2). One is all a running
        # query reads; a restarted or retried one loads from the checkpoint's files.
        .config("spark.sql.streaming.maxBatchesToRetainInMemory", "1")
        # The streaming logs written through Hadoop's FileSystem API rather than FileContext.
        # Without Hadoop's native library every FileContext rename runs `readlink` as a
        # child process: each log entry of a micro-batch (offsets, commits, the source's
        # file list) took 50-60 ms, now about 17 ms (bench_microbatch). A rename
        # stays atomic on a local disk, and the run lock keeps a second writer out of the
        # folder. (Hadoop's raw local file system, without `.crc` files, halves that again,
        # but the RocksDB state store needs the checksummed one: it casts to it.)
        .config("spark.sql.streaming.checkpointFileManagerClass", CHECKPOINT_FILES)
        # pyspark records the Python call site of every DataFrame function it is given, for
        # its error messages: four round trips to the JVM and a failed `import IPython`
        # each, half of a keyed micro-batch's 1,900 round trips. lockstep's errors name
        # their own place.
        .config("spark.python.sql.dataFrameDebugging.enabled", "false")
        .config("spark.driver.extraJavaOptions", java_opts)
    )
    connector = connector_conf(connector_jars(), partitions=settings.shuffle_partitions)
    connector = with_kafka_jars(with_s3a_jars(with_stream_jar(connector)))
    local_fs = local_fs_conf(settings.extra, on_cluster=settings.on_cluster)
    for key, value in {**connector, **_cluster_conf(settings), **settings.extra, **local_fs}.items():
        builder = builder.config(key, value)
    _session = builder.getOrCreate()
    _started_log, _started_memory = _jvm_log, settings.driver_memory
    logging.getLogger("py4j").setLevel(logging.WARNING)  # its shutdown chatter outlives stderr
    _session.sparkContext.setLogLevel("WARN" if _jvm_log else "ERROR")
    return _session


def _cluster_conf(settings: SparkSettings) -> dict[str, str]:
    """On a cluster the executors run Python too (the changelog readers, pandas functions): this
    interpreter's path (PYSPARK_PYTHON, above) with lockstep importable. That holds when the
    workers see this machine's paths, as on one host or with the venv installed alike on every
    worker."""
    if not settings.on_cluster:
        return {}
    root = str(Path(__file__).resolve().parents[2])
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    return {"spark.executorEnv.PYTHONPATH": path, "spark.executor.memory": settings.executor_memory}


def _launch_jvm_our_way() -> None:
    """Wrap the Popen that starts Spark's JVM, for two things.

    A parent-death signal (Linux): when this process is killed (kill -9 leaves no time to stop
    Spark) the kernel kills the JVM too, instead of leaving it running. The signal follows the
    thread that started the JVM, so the session is started from the thread that runs the step
    (every entry point does) or from one that lives as long as the process (_BackgroundStart).

    The JVM's output to the log file set by log_jvm_to, if any (read when the JVM starts)."""
    import pyspark.java_gateway as gateway

    if getattr(gateway.Popen, "lockstep_launcher", False):
        return
    original = gateway.Popen

    def popen(command, **kwargs):
        inner = kwargs.get("preexec_fn")

        def preexec():
            if inner is not None:
                inner()
            if sys.platform.startswith("linux"):
                ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)

        kwargs["preexec_fn"] = preexec
        if _jvm_log is None:
            return original(command, **kwargs)
        _jvm_log.parent.mkdir(parents=True, exist_ok=True)
        # The gateway's port comes through a file, not the JVM's stdout. The JVM holds its own
        # copy of the log's descriptor; this process closes its one.
        with _jvm_log.open("w") as log:
            return original(command, **kwargs, stdout=log, stderr=subprocess.STDOUT)

    # setattr: a function replaces the class subprocess.Popen, and carries a marker, on purpose.
    setattr(popen, "lockstep_launcher", True)  # noqa: B010
    setattr(gateway, "Popen", popen)  # noqa: B010


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def stop_session() -> None:
    global _session
    if _starting is not None:
        with contextlib.suppress(Exception):  # a start that failed has nothing to stop
            _adopt_background_start(_starting, None)
    if _session is not None:
        _session.stop()
        _session = None
