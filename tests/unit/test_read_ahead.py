"""read_ahead: the items in order, a failure at its place, and no thread left behind."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobs.changelog.read_ahead import read_ahead


@given(st.lists(st.integers(), max_size=50), st.integers(min_value=1, max_value=4))
def test_the_items_come_in_their_order(items, depth):
    assert list(read_ahead(iter(items), depth)) == items


def test_a_failure_is_raised_after_the_items_before_it():
    def items():
        yield 1
        yield 2
        raise ValueError("line 3 is bad")

    seen = []
    with pytest.raises(ValueError, match="line 3 is bad"):
        for item in read_ahead(items()):
            seen.append(item)
    assert seen == [1, 2]


def test_a_consumer_that_stops_early_closes_the_items_and_ends_the_thread():
    closed = threading.Event()

    def endless():
        try:
            number = 0
            while True:
                yield number
                number += 1
        finally:
            closed.set()

    ahead = read_ahead(endless())
    assert [next(ahead) for _ in range(3)] == [0, 1, 2]
    ahead.close()
    assert closed.is_set()
    assert not any(t.name == "lockstep-read-ahead" for t in threading.enumerate())
