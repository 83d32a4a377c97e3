"""The webhook's connections, bounded: read deadlines, an idle timeout and a connection cap.

A client sending its request one byte a second would otherwise hold a connection (and its
buffers) for as long as it likes; enough of them OOM-kill the pod, and then every eviction is
admitted (failurePolicy: Ignore). The webhook's server (http.py) tells the guard what
each connection does, and the guard enforces:

- a read deadline: the TLS handshake and a first request must arrive whole (head and body)
  within `read_timeout` of `accept`, and a later request within `read_timeout` of its first
  byte after an idle keep-alive period; a connection that misses it is aborted, and so is one
  that leaves its answers unread for `read_timeout`;
- an idle timeout: a keep-alive connection with nothing to read or answer is closed after
  `keepalive_timeout`;
- a cap on open connections, counted from `accept` (a connection that never starts TLS holds
  a slot, and a file descriptor, like any other): when a new one would exceed it, the least
  recently used connection that is not running a handler is aborted to make room (each
  request moves its connection to the back) — first one that leaves its answers unread or
  has not sent a whole request a second after accept (a tenth of the read deadline: still in
  its handshake, or slow with its first request), then one that has sent nothing at all,
  then an idle one that has sent a single request (a newcomer), then an idle keep-alive one
  that has been reused (an idle one whose next request waits in the kernel, unread, is not
  idle), then a newcomer younger than that second that has begun its handshake, then one
  slow with a later request; only when every connection is running a handler is the new one
  refused. The API server's connections, reused and answered, are the last to go: however
  many newcomers send a request and then idle, a connection used again before
  `max_connections` of them arrive is never dropped.

The API server's own connections send a whole AdmissionReview at once and are reused, so
they never meet the first or last limit in normal operation.
"""

from __future__ import annotations

import asyncio
import fcntl
import termios
from dataclasses import dataclass

from graceful_drain.logs import get_logger

DEFAULT_READ_TIMEOUT_SECONDS = 10.0
DEFAULT_KEEPALIVE_TIMEOUT_SECONDS = 75.0  # as aiohttp's server; Go's client drops idle ones at 90
DEFAULT_MAX_CONNECTIONS = 512
# Under the cap, a connection without a whole request yet is dropped before idle ones only
# once this share of its read deadline has passed since accept (1 s of the default 10 s).
YOUNG_SHARE = 0.1

_log = get_logger("connections")


@dataclass(eq=False, slots=True, weakref_slot=True)
class GuardedConnection:
    transport: asyncio.BaseTransport | None = None
    busy: bool = False  # a request arrived whole and is being answered
    idle: bool = False  # kept alive between requests (its deadline is the idle timeout)
    heard: bool = False  # a byte of it has arrived (its TLS handshake has begun)
    handshaken: bool = False  # its TLS handshake is done
    served: bool = False  # a request of it has arrived whole: a client that speaks HTTP
    reused: bool = False  # a second request of it has arrived whole: a client that keeps it
    stalled: bool = False  # answers wait for it to read the ones it was sent
    deadline: float | None = None  # loop time by which it must have read, or by which it closes
    fd: int = -1  # its socket's, when known: an idle one with bytes to read is not idle
    opened_at: float = 0.0  # loop time of its accept
    # the event loop it was accepted on, whose clock its deadlines are on: read once, since
    # on Python 3.11 `asyncio.get_running_loop()` costs a getpid system call
    loop: asyncio.AbstractEventLoop | None = None

    def disarm(self) -> None:
        self.deadline = None
        self.idle = False


@dataclass
class ConnectionStats:
    open: int = 0
    timed_out: int = 0  # aborted for missing the read deadline
    idle_closed: int = 0  # closed after keepalive_timeout with nothing to do
    evicted: int = 0  # aborted to make room under the cap
    refused: int = 0  # new connections aborted because every slot ran a handler


def _input_waiting(connection: GuardedConnection) -> bool:
    """Bytes of its next request wait in the kernel, not read yet (the loop has not come to
    them): the client is using it again, it only looks idle."""
    if connection.fd < 0:
        return False
    try:
        waiting = fcntl.ioctl(connection.fd, termios.FIONREAD, b"\0\0\0\0")
    except OSError:
        return False
    return waiting != b"\0\0\0\0"


def _silent(connection: GuardedConnection) -> bool:
    return not connection.heard


def _young(connection: GuardedConnection) -> bool:
    return not connection.served


def _idle_once(connection: GuardedConnection) -> bool:
    return connection.idle and not connection.reused and not _input_waiting(connection)


def _idle(connection: GuardedConnection) -> bool:
    return connection.idle and not _input_waiting(connection)


def _reading(connection: GuardedConnection) -> bool:
    return True


