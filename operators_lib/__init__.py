"""Airflow operators for lockstep's three steps and its report DAG. Thin: all work happens in
execute(), by the same functions the `lockstep` command runs, and nothing heavy is imported at
DAG-parse time."""

from operators_lib.lockstep_operators import (
    LockstepBatchOperator,
    LockstepCheckOperator,
    LockstepReportOperator,
    LockstepStreamOperator,
)

__all__ = ["LockstepBatchOperator", "LockstepCheckOperator", "LockstepReportOperator", "LockstepStreamOperator"]
