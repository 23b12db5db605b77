"""The watermark an earlier stage's rows carry into a later stage's window: each version with the
watermark after the micro-batch that made it, its rows with the one in effect before it."""

from __future__ import annotations

from jobs.changelog.feed_watermarks import VersionWatermarks, Watermarks, record_watermark, version_watermarks


def test_a_version_carries_the_watermark_before_and_after_the_micro_batch_that_made_it(tmp_path):
    record_watermark(tmp_path, 1, 100)
    record_watermark(tmp_path, 1, 150)  # a micro-batch that committed nothing moves the watermark on
    record_watermark(tmp_path, 2, 200)
    record_watermark(tmp_path, 2, 200)  # a replayed micro-batch: its version keeps the first record
    marks = version_watermarks(tmp_path)
    assert marks == {1: VersionWatermarks(None, 100), 2: VersionWatermarks(150, 200)}


def test_the_end_of_a_bounded_input_raises_every_later_versions_watermarks(tmp_path):
    record_watermark(tmp_path, 3, 300)
    marks = Watermarks(version_watermarks(tmp_path), "ts")
    assert marks.of(3, {"watermark_floor": 500}) == VersionWatermarks(500, 500)
    assert marks.of(3, {}) == VersionWatermarks(None, 300)
    assert marks.of(4, {}) == VersionWatermarks(None, None)  # not recorded: its rows are on time
