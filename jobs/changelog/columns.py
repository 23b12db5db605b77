"""Every column lockstep adds beside a query's own, one name each.

Source columns may not start with the reserved prefix (schema.py rejects them), so none of these
can clash with a user's column. Names used only inside one expression (a window alias, a row
number) stay local to the function that builds it; everything that crosses a module is here.
"""

RESERVED_PREFIX = "__"

# -- a change row, as staged and streamed ---------------------------------------------------------
WEIGHT = "__w"  # +1 for +I and +U, -1 for -U and -D
SEQ = "__seq"  # the row's position in its source's whole changelog
KIND = "__kind"  # the row kind (jobs.changelog.kinds.RowKind) as a small integer
LINE = "__line"  # the line of the source file the row came from
FILE = "__file"  # the source file (relative to the source folder) the row came from
WATERMARK = "__wm"  # the watermark in effect when the row's micro-batch ran (event-time sources)

# -- tables of live rows --------------------------------------------------------------------------
# How many live copies a row has: in a multiset (retract-mode) table, in a keyed operator's state,
# and, in the aggregate state, how many live input rows a group has (0: the group is gone).
COUNT = "__count"

# -- windows --------------------------------------------------------------------------------------
WINDOW_START, WINDOW_END = "__wstart", "__wend"  # the window a row was assigned to

# -- a temporal join's versioned table ------------------------------------------------------------
VALID_TO = "__valid_to"  # when the next version of the key starts (NULL: none yet)
LIVE = "__live"  # false for a deletion

# -- the sink writer ------------------------------------------------------------------------------
OP = "__op"  # what the MERGE does with a row: UPSERT or DELETE
UPSERT, DELETE = "upsert", "delete"
ORDINAL = "__ordinal"  # the upsert materializer's arrival order of a live row

# -- the aggregate state --------------------------------------------------------------------------
SLOT = "__slot"  # 0: a group's invertible sums; i > 0: the values of its i-th multiset aggregate
TOUCHED = "__touched"  # when a group last changed (ms since the epoch): lockstep's state TTL
