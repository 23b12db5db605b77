"""A driver JVM that ran out of heap is reported by what to change, read from its log."""

from jobs.runtime.spark import out_of_memory_in

# The head of the log of a run whose in-memory aggregation state outgrew a 1 GiB heap
# (tests/benchmarks/bench_spill.py, 5,000,000 keys).
SPARK_LOG = """\
22:44:43 WARN NativeCodeLoader: Unable to load native-hadoop library for your platform... using builtin-java classes where applicable
22:46:17 ERROR Executor: Exception in task 1.0 in stage 3.0 (TID 7)
java.lang.OutOfMemoryError: GC overhead limit exceeded
\tat org.apache.spark.sql.catalyst.expressions.UnsafeRow.copy(UnsafeRow.java:499)
\tat org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider$HDFSBackedStateStore.put(HDFSBackedStateStoreProvider.scala:193)
22:46:17 ERROR Executor: Exception in task 0.0 in stage 3.0 (TID 6)
java.lang.OutOfMemoryError: Java heap space
"""


def test_an_out_of_memory_error_in_the_log_is_named_with_the_heap_and_the_remedies(tmp_path):
    log = tmp_path / "q.spark.log"
    log.write_text(SPARK_LOG)
    advice = out_of_memory_in(log, "1g")
    assert advice.startswith(
        "the Spark driver ran out of memory (OutOfMemoryError: GC overhead limit exceeded; spark.driver_memory 1g)"
    )
    assert "stream.state_store: rocksdb" in advice
    assert "Java heap space" not in advice  # the first error is the one that names the cause


def test_a_log_without_one_or_no_log_gives_no_advice(tmp_path):
    log = tmp_path / "q.spark.log"
    log.write_text(SPARK_LOG.split("java.lang.OutOfMemoryError")[0])
    assert out_of_memory_in(log, "1g") is None
    assert out_of_memory_in(tmp_path / "missing.spark.log", "1g") is None
