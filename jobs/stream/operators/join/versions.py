"""A temporal join's rows, computed on the driver: each left row with the version of its key whose
time is the latest at or before the row's (plan/temporal_join.py has the rules).

The versioned table's state is its history: one row per (key, time), the right side's columns
and LIVE (false for a deletion), each with COUNT 1. A micro-batch's changes are laid over it in
changelog order (`with_changes`); `point_in_time` joins the left rows with it.
"""

from __future__ import annotations

from functools import reduce

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from jobs.changelog.columns import COUNT, KIND, LIVE, SEQ
from jobs.changelog.kinds import RowKind
from jobs.changelog.schema import epoch_micros
from jobs.plan.nodes import TemporalJoin


def with_changes(history: pa.Table, changes: pa.Table, keys: tuple[str, ...], time: str) -> pa.Table:
    """The history after the changelog rows `changes` (the right's columns, KIND and SEQ): a
    +I or +U row is the version at its time, a -D the deletion at its time, a -U nothing; the
    later change of a (key, time) wins."""
    kinds = changes.column(KIND).to_numpy(zero_copy_only=False)
    changes = changes.filter(pa.array(kinds != int(RowKind.UPDATE_BEFORE)))
    live = pc.not_equal(changes.column(KIND), int(RowKind.DELETE))
    entries = changes.drop_columns([KIND, SEQ]).append_column(LIVE, live)
    entries = entries.append_column(COUNT, pa.array(np.ones(entries.num_rows, np.int64)))
    merged = pa.concat_tables([history, entries.cast(history.schema)])
    order = np.concatenate([np.full(history.num_rows, -1, np.int64), changes.column(SEQ).to_numpy()])
    frame = merged.select([*keys, time]).to_pandas()
    frame["__order"], frame["__row"] = order, np.arange(merged.num_rows)
    kept = frame.sort_values("__order", kind="stable").drop_duplicates([*keys, time], keep="last")["__row"]
    return merged.take(pa.array(np.sort(kept.to_numpy())))


def point_in_time(node: TemporalJoin, left: pa.Table, history: pa.Table) -> pa.Table:
    """Each left row (with its COUNT) joined with the version at its time: node.output's columns
    and COUNT. INNER leaves out a row without a live version, LEFT pads it with NULLs."""
    right_names = node.right.output_names
    found = _version_rows(node, left, history)
    live = pc.fill_null(pc.take(history.column(LIVE), pa.array(found, mask=found < 0)), False)
    versions = pa.array(found, mask=~np.asarray(live.to_numpy(zero_copy_only=False), bool))
    columns = [left.column(c) for c in node.left.output_names]
    columns += [history.column(c).take(versions) for c in right_names]
    joined = pa.table([*columns, left.column(COUNT)], names=[*node.output, COUNT])
    return joined.filter(live) if node.kind == "inner" else joined


def _version_rows(node: TemporalJoin, left: pa.Table, history: pa.Table) -> np.ndarray:
    """Per left row, the history row of its version (latest time at or before the row's), or -1."""
    found = np.full(left.num_rows, -1, np.int64)
    if left.num_rows == 0 or history.num_rows == 0:
        return found
    keys = [f"__k{i}" for i in range(len(node.left_keys))]
    lefts = _lookup_frame(left, node.left_keys, node.left_time, keys, history, node.right_keys)
    rights = _lookup_frame(history, node.right_keys, node.right_time, keys)
    matched = pd.merge_asof(
        lefts.sort_values("__t", kind="stable"),
        rights.sort_values("__t", kind="stable").rename(columns={"__row": "__version"}),
        on="__t",
        by=keys,
        direction="backward",
    )
    hit = matched["__version"].notna().to_numpy()
    found[matched["__row"].to_numpy()[hit]] = matched["__version"].to_numpy()[hit].astype(np.int64)
    return found


def _lookup_frame(rows, keys, time, names, like=None, like_keys=None) -> pd.DataFrame:
    """The rows' keys (cast to `like`'s key types) and time in microseconds, without the rows
    whose key or time is NULL (they match nothing), and each row's position."""
    columns = [rows.column(k) for k in keys]
    if like is not None:
        columns = [c.cast(like.schema.field(k).type) for c, k in zip(columns, like_keys)]
    micros = epoch_micros(rows.column(time))
    table = pa.table([*columns, micros, pa.array(np.arange(rows.num_rows))], names=[*names, "__t", "__row"])
    present = reduce(pc.and_, [pc.is_valid(c) for c in table.columns[:-1]])
    return table.filter(present).to_pandas()
