"""The webhook's HTTPS server: one request body in, one JSON body out, over HTTP/1.1 keep-alive.

The API server's webhook client uses a small part of HTTP: it POSTs one AdmissionReview, with
a Content-Length, to one path (plus a `?timeout=` query), and reuses the connection. aiohttp's
server machinery (request and response objects, a payload stream and a task per request) cost
as much CPU per admission as the review itself; this protocol, on httptools' parser (llhttp,
Node's), costs a fraction of it (bench/README.md, "the webhook on its own HTTP server"). Anything
else a client sends still gets a plain HTTP answer, as Go's net/http (the server the API
server's client is written against) gives it:

- a POST on a route: 200 with the handler's body. A body over `max_body` bytes is not kept:
  the handler gets None (the webhook answers it as a malformed review). The handler also
  gets the request's `Arrival`: when the server first knew of it (the connection's accept
  for its first request, else the read of its first bytes) and the `?timeout=` its client
  waits, so that it can answer within what the client still waits, whatever the request
  spent queued before it ran;
- another method on a route: 405 with `Allow: POST`; any other path: 404 (either without a
  body for HEAD);
- bytes that are not HTTP/1.x, or an upgrade: 400; a request line of another major version
  (`HTTP/2.0`): 505; a head (request line and headers) over MAX_HEAD_BYTES: 431. Each closes
  the connection;
- `Expect: 100-continue` gets its interim answer (after the answers to the requests before
  it), unless the announced Content-Length is over `max_body`: then no 100 is sent, the
  handler gets None at once, and the connection closes after its answer, the body unread.
  Requests pipelined on one connection are answered in order, one handler at a time;
- HTTP/1.0, or `Connection: close`, is answered and then closed; so is a connection the
  client half-closes (TCP FIN or TLS close_notify) once the requests that arrived whole
  before it are answered.

The listening socket is plain TCP and each connection does its own TLS, over memory BIOs: the
`ConnectionGuard` (connections.py) counts a connection from `accept`, so one that never starts
or finishes its handshake holds a slot under the cap like any other, and the server decides
how much of a connection's input it takes. What one connection can make the server hold or
do is bounded, whatever it sends: reads go into one RECEIVE_BUFFER_BYTES buffer all
connections share, copied into the connection's TLS input at once; the parser is fed chunks
that cannot complete more requests than MAX_PIPELINED minus those waiting (`_feed`), and
reading pauses when that many wait; a connection makes at most ANSWERS_PER_TURN answers in
one turn of the event loop before the others get theirs; and once more than
WRITE_BUFFER_HIGH bytes of its answers are written and not taken by the client (in the TLS
output, the transport's buffer or the kernel's send queue, whose size is fixed), nothing more
is parsed or answered for it until it reads: meanwhile the guard treats it as a slow reader.
The read deadlines and the cap are the guard's, which also closes a keep-alive connection
left idle for its `keepalive_timeout`. On stop, the server stops accepting, closes idle
connections, lets running handlers answer for up to `shutdown_timeout`, and then aborts what
is left.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import socket
import ssl
import sys
import termios
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from typing import cast

import httptools
import msgspec

from graceful_drain.controller.serving.connections import ConnectionGuard, GuardedConnection
from graceful_drain.kube.timefmt import parse_go_duration
from graceful_drain.logs import get_logger


class Arrival(msgspec.Struct, frozen=True, gc=False):
    """When a request reached the server, and how long its client waits for the answer.

    `at` is the server's clock (`WebhookServer.clock`, time.monotonic) at the earliest moment
    it knew of the request: for a connection's first request, its `accept` when its first
    bytes were read within WAITING_CLIENT_SECONDS of the read that completed the TLS handshake
    (the client was already waiting through it), else the read that brought them, as for a
    later one: a client may open a connection and leave it idle (Go's transport dials one for
    a request and, if another connection frees up first, keeps the new one for later). Time
    spent in the kernel's queues before that is not seen. `timeout` is the
    client's `?timeout=` query in seconds (the API server's webhook client sends what is
    left of the webhook's timeoutSeconds, rounded up to a whole second), None without one.
    A frozen msgspec struct: one is built per request."""

    at: float
    timeout: float | None = None


# The body of a POST on a route (None when it was over the size limit and not kept), and when
# it arrived.
BodyHandler = Callable[[bytes | None, Arrival], Awaitable[bytes]]

MAX_HEAD_BYTES = 64 * 1024  # an AdmissionReview request's head is a few hundred bytes
MAX_PIPELINED = 8  # complete requests queued behind the one answering before reading pauses
# Answers one connection makes in one turn of the event loop before the others get theirs.
ANSWERS_PER_TURN = 4
RESUME_AT = MAX_PIPELINED // 2  # reading paused on a full queue resumes once this few wait
# What one connection can make the server hold, besides its queued requests: a read of the
# socket (into one buffer all connections share, copied into the connection's TLS input at
# once), a record's plaintext, and answers the client has not read.
RECEIVE_BUFFER_BYTES = 16 * 1024
TLS_READ_BYTES = 16 * 1024  # one TLS record's plaintext at most
FEED_SLICE = 4096  # the parser is fed this much at a time, and stops once reading pauses
WRITE_BUFFER_HIGH = 16 * 1024  # answers (encrypted) written and not read before no more are made
# The accepted socket's send buffer, fixed (the kernel doubles it, and no longer grows it to
# megabytes): what the peer has not consumed is measured across it (see `_unconsumed`).
SEND_BUFFER_BYTES = 16 * 1024
# A connection whose answers wait unread is looked at again after this, doubling up to the max.
UNREAD_POLL_SECONDS = 0.01
UNREAD_POLL_MAX_SECONDS = 0.5
WRITE_BUFFER_LOW = WRITE_BUFFER_HIGH // 4  # ... and made again once no more than this is
DEFAULT_SHUTDOWN_TIMEOUT_SECONDS = 5.0
# Connections the kernel queues before accept; accepted in one turn of the loop at most, the
# open file descriptors can pass the guard's cap by this many until the evicted ones close.
LISTEN_BACKLOG = 128
# A connection's first request read this soon after its handshake's end came from a client
# that waited through the handshake: it counts from the accept. Later, the connection was
# idle first. Generous on purpose: counting from the accept only ever holds sooner.
WAITING_CLIENT_SECONDS = 1.0

_log = get_logger("http")


def _plain(status: bytes, text: bytes, extra: bytes = b"") -> bytes:
    """A complete text answer, up to the keep-alive decision (see `_closing`)."""
    return (
        b"HTTP/1.1 " + status + b"\r\nContent-Type: text/plain; charset=utf-8\r\n"
        b"Content-Length: " + str(len(text)).encode() + b"\r\n" + extra + b"\r\n" + text
    )


NOT_FOUND = _plain(b"404 Not Found", b"404: Not Found")
NOT_ALLOWED = _plain(b"405 Method Not Allowed", b"405: Method Not Allowed", b"Allow: POST\r\n")
BAD_REQUEST = _plain(b"400 Bad Request", b"400: Bad Request")
VERSION_NOT_SUPPORTED = _plain(
    b"505 HTTP Version Not Supported", b"505: HTTP version not supported"
)
HEAD_TOO_LARGE = _plain(b"431 Request Header Fields Too Large", b"431: Request head too large")
HANDLER_FAILED = _plain(b"500 Internal Server Error", b"500: Internal Server Error")
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
_OK_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
_CLOSE_HEADER = b"Connection: close\r\n"


def _closing(answer: bytes) -> bytes:
    """`answer` with `Connection: close` added to its head."""
    return answer.replace(b"\r\n\r\n", b"\r\n" + _CLOSE_HEADER + b"\r\n", 1)


def _for_method(answer: bytes, method: bytes) -> bytes:
    """`answer`, or for HEAD its head alone (with the Content-Length GET would get)."""
    if method != b"HEAD":
        return answer
    return answer[: answer.index(b"\r\n\r\n") + 4]


def _ok(body: bytes, keep_alive: bool) -> bytes:
    head = _OK_HEAD % len(body)
    return head + body if keep_alive else _closing(head) + body


@functools.lru_cache(maxsize=64)
def query_timeout(query: bytes) -> float | None:
    """The `timeout` parameter of a URL's query (Go's duration syntax, as the API server's
    client writes it: `5s`) in seconds; None when absent, unreadable or not positive.
    Remembered (a bounded cache): the API server sends the same query on every request, and
    parsing it cost about a sixth of what the rest of the server does for one."""
    for part in query.split(b"&"):
        name, _, value = part.partition(b"=")
        if name == b"timeout":
            try:
                seconds = parse_go_duration(value.decode("ascii")).total_seconds()
            except (ValueError, UnicodeDecodeError):
                return None
            return seconds if seconds > 0 else None
    return None


# One queued answer: (handler, body and arrival) for a route, or (None, a prebuilt answer,
# None).
_Pending = tuple[BodyHandler | None, bytes | None, bool, Arrival | None]


class _Message:
    """One request as it is parsed, from its first byte (`on_message_begin`) until it is
    whole (`on_message_complete`): the next request's first byte makes a new one."""

    __slots__ = (
        "arrived_at", "body", "body_bytes", "content_length", "expect_continue", "head_bytes",
        "head_read", "in_head", "oversized", "url", "version",
    )  # fmt: skip

    def __init__(self, arrived_at: float) -> None:
        self.arrived_at = arrived_at  # `Arrival.at`: the server's clock when it began
        self.url = b""
        self.head_bytes = 0  # of the head's parts handed over so far (url, whole headers)
        self.head_read = 0  # of the head read while it was incomplete, counted by slice
        self.in_head = True
        self.version = ""  # "1.1", once the head is whole (the parser formats it at each ask)
        self.expect_continue = False
        self.content_length = -1
        self.body: list[bytes] = []
        self.body_bytes = 0
        self.oversized = False  # over max_body: the body is not kept


