"""The webhook's own HTTP/1.1 server (controller/serving/http.py) against raw bytes over real TLS.

Each test starts a `WebhookServer` on 127.0.0.1 with small handlers (one echoes the body it
got, one waits on an event the test sets, one raises) and speaks HTTP to it byte by byte, as
a client that is not the API server might, on asyncio's default event loop and on uvloop
(whose TLS transport the controller process serves with; conftest.py). The controller's own
handler behind `app.webhook_site` is covered by ../test_webhook_e2e.py. Every wait is bounded
(DEADLINE).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import socket
import ssl
import time
import weakref
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import structlog
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graceful_drain.controller.serving.connections import ConnectionGuard
from graceful_drain.controller.serving.http import (
    ANSWERS_PER_TURN,
    MAX_HEAD_BYTES,
    MAX_PIPELINED,
    WAITING_CLIENT_SECONDS,
    WRITE_BUFFER_HIGH,
    Arrival,
    BodyHandler,
    WebhookServer,
    _Exchange,
)
from graceful_drain.controller.tls.context import server_context

from ..conftest import DEADLINE, WebhookCerts
from ..counting_guard import CountingGuard

pytestmark = pytest.mark.e2e  # on both event loops: conftest.py


MAX_BODY = 64  # the servers here keep bodies up to this size
# A deadline the test waits out. A request sent at once must beat it on a loaded machine (the
# read deadline runs from the connection's opening, its TLS handshake included).
SHORT = 1.0


# --- handlers -----------------------------------------------------------------------------------


class Echo:
    """Answers with the body it got (`null` when the server did not keep it)."""

    def __init__(self) -> None:
        self.bodies: list[bytes | None] = []
        self.arrivals: list[Arrival] = []

    async def __call__(self, body: bytes | None, arrival: Arrival) -> bytes:
        self.bodies.append(body)
        self.arrivals.append(arrival)
        return b"null" if body is None else body


class Gate:
    """Answers `answer` once the test opens the gate."""

    def __init__(self, answer: bytes = b'"through the gate"') -> None:
        self.answer = answer
        self.entered = asyncio.Event()  # set at each call
        self.open = asyncio.Event()
        self.waiting = 0
        self.cancelled = asyncio.Event()

    async def __call__(self, body: bytes | None, arrival: Arrival) -> bytes:
        self.waiting += 1
        self.entered.set()
        try:
            await self.open.wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        finally:
            self.waiting -= 1
        return self.answer

    async def until_waiting(self, count: int) -> None:
        async with asyncio.timeout(DEADLINE):
            while self.waiting < count:
                self.entered.clear()
                await self.entered.wait()


async def broken(body: bytes | None, arrival: Arrival) -> bytes:
    raise RuntimeError("a handler's bug")


@dataclass
class Routes:
    echo: Echo
    gate: Gate
    ping: Echo  # for the test's own round trips on a second connection

    def mapping(self) -> dict[str, BodyHandler]:
        return {"/echo": self.echo, "/gate": self.gate, "/ping": self.ping, "/broken": broken}


@pytest.fixture
def routes() -> Routes:
    return Routes(Echo(), Gate(), Echo())


# --- the server and a raw client ------------------------------------------------------------


@asynccontextmanager
async def serving(
    certs: WebhookCerts,
    routes: Mapping[str, BodyHandler],
    guard: ConnectionGuard | None = None,
    *,
    shutdown_timeout: float = DEADLINE,
    max_body: int = MAX_BODY,
    clock: Callable[[], float] = time.monotonic,
) -> AsyncIterator[WebhookServer]:
    context = server_context()
    context.load_cert_chain(certs.cert_file, certs.key_file)
    server = WebhookServer("test", routes, "127.0.0.1", 0, context, guard, max_body=max_body,
                           shutdown_timeout=shutdown_timeout, clock=clock)  # fmt: skip
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@dataclass
class Answer:
    status: int
    headers: dict[str, str]  # names in lower case
    body: bytes

    @property
    def closes(self) -> bool:
        return self.headers.get("connection", "").lower() == "close"


class Client:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def connect(
        cls, server: WebhookServer, certs: WebhookCerts, *, receive_buffer: int | None = None
    ) -> Client:
        """`receive_buffer`: the socket's, fixed (the kernel no longer grows it)."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        if receive_buffer is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        async with asyncio.timeout(DEADLINE):
            await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", server.port))
            reader, writer = await asyncio.open_connection(
                sock=sock, ssl=certs.client_context(), server_hostname="127.0.0.1"
            )
        return cls(reader, writer)

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        async with asyncio.timeout(DEADLINE):
            await self.writer.drain()

    async def answer(self) -> Answer:
        """The next answer, final or interim (1xx)."""
        async with asyncio.timeout(DEADLINE):
            head = await self.reader.readuntil(b"\r\n\r\n")
            status_line, *lines = head[:-4].decode("latin-1").split("\r\n")
            version, status, _reason = status_line.split(" ", 2)
            assert version == "HTTP/1.1"
            headers: dict[str, str] = {}
            for line in lines:
                name, _, value = line.partition(":")
                assert name.lower() not in headers, f"header {name} twice"
                headers[name.lower()] = value.strip()
            length = int(headers.get("content-length", "0"))
            body = await self.reader.readexactly(length)
        return Answer(int(status), headers, body)

    async def rest(self) -> bytes:
        """Everything the server sends until it closes the connection (EOF)."""
        async with asyncio.timeout(DEADLINE):
            return await self.reader.read()

    async def closed_by_server(self) -> bool:
        """True once the server has closed or aborted the connection with nothing more sent."""
        try:
            return await self.rest() == b""
        except (ConnectionError, ssl.SSLError):
            return True  # aborted: a reset instead of TLS's close_notify

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(ConnectionError, ssl.SSLError):
            await self.writer.wait_closed()


