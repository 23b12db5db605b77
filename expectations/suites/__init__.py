"""The suites of a check, each on the data it validates, one module per suite:

    unity         on the stream's result table: same rows as the batch result, key by key
    batch_result  on the batch result: one row per key (so comparing by key is comparing rows)
    retraction    on the sink's change data feed: every retraction retracts what was emitted
    windows       windowed queries, on the stream result: final windows end before the
                  watermark; windows without late events agree with batch
    state         on Spark's aggregation state: no group counted below zero or left empty
    materializer  on the upsert materializer's state: one distinct live row per sink key

Each of lockstep's own expectations is one class, self-contained: its description says what a
returned row means, and `rows_query` builds the query that returns the rows breaking it, for the
given columns (Great Expectations runs it with the validated data as {batch}). They are judged
by one metric (unexpected_rows.py) that brings the first rows and their count from one Spark job.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import great_expectations.expectations as gxe

from expectations.suites.unexpected_rows import METRIC

if TYPE_CHECKING:
    from great_expectations.core import ExpectationValidationResult


@dataclass(frozen=True)
class SuiteSpec:
    name: str
    asset: str  # which data it validates: stream_result, batch_result, change_feed, ...
    expectations: tuple
    skipped: tuple[tuple[str, str], ...] = ()  # (expectation, why it cannot be checked here)

    def unread(self, reason: str) -> SuiteSpec:
        """This suite with every expectation skipped for `reason` (its data does not exist)."""
        skipped = tuple((e.expectation_type, reason) for e in self.expectations)
        return SuiteSpec(self.name, self.asset, (), self.skipped + skipped)


class LockstepExpectation(gxe.UnexpectedRowsExpectation):
    """An UnexpectedRowsExpectation whose query its own class builds, judged from one Spark job
    (Great Expectations' own runs the query twice: once to count, once for the rows)."""

    metric_dependencies: ClassVar[tuple[str, ...]] = (METRIC,)

    @classmethod
    def rows_query(cls, *args) -> str:
        raise NotImplementedError

    @classmethod
    def build(cls, *args) -> LockstepExpectation:
        return cls(unexpected_rows_query=cls.rows_query(*args))

    def _validate(
        self, metrics: dict, runtime_configuration: dict | None = None, execution_engine=None
    ) -> ExpectationValidationResult | dict:
        # Great Expectations' own judgement, from the two metrics it would have computed apart,
        # so the result (and the Data Docs that render it) is the one it gives.
        rows, count = metrics[METRIC]
        return super()._validate(
            {"unexpected_rows_query.table": rows, "unexpected_rows_query.row_count": count},
            runtime_configuration,
            execution_engine,
        )
