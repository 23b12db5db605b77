"""Passes over a plan, one per module, run in this order. Each reads the plan and the annotations
earlier passes left, and returns them with its own added; none changes the nodes.

1. upsert_keys   which columns identify an output row (the key its changes arrive in order by)
2. modify_kinds  which change kinds each node can emit: insert, update, delete (bottom-up)
3. sink_check    the sink's primary key, whether an upsert materializer is needed, and whether
                 the sink can take what the query emits (append, retract)
4. update_kinds  whether updates must carry their before-image (-U), required top-down
"""

from jobs.plan.passes import modify_kinds, sink_check, update_kinds, upsert_keys

PASSES = (upsert_keys.run, modify_kinds.run, sink_check.run, update_kinds.run)
