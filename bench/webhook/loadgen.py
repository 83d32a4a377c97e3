"""The load generator: HTTP/1.1 over TLS with keep-alive, one request in flight per connection.

It runs in its own process (uvloop), so it never shares the server's event loop, and it is
deliberately lean — prebuilt request bytes, a minimal response parser (status line and
Content-Length), no HTTP library — so that it costs the CPU less than the servers it loads.
It measures its own CPU time over the window: the report shows how close it came to a full
core, which is when it, not the server, would be the limit.

Bounded in time and count: a warm-up, then a measured window that ends at `duration` seconds
or `max_requests` requests, whichever comes first; a request unanswered after `timeout`
seconds fails its connection (counted as an error) and the worker reconnects.

A response is an error when the status is not 200, or, with `verify`, when its body lacks the
request's uid or the expected `"allowed"` value (the reference's canned answer is checked for
status only, but the same body search is done to keep the client's cost equal).
"""

from __future__ import annotations

import asyncio
import ssl
import time
from array import array
from collections import Counter
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import cast

from bench.procs import run_child

_HEADER_END = b"\r\n\r\n"
_CONTENT_LENGTH = b"\r\ncontent-length:"


@dataclass(frozen=True)
class LoadRequest:
    body: bytes
    uid: str
    allowed: bool


@dataclass(frozen=True)
class LoadOptions:
    host: str
    port: int
    ca_pem: bytes
    path: str
    requests: tuple[LoadRequest, ...]
    concurrency: int
    warmup: float  # seconds
    duration: float  # seconds
    max_requests: int
    verify: bool
    timeout: float = 5.0
    uvloop: bool = True


@dataclass
class LoadResult:
    completed: int = 0  # measured requests answered (error or not)
    errors: Counter[str] = field(default_factory=Counter)
    latencies: bytes = b""  # array('d') of seconds, measured requests answered without error
    window: float = 0.0  # seconds from the end of warm-up to the last answer
    client_cpu: float = 0.0  # CPU seconds of this process over the window
    connections: int = 0  # TLS connections opened (reconnects included)


class _Failed(Exception):
    pass


class HttpConnection(asyncio.Protocol):
    """One keep-alive connection; `send` writes a request and waits for its response."""

    def __init__(self) -> None:
        self.transport: asyncio.WriteTransport | None = None
        self.buffer = bytearray()
        self.waiter: asyncio.Future[tuple[int, bytes]] | None = None
        self.started = 0.0  # perf_counter of the request in flight, 0 when idle
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's SSL transport has the WriteTransport methods without subclassing it.
        self.transport = cast(asyncio.WriteTransport, transport)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        end = self.buffer.find(_HEADER_END)
        if end < 0:
            return
        head = bytes(self.buffer[:end]).lower()
        at = head.find(_CONTENT_LENGTH)
        if at < 0:
            self.fail(_Failed("response without content-length"))
            return
        stop = head.find(b"\r\n", at + 2)
        length = int(head[at + len(_CONTENT_LENGTH) : stop if stop > 0 else len(head)])
        total = end + len(_HEADER_END) + length
        if len(self.buffer) < total:
            return
        status = int(head[9:12])
        body = bytes(self.buffer[end + len(_HEADER_END) : total])
        del self.buffer[:total]
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result((status, body))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.fail(_Failed("connection lost"))

    def fail(self, error: Exception) -> None:
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(error)
        if self.transport is not None and not self.closed:
            self.closed = True
            self.transport.abort()

    def start(self, payload: bytes) -> asyncio.Future[tuple[int, bytes]]:
        """Write one request; the future resolves to (status, body) or fails."""
        waiter: asyncio.Future[tuple[int, bytes]] = asyncio.get_running_loop().create_future()
        if self.closed or self.transport is None:
            waiter.set_exception(_Failed("connection closed"))
            return waiter
        self.waiter = waiter
        self.started = time.perf_counter()
        self.transport.write(payload)
        return waiter

    async def send(self, payload: bytes) -> tuple[int, bytes]:
        try:
            return await self.start(payload)
        finally:
            self.started = 0.0


