"""The webhook's listening socket, bounded: read timeouts and a connection cap.

aiohttp has no header or body read timeout, so a client sending its request one byte a
second holds a connection (and ~60 KB) for as long as it likes; enough of them OOM-kill the
pod, and then every eviction is admitted (failurePolicy: Ignore). `GuardedTCPSite` serves the
same aiohttp application with:

- a TLS handshake timeout (`read_timeout`);
- a read deadline: a request must arrive whole (headers and body) within `read_timeout` of
  the connection opening or of its first byte after an idle keep-alive period; a connection
  that misses it is aborted;
- a cap on open connections: when a new one would exceed it, the oldest connection that is
  not running a handler (idle keep-alive first, then slow readers) is aborted to make room;
  only when every connection is running a handler is the new one refused.

The API server's own connections send a whole AdmissionReview at once and are reused, so
they never meet either limit in normal operation. Idle keep-alive connections are closed by
aiohttp's keepalive_timeout as before.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, cast

from aiohttp import web

from graceful_drain.logs import get_logger

DEFAULT_READ_TIMEOUT_SECONDS = 10.0
DEFAULT_MAX_CONNECTIONS = 512  # ~60 KB each: about 30 MB, far below the 512 MiB limit

_log = get_logger("connections")

Handler = Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]


@dataclass(eq=False, slots=True)
class _Connection:
    transport: asyncio.BaseTransport | None = None
    busy: bool = False  # a handler runs for it
    deadline: float | None = None  # loop time by which the request must have arrived whole

    def disarm(self) -> None:
        self.deadline = None


@dataclass
class ConnectionStats:
    open: int = 0
    timed_out: int = 0  # aborted for missing the read deadline
    evicted: int = 0  # aborted to make room under the cap
    refused: int = 0  # new connections aborted because every slot ran a handler


class ConnectionGuard:
    """Tracks the connections of one listening socket; see the module docstring."""

    def __init__(
        self,
        *,
        read_timeout: float = DEFAULT_READ_TIMEOUT_SECONDS,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
    ) -> None:
        if read_timeout <= 0 or max_connections < 1:
            raise ValueError("need read_timeout > 0 and max_connections >= 1")
        self.read_timeout = read_timeout
        self.max_connections = max_connections
        self.stats = ConnectionStats()
        self._open: dict[asyncio.BaseTransport, _Connection] = {}  # insertion order: oldest first
        # One timer for every deadline, at the earliest one: a deadline is always now +
        # read_timeout, so a new one never comes before those already set, and a request
        # costs a float instead of a loop timer made and cancelled.
        self._sweep_timer: asyncio.TimerHandle | None = None
        self._sweep_loop: asyncio.AbstractEventLoop | None = None  # a stopped site's may be gone

    # --- the protocol side ------------------------------------------------------------------

    def wrap(self, factory: Callable[[], asyncio.Protocol]) -> Callable[[], asyncio.Protocol]:
        def guarded() -> asyncio.Protocol:
            return _GuardedProtocol(self, factory())

        return guarded

    def _opened(self, connection: _Connection, transport: asyncio.BaseTransport) -> bool:
        """Register a new connection; False if it must be refused."""
        if len(self._open) >= self.max_connections and not self._make_room():
            self.stats.refused += 1
            _log.warning("connection refused: every slot is running a handler",
                         max_connections=self.max_connections)  # fmt: skip
            return False
        connection.transport = transport
        self._open[transport] = connection
        self.stats.open = len(self._open)
        self._arm(connection)
        return True

    def _make_room(self) -> bool:
        idle = [c for c in self._open.values() if not c.busy and c.deadline is None]
        reading = [c for c in self._open.values() if not c.busy and c.deadline is not None]
        for victim in (*idle, *reading):
            self.stats.evicted += 1
            self._abort(victim)
            return True
        return False

    def _data(self, connection: _Connection) -> None:
        if not connection.busy and connection.deadline is None:
            self._arm(connection)  # the first byte of a new request

    def _closed(self, connection: _Connection) -> None:
        connection.disarm()
        if connection.transport is not None:
            self._open.pop(connection.transport, None)
        self.stats.open = len(self._open)

    def _arm(self, connection: _Connection) -> None:
        loop = asyncio.get_running_loop()
        connection.deadline = deadline = loop.time() + self.read_timeout
        if self._sweep_timer is None or self._sweep_loop is not loop:
            self._sweep_timer, self._sweep_loop = loop.call_at(deadline, self._sweep), loop

    def _sweep(self) -> None:
        """Abort every connection past its deadline; wake again at the earliest one left."""
        self._sweep_timer = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        earliest: float | None = None
        for connection in list(self._open.values()):
            deadline = connection.deadline
            if deadline is None or connection.busy:
                continue
            if deadline <= now:
                self.stats.timed_out += 1
                self._abort(connection)
            elif earliest is None or deadline < earliest:
                earliest = deadline
        if earliest is not None:
            self._sweep_timer = loop.call_at(earliest, self._sweep)

    def _abort(self, connection: _Connection) -> None:
        connection.disarm()
        transport = connection.transport
        if transport is not None:
            self._open.pop(transport, None)
            self.stats.open = len(self._open)
            abort = getattr(transport, "abort", None)
            if abort is not None:
                abort()
            else:
                transport.close()

    # --- the application side ---------------------------------------------------------------

    @web.middleware
    async def middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        """`serve` as an aiohttp middleware, for a site with an Application."""
        return await self.serve(request, cast(Handler, handler))  # it only ever gets `request`

    def guarded(self, handler: Handler) -> Handler:
        """`serve` around a low-level handler (aiohttp's web.Server, no middleware chain)."""

        async def guarded(request: web.BaseRequest) -> web.StreamResponse:
            return await self.serve(request, handler)

        return guarded

    async def serve(self, request: web.BaseRequest, handler: Handler) -> web.StreamResponse:
        """Reads the body under the connection's read deadline, then runs the handler."""
        transport = request.transport
        if transport is None or transport.is_closing():
            return web.Response(status=408)  # aborted by the guard: nobody reads an answer
        connection = self._open.get(transport)
        if connection is None:
            return await handler(request)
        try:
            await request.read()  # aiohttp keeps it: the handler's read() returns it at once
        except (ConnectionError, asyncio.CancelledError) as error:
            if isinstance(error, asyncio.CancelledError) and not transport.is_closing():
                raise
            return web.Response(status=408)  # aborted while reading: nobody reads an answer
        except web.HTTPException:
            pass  # over client_max_size: the handler reads again and answers it its own way
        connection.disarm()
        connection.busy = True
        try:
            return await handler(request)
        finally:
            connection.busy = False


class _GuardedProtocol(asyncio.Protocol):
    """Forwards everything to aiohttp's protocol, telling the guard what happens."""

    def __init__(self, guard: ConnectionGuard, inner: asyncio.Protocol) -> None:
        self._guard = guard
        self._inner = inner
        self._connection = _Connection()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._inner.connection_made(transport)
        if not self._guard._opened(self._connection, transport):
            abort = getattr(transport, "abort", None)
            (abort or transport.close)()

    def data_received(self, data: bytes) -> None:
        self._guard._data(self._connection)
        self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self._guard._closed(self._connection)
        self._inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()


class GuardedTCPSite(web.TCPSite):
    """aiohttp's TCPSite with the guard in front of every connection it accepts."""

    def __init__(self, runner: web.BaseRunner, host: str, port: int, *,
                 ssl_context: Any, guard: ConnectionGuard) -> None:  # fmt: skip
        super().__init__(runner, host, port, ssl_context=ssl_context)
        self._guard = guard

    async def start(self) -> None:
        await web.BaseSite.start(self)
        server = self._runner.server
        assert server is not None
        loop = asyncio.get_running_loop()
        tls: dict[str, Any] = {}
        if self._ssl_context is not None:
            tls = {"ssl": self._ssl_context, "ssl_handshake_timeout": self._guard.read_timeout}
        self._server = await loop.create_server(
            self._guard.wrap(server), self._host, self._port, backlog=self._backlog, **tls
        )
        sockets = self._server.sockets
        self._bound_port = sockets[0].getsockname()[1] if sockets else self._port
