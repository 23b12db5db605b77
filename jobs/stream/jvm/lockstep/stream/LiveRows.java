package lockstep.stream;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.spark.api.java.function.MapFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.streaming.ExpiredTimerInfo;
import org.apache.spark.sql.streaming.MapState;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.StatefulProcessor;
import org.apache.spark.sql.streaming.TTLConfig;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.streaming.TimerValues;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

import scala.Tuple2;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The live rows of each key, kept in Spark's keyed state on the executors (RocksDB), as a
 * multiset: a row and how many copies of it are live.
 *
 * <p>Input: rows of [key columns, value columns, weight]: a change adds (weight > 0) or retracts
 * (weight < 0) copies of its value. For each key a micro-batch touches, the output is the key's
 * live rows before the micro-batch (phase 0, weight = copies) and the micro-batch's net change
 * per value (phase 1, weight = copies gained or lost); the state then holds the rows after it.
 * What the key's operator makes of its rows before and after is computed downstream, by Spark's
 * own batch operators, so this class knows nothing of deduplication, joins or aggregates.
 *
 * <p>With a session gap ({@link #applyToSessions}), a change is first judged as Flink judges it
 * for session windows: it is late when the session it would fall into, after merging with the
 * key's sessions before the micro-batch, ends at or before the watermark ({@link SessionLateness}).
 * A late change leaves the state as it is and comes out as phase 2 with its sequence number, so
 * that the late-events table lists exactly what the stream left out.
 *
 * <p>With an expiry ({@link #applyExpiring}), rows leave the state as the watermark passes them
 * ({@link StateExpiry}): each added row registers an event-time timer, and Spark's watermark (the
 * least of the inputs' `withWatermark`, one micro-batch behind) fires it, in this micro-batch or a
 * later one.
 */
public final class LiveRows extends StatefulProcessor<Row, Row, Row> {
  public static final byte BEFORE = 0;
  public static final byte CHANGE = 1;
  public static final byte LATE = 2;

  private final StructType valueSchema;
  private final int keyWidth;
  private final int valueWidth;
  private final SessionLateness lateness;  // null: every change is applied
  private final StateExpiry expiry;  // null: rows stay until retracted
  private transient MapState<Row, Long> live;

  private LiveRows(StructType valueSchema, int keyWidth, SessionLateness lateness, StateExpiry expiry) {
    this.valueSchema = valueSchema;
    this.keyWidth = keyWidth;
    this.valueWidth = valueSchema.size();
    this.lateness = lateness;
    this.expiry = expiry;
  }

  /**
   * The changes, grouped by their first `keyWidth` columns, through the live rows. The last
   * column is the weight (a long); the ones between are the value.
   */
  public static Dataset<Row> apply(Dataset<Row> changes, int keyWidth) {
    StructType input = changes.schema();
    requireWeight(input);
    return run(changes, keyWidth, input.size() - keyWidth - 1, null, null);
  }

  /**
   * As {@link #apply}, with rows that leave the state as the watermark passes: the value's column
   * at `expiresIndex` is each row's expiry in microseconds, the one at `orderIndex` (or -1) a
   * version's order ({@link StateExpiry}). The input must carry Spark's event-time watermark.
   */
  public static Dataset<Row> applyExpiring(Dataset<Row> changes, int keyWidth, int expiresIndex, int orderIndex) {
    StructType input = changes.schema();
    requireWeight(input);
    return run(changes, keyWidth, input.size() - keyWidth - 1, null, new StateExpiry(expiresIndex, orderIndex));
  }

  /**
   * As {@link #apply}, for a session window's rows: the columns after the value are the
   * watermark (microseconds, or null), the change's sequence number and the weight. `timeIndex`
   * is the event time's place in the value; `gapMicros` the session gap.
   */
  public static Dataset<Row> applyToSessions(Dataset<Row> changes, int keyWidth, int timeIndex, long gapMicros) {
    StructType input = changes.schema();
    requireWeight(input);
    int valueWidth = input.size() - keyWidth - 3;
    return run(changes, keyWidth, valueWidth, new SessionLateness(timeIndex, gapMicros, keyWidth + valueWidth), null);
  }

  private static void requireWeight(StructType input) {
    if (!input.fields()[input.size() - 1].dataType().equals(DataTypes.LongType)) {
      throw new IllegalArgumentException("LiveRows takes [key columns, value columns, weight as a long]: " + input.simpleString());
    }
  }

  private static Dataset<Row> run(Dataset<Row> changes, int keyWidth, int valueWidth, SessionLateness lateness,
      StateExpiry expiry) {
    StructType input = changes.schema();
    if (valueWidth < 0) {
      throw new IllegalArgumentException("LiveRows: fewer columns than keys: " + input.simpleString());
    }
    StructType key = slice(input, 0, keyWidth);
    StructType value = slice(input, keyWidth, valueWidth);
    StructType output = key.merge(value, false)
        .add(new StructField("__w", DataTypes.LongType, false, org.apache.spark.sql.types.Metadata.empty()))
        .add(new StructField("__phase", DataTypes.ByteType, false, org.apache.spark.sql.types.Metadata.empty()));
    if (lateness != null) {
      output = output.add(new StructField("__seq", DataTypes.LongType, true, org.apache.spark.sql.types.Metadata.empty()));
    }
    final int width = keyWidth;
    MapFunction<Row, Row> keyOf = row -> slice(row, 0, width);
    return changes
        .groupByKey(keyOf, Encoders.row(key))
        .transformWithState(new LiveRows(value, keyWidth, lateness, expiry),
            expiry == null ? TimeMode.None() : TimeMode.EventTime(), OutputMode.Append(), Encoders.row(output));
  }

  @Override
  public void init(OutputMode outputMode, TimeMode timeMode) {
    live = getHandle().getMapState("live", Encoders.row(valueSchema), Encoders.LONG(), TTLConfig.NONE());
  }

  @Override
  public scala.collection.Iterator<Row> handleInputRows(Row key, scala.collection.Iterator<Row> rows,
      TimerValues timerValues) {
    List<Row> out = new ArrayList<>();
    List<Row> beforeRows = new ArrayList<>();
    Iterator<Tuple2<Row, Long>> before = CollectionConverters.asJava(live.iterator());
    while (before.hasNext()) {
      Tuple2<Row, Long> entry = before.next();
      beforeRows.add(entry._1());
      out.add(output(key, entry._1(), entry._2(), BEFORE, null));
    }
    Iterator<Row> changes = CollectionConverters.asJava(rows);
    if (lateness != null) {
      changes = lateness.onTime(changes, beforeRows, keyWidth, late -> out.add(
          output(key, slice(late, keyWidth, valueWidth), late.getLong(late.size() - 1), LATE, lateness.seqOf(late))));
    }
    List<Row> added = new ArrayList<>();
    for (Map.Entry<Row, Long> change : netChanges(changes).entrySet()) {
      Row value = change.getKey();
      long copies = (live.containsKey(value) ? live.getValue(value) : 0L) + change.getValue();
      if (copies == 0L) {
        live.removeKey(value);
      } else {
        live.updateValue(value, copies);
        added.add(value);
      }
      out.add(output(key, value, change.getValue(), CHANGE, null));
    }
    if (expiry != null) {
      registerTimers(expiry.timersFor(added));
    }
    return CollectionConverters.asScala(out.iterator());
  }

  /** The rows the watermark has passed leave the state; nothing is emitted. */
  @Override
  public scala.collection.Iterator<Row> handleExpiredTimer(Row key, TimerValues timerValues,
      ExpiredTimerInfo expiredTimerInfo) {
    expiry.forget(live, timerValues.getCurrentWatermarkInMs());
    return CollectionConverters.asScala(java.util.Collections.<Row>emptyIterator());
  }

  private void registerTimers(Set<Long> timers) {
    Iterator<Object> registered = CollectionConverters.asJava(getHandle().listTimers());
    while (registered.hasNext()) {
      timers.remove((Long) registered.next());
    }
    for (long timer : timers) {
      getHandle().registerTimer(timer);
    }
  }

  private Map<Row, Long> netChanges(Iterator<Row> changes) {
    Map<Row, Long> net = new HashMap<>();
    while (changes.hasNext()) {
      Row change = changes.next();
      net.merge(slice(change, keyWidth, valueWidth), change.getLong(change.size() - 1), Long::sum);
    }
    net.values().removeIf(weight -> weight == 0L);
    return net;
  }

  private Row output(Row key, Row value, long weight, byte phase, Long seq) {
    Object[] values = new Object[keyWidth + valueWidth + (lateness == null ? 2 : 3)];
    for (int i = 0; i < keyWidth; i++) values[i] = key.get(i);
    for (int i = 0; i < valueWidth; i++) values[keyWidth + i] = value.get(i);
    values[keyWidth + valueWidth] = weight;
    values[keyWidth + valueWidth + 1] = phase;
    if (lateness != null) values[keyWidth + valueWidth + 2] = seq;
    return RowFactory.create(values);
  }

  private static Row slice(Row row, int from, int width) {
    Object[] values = new Object[width];
    for (int i = 0; i < width; i++) values[i] = row.get(from + i);
    return RowFactory.create(values);
  }

  private static StructType slice(StructType schema, int from, int width) {
    StructType sliced = new StructType();
    for (int i = 0; i < width; i++) sliced = sliced.add(schema.fields()[from + i]);
    return sliced;
  }
}