def request_bytes(host: str, port: int, path: str, body: bytes) -> bytes:
    head = (
        f"POST {path} HTTP/1.1\r\n"
        f"Host: {host}:{port}\r\n"
        "Content-Type: application/json\r\n"
        "Accept: application/json, */*\r\n"
        "User-Agent: kube-apiserver-admission\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


class _Run:
    def __init__(self, options: LoadOptions, connection: Connection) -> None:
        self.options = options
        self.parent = connection
        self.context = ssl.create_default_context(cadata=options.ca_pem.decode())
        self.payloads = [
            request_bytes(options.host, options.port, options.path, request.body)
            for request in options.requests
        ]
        self.checks = [
            (f'"uid":"{r.uid}"'.encode(), b'"allowed":true' if r.allowed else b'"allowed":false')
            for r in options.requests
        ]
        self.latencies = array("d")
        self.result = LoadResult()
        self.issued = 0
        self.window_start = 0.0
        self.end = 0.0
        self.cpu_start = 0.0
        self.live: list[HttpConnection] = []

    async def connect(self) -> HttpConnection:
        loop = asyncio.get_running_loop()
        _, protocol = await loop.create_connection(
            HttpConnection, self.options.host, self.options.port, ssl=self.context
        )
        self.result.connections += 1
        self.live.append(protocol)
        return protocol

    def _open_window(self) -> None:
        self.cpu_start = time.process_time()
        self.parent.send("window")

    async def worker(self, index: int, connection: HttpConnection) -> None:
        options = self.options
        count = len(self.payloads)
        position = (index * 7919) % count  # workers start spread over the mix
        while True:
            started = time.perf_counter()
            if started >= self.end or self.issued >= options.max_requests:
                return
            measured = started >= self.window_start
            if measured:
                self.issued += 1
            payload, (uid, allowed) = self.payloads[position], self.checks[position]
            position = position + 1 if position + 1 < count else 0
            try:
                status, body = await connection.send(payload)
            except (_Failed, OSError) as error:
                if measured:
                    self.result.completed += 1
                    self.result.errors[str(error) or type(error).__name__] += 1
                connection = await self._reconnect()
                continue
            elapsed = time.perf_counter() - started
            uid_ok, answer_ok = uid in body, allowed in body
            if not measured:
                continue
            self.result.completed += 1
            if status != 200:
                self.result.errors[f"HTTP {status}"] += 1
            elif options.verify and not uid_ok:
                self.result.errors["uid not echoed"] += 1
            elif options.verify and not answer_ok:
                self.result.errors["wrong decision"] += 1
            else:
                self.latencies.append(elapsed)

    async def _reconnect(self) -> HttpConnection:
        while True:
            try:
                return await self.connect()
            except OSError:
                self.result.errors["connect failed"] += 1
                if time.perf_counter() >= self.end:
                    raise
                await asyncio.sleep(0.05)

    async def watchdog(self) -> None:
        while True:
            await asyncio.sleep(0.25)
            limit = time.perf_counter() - self.options.timeout
            for connection in self.live:
                if connection.started and connection.started < limit:
                    connection.fail(_Failed(f"no answer within {self.options.timeout:g}s"))

    async def run(self) -> LoadResult:
        options = self.options
        connections = await asyncio.gather(*(self.connect() for _ in range(options.concurrency)))
        now = time.perf_counter()
        self.window_start = now + options.warmup
        self.end = self.window_start + options.duration
        loop = asyncio.get_running_loop()
        loop.call_later(options.warmup, self._open_window)
        watchdog = asyncio.create_task(self.watchdog())
        try:
            await asyncio.gather(
                *(self.worker(index, conn) for index, conn in enumerate(connections)),
                return_exceptions=True,
            )
        finally:
            watchdog.cancel()
        finished = time.perf_counter()
        self.result.client_cpu = time.process_time() - self.cpu_start
        self.result.window = finished - self.window_start
        self.result.latencies = self.latencies.tobytes()
        for connection in self.live:
            connection.fail(_Failed("done"))
        return self.result


async def _main(connection: Connection, options: LoadOptions) -> None:
    result = await _Run(options, connection).run()
    connection.send(result)


def loadgen_main(connection: Connection, options: LoadOptions) -> None:
    """Process entry point (spawned): sends "window" when measuring starts, then a
    LoadResult."""
    run_child(connection, _main(connection, options), uvloop=options.uvloop)


def latencies_of(result: LoadResult) -> array[float]:
    samples = array("d")
    samples.frombytes(result.latencies)
    return samples
