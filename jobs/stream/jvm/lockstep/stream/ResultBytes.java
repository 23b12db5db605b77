package lockstep.stream;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.spark.SparkContext;
import org.apache.spark.executor.TaskMetrics;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerStageSubmitted;
import org.apache.spark.scheduler.SparkListenerTaskEnd;

/**
 * The bytes Spark's tasks returned to the driver (each task's serialized result: the rows a
 * collect brings, and the accumulators and commit messages every task sends), summed since the
 * listener was added, in all and by the call site of the stage that returned them. What shows
 * whether an engine brings rows to the driver.
 */
public final class ResultBytes extends SparkListener {
  private final AtomicLong bytes = new AtomicLong();
  private final AtomicLong tasks = new AtomicLong();
  private final Map<Integer, String> stageNames = new ConcurrentHashMap<>();
  private final Map<String, AtomicLong> bySite = new ConcurrentHashMap<>();

  public static ResultBytes listen(SparkContext context) {
    ResultBytes listener = new ResultBytes();
    context.addSparkListener(listener);
    return listener;
  }

  @Override
  public void onStageSubmitted(SparkListenerStageSubmitted submitted) {
    stageNames.put(submitted.stageInfo().stageId(), submitted.stageInfo().name());
  }

  @Override
  public void onTaskEnd(SparkListenerTaskEnd taskEnd) {
    TaskMetrics metrics = taskEnd.taskMetrics();
    if (metrics == null) {
      return;
    }
    bytes.addAndGet(metrics.resultSize());
    tasks.incrementAndGet();
    String site = stageNames.getOrDefault(taskEnd.stageId(), "?");
    bySite.computeIfAbsent(site, name -> new AtomicLong()).addAndGet(metrics.resultSize());
  }

  public long bytes() {
    return bytes.get();
  }

  public long tasks() {
    return tasks.get();
  }

  /** The call sites that returned the most bytes, one "bytes site" line each. */
  public String largest(int count) {
    StringBuilder lines = new StringBuilder();
    bySite.entrySet().stream()
        .sorted((a, b) -> Long.compare(b.getValue().get(), a.getValue().get()))
        .limit(count)
        .forEach(e -> lines.append(e.getValue().get()).append(' ').append(e.getKey()).append('\n'));
    return lines.toString();
  }
}
