"""A real HTTP dimension service for lookup-join tests and benchmarks, with failures to inject.

`GET /<table>/<key>` answers the key's row as a JSON object, or 404 when the table has no such
key. The server is asyncio in a background thread: a request waiting out its latency is a
sleeping coroutine, not a thread, so hundreds of concurrent requests cost next to nothing and the
service is not the bottleneck of what it measures.

Failures are injected per key: `fail_times={"7": 2}` makes the first two requests for key 7 fail,
as `fail_mode` says: "error" answers 500 (after the latency), "hang" answers nothing until the
client gives up (closes the connection) or `hang_seconds` pass, i.e. it outlasts any timeout.

    with DimensionServer({"customers": {"7": {"name": "Ann"}}}, latency=0.01) as server:
        AsyncLookup(LookupConfig(url=server.url + "/customers/{customer_id}", ...))
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import Counter
from collections.abc import Callable
from http import HTTPStatus
from urllib.parse import unquote, urlsplit

FAIL_MODES = ("error", "hang")


class DimensionServer:
    def __init__(
        self,
        tables: dict[str, dict[str, dict]] | None = None,
        *,
        latency: float = 0.0,
        latency_fn: Callable[[str], float] | None = None,
        fail_times: dict[str, int] | None = None,
        fail_mode: str = "error",
        hang_seconds: float = 30.0,
        held: dict[str, set[str]] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ):
        if fail_mode not in FAIL_MODES:
            raise ValueError(f"DimensionServer: fail_mode must be one of {FAIL_MODES}, not {fail_mode!r}")
        self.tables = {table: dict(rows) for table, rows in (tables or {}).items()}
        self.latency, self.latency_fn = latency, latency_fn
        self.fail_times = dict(fail_times or {})  # key -> failures still to inject
        self.fail_mode, self.hang_seconds = fail_mode, hang_seconds
        # key -> keys it answers only after: an order of answers that holds on any machine.
        self.held = dict(held or {})
        self.host, self.port = host, port
        self.reset_counters()
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._startup_error: BaseException | None = None
        self._connections: set[asyncio.Task] = set()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def set(self, table: str, key: object, row: dict | None) -> None:
        """Change a row while the server runs; None removes it (the key then answers 404)."""
        rows = self.tables.setdefault(table, {})
        if row is None:
            rows.pop(str(key), None)
        else:
            rows[str(key)] = row

    def reset_counters(self) -> None:
        self.requests = 0
        self.requests_by_key: Counter[str] = Counter()
        self.concurrent = self.max_concurrent = 0
        self.answered: set[str] = set()

    def start(self) -> DimensionServer:
        self._thread = threading.Thread(target=asyncio.run, args=(self._serve(),), daemon=True, name="dimension-server")
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("DimensionServer: did not start within 10 s")
        if self._startup_error is not None:
            raise self._startup_error
        return self

    def stop(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            return
        self._loop.call_soon_threadsafe(self._stopping.set)
        self._thread.join(10)

    def __enter__(self) -> DimensionServer:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    async def _serve(self) -> None:
        self._loop, self._stopping = asyncio.get_running_loop(), asyncio.Event()
        try:
            # A deep backlog: a burst of new connections beyond it waits for SYN retries (1 s).
            server = await asyncio.start_server(self._connection, self.host, self.port, backlog=1024)
        except OSError as exc:
            self._startup_error = exc
            self._ready.set()
            return
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        await self._stopping.wait()
        server.close()
        for task in self._connections:
            task.cancel()  # hanging requests and idle keep-alive connections
        await asyncio.gather(*self._connections, return_exceptions=True)
        await server.wait_closed()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self._connections.add(task)
        try:
            while await self._exchange(reader, writer):
                pass
        except (ConnectionError, ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass  # the client hung up (between requests or in the middle of one), or sent garbage
        except asyncio.CancelledError:
            pass  # stop(): ending quietly, else asyncio logs each cancelled connection
        finally:
            self._connections.discard(task)
            writer.close()

    async def _exchange(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """One request and its answer; whether the connection stays open for the next one."""
        request_line, headers = _parse_head(await reader.readuntil(b"\r\n\r\n"))
        method, target, version = request_line
        if length := int(headers.get("content-length", "0")):
            await reader.readexactly(length)
        answer = await self._answer(method, target, reader)
        if answer is None:
            return False
        keep_alive = version == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
        writer.write(_response(*answer, keep_alive))
        await writer.drain()
        return keep_alive

    async def _answer(self, method: str, target: str, reader: asyncio.StreamReader) -> tuple[int, bytes] | None:
        table, key = _table_and_key(target)
        self.requests += 1
        self.requests_by_key[key] += 1
        self.concurrent += 1
        self.max_concurrent = max(self.max_concurrent, self.concurrent)
        try:
            if self.fail_times.get(key, 0) > 0:
                self.fail_times[key] -= 1
                return await self._fail(key, reader)
            await asyncio.sleep(self.latency_fn(key) if self.latency_fn else self.latency)
            while not self.held.get(key, set()) <= self.answered:
                await asyncio.sleep(0.001)
            return _row_answer(method, self.tables.get(table, {}).get(key))
        finally:
            self.answered.add(key)
            self.concurrent -= 1

    async def _fail(self, key: str, reader: asyncio.StreamReader) -> tuple[int, bytes] | None:
        if self.fail_mode == "error":
            await asyncio.sleep(self.latency_fn(key) if self.latency_fn else self.latency)
            return HTTPStatus.INTERNAL_SERVER_ERROR, b'{"error": "injected failure"}'
        try:
            await asyncio.wait_for(reader.read(), self.hang_seconds)  # until the client hangs up
        except TimeoutError:
            pass
        return None


def _parse_head(head: bytes) -> tuple[tuple[str, str, str], dict[str, str]]:
    request_line, *lines = head.decode("latin-1").rstrip("\r\n").split("\r\n")
    method, target, version = request_line.split(" ", 2)
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return (method, target, version), headers


def _table_and_key(target: str) -> tuple[str, str]:
    # Split before unquoting: a key may contain a '/' (sent as %2F).
    parts = urlsplit(target).path.split("/")
    if len(parts) != 3:
        return "", unquote(urlsplit(target).path)
    return unquote(parts[1]), unquote(parts[2])


def _row_answer(method: str, row: dict | None) -> tuple[int, bytes]:
    if method != "GET":
        return HTTPStatus.METHOD_NOT_ALLOWED, b'{"error": "only GET"}'
    if row is None:
        return HTTPStatus.NOT_FOUND, b'{"error": "no such key"}'
    return HTTPStatus.OK, json.dumps(row).encode()


def _response(status: int, body: bytes, keep_alive: bool) -> bytes:
    phrase = HTTPStatus(status).phrase
    head = (
        f"HTTP/1.1 {int(status)} {phrase}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: {'keep-alive' if keep_alive else 'close'}\r\n\r\n"
    )
    return head.encode("latin-1") + body
