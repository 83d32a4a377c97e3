"""A lean HTTP/1.1 client for kubesim's private Unix socket (`KubeClient(unix_socket=...)`).

kubesim's own components make thousands of small requests and read thousands of watch
batches per scenario, all to kubesim's own aiohttp server over a private socket. aiohttp's
client machinery (sessions, request and response objects, payloads, cookie jar, tracing,
timeout contexts) cost more CPU per request than the server's handling of it; this is the
part of it that plain HTTP on a private socket needs: a pool of keep-alive connections (one
request in flight on each), a request head written in one piece, and a response read by
Content-Length, chunked transfer coding or to EOF. HTTPS to any other server stays on aiohttp.

A connection is reused only after a whole answer that allowed it (HTTP/1.1 without
`Connection: close`); a request cancelled, timed out or failed mid-way closes its connection.
A connection the server closed while idle is found at its next use: an idempotent request
that gets no answer byte on a reused connection is sent once more on a fresh one, as
aiohttp's client does. Errors are `ConnectionLost` (an `aiohttp.ClientOSError`, so the
callers' `aiohttp.ClientError` and `OSError` clauses both catch it) and `TimeoutError`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Mapping
from functools import lru_cache

import aiohttp
from yarl import URL

MAX_HEAD_BYTES = 64 * 1024  # a response head longer than this is refused
IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"})
_BODYLESS_STATUS = frozenset({204, 304})
# Characters yarl leaves as they are in a path / a query key or value: a target made only of
# these is written as given, anything else is encoded by yarl itself (`request_target`).
_PLAIN_QUERY = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_PLAIN_PATH = _PLAIN_QUERY | frozenset("/:")


class ConnectionLost(aiohttp.ClientOSError):
    """The connection could not be made, broke, or closed before the whole answer arrived,
    or the answer was not HTTP/1.x as this client reads it."""


class _NoAnswer(Exception):
    """EOF before the first byte of the response: the server had closed the connection."""


def request_target(path: str, params: Mapping[str, str] | None) -> str:
    """The request target (path and query) aiohttp's client sends for `path` and `params`:
    yarl's encoding, computed by yarl unless every character is one it leaves alone."""
    if _PLAIN_PATH.issuperset(path) and (
        not params or all(_PLAIN_QUERY.issuperset(k + v) for k, v in params.items())
    ):
        if not params:
            return path or "/"
        return path + "?" + "&".join(f"{k}={v}" for k, v in params.items())
    return _encoded_target(path, tuple(params.items()) if params else ())


@lru_cache(maxsize=1024)
def _encoded_target(path: str, params: tuple[tuple[str, str], ...]) -> str:
    url = URL("http://localhost" + path)
    return url.extend_query(params).raw_path_qs if params else url.raw_path_qs


class Response:
    __slots__ = ("body", "headers", "status")

    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers  # names lower-cased; a repeated header keeps its last value
        self.body = body


