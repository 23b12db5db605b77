"""A minimal asyncio HTTP/1.1 GET client for plain `http://` dimension services.

Why not httpx: it costs ~2 ms of CPU per request, which on a small machine caps a lookup at a
few hundred requests per second whatever the capacity; this client costs a fraction of that.
It does only what a lookup needs: GET, keep-alive, Content-Length, chunked or read-until-close
bodies. No TLS, redirects, proxies or compression (https:// URLs stay with httpx).

Connections are pooled per host and port; a connection carries one request at a time and goes
back to the pool only after its answer was read completely. Every failure is an OSError
(ConnectionError), so the lookup engine retries it like any other connection failure.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from dataclasses import dataclass
from urllib.parse import urlsplit

Origin = tuple[str, int]  # host, port

_NO_BODY_STATUSES = (204, 304)


class BrokenResponse(ConnectionError):
    """The connection closed or the answer could not be parsed."""


class _StaleConnection(BrokenResponse):
    """A reused connection failed before any byte of the answer came: the server had most likely
    closed it while it sat idle, so the request never reached the service."""


@dataclass(eq=False)
class _Connection:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    reused: bool = False


class HttpClient:
    """GET requests over pooled keep-alive connections. Belongs to the event loop it runs in:
    close() it before that loop ends."""

    def __init__(self) -> None:
        self._idle: defaultdict[Origin, list[_Connection]] = defaultdict(list)
        self._open: set[_Connection] = set()
        self.connections_opened = 0  # for tests and benchmarks: how well keep-alive works

    async def get(self, url: str) -> tuple[int, bytes]:
        """(status, body) of GET url."""
        origin, request = _request(url)
        if self._idle[origin]:
            try:
                return await self._exchange(origin, self._idle[origin].pop(), request)
            except _StaleConnection:
                pass  # not the service failing: a fresh connection, not one of the engine's retries
        return await self._exchange(origin, await self._connect(origin), request)

    async def close(self) -> None:
        connections, self._open = self._open, set()
        self._idle.clear()
        for connection in connections:
            connection.writer.close()
        await asyncio.gather(*(c.writer.wait_closed() for c in connections), return_exceptions=True)

    async def _connect(self, origin: Origin) -> _Connection:
        reader, writer = await asyncio.open_connection(*origin)
        connection = _Connection(reader, writer)
        self._open.add(connection)
        self.connections_opened += 1
        return connection

    async def _exchange(self, origin: Origin, connection: _Connection, request: bytes) -> tuple[int, bytes]:
        try:
            status, body, keep_alive = await _send(connection, request)
        except BaseException:
            # An error, a timeout or a cancellation may leave half an answer unread: the
            # connection is unusable, whatever ended the request.
            self._discard(connection)
            raise
        if keep_alive:
            connection.reused = True
            self._idle[origin].append(connection)
        else:
            self._discard(connection)
        return status, body

    def _discard(self, connection: _Connection) -> None:
        self._open.discard(connection)
        connection.writer.close()


def _request(url: str) -> tuple[Origin, bytes]:
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError(f"HttpClient: only http:// URLs with a host, not {url!r}")
    port = parts.port or 80
    host = parts.hostname if port == 80 else f"{parts.hostname}:{port}"
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    head = f"GET {target} HTTP/1.1\r\nHost: {host}\r\nAccept: application/json\r\n\r\n"
    return (parts.hostname, port), head.encode("latin-1")


async def _send(connection: _Connection, request: bytes) -> tuple[int, bytes, bool]:
    """(status, body, whether the connection may carry another request)."""
    try:
        connection.writer.write(request)
        await connection.writer.drain()
        head = await connection.reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        raise _broken(connection, "the server closed the connection", nothing_read=not exc.partial) from None
    except ConnectionError as exc:
        raise _broken(connection, f"{type(exc).__name__}: {exc}", nothing_read=True) from None
    except asyncio.LimitOverrunError:
        raise BrokenResponse("the answer's head is too long") from None
    version, status, headers = _parse_head(head)
    try:
        body, complete = await _read_body(connection.reader, status, headers)
    except asyncio.IncompleteReadError:
        raise BrokenResponse("the server closed the connection in the middle of the answer") from None
    except (asyncio.LimitOverrunError, ValueError) as exc:
        raise BrokenResponse(f"a malformed body: {exc}") from None
    return status, body, complete and _keeps_alive(version, headers)


def _broken(connection: _Connection, reason: str, *, nothing_read: bool) -> BrokenResponse:
    if connection.reused and nothing_read:
        return _StaleConnection(reason)
    return BrokenResponse(reason)


def _parse_head(head: bytes) -> tuple[str, int, dict[str, str]]:
    status_line, *lines = head.decode("latin-1").rstrip("\r\n").split("\r\n")
    version, _, rest = status_line.partition(" ")
    try:
        status = int(rest[:3])
    except ValueError:
        raise BrokenResponse(f"not an HTTP status line: {status_line[:80]!r}") from None
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return version, status, headers


async def _read_body(reader: asyncio.StreamReader, status: int, headers: dict[str, str]) -> tuple[bytes, bool]:
    """The body and whether its end was known (else it ran to the end of the connection)."""
    if status in _NO_BODY_STATUSES or 100 <= status < 200:
        return b"", True
    if "chunked" in headers.get("transfer-encoding", "").lower():
        return await _read_chunks(reader), True
    if "content-length" in headers:
        return await reader.readexactly(int(headers["content-length"])), True
    return await reader.read(), False


async def _read_chunks(reader: asyncio.StreamReader) -> bytes:
    chunks = []
    while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
        chunks.append(await reader.readexactly(size))
        await reader.readexactly(2)  # the CRLF after each chunk
    while await reader.readuntil(b"\r\n") != b"\r\n":
        pass  # trailer fields, up to the empty line
    return b"".join(chunks)


def _keeps_alive(version: str, headers: dict[str, str]) -> bool:
    connection = headers.get("connection", "").lower()
    if version == "HTTP/1.0":
        return connection == "keep-alive"
    return connection != "close"