@asynccontextmanager
async def connected(server: WebhookServer, certs: WebhookCerts) -> AsyncIterator[Client]:
    client = await Client.connect(server, certs)
    try:
        yield client
    finally:
        await client.close()


def request(
    method: bytes, path: bytes, body: bytes = b"", *, extra: bytes = b"", version: bytes = b"1.1"
) -> bytes:
    length = b"Content-Length: %d\r\n" % len(body) if method == b"POST" else b""
    return (
        method + b" " + path + b" HTTP/" + version + b"\r\nHost: webhook\r\n"
        b"Content-Type: application/json\r\n" + length + extra + b"\r\n" + body
    )


def post(path: bytes, body: bytes = b"", **options: bytes) -> bytes:
    return request(b"POST", path, body, **options)


def chunked(path: bytes, pieces: list[bytes]) -> bytes:
    body = b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for piece in pieces if piece)
    return (
        b"POST " + path + b" HTTP/1.1\r\nHost: webhook\r\nTransfer-Encoding: chunked\r\n\r\n"
        + body + b"0\r\n\r\n"
    )  # fmt: skip


async def round_trip(server: WebhookServer, certs: WebhookCerts) -> None:
    """One request on a connection of its own: the server's loop has run past everything
    the test sent before."""
    async with connected(server, certs) as other:
        await other.send(post(b"/ping", b'"ping"'))
        assert (await other.answer()).body == b'"ping"'


class Pieces:
    """Sends a message piece by piece, each read by the server on its own: after each piece a
    ping on a second connection is answered, so the server's loop has polled its sockets
    since the piece was written (on loopback it was there to read). Without this the
    pieces written in one turn of the loop, which the server shares, reach it as one."""

    def __init__(self, client: Client, pinger: Client) -> None:
        self.client = client
        self.pinger = pinger

    async def send(self, piece: bytes) -> None:
        await self.client.send(piece)
        await self.pinger.send(post(b"/ping", b'"ping"'))
        assert (await self.pinger.answer()).body == b'"ping"'


@asynccontextmanager
async def in_pieces(server: WebhookServer, certs: WebhookCerts, client: Client
                    ) -> AsyncIterator[Pieces]:  # fmt: skip
    async with connected(server, certs) as pinger:
        yield Pieces(client, pinger)


async def assert_ok(client: Client, body: bytes) -> Answer:
    answer = await client.answer()
    assert answer.status == 200
    assert answer.headers["content-type"] == "application/json"
    assert answer.headers["content-length"] == str(len(body))
    assert answer.body == body
    return answer


# --- routing ------------------------------------------------------------------------------------


async def test_a_handler_is_told_when_its_request_arrived_and_the_clients_timeout(
    certs: WebhookCerts, routes: Routes
) -> None:
    """`Arrival`: a connection's first request counts from its accept when it came within
    WAITING_CLIENT_SECONDS of the handshake's end (its client was waiting through the
    handshake), else from the read of its first bytes (the connection idled first, as one
    Go's transport dialled and kept for later), as a later one does; `?timeout=` is the API
    server's webhook timeout, in seconds."""
    now, guard = [100.0], CountingGuard(DEADLINE)
    async with (
        serving(certs, routes.mapping(), guard, clock=lambda: now[0]) as server,
        connected(server, certs) as client,  # accepted at 100
    ):
        await guard.until_handshaken(1)  # the client's Finished read, at 100
        now[0] = 100.0 + WAITING_CLIENT_SECONDS  # the request right behind the handshake
        await client.send(post(b"/echo?timeout=5s", b'"first"'))
        await assert_ok(client, b'"first"')
        now[0] = 200.0
        await client.send(post(b"/echo?dryRun=All&timeout=1m30s", b'"second"'))
        await assert_ok(client, b'"second"')
        now[0] = 300.0
        for query in (b"", b"?timeout=", b"?timeout=soon", b"?timeout=0s", b"?timeouts=5s"):
            await client.send(post(b"/echo" + query, b'"none"'))
            await assert_ok(client, b'"none"')
        async with connected(server, certs) as idle:  # accepted at 300
            await guard.until_handshaken(2)
            now[0] = 304.5  # its first request comes long after: it idled, not waited
            await idle.send(post(b"/echo?timeout=5s", b'"idled"'))
            await assert_ok(idle, b'"idled"')
    assert routes.echo.arrivals == [
        Arrival(100.0, 5.0),
        Arrival(200.0, 90.0),
        *[Arrival(300.0, None)] * 5,
        Arrival(304.5, 5.0),
    ]


async def test_a_post_on_a_route_is_answered_with_the_handlers_bytes(
    certs: WebhookCerts, routes: Routes
) -> None:
    async with serving(certs, routes.mapping()) as server, connected(server, certs) as client:
        review = b'{"kind":"AdmissionReview","request":{"uid":"1"}}'
        await client.send(post(b"/echo", review))
        answer = await assert_ok(client, review)
        assert not answer.closes
        # the query kube-apiserver adds (the webhook's timeoutSeconds) does not change the route
        await client.send(post(b"/echo?timeout=10s", b'"two"'))
        await assert_ok(client, b'"two"')
        await client.send(post(b"/echo", b""))  # an empty body is still a body, not None
        await assert_ok(client, b"")
        assert routes.echo.bodies == [review, b'"two"', b""]


async def test_other_methods_get_405_other_paths_404_and_the_connection_serves_on(
    certs: WebhookCerts, routes: Routes
) -> None:
    async with serving(certs, routes.mapping()) as server, connected(server, certs) as client:
        for method in (b"GET", b"PUT", b"DELETE"):
            await client.send(request(method, b"/echo?timeout=10s"))
            answer = await client.answer()
            assert answer.status == 405 and answer.headers["allow"] == "POST"
            assert not answer.closes
        for path in (b"/", b"/echo/", b"/ECHO", b"/other?x=/echo"):
            await client.send(post(path, b"{}"))
            answer = await client.answer()
            assert answer.status == 404 and not answer.closes
        await client.send(post(b"/echo", b'"still here"'))
        await assert_ok(client, b'"still here"')
        assert routes.echo.bodies == [b'"still here"']  # no handler ran for a 404 or a 405