class _Connection:
    __slots__ = ("reader", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    def reusable(self) -> bool:
        return not self.reader.at_eof() and not self.writer.transport.is_closing()

    def close(self) -> None:
        self.writer.close()


class Stream:
    """A response whose body is read as it arrives (a watch); `close` when done with it."""

    def __init__(
        self, pool: UnixHTTPClient, conn: _Connection, status: int, headers: dict[str, str],
        keep_alive: bool, idle_timeout: float | None,
    ) -> None:  # fmt: skip
        self.status = status
        self.headers = headers
        self._pool = pool
        self._conn: _Connection | None = conn
        self._keep_alive = keep_alive
        self._idle_timeout = idle_timeout

    async def read(self) -> bytes:
        """The whole body (an error answer's Status)."""
        parts = [chunk async for chunk in self.chunks()]
        return b"".join(parts)

    async def lines(self) -> AsyncGenerator[bytes, None]:
        """The body's newline-terminated lines, however the chunks split them; a last line
        without a newline is yielded at the end."""
        rest = b""
        async for chunk in self.chunks():
            if rest:
                chunk = rest + chunk
            *whole, rest = chunk.split(b"\n")
            for line in whole:
                yield line
        if rest:
            yield rest

    async def chunks(self) -> AsyncGenerator[bytes, None]:
        """The body as it arrives, each read bounded by the idle timeout; at its end the
        connection goes back to the pool if the answer allows it."""
        conn = self._conn
        if conn is None:
            return
        reader = conn.reader
        chunked = "chunked" in self.headers.get("transfer-encoding", "").lower()
        length = self.headers.get("content-length")
        if self.status in _BODYLESS_STATUS or 100 <= self.status < 200:
            pass
        elif chunked:
            chunks = Dechunker()
            while not chunks.done:
                async with asyncio.timeout(self._idle_timeout):
                    data = await _read_some(reader)
                if body := chunks.feed(data):
                    yield body
            if chunks.extra:
                self._keep_alive = False
        elif length is not None:
            async with asyncio.timeout(self._idle_timeout):
                body = await _read_exactly(reader, _content_length(length))
            yield body
        else:  # delimited by EOF: the connection cannot be reused
            self._keep_alive = False
            while True:
                async with asyncio.timeout(self._idle_timeout):
                    data = await reader.read(65536)
                if not data:
                    break
                yield data
        self._conn = None
        self._pool._release(conn, self._keep_alive)

    def close(self) -> None:
        """Drop the connection unless the body was read to its end (then it is pooled)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            self._pool._release(conn, keep=False)


class UnixHTTPClient:
    """HTTP/1.1 to one server on a Unix socket; `headers` go with every request."""

    def __init__(
        self, socket_path: str, host: str, headers: Mapping[str, str], *, limit: int = 64,
        connect_timeout: float = 10.0,
    ) -> None:  # fmt: skip
        self.socket_path = socket_path
        self._fixed = "".join(f"{k}: {v}\r\n" for k, v in {"Host": host, **headers}.items())
        self._connect_timeout = connect_timeout
        self._slots = asyncio.Semaphore(limit)  # connections open at once, streams included
        self._idle: list[_Connection] = []
        self._busy: set[_Connection] = set()

    async def request(
        self, method: str, target: str, body: bytes | None = None,
        content_type: str | None = None, total: float | None = 30.0,
    ) -> Response:  # fmt: skip
        """Send one request and read its whole answer, all within `total` seconds."""
        head = self._head(method, target, body, content_type)
        async with asyncio.timeout(total):
            for fresh in (False, True):
                conn, reused = await self._acquire(fresh)
                try:
                    return await self._exchange(conn, method, head, body)
                except _NoAnswer:
                    if not (reused and method in IDEMPOTENT):
                        break
        raise ConnectionLost("the server closed the connection without answering")

    async def stream(self, target: str, idle_timeout: float | None) -> Stream:
        """GET `target` and return once its head arrived; every read (the head's, each
        chunk's) must make progress within `idle_timeout` seconds, none bounds the whole."""
        head = self._head("GET", target, None, None)
        for fresh in (False, True):
            conn, reused = await self._acquire(fresh)
            keep = False
            try:
                conn.writer.write(head)
                async with asyncio.timeout(idle_timeout):
                    status, headers, keep = await _read_head(conn.reader)
            except _NoAnswer:
                self._release(conn, keep=False)
                if reused:
                    continue
                raise ConnectionLost("the server closed the connection without answering") from None
            except BaseException:
                self._release(conn, keep=False)
                raise
            return Stream(self, conn, status, headers, keep, idle_timeout)
        raise ConnectionLost("the server closed the connection without answering")

    async def close(self) -> None:
        """Close every connection, idle or in use (their readers then fail)."""
        idle, self._idle = self._idle, []
        for conn in idle + list(self._busy):
            conn.close()
        for conn in idle:
            with contextlib.suppress(OSError):
                await conn.writer.wait_closed()

    def _head(
        self, method: str, target: str, body: bytes | None, content_type: str | None
    ) -> bytes:
        head = f"{method} {target} HTTP/1.1\r\n{self._fixed}"
        if body is not None:
            if content_type:
                head += f"Content-Type: {content_type}\r\n"
            head += f"Content-Length: {len(body)}\r\n"
        elif method in ("POST", "PUT", "PATCH"):
            head += "Content-Length: 0\r\n"
        return (head + "\r\n").encode("latin-1")

    async def _exchange(
        self, conn: _Connection, method: str, head: bytes, body: bytes | None
    ) -> Response:
        keep = False
        try:
            conn.writer.write(head + body if body else head)
            status, headers, keep = await _read_head(conn.reader)
            if method == "HEAD" or status in _BODYLESS_STATUS or 100 <= status < 200:
                data = b""
            elif "chunked" in headers.get("transfer-encoding", "").lower():
                chunks, parts = Dechunker(), []
                while not chunks.done:
                    parts.append(chunks.feed(await _read_some(conn.reader)))
                data = b"".join(parts)
                keep = keep and not chunks.extra
            elif (length := headers.get("content-length")) is not None:
                data = await _read_exactly(conn.reader, _content_length(length))
            else:
                keep = False
                data = await conn.reader.read()
            response = Response(status, headers, data)
        except BaseException:
            keep = False
            raise
        finally:
            self._release(conn, keep)
        return response

    async def _acquire(self, fresh: bool = False) -> tuple[_Connection, bool]:
        """A pooled connection (reused: True) or a new one; holds one of the slots."""
        await self._slots.acquire()
        try:
            while self._idle and not fresh:
                conn = self._idle.pop()
                if conn.reusable():
                    self._busy.add(conn)
                    return conn, True
                conn.close()
            conn = await self._connect()
        except BaseException:
            self._slots.release()
            raise
        self._busy.add(conn)
        return conn, False

    def _release(self, conn: _Connection, keep: bool) -> None:
        if conn not in self._busy:
            return
        self._busy.discard(conn)
        self._slots.release()
        if keep and conn.reusable():
            self._idle.append(conn)
        else:
            conn.close()

    async def _connect(self) -> _Connection:
        try:
            async with asyncio.timeout(self._connect_timeout):
                reader, writer = await asyncio.open_unix_connection(
                    self.socket_path, limit=MAX_HEAD_BYTES
                )
        except TimeoutError:
            raise
        except OSError as err:
            raise ConnectionLost(
                err.errno, f"cannot connect to {self.socket_path}: {err.strerror or err}"
            ) from err
        return _Connection(reader, writer)


async def _read_head(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bool]:
    """Status, headers (names lower-cased) and whether the connection may be reused."""
    try:
        raw = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as err:
        if not err.partial:
            raise _NoAnswer from None
        raise ConnectionLost("the server closed the connection mid-answer") from None
    except asyncio.LimitOverrunError:
        raise ConnectionLost(f"a response head over {MAX_HEAD_BYTES} bytes") from None
    except OSError as err:
        raise ConnectionLost(str(err)) from err
    lines = raw.decode("latin-1").split("\r\n")
    version, _, rest = lines[0].partition(" ")
    code = rest[:3]
    if not version.startswith("HTTP/1.") or not code.isdigit():
        raise ConnectionLost(f"not an HTTP/1.x answer: {lines[0][:80]!r}")
    headers = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    connection = headers.get("connection", "").lower()
    keep = "close" not in connection if version == "HTTP/1.1" else "keep-alive" in connection
    return int(code), headers, keep


class Dechunker:
    """Chunked transfer coding decoded from the bytes as they arrive, however the reads
    split it: `feed` returns the body bytes they complete; `done` after the last chunk and
    its trailers, with anything past them in `extra` (then the connection is not reused)."""

    MAX_LINE = 4096  # a chunk-size or trailer line longer than this is refused

    def __init__(self) -> None:
        self._pending = b""  # an incomplete size line, CRLF or trailer line
        self._left = 0  # data bytes of the current chunk still to come
        self._state = "size"  # size, data, crlf, trailer, done
        self.extra = b""

    @property
    def done(self) -> bool:
        return self._state == "done"

    def feed(self, data: bytes) -> bytes:
        buf = self._pending + data if self._pending else data
        out: list[bytes] = []
        pos, end = 0, len(buf)
        while pos < end:
            state = self._state
            if state == "data":
                take = min(self._left, end - pos)
                out.append(buf[pos : pos + take])
                pos += take
                self._left -= take
                if not self._left:
                    self._state = "crlf"
            elif state == "crlf":
                if end - pos < 2:
                    break
                if buf[pos : pos + 2] != b"\r\n":
                    raise ConnectionLost("a chunk not followed by CRLF")
                pos += 2
                self._state = "size"
            elif state == "done":
                self.extra = buf[pos:]
                pos = end
            else:  # a size or trailer line
                eol = buf.find(b"\r\n", pos)
                if eol < 0:
                    if end - pos > self.MAX_LINE:
                        raise ConnectionLost("a chunk-size or trailer line too long")
                    break
                line = buf[pos:eol]
                pos = eol + 2
                if state == "trailer":
                    if not line:
                        self._state = "done"
                    continue
                try:
                    size = int(line.split(b";", 1)[0], 16)
                except ValueError:
                    raise ConnectionLost(f"a malformed chunk-size line: {line[:40]!r}") from None
                if size < 0:
                    raise ConnectionLost(f"a malformed chunk-size line: {line[:40]!r}")
                self._left = size
                self._state = "data" if size else "trailer"
        self._pending = buf[pos:]
        return out[0] if len(out) == 1 else b"".join(out)


async def _read_some(reader: asyncio.StreamReader) -> bytes:
    """What arrived on the connection (waiting for something); EOF is a lost connection."""
    try:
        data = await reader.read(65536)
    except OSError as err:
        raise ConnectionLost(str(err)) from err
    if not data:
        raise ConnectionLost("the server closed the connection mid-body")
    return data


async def _read_exactly(reader: asyncio.StreamReader, size: int) -> bytes:
    try:
        return await reader.readexactly(size)
    except asyncio.IncompleteReadError:
        raise ConnectionLost("the server closed the connection mid-body") from None
    except OSError as err:
        raise ConnectionLost(str(err)) from err


def _content_length(value: str) -> int:
    if not value.isdigit():
        raise ConnectionLost(f"a malformed Content-Length: {value[:40]!r}")
    return int(value)
