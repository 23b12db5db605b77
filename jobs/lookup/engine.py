"""The async lookup engine: a batch of keys in, their dimension rows out (Flink's Async I/O).

Every distinct key of a batch is fetched concurrently, at most `capacity` requests in flight
(the dispatcher waits for a free slot, as Flink's operator blocks when its queue is full). Rows
with the same key share one fetch, so within one run() a retraction is enriched exactly as the
insertion it retracts. A fetch that fails or times out is retried; when every attempt failed,
the lookup raises LookupFailed (on_error fail) or answers None for the rows (on_error null).

Output order. "ordered" returns the rows in input order. "unordered" returns them in completion
order with two exceptions that keep the changelog meaning what it meant:
- rows with the same key never overtake each other (they share one result and come out together
  in input order). A retraction carries the row it retracts, so it has the same key as the
  +I/+U before it and never comes out first;
- no row overtakes an earlier retraction. An update may change the lookup key (-U with the old
  customer, +U with the new one): per-key order alone would let the +U out before the -U, and a
  sink keyed by the row's own key would then delete the new row. Flink avoids this by allowing
  unordered output only for insert-only input; here an insert-only batch is fully unordered.
Both hold whatever the caller does with the rows, because run() returns one list: the order
costs no latency, all fetches run concurrently in either mode.
"""

from __future__ import annotations

import asyncio
import enum
import functools
import itertools
import json
import ssl
import time
from collections import OrderedDict, defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass
from typing import Final, TypeVar, overload

import httpx

from jobs.errors import LookupFailed
from jobs.lookup.config import LookupConfig
from jobs.lookup.http import HttpClient

Fetch = Callable[[tuple], Awaitable[dict | None]]
Result = tuple[int, dict | None]
BACKOFF_SECONDS = 0.05  # before retry n: n * this
_T = TypeVar("_T")


class _Miss(enum.Enum):
    """Not in the cache: None is a cached answer (the service has no row)."""

    MISS = enum.auto()


_MISS: Final = _Miss.MISS


class ServiceError(Exception):
    """One failed attempt worth retrying: an HTTP status other than 200 and 404, an answer that
    is not a JSON object. A custom fetch raises it for its own transient failures."""


# What a retry may cure; anything else a fetch raises is a bug and propagates at once.
RETRIED = (ServiceError, httpx.HTTPError, OSError)


@dataclass
class LookupStats:
    requests: int = 0  # attempts sent to the service, retries included
    cache_hits: int = 0  # rows answered from the cache
    retries: int = 0
    timeouts: int = 0  # attempts that ran past timeout_seconds
    nulls_for_errors: int = 0  # rows given None because every attempt failed (on_error null)
    max_in_flight: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


class AsyncLookup:
    """Looks up batches of keys for one lookup table; the cache and the stats outlive run()."""

    def __init__(self, config: LookupConfig, fetch: Fetch | None = None, clock: Callable[[], float] = time.monotonic):
        self.config = config
        self.stats = LookupStats()
        self._fetch = fetch
        self._cache = (
            TtlCache(config.cache_max_rows, config.cache_ttl_seconds, clock) if config.cache_max_rows else None
        )

    def run(self, keys: list[tuple], retracts: list[bool]) -> list[Result]:
        """(input index, row or None) for every key, in the config's order. Runs its own event
        loop, so it is called from plain (non-async) code such as a Spark Python worker."""
        if len(keys) != len(retracts):
            raise ValueError(f"lookup {self.config.name}: {len(keys)} keys but {len(retracts)} retract flags")
        if not keys:
            return []  # an empty partition: no event loop, no client
        completed = asyncio.run(self._run(keys))
        return emission_order(completed, retracts, self.config.order)

    async def _run(self, keys: list[tuple]) -> list[Result]:
        async with self._service() as fetch:
            return await _Batch(self, fetch).lookup_all(keys)

    @asynccontextmanager
    async def _service(self) -> AsyncIterator[Fetch]:
        if self._fetch is not None:
            yield self._fetch
            return
        # Opened per run(): a connection belongs to the event loop that opened it.
        async with HttpDimension(self.config) as fetch:
            yield fetch

    def cached(self, key: tuple) -> dict | None | _Miss:
        """The cached row (None: the service has no row) or _MISS; counts the hit."""
        if self._cache is None:
            return _MISS
        row = self._cache.get(key, _MISS)
        if row is not _MISS:
            self.stats.cache_hits += 1
        return row

    def remember(self, key: tuple, row: dict | None) -> None:
        if self._cache is not None:
            self._cache.put(key, row)


