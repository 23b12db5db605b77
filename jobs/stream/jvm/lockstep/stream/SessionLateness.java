package lockstep.stream;

import java.io.Serializable;
import java.sql.Timestamp;
import java.time.Instant;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.function.Consumer;

import org.apache.spark.sql.Row;

/**
 * When a change to a session window is late, as Flink's merging window operator judges it: the
 * change's own window [ts, ts + gap) is merged with the key's sessions that it touches, and the
 * change is late only when the merged session ends at or before the watermark. A change behind
 * the watermark that falls into a session still open is applied.
 *
 * <p>The sessions are the key's before the micro-batch, formed from its live rows as Spark's
 * session_window forms them (windows that touch merge). The same rule, for the local engine, is
 * jobs/stream/operators/session/lateness.py.
 */
final class SessionLateness implements Serializable {
  private final int timeIndex;  // the event time's place in the value
  private final long gap;  // microseconds
  private final int watermarkIndex;  // the watermark's place in an input row; the sequence number follows

  SessionLateness(int timeIndex, long gapMicros, int watermarkIndex) {
    this.timeIndex = timeIndex;
    this.gap = gapMicros;
    this.watermarkIndex = watermarkIndex;
  }

  /** The changes on time; each late one is handed to `late`. */
  Iterator<Row> onTime(Iterator<Row> changes, List<Row> before, int keyWidth, Consumer<Row> late) {
    List<Row> kept = new ArrayList<>();
    List<long[]> sessions = null;  // formed when a change first needs them
    while (changes.hasNext()) {
      Row change = changes.next();
      Long ts = micros(change.get(keyWidth + timeIndex));
      if (ts == null || change.isNullAt(watermarkIndex) || ts + gap > change.getLong(watermarkIndex)) {
        kept.add(change);
        continue;
      }
      if (sessions == null) sessions = sessions(before);
      if (inOpenSession(ts, change.getLong(watermarkIndex), sessions)) {
        kept.add(change);
      } else {
        late.accept(change);
      }
    }
    return kept.iterator();
  }

  long seqOf(Row change) {
    return change.getLong(watermarkIndex + 1);
  }

  private boolean inOpenSession(long ts, long watermark, List<long[]> sessions) {
    for (long[] session : sessions) {
      if (session[1] > watermark && session[0] <= ts + gap && session[1] >= ts) return true;
    }
    return false;
  }

  /** [start, end) of each session the rows form, in order of start. */
  private List<long[]> sessions(List<Row> rows) {
    List<Long> times = new ArrayList<>();
    for (Row row : rows) {
      Long ts = micros(row.get(timeIndex));
      if (ts != null) times.add(ts);
    }
    times.sort(null);
    List<long[]> sessions = new ArrayList<>();
    for (long ts : times) {
      long[] last = sessions.isEmpty() ? null : sessions.get(sessions.size() - 1);
      if (last != null && ts <= last[1]) {
        last[1] = Math.max(last[1], ts + gap);
      } else {
        sessions.add(new long[] {ts, ts + gap});
      }
    }
    return sessions;
  }

  /** An event time as microseconds since the epoch, whichever Java type Spark handed it as. */
  static Long micros(Object time) {
    if (time == null) return null;
    if (time instanceof Timestamp t) return Math.floorDiv(t.getTime(), 1000L) * 1_000_000L + t.getNanos() / 1000;
    if (time instanceof Instant t) return t.getEpochSecond() * 1_000_000L + t.getNano() / 1000;
    if (time instanceof LocalDateTime t) return t.toEpochSecond(ZoneOffset.UTC) * 1_000_000L + t.getNano() / 1000;
    throw new IllegalArgumentException("a session window's event time is a timestamp, not " + time.getClass());
  }
}
