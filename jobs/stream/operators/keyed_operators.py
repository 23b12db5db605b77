"""The spark engine's keyed operators, as one type."""

from __future__ import annotations

from jobs.stream.operators.aggregate.on_spark_state import GroupsOnKeyedState
from jobs.stream.operators.deduplicate.on_spark_state import DedupOnKeyedState
from jobs.stream.operators.join.on_spark_state import JoinOnKeyedState
from jobs.stream.operators.over.on_spark_state import OverOnKeyedState
from jobs.stream.operators.session.on_spark_state import SessionsOnKeyedState

KeyedStateOperator = DedupOnKeyedState | GroupsOnKeyedState | JoinOnKeyedState | OverOnKeyedState | SessionsOnKeyedState