class _Exchange(asyncio.BufferedProtocol):
    """One connection, from `accept`: its TLS (ssl.SSLObject over memory BIOs), then its
    requests, parsed as they arrive and answered in order.

    A connection costs little until its first byte: the TLS object, its two BIOs and the
    parser are made then (`_begin`), so one that never starts TLS holds this object, its
    guard record and the transport. Nothing it holds refers back to it once it is closed
    (the parser, whose callbacks are its methods, is let go in `connection_lost`, and its
    answering task, woken there, ends in the next turn of the loop): a closed connection is
    freed by reference counting, not left to the cyclic collector."""

    __slots__ = (
        "__weakref__", "_accepted_at", "_answering", "_begun", "_broken", "_closed",
        "_connection", "_eof", "_fd", "_fed_body", "_guard", "_handshake_read_at",
        "_handshaken", "_head_began_at",
        "_heads_done", "_idle", "_incoming", "_message", "_outgoing", "_parser", "_paused",
        "_queue", "_read_at", "_refusal", "_server", "_shutting_down", "_task", "_tls",
        "_transport", "_unfed", "_unread_at_most", "_waiting", "_writable", "_writing_paused",
    )  # fmt: skip
    # made at the first byte (`_begin`)
    _parser: httptools.HttpRequestParser
    _incoming: ssl.MemoryBIO
    _outgoing: ssl.MemoryBIO
    _tls: ssl.SSLObject

    def __init__(self, server: WebhookServer) -> None:
        self._server = server
        self._guard = server.guard
        self._connection = GuardedConnection()
        self._transport: asyncio.Transport | None = None
        self._fd = -1  # the socket's, to ask the kernel what it holds unsent
        self._accepted_at = server.clock()  # the protocol is made at accept
        self._read_at = self._accepted_at  # the clock at the last read of the socket
        self._begun = False
        self._handshaken = False
        self._handshake_read_at = -1.0  # `_read_at` of the read that completed the handshake
        # Bytes written that the client may not have taken: `_unconsumed` when last asked,
        # plus all written since (none leave but by the client's reads), so that the kernel
        # is asked only once this could pass WRITE_BUFFER_HIGH.
        self._unread_at_most = 0
        self._unfed = b""  # plaintext decrypted but not yet parsed (reading paused)
        self._queue: deque[_Pending] = deque()
        self._waiting = 0  # requests in the queue (not counting 100 Continue answers)
        self._answering = False  # the task is answering the queue
        # The connection's one answering task, from its first request until it closes; it
        # waits on `_idle` while there is nothing to answer.
        self._task: asyncio.Task[None] | None = None
        self._idle: asyncio.Future[None] | None = None
        self._closed = False
        self._broken = False  # the parser failed or the stream was refused: nothing more is read
        self._eof = False  # the client half-closed: answer what came whole, then close
        self._shutting_down = False
        self._paused = False
        self._writing_paused = False  # the transport's buffer is full: nothing more is read
        self._writable: asyncio.Future[None] | None = None  # the answers wait on it meanwhile
        # the parsing: the request begun and not yet whole (None between requests), ...
        self._message: _Message | None = None
        # ... the answer (431 or 505) and problem that end the connection once the parser
        # returns, ...
        self._refusal: tuple[bytes, str] | None = None
        self._heads_done = 0  # ... heads parsed, to tell where data ended, ...
        self._fed_body = 0  # ... and the slice being parsed: its body bytes so far
        self._head_began_at = -1  # body bytes in that slice before the head began in it

    # --- the TCP transport and TLS ------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                self._fd = self._connection.fd = sock.fileno()
        # counted from accept: a connection that never completes its handshake holds a slot
        if not self._guard.opened(self._connection, transport):
            self._transport.abort()
            return
        self._transport.set_write_buffer_limits(high=WRITE_BUFFER_HIGH)
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER_BYTES)
        self._server._exchanges.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._queue.clear()
        self._waiting = 0
        self._unfed = b""
        self._wake_writer()
        idle, self._idle = self._idle, None
        if idle is not None and not idle.done():
            idle.set_result(None)  # the answering task ends
        self._guard.closed(self._connection)
        self._server._forget(self)
        self._transport = None
        self._fd = -1
        if self._begun:
            del self._parser  # its callbacks are this object's methods: no cycle outlives it

    def _begin(self) -> None:
        """The first byte came: make the TLS object and the parser."""
        self._begun = True
        self._guard.heard(self._connection)
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._tls = self._server.ssl_context.wrap_bio(
            self._incoming, self._outgoing, server_side=True
        )
        self._parser = httptools.HttpRequestParser(self)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._server.receive_buffer  # shared: each read is copied out at once

    def buffer_updated(self, nbytes: int) -> None:
        if self._broken or self._closed:
            return
        self._read_at = self._server.clock()
        if not self._begun:
            self._begin()
        self._incoming.write(self._server.receive_buffer[:nbytes])
        if not self._handshaken:
            try:
                self._tls.do_handshake()
            except ssl.SSLWantReadError:
                self._flush_tls()
                return
            except (ssl.SSLError, ValueError) as error:
                self._flush_tls()
                self._drop(f"TLS handshake failed: {error}")
                return
            self._handshaken = True
            self._handshake_read_at = self._read_at
            self._guard.handshaken(self._connection)
        self._read_tls()

    def eof_received(self) -> bool | None:
        """A half-close: what came whole is answered before the connection closes (as Go's
        net/http does), what came in part is dropped."""
        self._eof = True
        if self._answering or self._queue:
            self._pause()  # nothing more comes
            return True
        return None  # nothing to answer: the transport closes itself

    def _read_tls(self) -> None:
        """Decrypt and parse what the client sent, stopping as soon as the parser is paused;
        what is left waits, encrypted, in the incoming BIO (at most one read of the shared
        buffer, the transport paused)."""
        while not self._paused and not self._broken and not self._closed:
            if self._unfed:
                data, self._unfed = self._unfed, b""
            elif not self._incoming.pending and not self._tls.pending():
                break  # nothing to decrypt: the read would raise SSLWantReadError, at a cost
            else:
                try:
                    data = self._tls.read(TLS_READ_BYTES)
                except ssl.SSLWantReadError:
                    break
                except ssl.SSLZeroReturnError:
                    data = b""
                except ssl.SSLError as error:
                    self._drop(f"TLS error: {error}")
                    return
                if not data:  # the client's close_notify: as a half-close
                    self._flush_tls()
                    if not self.eof_received():
                        self._close()
                    return
            self._feed(data)
        self._flush_tls()

    def _flush_tls(self) -> None:
        """Send what TLS produced (handshake messages, tickets, encrypted answers)."""
        if self._outgoing.pending and self._transport is not None:
            data = self._outgoing.read()
            self._unread_at_most += len(data)
            self._transport.write(data)

    def _send(self, data: bytes) -> None:
        self._tls.write(data)
        self._flush_tls()

    def _drop(self, problem: str) -> None:
        _log.debug("webhook connection dropped", problem=problem)
        self._broken = True
        if self._transport is not None:
            self._transport.abort()

    def pause_writing(self) -> None:
        self._writing_paused = True
        self._pause()
        if not self._answering:  # otherwise the answers see it (`_until_read`)
            self._guard.stalled(self._connection)

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._wake_writer()
        if not self._answering and not self._closed:
            self._guard.done(self._connection, mid_request=self._message is not None)
        if self._waiting < MAX_PIPELINED:
            self._resume()

    def _wake_writer(self) -> None:
        writable, self._writable = self._writable, None
        if writable is not None and not writable.done():
            writable.set_result(None)

    def _unconsumed(self) -> int:
        """Bytes of answers written that the client has not taken: in the TLS output, in the
        transport's buffer, and in the kernel's send queue (unsent or unacknowledged; the
        socket's send buffer is fixed at SEND_BUFFER_BYTES, so it cannot hide megabytes)."""
        transport = self._transport
        if transport is None:
            return 0
        unconsumed = self._outgoing.pending + transport.get_write_buffer_size()
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                queued = fcntl.ioctl(self._fd, termios.TIOCOUTQ, b"\0\0\0\0")
                unconsumed += int.from_bytes(queued, sys.byteorder, signed=True)
        self._unread_at_most = unconsumed
        return unconsumed

    # --- parsing, a bounded chunk at a time ---------------------------------------------------

    def _feed(self, data: bytes) -> None:
        """Parse `data` in chunks that cannot complete more requests than the queue has room
        for, keeping the rest once reading pauses: however many requests one read holds, at
        most MAX_PIPELINED wait. Every request on the queue has two line ends of its own (its
        request line's and the empty line ending its head; a request line of HTTP/0.9, with
        one, breaks the connection), so a chunk with fewer than `needed + 2 * room` of them
        completes at most `room` requests, `needed` being what the request begun still lacks
        (none once its head is whole, one while in its head). A chunk is also at most
        FEED_SLICE bytes (the head's size is counted by chunk)."""
        start, end = 0, len(data)
        while start < end:
            if self._broken or self._closed:
                return
            room = MAX_PIPELINED - self._waiting
            if room <= 0:
                self._pause()
            if self._paused or room <= 0:
                self._unfed = data[start:]
                return
            stop = min(end, start + FEED_SLICE)
            message = self._message
            needed = 2 if message is None else 1 if message.in_head else 0
            allowed = needed + 2 * room - 1
            if data.count(b"\n", start, stop) > allowed:
                cut = start - 1
                for _ in range(allowed + 1):
                    cut = data.find(b"\n", cut + 1, stop)
                stop = cut  # before the line end that could complete one request too many
            self._feed_slice(memoryview(data)[start:stop])
            start = stop

    def _feed_slice(self, data: memoryview) -> None:
        self._guard.data(self._connection)
        heads_before = self._heads_done
        self._fed_body, self._head_began_at = 0, -1
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            if not self._broken:
                self._fail(BAD_REQUEST, "upgrade requested")
            return
        except httptools.HttpParserError as error:
            if not self._broken:
                self._fail(BAD_REQUEST, f"not HTTP/1.x: {error}")
            return
        if self._broken:
            return
        message = self._message
        if message is not None and message.in_head and self._heads_done == heads_before:
            # the slice was head from where the head began (and more may come); the parser
            # keeps a header's value until it ends, so this counts what it holds
            began = self._head_began_at
            message.head_read += len(data) if began < 0 else len(data) - began
            if message.head_read > MAX_HEAD_BYTES:
                self._refusal = (HEAD_TOO_LARGE, f"head over {MAX_HEAD_BYTES} bytes")
        if self._refusal is not None:
            self._fail(*self._refusal)

    # --- httptools' callbacks -----------------------------------------------------------------

    def on_message_begin(self) -> None:
        # the first request's client waited from accept, unless the connection idled after
        # its handshake (`Arrival`)
        read_at = self._read_at
        waited = read_at - self._handshake_read_at <= WAITING_CLIENT_SECONDS
        arrived_at = self._accepted_at if waited and not self._heads_done else read_at
        self._message = _Message(arrived_at)
        self._head_began_at = self._fed_body

    def on_url(self, url: bytes) -> None:
        message = self._message
        assert message is not None
        message.url += url
        message.head_bytes += len(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        message = self._message
        assert message is not None
        message.head_bytes += len(name) + len(value) + 4
        if len(name) == 6 and name.lower() == b"expect" and value.lower() == b"100-continue":
            message.expect_continue = True
        elif len(name) == 14 and name.lower() == b"content-length" and value.isdigit():
            message.content_length = int(value)  # the parser refuses a bad or repeated one

    def on_headers_complete(self) -> None:
        message = self._message
        assert message is not None
        message.in_head = False
        self._heads_done += 1
        if self._broken:
            return
        if message.head_bytes > MAX_HEAD_BYTES:
            # answered once feed_data returns
            self._refusal = (HEAD_TOO_LARGE, f"head over {MAX_HEAD_BYTES} bytes")
            return
        message.version = version = self._parser.get_http_version()
        if not version.startswith("1."):
            # 505, once feed_data returns (as Go's net/http)
            self._refusal = (VERSION_NOT_SUPPORTED, "not HTTP/1.x")
            return
        if not message.expect_continue or self._transport is None or self._closed:
            return
        if message.content_length > self._server.max_body:
            # Go's net/http: no 100 Continue for a body the handler does not read; the
            # answer (the handler given None) is queued at once and the connection closed
            self._enqueue(self._route(message, None, keep_alive=False))
            self._broken = True
            self._pause()
        elif self._answering:  # after the answers to the requests before it, in order
            self._enqueue((None, _CONTINUE, True, None))
        else:
            self._send(_CONTINUE)

    def on_body(self, body: bytes) -> None:
        self._fed_body += len(body)
        message = self._message
        assert message is not None
        if message.oversized or self._refusal is not None or self._broken:
            return
        message.body_bytes += len(body)
        if message.body_bytes > self._server.max_body:
            message.oversized = True
            message.body = []
        else:
            message.body.append(body)

    def on_message_complete(self) -> None:
        message, self._message = self._message, None
        assert message is not None
        parser = self._parser
        if self._broken or self._refusal is not None or parser.should_upgrade():
            return  # answered by `_fail` once feed_data returns (or raises HttpParserUpgrade)
        keep_alive = parser.should_keep_alive() and message.version == "1.1"
        body = None if message.oversized else b"".join(message.body)
        self._enqueue(self._route(message, body, keep_alive))

    def _route(self, message: _Message, body: bytes | None, keep_alive: bool) -> _Pending:
        path, _, query = message.url.partition(b"?")
        handler = self._server.routes.get(path)
        method = self._parser.get_method()
        if handler is None:
            return (None, _for_method(NOT_FOUND, method), keep_alive, None)
        if method != b"POST":
            return (None, _for_method(NOT_ALLOWED, method), keep_alive, None)
        timeout = query_timeout(query) if query else None
        return (handler, body, keep_alive, Arrival(message.arrived_at, timeout))

    # --- answering ----------------------------------------------------------------------------

    def _enqueue(self, pending: _Pending) -> None:
        self._guard.busy(self._connection)
        self._queue.append(pending)
        if pending[1] is not _CONTINUE:
            self._waiting += 1
            if self._waiting >= MAX_PIPELINED:
                self._pause()
        if not self._answering:
            self._answering = True
            idle, self._idle = self._idle, None
            if idle is not None and not idle.done():  # (done: cancelled with the task)
                idle.set_result(None)  # the task waits for this request
            else:  # held: the loop keeps only a weak reference to a task
                self._task = asyncio.get_running_loop().create_task(self._answer_queue())

    async def _answer_queue(self) -> None:
        """The connection's answering task: answer the queue in order, at most
        ANSWERS_PER_TURN answers before the other connections get their turn of the loop, and
        none while the client leaves more than WRITE_BUFFER_HIGH bytes of answers unread
        (`_until_read`); then wait (`_idle`) for the next request, until the connection
        closes. One task for all of a connection's requests: a task made and ended per request
        (its context, its entry in asyncio's weak set of tasks) cost more than a future."""
        loop = asyncio.get_running_loop()
        while True:
            this_turn = 0
            try:
                while self._queue and not self._closed:
                    if this_turn >= ANSWERS_PER_TURN:
                        this_turn = 0
                        await asyncio.sleep(0)  # the others' turn
                        continue
                    if (
                        self._writing_paused
                        or (
                            self._unread_at_most > WRITE_BUFFER_HIGH
                            and self._unconsumed() > WRITE_BUFFER_HIGH
                        )
                    ) and not await self._until_read():
                        return
                    handler, body, keep_alive, arrival = self._queue.popleft()
                    if handler is None:
                        assert body is not None
                        if body is not _CONTINUE:
                            self._waiting -= 1
                        keep_alive = keep_alive and not self._shutting_down
                        answer = body if keep_alive else _closing(body)
                    else:
                        assert arrival is not None
                        self._waiting -= 1
                        try:
                            reply = await handler(body, arrival)
                        except Exception as error:  # a handler's bug: said, never hidden as 200
                            _log.error("webhook handler failed", error=repr(error))
                            answer, keep_alive = _closing(HANDLER_FAILED), False
                        else:  # stop() may have come while the handler ran: the answer says so
                            keep_alive = keep_alive and not self._shutting_down
                            answer = _ok(reply, keep_alive)
                    if not self._write(answer, keep_alive):
                        return
                    this_turn += 1
                    if self._paused and self._waiting <= RESUME_AT:
                        self._resume()
            finally:
                self._answering = False
                if not self._closed:
                    if self._eof:
                        self._close()  # the client half-closed: everything whole is answered
                    else:
                        self._guard.done(self._connection, mid_request=self._message is not None)
            if self._closed or self._eof:
                return
            self._idle = idle = loop.create_future()
            await idle  # set by `_enqueue`, or by `connection_lost`
            if self._closed:
                return

    async def _until_read(self) -> bool:
        """The client leaves its answers unread: no handler runs, no answer is made and
        nothing more is parsed until it has taken all but WRITE_BUFFER_LOW bytes of them;
        meanwhile it is a slow reader to the guard, which aborts it after its read deadline.
        Woken when the transport's buffer drains, and looked at again meanwhile (the kernel
        says nothing when the client reads). False once the connection is closed."""
        self._guard.stalled(self._connection)
        self._pause()
        loop = asyncio.get_running_loop()
        delay = UNREAD_POLL_SECONDS
        while not self._closed and (
            self._writing_paused or self._unconsumed() > WRITE_BUFFER_LOW
        ):  # fmt: skip
            self._writable = writable = loop.create_future()
            timer = loop.call_later(delay, self._wake_writer)
            try:
                await writable
            finally:
                timer.cancel()
            delay = min(2 * delay, UNREAD_POLL_MAX_SECONDS)
        if self._closed:
            return False
        self._guard.busy(self._connection)
        return True

    def _write(self, answer: bytes, keep_alive: bool) -> bool:
        """Write one answer; False when the connection is (now) closed."""
        transport = self._transport
        if transport is None or self._closed or transport.is_closing():
            return False
        self._send(answer)
        if not keep_alive:
            self._close()
            return False
        return True

    def _fail(self, answer: bytes, problem: str) -> None:
        """The connection can go no further: answer what came before, then `answer`, then close."""
        _log.debug("webhook connection closed", problem=problem)
        self._broken = True
        self._pause()
        self._enqueue((None, answer, False, None))

    def _close(self) -> None:
        """Close after what is written: TLS's close_notify, then the TCP connection."""
        self._queue.clear()
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        if self._handshaken:
            with contextlib.suppress(ssl.SSLError, ValueError):
                self._tls.unwrap()  # the client's own close_notify is not waited for
            self._flush_tls()
        transport.close()

    def _pause(self) -> None:
        if not self._paused and self._transport is not None and not self._closed:
            self._paused = True
            with contextlib.suppress(RuntimeError):  # after a half-close, nothing is read anyway
                self._transport.pause_reading()

    def _resume(self) -> None:
        if (
            self._paused and not self._broken and not self._writing_paused
            and self._transport is not None and not self._closed
        ):  # fmt: skip
            self._paused = False
            self._read_tls()  # what was read before the pause comes first
            if not self._paused and not self._closed and not self._eof:
                self._transport.resume_reading()  # after a half-close nothing more comes

    # --- shutdown -----------------------------------------------------------------------------

    def shut_down(self) -> None:
        """Close now when idle; otherwise after the answer being written."""
        self._shutting_down = True
        if not self._answering:
            self._close()

    def abort(self) -> None:
        """At the end of stop()'s wait: the connection goes, and a handler still running is
        cancelled (nobody is left to read its answer)."""
        if self._transport is not None:
            self._transport.abort()
        if self._task is not None and not self._task.done():
            self._task.cancel()


class WebhookServer:
    """POST `routes` (path -> BodyHandler) served over HTTPS on host:port."""

    def __init__(
        self,
        name: str,
        routes: Mapping[str, BodyHandler],
        host: str,
        port: int,
        ssl_context: ssl.SSLContext,
        guard: ConnectionGuard | None = None,
        *,
        max_body: int,
        shutdown_timeout: float = DEFAULT_SHUTDOWN_TIMEOUT_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.clock = clock  # what `Arrival.at` is read on
        self.routes = {path.encode(): handler for path, handler in routes.items()}
        self.guard = guard or ConnectionGuard()
        self.max_body = max_body
        self.ssl_context = ssl_context
        self.receive_buffer = memoryview(bytearray(RECEIVE_BUFFER_BYTES))
        self._host = host
        self._port = port
        self._shutdown_timeout = shutdown_timeout
        self._server: asyncio.Server | None = None
        self._exchanges: set[_Exchange] = set()
        self._all_closed: asyncio.Event | None = None

    @property
    def port(self) -> int:
        """The bound port (useful when configured as 0)."""
        if self._server is not None:
            for sock in self._server.sockets:
                return int(sock.getsockname()[1])
        return self._port

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        # plain TCP: each connection does its own TLS (_Exchange), so the guard counts it
        # from accept, handshake included
        self._server = await loop.create_server(
            lambda: _Exchange(self), self._host, self._port, backlog=LISTEN_BACKLOG
        )
        _log.info("listening", site=self.name, host=self._host, port=self.port, tls=True)

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        self._all_closed = asyncio.Event()
        for exchange in list(self._exchanges):
            exchange.shut_down()
        if self._exchanges:
            try:
                async with asyncio.timeout(self._shutdown_timeout):
                    await self._all_closed.wait()
            except TimeoutError:
                _log.warning("connections still open at shutdown: aborted",
                             site=self.name, count=len(self._exchanges))  # fmt: skip
                for exchange in list(self._exchanges):
                    exchange.abort()
        await server.wait_closed()

    def _forget(self, exchange: _Exchange) -> None:
        self._exchanges.discard(exchange)
        if not self._exchanges and self._all_closed is not None:
            self._all_closed.set()
