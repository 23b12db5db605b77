package lockstep.stream;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Set;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.streaming.MapState;

import scala.Tuple2;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Which of a key's live rows the watermark has made useless, as Flink's interval joins, window
 * operators and temporal joins clean their state up by event-time timers.
 *
 * <p>Two columns of the value say it, both computed upstream from the operator's rule:
 * <ul>
 *   <li>the expiry (microseconds, or null: never): the row is forgotten once the watermark reaches
 *       it (an interval join's row when no row still to come on the other side can match it, a
 *       window's row when its window has closed);</li>
 *   <li>optionally, a version's order (null for other rows): such a row is forgotten only when a
 *       later version of the key has also reached the watermark, so the latest version at or before
 *       the watermark stays (a temporal join's versioned table).</li>
 * </ul>
 * A forgotten row leaves the state without any output: the operator's rows it made stay as they
 * are, and it is left out of the key's rows both before and after every later micro-batch.
 */
final class StateExpiry implements Serializable {
  private final int expiresIndex;  // in the value
  private final int orderIndex;  // in the value; -1: no versions

  StateExpiry(int expiresIndex, int orderIndex) {
    this.expiresIndex = expiresIndex;
    this.orderIndex = orderIndex;
  }

  /** The event-time timers (milliseconds) at which some of these rows can go. */
  Set<Long> timersFor(Iterable<Row> values) {
    Set<Long> timers = new HashSet<>();
    for (Row value : values) {
      if (!value.isNullAt(expiresIndex)) {
        timers.add(Math.floorDiv(value.getLong(expiresIndex) + 999L, 1000L));  // reached when ms * 1000 >= it
      }
    }
    return timers;
  }

  /** Remove the rows the watermark (milliseconds) has made useless; how many went. */
  int forget(MapState<Row, Long> live, long watermarkMs) {
    long watermark = watermarkMs * 1000L;
    List<Row> reached = new ArrayList<>();
    Row latestVersion = null;
    Iterator<Tuple2<Row, Long>> rows = CollectionConverters.asJava(live.iterator());
    while (rows.hasNext()) {
      Row value = rows.next()._1();
      if (value.isNullAt(expiresIndex) || value.getLong(expiresIndex) > watermark) {
        continue;
      }
      reached.add(value);
      if (isVersion(value) && (latestVersion == null || later(value, latestVersion))) {
        latestVersion = value;
      }
    }
    for (Row value : reached) {
      if (value != latestVersion) {
        live.removeKey(value);
      }
    }
    return reached.size() - (latestVersion == null ? 0 : 1);
  }

  private boolean isVersion(Row value) {
    return orderIndex >= 0 && !value.isNullAt(orderIndex);
  }

  private boolean later(Row a, Row b) {
    long timeA = a.getLong(expiresIndex), timeB = b.getLong(expiresIndex);
    return timeA != timeB ? timeA > timeB : a.getLong(orderIndex) > b.getLong(orderIndex);
  }
}