class _Batch:
    """One run(): the keys being fetched, the rows waiting for each, the rows completed."""

    def __init__(self, lookup: AsyncLookup, fetch: Fetch):
        self.lookup, self.config, self.stats, self.fetch = lookup, lookup.config, lookup.stats, fetch
        self.slots = asyncio.Semaphore(self.config.capacity)
        self.waiting: dict[tuple, list[int]] = {}  # key being fetched -> its rows, in input order
        self.completed: list[Result] = []  # in completion order
        self.in_flight = 0

    async def lookup_all(self, keys: list[tuple]) -> list[Result]:
        try:
            # A TaskGroup cancels the other fetches (and the dispatching) when one raises.
            async with asyncio.TaskGroup() as group:
                for index, key in enumerate(keys):
                    await self._dispatch(group, index, key)
        except BaseExceptionGroup as failures:
            raise failures.exceptions[0] from None
        return self.completed

    async def _dispatch(self, group: asyncio.TaskGroup, index: int, key: tuple) -> None:
        if key in self.waiting:
            self.waiting[key].append(index)
            return
        row = self.lookup.cached(key)
        if row is not _MISS:
            self.completed.append((index, row))
            return
        await self.slots.acquire()  # the slot is held until the key's last attempt ends
        self.waiting[key] = [index]
        group.create_task(self._lookup(key))

    async def _lookup(self, key: tuple) -> None:
        try:
            row, failed = await self._with_retries(key), False
        except LookupFailed:
            if self.config.on_error == "fail":
                raise
            row, failed = None, True
        finally:
            self.slots.release()
        self._complete(key, row, failed)

    def _complete(self, key: tuple, row: dict | None, failed: bool) -> None:
        # No await in here: a later row with this key either joined `waiting` before, or finds
        # the key gone and reads the cache, never a half-finished key.
        rows = self.waiting.pop(key)
        if failed:
            self.stats.nulls_for_errors += len(rows)
        else:
            self.lookup.remember(key, row)  # a missing row (None) too; an error never
        self.completed.extend((index, row) for index in rows)

    async def _with_retries(self, key: tuple) -> dict | None:
        errors: list[BaseException | None] = []  # None: that attempt timed out
        for attempt in range(self.config.retries + 1):
            if attempt:
                self.stats.retries += 1
                await asyncio.sleep(BACKOFF_SECONDS * attempt)
            try:
                return await self._attempt(key)
            except (TimeoutError, httpx.TimeoutException):
                self.stats.timeouts += 1
                errors.append(None)
            except RETRIED as exc:
                errors.append(exc)
        raise LookupFailed(failure_message(self.config, key, errors), where=f"lookup {self.config.name}")

    async def _attempt(self, key: tuple) -> dict | None:
        self.stats.requests += 1
        self.in_flight += 1
        self.stats.max_in_flight = max(self.stats.max_in_flight, self.in_flight)
        try:
            return await asyncio.wait_for(self.fetch(key), self.config.timeout_seconds)
        finally:
            self.in_flight -= 1


class HttpDimension:
    """The default fetch: GET the key's URL; 200 -> the output columns of the JSON object
    (a column the object lacks is null), 404 -> None (the service has no row for the key).

    http:// URLs go through HttpClient (jobs/lookup/http.py): httpx costs ~2 ms of CPU per
    request, which on a 2-core machine held capacity 100 at 10 ms latency to a 5.6x speed-up
    over capacity 1; the minimal client reaches the 20x the engine is meant for.

    https:// URLs stay with httpx (the minimal client has no TLS), one client (one keep-alive
    connection) per request in flight, opened when first needed. A single client's pool does
    not do: httpx 0.28 (httpcore 1.0) hands an idle connection to every request that asks
    before the first one starts using it; the others fail over and retry, scanning the whole
    pool each time. Measured: 1,000 lookups at capacity 100 and 10 ms took 9 s with one shared
    pool, 2 s with a client per request in flight.
    """

    def __init__(self, config: LookupConfig):
        self.config = config
        self._plain = HttpClient()
        self._clients: list[httpx.AsyncClient] = []
        self._idle: list[httpx.AsyncClient] = []

    async def __aenter__(self) -> HttpDimension:
        return self

    async def __aexit__(self, *exc_info) -> None:
        # Connections belong to run()'s event loop, which ends right after this.
        await asyncio.gather(self._plain.close(), *(client.aclose() for client in self._clients))

    async def __call__(self, key: tuple) -> dict | None:
        url = self.config.url_for(key)
        if url.startswith("http://"):
            return self._row(*await self._plain.get(url))
        return self._row(*await self._get_tls(url))

    async def _get_tls(self, url: str) -> tuple[int, bytes]:
        client = self._idle.pop() if self._idle else self._new_client()
        try:
            response = await client.get(url)
        finally:
            self._idle.append(client)  # a cancelled request closed its connection: reconnects
        return response.status_code, response.content

    def _new_client(self) -> httpx.AsyncClient:
        limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
        client = httpx.AsyncClient(limits=limits, timeout=self.config.timeout_seconds, verify=_tls_context())
        self._clients.append(client)
        return client

    def _row(self, status: int, body: bytes) -> dict | None:
        if status == 404:
            return None
        if status != 200:
            raise ServiceError(f"HTTP {status}")
        try:
            answer = json.loads(body)
        except ValueError:
            raise ServiceError("HTTP 200 but the answer is not JSON") from None
        if not isinstance(answer, dict):
            raise ServiceError(f"HTTP 200 but the answer is a JSON {type(answer).__name__}, not an object")
        return {name: answer.get(name) for name in self.config.output_names}


