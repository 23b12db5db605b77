"""The stream's operators, one folder per operator, each engine's implementation side by side.

    aggregate/     group aggregates: Spark's streaming aggregation on weighted rows (streaming.py,
                   both engines for SUM/COUNT/AVG); lockstep's group sums (group_sums.py, with
                   driver_sums.py, driver_groups.py) and value multisets for MIN/MAX/DISTINCT
                   (multiset.py) on the local engine; the groups' live rows in Spark's keyed
                   state on the spark engine (on_spark_state.py); grouped_rows.py, the batch
                   aggregation the spark engine recomputes a group with
    deduplicate/   deduplication and Top-N (one plan node): ranked_rows.py (Spark's ranking, both
                   engines), on_lockstep_state.py (local), on_spark_state.py (spark), top_rows.py
                   (the same ranking on the driver, in Arrow), window_expiry.py (a Top-N per
                   window's state that ends, local engine)
    join/          regular joins, semi and anti: joined_rows.py (Spark's join, both engines),
                   on_lockstep_state.py, on_spark_state.py, join_rows.py (Arrow, on the driver),
                   expiry.py (an interval join's and a window join's state that ends, local
                   engine), temporal.py
                   and versions.py (temporal joins, local engine)
    over/          OVER aggregations and LAG (local engine): each touched partition windowed by
                   Spark before and after the micro-batch
    session/       session windows: session_rows.py, on_lockstep_state.py, on_spark_state.py,
                   lateness.py (when a change is late, both engines)
    window/        tumbling and hopping windows: assignment and final results (windows.py,
                   local), final results as a Delta table (on_spark_state.py, spark),
                   driver_windows.py (windowed input read on the driver)
    materialize/   the upsert materializer: on_lockstep_state.py (local), on_spark_state.py (spark)
    calc.py        filter and projection, row by row (both engines)
    keyed_state.py the spark engine's keyed state, shared by its keyed operators (LiveRows)
    weighted_rows.py, driver_input.py, driver_rows.py
                   what the keyed operators share: weighted rows, and the local engine's input
                   and output read and written on the driver

An operator on the local engine keeps its state in lockstep's files through jobs/stream/state/
(live_state.py: a keyed input's live rows); on the spark engine in Spark's keyed state on the
executors (keyed_state.py, RocksDB). Both apply the same function to a key's rows before and
after a micro-batch (the *_rows.py module of the folder), so they give the same result.
Each operator folder's rule.py turns its plan node into the streaming frame and picks the
engine's implementation (frames.py: what a rule makes and is given); jobs/stream/rules.py finds
them, beside the stateless nodes' rules.

How the keyed operators (deduplication, Top-N, joins, sessions, MIN/MAX/DISTINCT aggregates)
handle retractions: recompute the touched keys, emit the difference.

Spark's streaming deduplication and stream-stream joins take append-only input, so they cannot
retract. Here each micro-batch is handled as a change to a keyed function of the live input:

    touched  = the keys (partition key / join key) the micro-batch's changes carry
    before   = f(live rows of the touched keys)          e.g. ROW_NUMBER() = 1, or a LEFT JOIN
    after    = f(live rows of the touched keys + changes)
    output   = after - before, as weighted rows (+n added, -n retracted)

f is Spark's own batch operator, so the stream applies exactly the semantics the batch side
does, and outer joins get their null-padded rows added and retracted for free (a padded row is
in `before` and not in `after` when the first match arrives). Rows of untouched keys cannot
change, so they are never read.

State is each input's live rows (state/live_state.py): a compacted snapshot plus short logs of net
changes, so a micro-batch reads the state, not the history, and a replayed one reads what it read
the first time.

Only f and the difference run in Spark. The micro-batch's change rows come to the driver in one
Spark job; there they are summed into net changes, the touched keys' live rows are read from the
state by Arrow, and `after` is summed from the two (state/row_counts.py, grouping exactly as Spark
groups); `before` and `after` go back to Spark as local frames.
"""