class ConnectionGuard:
    """Tracks the connections of one listening socket; see the module docstring."""

    def __init__(
        self,
        *,
        read_timeout: float = DEFAULT_READ_TIMEOUT_SECONDS,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        keepalive_timeout: float = DEFAULT_KEEPALIVE_TIMEOUT_SECONDS,
    ) -> None:
        if read_timeout <= 0 or max_connections < 1 or keepalive_timeout <= 0:
            raise ValueError(
                "need read_timeout > 0, keepalive_timeout > 0 and max_connections >= 1"
            )
        self.read_timeout = read_timeout
        self.keepalive_timeout = keepalive_timeout
        self.max_connections = max_connections
        self.stats = ConnectionStats()
        # least recently used first: in order of accept, each moved to the back at each request
        self._open: dict[asyncio.BaseTransport, GuardedConnection] = {}
        # One timer for every deadline, at the earliest one: a request costs a float and a
        # comparison instead of a loop timer made and cancelled.
        self._sweep_timer: asyncio.TimerHandle | None = None
        self._sweep_at = 0.0
        self._sweep_loop: asyncio.AbstractEventLoop | None = None  # a stopped site's may be gone

    def opened(self, connection: GuardedConnection, transport: asyncio.BaseTransport) -> bool:
        """Register a new connection (its read deadline starts); False if it must be refused."""
        if len(self._open) >= self.max_connections and not self._make_room():
            self.stats.refused += 1
            _log.warning("connection refused: every slot is running a handler",
                         max_connections=self.max_connections)  # fmt: skip
            return False
        connection.transport = transport
        self._open[transport] = connection
        self.stats.open = len(self._open)
        connection.loop = loop = asyncio.get_running_loop()
        connection.opened_at = loop.time()
        self._arm(connection, self.read_timeout)
        return True

    def data(self, connection: GuardedConnection) -> None:
        """Bytes arrived; the first byte of a new request starts its read deadline."""
        if not connection.busy and (connection.deadline is None or connection.idle):
            self._arm(connection, self.read_timeout)

    def heard(self, connection: GuardedConnection) -> None:
        """Its first byte arrived (a ClientHello, if it speaks TLS)."""
        connection.heard = True

    def handshaken(self, connection: GuardedConnection) -> None:
        """Its TLS handshake is done (the read deadline, from accept, runs on)."""
        connection.handshaken = True

    def busy(self, connection: GuardedConnection) -> None:
        """A request arrived whole: no deadline while it is answered, and the connection is
        now the most recently used (the last its kind gives up under the cap)."""
        connection.disarm()
        if connection.served and not connection.stalled:  # not the same one, read at last
            connection.reused = True
        connection.busy = connection.served = True
        connection.stalled = False
        transport = connection.transport
        if transport is not None:
            opened = self._open
            opened[transport] = opened.pop(transport)  # to the back: least recently used first

    def stalled(self, connection: GuardedConnection) -> None:
        """Its answers wait for the client to read the ones sent: it must read within
        `read_timeout`, and it may be evicted meanwhile (it is not running a handler)."""
        connection.busy = False
        connection.stalled = True
        self._arm(connection, self.read_timeout)

    def done(self, connection: GuardedConnection, *, mid_request: bool) -> None:
        """Every request so far is answered; `mid_request` when part of the next one is in."""
        connection.busy = False
        if mid_request:
            self._arm(connection, self.read_timeout)
        else:
            self._arm(connection, self.keepalive_timeout, idle=True)

    def closed(self, connection: GuardedConnection) -> None:
        self._forget(connection)

    def _make_room(self) -> bool:
        """Abort the least recently used connection of the first kind there is: one that
        leaves its answers unread or has not sent a whole request (its TLS handshake
        included) in the YOUNG_SHARE of its read deadline since accept; then one that has
        sent nothing at all; then one idle after a single request; then one idle between
        requests; then one still young in its handshake or first request (a newcomer, which
        may be the API server's: it gets its chance before a connection in use goes); then
        one reading a later request. One running a handler never."""
        young_after = asyncio.get_running_loop().time() - self.read_timeout * YOUNG_SHARE

        def stale(connection: GuardedConnection) -> bool:
            return connection.stalled or (
                not connection.served and connection.opened_at <= young_after
            )  # fmt: skip

        for evictable in (stale, _silent, _idle_once, _idle, _young, _reading):
            for connection in self._open.values():  # least recently used first
                if not connection.busy and evictable(connection):
                    self.stats.evicted += 1
                    self._abort(connection)
                    return True
        return False

    def _arm(self, connection: GuardedConnection, timeout: float, *, idle: bool = False) -> None:
        loop = connection.loop or asyncio.get_running_loop()
        connection.deadline = deadline = loop.time() + timeout
        connection.idle = idle
        timer = self._sweep_timer
        if timer is None or self._sweep_loop is not loop or deadline < self._sweep_at:
            if timer is not None:
                timer.cancel()
            self._sweep_timer, self._sweep_loop = loop.call_at(deadline, self._sweep), loop
            self._sweep_at = deadline

    def _sweep(self) -> None:
        """Abort every connection past its read deadline, close those idle for too long; wake
        again at the earliest deadline left."""
        self._sweep_timer = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        earliest: float | None = None
        for connection in list(self._open.values()):
            deadline = connection.deadline
            if deadline is None or connection.busy:
                continue
            if deadline > now:
                earliest = deadline if earliest is None else min(earliest, deadline)
            elif connection.idle:
                self.stats.idle_closed += 1
                self._close(connection)
            else:
                self.stats.timed_out += 1
                self._abort(connection)
        if earliest is not None:
            self._sweep_timer, self._sweep_at = loop.call_at(earliest, self._sweep), earliest

    def _forget(self, connection: GuardedConnection) -> asyncio.BaseTransport | None:
        connection.disarm()
        connection.fd = -1  # the number may soon be another socket's
        transport, connection.transport = connection.transport, None
        if transport is not None:
            self._open.pop(transport, None)
            self.stats.open = len(self._open)
        return transport

    def _abort(self, connection: GuardedConnection) -> None:
        transport = self._forget(connection)
        if transport is not None:
            # uvloop's TLS transport has abort() without subclassing WriteTransport
            abort = getattr(transport, "abort", None)
            (abort or transport.close)()

    def _close(self, connection: GuardedConnection) -> None:
        transport = self._forget(connection)
        if transport is not None:
            transport.close()
