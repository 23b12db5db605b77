"""The race's plumbing on every `make test` (`make race` runs it at size): both engines read the
same generated files and finish, lockstep's micro-batches are logged, and the marginal rate is
the extra rows over the extra seconds."""

import pytest

from tests.benchmarks.race import CLASSES, FLINK_PYTHON, marginal, race_one


@pytest.mark.skipif(not FLINK_PYTHON.exists(), reason="no .venv-flink: `make setup` creates it")
def test_both_engines_finish_the_same_small_changelog(tmp_path):
    small, large = (race_one(CLASSES["group_aggregate"], size, work=tmp_path) for size in (300, 900))
    for row in (small, large):
        assert row["flink"]["exit"] == 0, row["flink"]["error"]
        assert row["lockstep"]["exit"] == 0, row["lockstep"]["error"]
        assert row["batches"]["count"] >= 1 and row["lockstep"]["peak_mib"] > 0
    assert large["rows"] > small["rows"]
    rate = marginal(small, large, "lockstep")
    extra = large["lockstep"]["seconds"] - small["lockstep"]["seconds"]
    assert rate is None if extra <= 0 else rate == pytest.approx((large["rows"] - small["rows"]) / extra)