async def test_an_answer_to_head_has_no_body_and_the_next_answer_is_read_whole(
    certs: WebhookCerts, routes: Routes
) -> None:
    async with serving(certs, routes.mapping()) as server, connected(server, certs) as client:
        for path, status in ((b"/echo", b"405"), (b"/elsewhere", b"404")):
            await client.send(request(b"HEAD", path) + post(b"/echo", b'"after HEAD"'))
            async with asyncio.timeout(DEADLINE):
                head = await client.reader.readuntil(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 " + status + b" ")
            assert b"content-length: " in head.lower()  # the length GET would get, no body
            await assert_ok(client, b'"after HEAD"')


# --- bodies -------------------------------------------------------------------------------------


async def test_a_chunked_body_reaches_the_handler_whole(
    certs: WebhookCerts, routes: Routes
) -> None:
    async with serving(certs, routes.mapping()) as server, connected(server, certs) as client:
        await client.send(chunked(b"/echo", [b'{"a":', b"1", b',"b":[2,3]}']))
        await assert_ok(client, b'{"a":1,"b":[2,3]}')
        # and over the limit when chunked: the handler gets None, the connection serves on
        await client.send(chunked(b"/echo", [b"x" * (MAX_BODY // 2)] * 3))
        await assert_ok(client, b"null")
        await client.send(post(b"/echo", b'"after"'))
        await assert_ok(client, b'"after"')
        assert routes.echo.bodies == [b'{"a":1,"b":[2,3]}', None, b'"after"']


async def test_expect_100_continue_is_answered_before_the_body_is_sent(
    certs: WebhookCerts, routes: Routes
) -> None:
    body = b'{"sent":"after 100"}'
    async with serving(certs, routes.mapping()) as server, connected(server, certs) as client:
        head = post(b"/echo", body, extra=b"Expect: 100-continue\r\n")[: -len(body)]
        await client.send(head)
        interim = await client.answer()  # the body has not been sent yet
        assert interim.status == 100 and interim.body == b""
        await client.send(body)
        await assert_ok(client, body)


async def test_a_body_over_max_body_gives_the_handler_none_and_the_connection_serves_on(
    certs: WebhookCerts, routes: Routes
) -> None:
    async with serving(certs, routes.mapping()) as server, connected(server, certs) as client:
        at_limit, over = b"a" * MAX_BODY, b"b" * (MAX_BODY + 1)
        await client.send(post(b"/echo", at_limit))
        await assert_ok(client, at_limit)
        await client.send(post(b"/echo", over))
        await assert_ok(client, b"null")
        await client.send(post(b"/echo", b"c" * (MAX_BODY * 100)))
        await assert_ok(client, b"null")
        await client.send(post(b"/echo", b'"small"'))
        await assert_ok(client, b'"small"')
        assert routes.echo.bodies == [at_limit, None, None, b'"small"']


# --- pipelining ---------------------------------------------------------------------------------


async def test_pipelined_requests_are_answered_in_order_one_handler_at_a_time(
    certs: WebhookCerts, routes: Routes
) -> None:
    async with serving(certs, routes.mapping()) as server, connected(server, certs) as client:
        await client.send(post(b"/gate", b"{}") + post(b"/echo", b'"second"') + post(b"/nope"))
        async with asyncio.timeout(DEADLINE):
            await routes.gate.entered.wait()
        await round_trip(server, certs)
        assert routes.echo.bodies == []  # the second handler waits for the first
        routes.gate.open.set()
        await assert_ok(client, routes.gate.answer)  # the slow first is not overtaken
        await assert_ok(client, b'"second"')
        assert (await client.answer()).status == 404
        await client.send(post(b"/echo", b'"after"'))
        await assert_ok(client, b'"after"')


async def test_reading_pauses_while_max_pipelined_wait_and_every_request_is_answered(
    certs: WebhookCerts, routes: Routes
) -> None:
    count = 3 * MAX_PIPELINED
    async with serving(certs, routes.mapping()) as server, connected(server, certs) as client:
        await client.send(post(b"/gate", b"{}") + b"".join(
            post(b"/echo", b"%d" % i) for i in range(count)
        ))  # fmt: skip
        async with asyncio.timeout(DEADLINE):
            await routes.gate.entered.wait()
        await round_trip(server, certs)
        # a look inside: over loopback the kernel's buffers would take every request anyway
        [exchange] = [e for e in server._exchanges if e._queue]
        assert exchange._paused  # the transport delivers no more while the queue is full
        assert routes.echo.bodies == []
        routes.gate.open.set()
        await assert_ok(client, routes.gate.answer)
        for i in range(count):
            await assert_ok(client, b"%d" % i)
        assert not exchange._paused
        await client.send(post(b"/echo", b'"after"'))
        await assert_ok(client, b'"after"')


def kernel_buffer_bound(receive_buffer: int) -> int:
    """The most a loopback connection's kernel buffers can hold of the server's answers: the
    server socket's send buffer at its autotuning ceiling, and the client's receive buffer
    (fixed; the kernel doubles what is set)."""
    send_max = int(Path("/proc/sys/net/ipv4/tcp_wmem").read_text().split()[2])
    return send_max + 2 * receive_buffer


def unread(exchange: _Exchange) -> bool:
    """The server holds this connection as one leaving its answers unread."""
    return exchange._writing_paused or exchange._connection.stalled


async def test_a_client_that_does_not_read_its_answers_is_not_read_either(
    certs: WebhookCerts, routes: Routes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Answers the client leaves unread (more than WRITE_BUFFER_HIGH bytes of them, counted
    across the TLS output, the transport's buffer and the kernel's send queue): from then on
    the server parses nothing more and runs no handler until they drain, instead of
    buffering answers without end. Checked at every parse and every handler call (whatever
    the kernel's buffers and the scheduling), not by counting answers at some moment."""
    body, receive_buffer = b"x" * 16384, 16384
    # more answers than the kernel's buffers and the transport's can hold together
    count = 2 * (kernel_buffer_bound(receive_buffer) + WRITE_BUFFER_HIGH) // len(body) + 1
    exchanges: list[_Exchange] = []
    while_unread: list[str] = []  # what the server did while the answers waited: nothing
    longest_queue = 0
    stalled = asyncio.Event()

    def feed_slice(exchange: _Exchange, data: memoryview) -> None:
        if unread(exchange):
            while_unread.append("parsed")
        original_feed(exchange, data)

    def enqueue(exchange: _Exchange, pending: tuple[Any, ...]) -> None:
        nonlocal longest_queue
        original_enqueue(exchange, pending)
        longest_queue = max(longest_queue, len(exchange._queue))

    async def until_read(exchange: _Exchange) -> bool:
        exchanges.append(exchange)
        stalled.set()
        return await original_until_read(exchange)

    async def echo(got: bytes | None, arrival: Arrival) -> bytes:
        if any(unread(exchange) for exchange in exchanges):
            while_unread.append("handled")
        return await routes.echo(got, arrival)

    original_feed, original_enqueue = _Exchange._feed_slice, _Exchange._enqueue
    original_until_read = _Exchange._until_read
    monkeypatch.setattr(_Exchange, "_feed_slice", feed_slice)
    monkeypatch.setattr(_Exchange, "_enqueue", enqueue)
    monkeypatch.setattr(_Exchange, "_until_read", until_read)
    async with serving(certs, {"/echo": echo, "/ping": routes.ping}, max_body=len(body)) as server:
        client = await Client.connect(server, certs, receive_buffer=receive_buffer)
        try:
            client.writer.write(post(b"/echo", body) * count)  # and no answer read
            async with asyncio.timeout(DEADLINE):
                await stalled.wait()
                # answers not yet acknowledged count as unread too: under load the server can
                # stall for a moment before the client's buffers are full, then go on
                while not exchanges[-1]._paused:
                    await round_trip(server, certs)  # the server's loop goes on meanwhile
            for _ in range(8):
                await round_trip(server, certs)
            assert len(routes.echo.bodies) < count  # more than the buffers hold: it stopped
            for _ in range(count):  # reading the answers lets the server read on
                await assert_ok(client, body)
        finally:
            await client.close()
    assert while_unread == []
    assert longest_queue <= MAX_PIPELINED  # a slice holds less than one of these requests


async def test_expect_100_continue_behind_a_running_request_keeps_the_answers_in_order(
    certs: WebhookCerts, routes: Routes
) -> None:
    """The interim answer belongs to the second request: it may not come before the first's
    final answer, or the client would read it as the first's."""
    body = b'"second"'
    async with serving(certs, routes.mapping()) as server, connected(server, certs) as client:
        second_head = post(b"/echo", body, extra=b"Expect: 100-continue\r\n")[: -len(body)]
        await client.send(post(b"/gate", b"{}") + second_head)
        async with asyncio.timeout(DEADLINE):
            await routes.gate.entered.wait()
        await round_trip(server, certs)
        routes.gate.open.set()
        await assert_ok(client, routes.gate.answer)
        interim = await client.answer()
        assert interim.status == 100
        await client.send(body)
        await assert_ok(client, body)


# --- closing ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "message",
    [
        post(b"/echo", b'"old"', version=b"1.0"),
        post(b"/echo", b'"old"', version=b"1.0", extra=b"Connection: keep-alive\r\n"),
        post(b"/echo", b'"old"', extra=b"Connection: close\r\n"),
    ],
    ids=["http/1.0", "http/1.0 keep-alive", "connection-close"],
)
async def test_http_1_0_and_connection_close_are_answered_then_closed(
    certs: WebhookCerts, routes: Routes, message: bytes
) -> None:
    async with serving(certs, routes.mapping()) as server, connected(server, certs) as client:
        await client.send(message)
        answer = await assert_ok(client, b'"old"')
        assert answer.closes
        assert await client.rest() == b""


# What a well-kept HTTP/1.1 server does here, matched on Go's net/http (server.go), the
# server the API server's own webhook client is written against.


async def test_a_request_line_of_http_2_0_gets_505_then_the_connection_closes(
    certs: WebhookCerts, routes: Routes
) -> None:
    """Go's `http1ServerSupportsRequest`: a request that is not HTTP/1.x is refused with 505
    HTTP Version Not Supported, never answered as if it were HTTP/1.1. (Versions the parser
    does not know at all, HTTP/3.0, get 400 with the other bytes that are not HTTP/1.x.)"""
    async with serving(certs, routes.mapping()) as server, connected(server, certs) as client:
        await client.send(post(b"/echo", b"{}", version=b"2.0"))
        await assert_refused(client, 505)
        assert routes.echo.bodies == []
        await round_trip(server, certs)


def half_closing_client(port: int, context: ssl.SSLContext, data: bytes) -> bytes:
    """A blocking TLS client: sends `data`, half-closes its TCP side (a FIN, no close_notify,
    as a client that `shutdown(SHUT_WR)`s does), and reads until the server closes."""
    raw = socket.create_connection(("127.0.0.1", port), timeout=DEADLINE)
    with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        tls.sendall(data)
        socket.socket.shutdown(tls, socket.SHUT_WR)  # TCP's, under TLS
        received = b""
        with contextlib.suppress(ssl.SSLError, ConnectionError):  # an unclean end
            while chunk := tls.recv(65536):
                received += chunk
        return received


async def test_requests_followed_by_a_half_close_are_answered_then_the_connection_closes(
    certs: WebhookCerts, routes: Routes
) -> None:
    """Go's net/http answers what arrived whole before the client's FIN, then closes; a
    request cut off by it is dropped."""
    bodies = [b"%d" % i for i in range(2 * MAX_PIPELINED)]  # more than are parsed ahead
    async with serving(certs, routes.mapping()) as server:
        whole = b"".join(post(b"/echo", body) for body in bodies)
        received = await asyncio.to_thread(
            half_closing_client, server.port, certs.client_context(), whole + b"POST /echo HT"
        )
        assert received.count(b"HTTP/1.1 200 OK\r\n") == len(bodies)
        assert received.endswith(bodies[-1])
        assert routes.echo.bodies == bodies  # and the server closed: EOF


async def test_expect_100_continue_with_a_body_over_the_limit_gets_no_100_and_is_closed(
    certs: WebhookCerts, routes: Routes
) -> None:
    """Go's net/http sends 100 Continue only once the handler reads the body; a handler that
    does not (here: the body announced is over max_body, so the handler gets None at once)
    gets its answer out and the connection closes, the body never read."""
    async with serving(certs, routes.mapping()) as server, connected(server, certs) as client:
        too_big = b"x" * (MAX_BODY + 1)
        head = post(b"/echo", too_big, extra=b"Expect: 100-continue\r\n")[: -len(too_big)]
        await client.send(head)
        answer = await assert_ok(client, b"null")  # the first answer is final: no 100
        assert answer.closes
        assert await client.closed_by_server()
        assert routes.echo.bodies == [None]
        await round_trip(server, certs)


async def test_a_404_on_a_closing_request_says_connection_close(
    certs: WebhookCerts, routes: Routes
) -> None:
    async with serving(certs, routes.mapping()) as server, connected(server, certs) as client:
        await client.send(request(b"GET", b"/elsewhere", version=b"1.0"))
        answer = await client.answer()
        assert answer.status == 404 and answer.closes
        assert await client.rest() == b""


async def assert_refused(client: Client, status: int) -> None:
    answer = await client.answer()
    assert answer.status == status and answer.closes
    assert await client.closed_by_server()


@pytest.mark.parametrize(
    "garbage",
    [
        b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03" + b"\x00" * 32 + b"\r\n\r\n",
        b"HELLO\r\n\r\n",
        b"POST /echo HTTP/9.9\r\nContent-Length: 2\r\n\r\n{}",
        b"POST /echo HTTP/1.1\r\nContent-Length: x\r\n\r\n",
        b"POST /echo HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
        b"POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"POST /echo HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    ],
    ids=["tls-hello", "word", "version", "length", "two-lengths", "chunk-size", "smuggling"],
)
async def test_bytes_that_are_not_http_get_400_then_the_connection_closes(
    certs: WebhookCerts, routes: Routes, garbage: bytes
) -> None:
    async with serving(certs, routes.mapping()) as server, connected(server, certs) as client:
        await client.send(garbage)
        await assert_refused(client, 400)
        assert routes.echo.bodies == []
        await round_trip(server, certs)


async def test_garbage_after_a_good_request_answers_the_request_then_400(
    certs: WebhookCerts, routes: Routes
) -> None:
    async with serving(certs, routes.mapping()) as server, connected(server, certs) as client:
        await client.send(post(b"/echo", b'"good"') + b"\x00\x01garbage\r\n\r\n")
        await assert_ok(client, b'"good"')
        await assert_refused(client, 400)


@pytest.mark.parametrize(
    "message",
    [
        request(b"GET", b"/echo", extra=b"Connection: Upgrade\r\nUpgrade: websocket\r\n"),
        post(b"/echo", b"", extra=b"Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"
             b"HTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n"),
        post(b"/echo", b"{}", extra=b"Connection: Upgrade\r\nUpgrade: h2c\r\n"),
        request(b"CONNECT", b"127.0.0.1:443"),
    ],
    ids=["websocket", "h2c-post", "h2c-post-with-body", "connect"],
)  # fmt: skip
async def test_an_upgrade_gets_one_400_and_the_connection_closes(
    certs: WebhookCerts, routes: Routes, message: bytes
) -> None:
    async with serving(certs, routes.mapping()) as server, connected(server, certs) as client:
        await client.send(message)
        await assert_refused(client, 400)  # a single answer, then EOF
        assert routes.echo.bodies == []  # no handler ran for a request that was refused


async def test_a_head_with_too_many_headers_gets_431_then_the_connection_closes(
    certs: WebhookCerts, routes: Routes
) -> None:
    headers = b"".join(b"X-Header-%d: %s\r\n" % (i, b"v" * 40) for i in range(2000))
    assert len(headers) > MAX_HEAD_BYTES
    async with serving(certs, routes.mapping()) as server, connected(server, certs) as client:
        await client.send(post(b"/echo", b"{}", extra=headers))
        await assert_refused(client, 431)
        assert routes.echo.bodies == []
        await round_trip(server, certs)


async def test_one_huge_header_value_sent_in_pieces_gets_431_then_the_connection_closes(
    certs: WebhookCerts, routes: Routes
) -> None:
    """The value never ends, so the parser never hands it over: the server counts the bytes."""
    piece = b"v" * 4096
    async with (
        serving(certs, routes.mapping()) as server,
        connected(server, certs) as client,
        in_pieces(server, certs, client) as pieces,
    ):
        await pieces.send(b"POST /echo HTTP/1.1\r\nHost: webhook\r\nX-Huge: ")
        for _ in range(MAX_HEAD_BYTES // len(piece)):  # the last piece passes the limit
            await pieces.send(piece)
        await assert_refused(client, 431)
        await round_trip(server, certs)


async def test_a_head_under_the_limit_sent_in_pieces_is_served(
    certs: WebhookCerts, routes: Routes
) -> None:
    """A header value of 5/8 of the limit, in pieces: each byte counts once towards the limit."""
    value, piece = b"v" * (MAX_HEAD_BYTES * 5 // 8), 4096
    async with (
        serving(certs, routes.mapping()) as server,
        connected(server, certs) as client,
        in_pieces(server, certs, client) as pieces,
    ):
        await pieces.send(b"POST /echo HTTP/1.1\r\nHost: webhook\r\nX-Big: ")
        for start in range(0, len(value), piece):
            await pieces.send(value[start : start + piece])
        await pieces.send(b"\r\nContent-Length: 2\r\n\r\n{}")
        await assert_ok(client, b"{}")


async def test_a_large_body_before_a_pipelined_head_does_not_count_as_head(
    certs: WebhookCerts, routes: Routes
) -> None:
    """The bytes of the body before it, arriving with the start of the next head, are body.
    (Here the server reads the body and the head's start in one chunk; where the kernel split
    them, this test would prove less, never fail.)"""
    body = b"b" * (MAX_HEAD_BYTES * 5 // 4)  # over max_body as well: the handler gets None
    async with (
        serving(certs, routes.mapping()) as server,
        connected(server, certs) as client,
        in_pieces(server, certs, client) as pieces,
    ):
        first = post(b"/echo", body)
        await pieces.send(first[: -len(body)])  # the head alone
        await pieces.send(body + b"POST /echo HTTP/1.1\r\nHost: web")  # and the next begun
        await assert_ok(client, b"null")
        await client.send(b"hook\r\nContent-Length: 2\r\n\r\n{}")
        await assert_ok(client, b"{}")


async def test_a_raising_handler_gets_500_logged_and_closed_and_the_server_serves_on(
    certs: WebhookCerts, routes: Routes
) -> None:
    async with serving(certs, routes.mapping()) as server:
        with structlog.testing.capture_logs() as logs:
            async with connected(server, certs) as client:
                # pipelined behind it: not answered, the connection closes after the 500
                await client.send(post(b"/broken", b"{}") + post(b"/echo", b'"behind"'))
                await assert_refused(client, 500)
        failures = [log for log in logs if log["event"] == "webhook handler failed"]
        assert len(failures) == 1 and "a handler's bug" in failures[0]["error"]
        assert failures[0]["log_level"] == "error"
        assert routes.echo.bodies == []
        async with connected(server, certs) as client:
            await client.send(post(b"/echo", b'"new connection"'))
            await assert_ok(client, b'"new connection"')


# --- the guard: idle keep-alive and read deadlines ----------------------------------------------


async def test_an_idle_keep_alive_connection_is_closed_after_keepalive_timeout(
    certs: WebhookCerts, routes: Routes
) -> None:
    guard = ConnectionGuard(read_timeout=DEADLINE * 4, keepalive_timeout=0.2)
    async with (
        serving(certs, routes.mapping(), guard) as server,
        connected(server, certs) as client,
    ):
        await client.send(post(b"/echo", b"{}"))
        await assert_ok(client, b"{}")
        assert await client.rest() == b""  # closed (TLS close_notify), not aborted
        assert guard.stats.idle_closed == 1 and guard.stats.timed_out == 0
        assert guard.stats.open == 0


async def test_a_connection_is_not_idle_while_its_handler_runs(
    certs: WebhookCerts, routes: Routes
) -> None:
    guard = ConnectionGuard(read_timeout=SHORT, keepalive_timeout=SHORT)
    async with (
        serving(certs, routes.mapping(), guard) as server,
        connected(server, certs) as client,
    ):
        await client.send(post(b"/gate", b"{}"))
        async with asyncio.timeout(DEADLINE):
            await routes.gate.entered.wait()
        # a second connection idles out while the handler runs: both deadlines have passed
        async with connected(server, certs) as other:
            await other.send(post(b"/ping", b"{}"))
            await assert_ok(other, b"{}")
            assert await other.closed_by_server()
        assert guard.stats.idle_closed == 1 and guard.stats.timed_out == 0
        routes.gate.open.set()
        await assert_ok(client, routes.gate.answer)


async def test_a_request_begun_after_idling_gets_the_read_deadline(
    certs: WebhookCerts, routes: Routes
) -> None:
    """The first byte after an idle period starts the read deadline: a slow request is cut at
    read_timeout, not left until the (much longer) idle timeout."""
    guard = ConnectionGuard(read_timeout=SHORT, keepalive_timeout=DEADLINE * 4)
    async with (
        serving(certs, routes.mapping(), guard) as server,
        connected(server, certs) as client,
    ):
        await client.send(post(b"/echo", b"{}"))
        await assert_ok(client, b"{}")
        await round_trip(server, certs)  # some idle time
        await client.send(b"POST /echo HTTP/1.1\r\nHost: web")
        assert await client.closed_by_server()  # within DEADLINE: the read deadline cut it
        assert guard.stats.timed_out == 1 and guard.stats.idle_closed == 0


async def test_a_request_begun_after_idling_is_not_closed_as_idle(
    certs: WebhookCerts, routes: Routes
) -> None:
    """The first byte after an idle period ends it: the idle deadline no longer applies."""
    guard = ConnectionGuard(read_timeout=DEADLINE * 4, keepalive_timeout=SHORT)
    async with (
        serving(certs, routes.mapping(), guard) as server,
        connected(server, certs) as client,
    ):
        await client.send(post(b"/echo", b"{}"))
        await assert_ok(client, b"{}")
        await client.send(b"POST /echo HTTP/1.1\r\nHost: web")  # begun, not finished
        # a connection that went idle later idles out: the first one's idle deadline is past
        async with connected(server, certs) as later:
            await later.send(post(b"/ping", b"{}"))
            await assert_ok(later, b"{}")
            assert await later.closed_by_server()
        assert guard.stats.idle_closed == 1  # the later one only
        await client.send(b"hook\r\nContent-Length: 2\r\n\r\n{}")
        await assert_ok(client, b"{}")
        assert guard.stats.timed_out == 0


async def test_a_newcomer_is_refused_only_when_every_slot_runs_a_handler(
    certs: WebhookCerts, routes: Routes
) -> None:
    guard = ConnectionGuard(max_connections=2)
    async with (
        serving(certs, routes.mapping(), guard) as server,
        connected(server, certs) as first,
        connected(server, certs) as second,
    ):
        for client in (first, second):
            await client.send(post(b"/gate", b"{}"))
        await routes.gate.until_waiting(2)
        try:
            async with connected(server, certs) as refused:
                assert await refused.closed_by_server()  # aborted once its handshake is done
        except (ConnectionError, ssl.SSLError):
            pass  # or while the client still finished its side of it
        assert guard.stats.refused == 1 and guard.stats.evicted == 0
        routes.gate.open.set()
        for client in (first, second):
            await assert_ok(client, routes.gate.answer)
        async with connected(server, certs) as newcomer:  # room made by closing an idle one
            await newcomer.send(post(b"/echo", b'"in"'))
            await assert_ok(newcomer, b'"in"')
        assert guard.stats.evicted == 1 and guard.stats.refused == 1


# --- stop ---------------------------------------------------------------------------------------


async def test_stop_lets_a_running_handler_answer_closes_idle_ones_and_refuses_new_ones(
    certs: WebhookCerts, routes: Routes
) -> None:
    async with serving(certs, routes.mapping()) as server:
        port = server.port
        busy = await Client.connect(server, certs)
        idle = await Client.connect(server, certs)
        reading = await Client.connect(server, certs)
        try:
            await idle.send(post(b"/echo", b"{}"))
            await assert_ok(idle, b"{}")
            await reading.send(b"POST /echo HTTP/1.1\r\n")  # half a head
            await busy.send(post(b"/gate", b"{}") + post(b"/echo", b'"behind"'))
            async with asyncio.timeout(DEADLINE):
                await routes.gate.entered.wait()
            stopping = asyncio.create_task(server.stop())
            assert await idle.closed_by_server()
            assert await reading.closed_by_server()
            with pytest.raises(OSError):
                await asyncio.open_connection("127.0.0.1", port, ssl=certs.client_context())
            assert not stopping.done()  # it waits for the running handler
            routes.gate.open.set()
            answer = await assert_ok(busy, routes.gate.answer)
            assert answer.closes
            assert await busy.rest() == b""  # the pipelined one is dropped
            async with asyncio.timeout(DEADLINE):
                await stopping
            assert routes.echo.bodies == [b"{}"]
        finally:
            for client in (busy, idle, reading):
                await client.close()


async def test_stop_aborts_a_handler_that_never_finishes_after_shutdown_timeout(
    certs: WebhookCerts, routes: Routes
) -> None:
    async with serving(certs, routes.mapping(), shutdown_timeout=0.2) as server:
        async with connected(server, certs) as client:
            await client.send(post(b"/gate", b"{}"))
            async with asyncio.timeout(DEADLINE):
                await routes.gate.entered.wait()
                with structlog.testing.capture_logs() as logs:
                    await server.stop()
            assert await client.closed_by_server()
        assert [log["count"] for log in logs if "aborted" in log["event"]] == [1]
        assert server.guard.stats.open == 0
        async with asyncio.timeout(DEADLINE):
            await routes.gate.cancelled.wait()  # nobody is left to read its answer


# --- any split of a request stream --------------------------------------------------------------

MESSAGES = {
    "post": (post(b"/echo", b'{"a":1}'), 200, b'{"a":1}'),
    "query": (post(b"/echo?timeout=10s", b"[]"), 200, b"[]"),
    "empty": (post(b"/echo"), 200, b""),
    "over": (post(b"/echo", b"o" * (MAX_BODY + 1)), 200, b"null"),
    "chunked": (chunked(b"/echo", [b'{"b":', b"2}"]), 200, b'{"b":2}'),
    "continue": (post(b"/echo", b"1", extra=b"Expect: 100-continue\r\n"), 200, b"1"),
    "get": (request(b"GET", b"/echo"), 405, b"405: Method Not Allowed"),
    "elsewhere": (post(b"/elsewhere", b"{}"), 404, b"404: Not Found"),
}


@pytest.fixture
async def echo_server(certs: WebhookCerts, routes: Routes) -> AsyncIterator[WebhookServer]:
    async with serving(certs, routes.mapping()) as server:
        yield server


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    names=st.lists(st.sampled_from(sorted(MESSAGES)), min_size=1, max_size=6),
    cuts=st.lists(st.integers(min_value=1), max_size=8),
)
async def test_any_split_of_a_request_stream_gets_the_same_answers(
    echo_server: WebhookServer, certs: WebhookCerts, names: list[str], cuts: list[int]
) -> None:
    stream = b"".join(MESSAGES[name][0] for name in names)
    points = sorted({cut % len(stream) for cut in cuts} - {0})
    pieces = [stream[a:b] for a, b in zip([0, *points], [*points, len(stream)], strict=True)]
    expected: list[tuple[int, bytes]] = []
    for name in names:
        if name == "continue":
            expected.append((100, b""))
        expected.append(MESSAGES[name][1:])
    async with (
        connected(echo_server, certs) as client,
        in_pieces(echo_server, certs, client) as sender,
    ):
        for piece in pieces:
            await sender.send(piece)
        answers = [await client.answer() for _ in expected]
        assert [(answer.status, answer.body) for answer in answers] == expected
        assert all(not answer.closes for answer in answers)


# --- fairness: what one connection can make the server hold and do ------------------------------

TINY = {  # short requests: hundreds fit in one read
    "get": b"GET /x HTTP/1.1\r\n\r\n",
    "delete": b"DELETE /echo HTTP/1.1\r\n\r\n",  # 405
    "lines": b"POST /echo HTTP/1.1\r\nContent-Length: 3\r\n\r\n\n\n\n",  # a body of line ends
}
STATUS = {"get": 404, "delete": 405, "lines": 200}


@settings(max_examples=15, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    names=st.lists(st.sampled_from(sorted(TINY)), min_size=1, max_size=4),
    copies=st.integers(50, 400),
)
async def test_however_many_requests_one_read_holds_at_most_max_pipelined_wait(
    certs: WebhookCerts, routes: Routes, monkeypatch: pytest.MonkeyPatch, names: list[str],
    copies: int,
) -> None:  # fmt: skip
    """Hundreds of requests in one TLS record, behind one whose handler waits: the server
    parses no more than MAX_PIPELINED of them ahead (it stops feeding its parser, and reads no
    more, when that many wait), and answers every one, in order, once the first is done."""
    longest = 0

    def enqueue(exchange: _Exchange, pending: tuple[Any, ...]) -> None:
        nonlocal longest
        original_enqueue(exchange, pending)
        longest = max(longest, exchange._waiting)

    original_enqueue = _Exchange._enqueue
    monkeypatch.setattr(_Exchange, "_enqueue", enqueue)
    tail = b"".join(TINY[names[i % len(names)]] for i in range(copies))
    gate = Gate()
    async with (
        serving(certs, {**routes.mapping(), "/gate": gate}) as server,
        connected(server, certs) as client,
    ):
        await client.send(post(b"/gate", b"{}") + tail)
        await gate.until_waiting(1)
        await round_trip(server, certs)  # the server's loop has read what it will meanwhile
        assert longest == MAX_PIPELINED
        gate.open.set()
        await assert_ok(client, gate.answer)
        for i in range(copies):
            name = names[i % len(names)]
            answer = await client.answer()
            assert answer.status == STATUS[name], (i, name, answer)
    assert longest == MAX_PIPELINED


async def test_a_connection_answers_at_most_answers_per_turn_before_the_others_get_theirs(
    certs: WebhookCerts, routes: Routes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pipelined requests whose answers are ready at once (404s): the connection makes at
    most ANSWERS_PER_TURN of them in one turn of the event loop, counted by a callback that
    runs once per turn."""
    turn = 0
    made: dict[tuple[int, int], int] = {}  # (connection, turn) -> answers made in it
    ticking = True

    def tick() -> None:
        nonlocal turn
        turn += 1
        if ticking:
            asyncio.get_running_loop().call_soon(tick)  # runs in the next turn

    def write(exchange: _Exchange, answer: bytes, keep_alive: bool) -> bool:
        key = (id(exchange), turn)
        made[key] = made.get(key, 0) + 1
        return original_write(exchange, answer, keep_alive)

    original_write = _Exchange._write
    monkeypatch.setattr(_Exchange, "_write", write)
    count = 10 * ANSWERS_PER_TURN
    async with serving(certs, routes.mapping()) as server, connected(server, certs) as client:
        asyncio.get_running_loop().call_soon(tick)
        try:
            await client.send(request(b"GET", b"/nope") * count)
            for _ in range(count):
                assert (await client.answer()).status == 404
        finally:
            ticking = False
    assert sum(made.values()) == count
    assert max(made.values()) <= ANSWERS_PER_TURN, made


async def test_a_closed_connection_is_freed_by_reference_counting(
    certs: WebhookCerts, routes: Routes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the cyclic garbage collector off, every closed connection's objects are gone as
    soon as the server has let it go: one that never started TLS, one served and closed by
    its client, one cut at its read deadline in its head, one aborted while pipelining
    requests it did not read, one closed by the server (HTTP/1.0)."""
    made: list[weakref.ref[Any]] = []  # the connections under test: exchange, guard record
    recording = True

    def init(exchange: _Exchange, server: WebhookServer) -> None:
        original_init(exchange, server)
        if recording:
            made.extend([weakref.ref(exchange), weakref.ref(exchange._connection)])

    original_init = _Exchange.__init__
    monkeypatch.setattr(_Exchange, "__init__", init)
    guard = ConnectionGuard(read_timeout=SHORT)
    gc.collect()
    gc.disable()
    try:
        async with serving(certs, routes.mapping(), guard) as server:
            silent = await tcp(server)
            async with connected(server, certs) as client:
                await client.send(post(b"/echo", b'"one"'))
                await assert_ok(client, b'"one"')
            slow = await Client.connect(server, certs)
            await slow.send(b"POST /echo HTTP/1.1\r\nX-Slow: ")
            pipelining = await Client.connect(server, certs, receive_buffer=4096)
            pipelining.writer.write(request(b"GET", b"/nope") * 2000)
            closing = await Client.connect(server, certs)
            await closing.send(post(b"/echo", b'"bye"', version=b"1.0"))
            await assert_ok(closing, b'"bye"')
            assert await closing.closed_by_server()
            assert await slow.closed_by_server()  # at its read deadline
            pipelining.writer.transport.abort()
            silent.close()
            await closing.close()
            await slow.close()
            recording = False
            exchanges = made[::2]
            async with asyncio.timeout(DEADLINE):
                while any(ref() in server._exchanges for ref in exchanges):
                    await round_trip(server, certs)  # each goes once its transport has told it
            await round_trip(server, certs)  # and the tasks answering them have ended
            alive = [type(ref()).__name__ for ref in made if ref() is not None]
            assert alive == []
            assert len(made) == 10
    finally:
        gc.enable()


async def tcp(server: WebhookServer) -> socket.socket:
    """A connection that never starts TLS."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setblocking(False)
    async with asyncio.timeout(DEADLINE):
        await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", server.port))
    return sock
