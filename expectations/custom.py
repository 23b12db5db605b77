"""lockstep's own expectations. Each is an UnexpectedRowsExpectation with a fixed meaning: the
query is built for the query's key and columns (see queries.py), the name and the description
say what a returned row means. GX runs the query with the validated data as {batch}.
"""

from __future__ import annotations

import great_expectations.expectations as gxe


# -- stream/batch unity (the validated data is the stream's result table) ---------------------

class ExpectNoRowsMissingFromStream(gxe.UnexpectedRowsExpectation):
    description: str = "Every row of the batch result has a row with its key in the stream result."


class ExpectNoExtraRowsInStream(gxe.UnexpectedRowsExpectation):
    description: str = "Every row of the stream result has a row with its key in the batch result."


class ExpectNoMismatchedValues(gxe.UnexpectedRowsExpectation):
    description: str = ("Rows with the same key in the stream and batch results have equal values "
                        "(floating columns within the configured tolerance).")


class ExpectSinkKeyUnique(gxe.UnexpectedRowsExpectation):
    description: str = "The stream result has at most one row per sink primary key."


class ExpectNoPrimaryKeyViolations(gxe.UnexpectedRowsExpectation):
    description: str = ("The upsert materializer holds at most one distinct live row per sink "
                        "primary key: two would mean the key is not unique in the query's result.")


class ExpectBatchKeyUnique(gxe.UnexpectedRowsExpectation):
    description: str = ("The batch result has at most one row per sink primary key, so a "
                        "comparison by key is a comparison of rows.")


# -- retraction handling (the validated data is the sink's change data feed) -------------------

class ExpectNoGhostRetractions(gxe.UnexpectedRowsExpectation):
    description: str = ("Every update_preimage (-U) and delete (-D) retracts a row that is live at "
                        "that point of the change feed: nothing retracts a row never emitted.")


class ExpectRetractionsMatchLastImage(gxe.UnexpectedRowsExpectation):
    description: str = ("Every update_preimage (-U) and delete (-D) carries exactly the image last "
                        "emitted for its key.")


class ExpectNoInsertOverLiveRow(gxe.UnexpectedRowsExpectation):
    description: str = "An insert (+I) only adds a key that is not live (no duplicate emission)."


class ExpectUpdatesInPairs(gxe.UnexpectedRowsExpectation):
    description: str = ("Every update_postimage (+U) directly follows the update_preimage (-U) of its "
                        "key in the same commit, and every -U is followed by its +U.")


class ExpectChangeFeedReplaysToTable(gxe.UnexpectedRowsExpectation):
    description: str = ("Replaying the change feed from the first commit gives exactly the sink "
                        "table: no ghost rows, nothing lost.")


# -- aggregate state (the validated data is Spark's streaming state, read after the run) -------

class ExpectNoNegativeGroupCounts(gxe.UnexpectedRowsExpectation):
    description: str = "No group's live row count is negative (more retracted than inserted)."


class ExpectNoEmptyGroupInSink(gxe.UnexpectedRowsExpectation):
    description: str = ("No group whose rows were all retracted (count 0) is left in the sink: it "
                        "was deleted, not kept with a zero count.")


# -- windows (the validated data is the stream result, or its change feed) ---------------------

class ExpectFinalWindowRowsNeverChange(gxe.UnexpectedRowsExpectation):
    description: str = ("emit: final: a window's row is inserted once, when the watermark passes its "
                        "end, and never updated or deleted afterwards (the change feed holds inserts only).")


class ExpectNoWindowEndAfterWatermark(gxe.UnexpectedRowsExpectation):
    description: str = "emit: final: no emitted window ends after the final watermark."


class ExpectWindowsWithoutLateEventsAgree(gxe.UnexpectedRowsExpectation):
    description: str = ("Every window that received no late event has the same rows in the stream and "
                        "the batch result: a difference there is not explained by lateness.")
