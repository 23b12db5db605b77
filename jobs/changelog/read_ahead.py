"""An iterator's next items made on another thread while the caller works on the current one.

Staging parses a file a block at a time and then checks and writes each block; both halves spend
their time in Arrow and numpy, which let go of the GIL, so on two cores the next block's parse can
run beside this block's check (tests/benchmarks/bench_staging.py measures it).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")
_END = object()
_POLL_SECONDS = 0.1  # how soon a producer notices that the consumer is gone


def read_ahead(items: Iterable[T], depth: int = 1) -> Iterator[T]:
    """`items` in order, up to `depth` of them made ahead on a thread of their own. An exception
    the items raise is raised here, at its place in the order; a consumer that stops early stops
    the thread at its next item."""
    ready: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()
    worker = threading.Thread(target=_produce, args=(items, ready, stop), name="lockstep-read-ahead", daemon=True)
    worker.start()
    try:
        while (item := ready.get()) is not _END:
            if isinstance(item, _Failure):
                raise item.error
            yield item
    finally:
        stop.set()
        worker.join()


class _Failure:
    def __init__(self, error: BaseException):
        self.error = error


def _produce(items: Iterable[T], ready: queue.Queue, stop: threading.Event) -> None:
    iterator = iter(items)
    try:
        for item in iterator:
            if not _put(ready, item, stop):
                return
        _put(ready, _END, stop)
    except BaseException as error:  # handed to the consumer, raised there
        _put(ready, _Failure(error), stop)
    finally:
        close = getattr(iterator, "close", None)
        if close is not None:
            close()  # a generator's open file, when the consumer stopped early


def _put(ready: queue.Queue, item, stop: threading.Event) -> bool:
    """Hand `item` on, unless the consumer stopped first."""
    while not stop.is_set():
        try:
            ready.put(item, timeout=_POLL_SECONDS)
            return True
        except queue.Full:
            continue
    return False