@functools.cache
def _tls_context() -> ssl.SSLContext:
    # Once per process: loading the CA bundle takes ~60 ms, which every client and every run()
    # would pay again otherwise (httpx builds one per client by default).
    return httpx.create_ssl_context()


class TtlCache:
    """Least recently used rows, each valid for ttl seconds after it was fetched (Flink's
    partial lookup cache: expire-after-write, missing keys cached too)."""

    def __init__(self, max_rows: int, ttl_seconds: float, clock: Callable[[], float] = time.monotonic):
        self.max_rows, self.ttl, self.clock = max_rows, ttl_seconds, clock
        self._rows: OrderedDict[tuple, tuple[float, dict | None]] = OrderedDict()

    @overload
    def get(self, key: tuple) -> dict | None: ...
    @overload
    def get(self, key: tuple, default: _T) -> dict | None | _T: ...
    def get(self, key: tuple, default: object = None) -> object:
        entry = self._rows.get(key)
        if entry is None:
            return default
        expires, row = entry
        if self.clock() >= expires:
            del self._rows[key]
            return default
        self._rows.move_to_end(key)
        return row

    def put(self, key: tuple, row: dict | None) -> None:
        self._rows[key] = (self.clock() + self.ttl, row)
        self._rows.move_to_end(key)
        while len(self._rows) > self.max_rows:
            self._rows.popitem(last=False)

    def __len__(self) -> int:
        return len(self._rows)


def emission_order(completed: list[Result], retracts: list[bool], order: str) -> list[Result]:
    """The rows as run() returns them: input order, or completion order held behind retractions."""
    if order == "ordered":
        return sorted(completed, key=lambda result: result[0])
    return _behind_retractions(completed, retracts)


def _behind_retractions(completed: list[Result], retracts: list[bool]) -> list[Result]:
    # Segment n: the rows with n retractions before them (a retraction belongs to the segment it
    # ends). Segment n opens when retraction n-1 has come out; until then its rows are held.
    # Rows of a segment already open go at once (they join the open segment's queue).
    segment = list(itertools.accumulate((int(r) for r in retracts[:-1]), initial=0))
    held: dict[int, list[Result]] = defaultdict(list)
    out: list[Result] = []
    opened = 0
    for result in completed:
        held[max(segment[result[0]], opened)].append(result)
        while opened in held:
            released = held.pop(opened)
            out.extend(released)
            if not any(retracts[index] for index, _ in released):
                break
            opened += 1
    return out


def failure_message(config: LookupConfig, key: tuple, errors: list[BaseException | None]) -> str:
    """`URL (key k=v) timed out after 3 attempts (2.0 s each)`, or failed with the last error."""
    attempts = f"{len(errors)} attempt{'s' if len(errors) != 1 else ''}"
    place = f"{config.url_for(key)} (key {config.describe_key(key)})"
    if all(error is None for error in errors):
        return f"{place} timed out after {attempts} ({config.timeout_seconds} s each)"
    last = errors[-1]
    reason = f"timed out after {config.timeout_seconds} s" if last is None else _describe(last)
    return f"{place} failed after {attempts}, the last: {reason}"


def _describe(error: BaseException) -> str:
    if isinstance(error, ServiceError):
        return str(error)
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
