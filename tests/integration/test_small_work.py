"""Spark's settings for small work (jobs/runtime/small_work.py): switched on under the threshold
only, and the session's own values put back afterwards, also after a failure."""

from __future__ import annotations

import pytest

from jobs.runtime.small_work import SMALL_WORK_CONF, sized_for

KEYS = list(SMALL_WORK_CONF)


def _values(spark) -> dict[str, str]:
    return {key: spark.conf.get(key) for key in KEYS}


def test_small_work_switches_codegen_and_adaptive_off_and_back(spark):
    before = _values(spark)
    assert before != SMALL_WORK_CONF  # Spark's defaults: both on
    with sized_for(spark, 9, threshold=10) as applied:
        assert applied and _values(spark) == SMALL_WORK_CONF
    assert _values(spark) == before


@pytest.mark.parametrize("rows, threshold", [(10, 10), (5_000_000, 10_000), (0, 0)])
def test_work_at_or_over_the_threshold_keeps_the_sessions_settings(spark, rows, threshold):
    before = _values(spark)
    with sized_for(spark, rows, threshold) as applied:
        assert not applied and _values(spark) == before


def test_a_users_own_value_is_put_back_after_a_failure(spark):
    spark.conf.set("spark.sql.adaptive.enabled", "false")  # as a settings file's `extra` may set it
    try:
        with pytest.raises(ZeroDivisionError), sized_for(spark, 1, threshold=10):
            _ = 1 / 0
        assert spark.conf.get("spark.sql.adaptive.enabled") == "false"
        assert spark.conf.get("spark.sql.codegen.wholeStage") == "true"
    finally:
        spark.conf.unset("spark.sql.adaptive.enabled")
