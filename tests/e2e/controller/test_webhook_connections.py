"""Slow clients against the webhook's TLS socket: read deadlines and the connection cap.

Issue 15: headers at 1 byte/s kept 1,500 connections open for 45 s (none closed) and grew
RSS by ~60 KB each; ~7k of them OOM-kill the pod. Timings here are scaled down (a 0.5 s read
deadline instead of 10 s); each wait is bounded and fails the test when exceeded.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl

import aiohttp
import pytest
from bench.objects import eviction_review
from prometheus_client.parser import text_string_to_metric_families

from graceful_drain.controller.app import ControllerApp
from graceful_drain.controller.serving.connections import ConnectionGuard
from kubesim.sim import KubeSim

from .conftest import DEADLINE, WebhookCerts, post_review, running_controller

pytestmark = pytest.mark.e2e

TRICKLE_BYTES = 200  # a slow client never gets this far: the deadline closes it first


async def trickle(port: int, context: ssl.SSLContext, head: bytes) -> bool:
    """Send `head`, then one byte every 20 ms. True once the server has closed the
    connection (it did not wait for the request to complete)."""
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context)
    except (ConnectionError, ssl.SSLError):
        return True  # cut off in its handshake: the read deadline runs from accept
    try:
        writer.write(head)
        for _ in range(TRICKLE_BYTES):
            if reader.at_eof():
                return True
            writer.write(b"a")
            try:
                await writer.drain()
                await asyncio.wait_for(reader.read(1), 0.02)  # a slow client's pace
            except TimeoutError:
                continue
            except (ConnectionError, ssl.SSLError):
                return True
            return True  # an answer or EOF: the server stopped waiting for us
        return False
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError, ssl.SSLError):
            await writer.wait_closed()


HEADERS_NEVER_END = b"POST /validate-eviction HTTP/1.1\r\nHost: webhook\r\nX-Slow: "
BODY_NEVER_ENDS = (
    b"POST /validate-eviction HTTP/1.1\r\nHost: webhook\r\n"
    b"Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"
)


async def connections_closed(
    session: aiohttp.ClientSession, app: ControllerApp
) -> dict[str, float]:
    """graceful_drain_webhook_connections_closed_total by `why`, scraped from /metrics."""
    async with session.get(f"http://127.0.0.1:{app.health_site.port}/metrics") as resp:
        assert resp.status == 200
        text = await resp.text()
    return {
        sample.labels["why"]: sample.value
        for family in text_string_to_metric_families(text)
        if family.name == "graceful_drain_webhook_connections_closed"
        for sample in family.samples
        if sample.name.endswith("_total")
    }


async def test_slow_readers_are_closed_while_the_api_server_gets_its_answers(
    sim: KubeSim, certs: WebhookCerts, https: aiohttp.ClientSession
) -> None:
    # the deadline runs from accept, the handshake included: 1 s leaves a loaded machine room
    # for the API server's handshake and request, and cuts a trickle (4 s) well before its end
    guard = ConnectionGuard(read_timeout=1.0, max_connections=64)
    async with running_controller(sim, certs, app_options={"connection_guard": guard}) as app:
        port = app.webhook_site.port
        context = certs.client_context()
        heads = (HEADERS_NEVER_END, BODY_NEVER_ENDS)
        slow = [asyncio.create_task(trickle(port, context, heads[i % 2])) for i in range(24)]
        for _ in range(3):  # AdmissionReviews while the slow clients trickle
            status, review = await post_review(https, app, eviction_review("default", "gone"))
            assert status == 200
            assert review["response"]["allowed"] is True  # no such pod: pod-gone
        async with asyncio.timeout(DEADLINE):
            closed = await asyncio.gather(*slow)
        assert all(closed)  # every slow client was cut off before it finished trickling
        assert guard.stats.timed_out >= 24
        assert guard.stats.evicted == guard.stats.refused == 0
        closed_by_why = await connections_closed(https, app)
        assert closed_by_why["read-timeout"] == guard.stats.timed_out  # what operators see
        assert closed_by_why["evicted"] == closed_by_why["refused"] == 0


async def test_the_cap_bounds_open_connections_and_a_newcomer_still_gets_in(
    sim: KubeSim, certs: WebhookCerts, https: aiohttp.ClientSession
) -> None:
    guard = ConnectionGuard(read_timeout=30, max_connections=8)  # the deadline plays no part
    async with running_controller(sim, certs, app_options={"connection_guard": guard}) as app:
        context = certs.client_context()
        held: list[asyncio.StreamWriter] = []
        try:
            for _ in range(24):
                _reader, writer = await asyncio.open_connection(
                    "127.0.0.1", app.webhook_site.port, ssl=context
                )
                writer.write(HEADERS_NEVER_END)
                await writer.drain()
                held.append(writer)
                assert guard.stats.open <= 8
            status, review = await post_review(https, app, eviction_review("default", "gone"))
            assert status == 200 and review["response"]["allowed"] is True
            assert guard.stats.evicted >= 16  # the oldest slow readers made room
            assert guard.stats.refused == 0
        finally:
            for writer in held:
                writer.close()


async def test_a_client_that_sends_nothing_is_closed(sim: KubeSim, certs: WebhookCerts) -> None:
    guard = ConnectionGuard(read_timeout=0.3, max_connections=8)
    async with running_controller(sim, certs, app_options={"connection_guard": guard}) as app:
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", app.webhook_site.port, ssl=certs.client_context()
        )
        try:
            async with asyncio.timeout(DEADLINE):
                assert await reader.read() == b""  # EOF: the server closed it
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError, ssl.SSLError):
                await writer.wait_closed()
        assert guard.stats.timed_out == 1


async def test_the_cap_refuses_only_when_every_slot_runs_a_handler() -> None:
    """The eviction order, on the guard alone: idle first, then slow readers, never busy."""
    guard = ConnectionGuard(read_timeout=60, max_connections=2)

    class Transport(asyncio.Transport):
        def __init__(self) -> None:
            super().__init__()
            self.aborted = False

        def abort(self) -> None:
            self.aborted = True

    from graceful_drain.controller.serving.connections import GuardedConnection as _Connection

    busy, reading = _Connection(), _Connection()
    first, second = Transport(), Transport()
    assert guard.opened(busy, first) and guard.opened(reading, second)
    busy.disarm()
    busy.busy = True
    third = Transport()
    assert guard.opened(_Connection(), third)  # room made by aborting the slow reader
    assert second.aborted and not first.aborted
    fourth = Transport()
    for connection in list(guard._open.values()):
        connection.disarm()
        connection.busy = True
    assert not guard.opened(_Connection(), fourth)
    assert guard.stats.refused == 1 and guard.stats.evicted == 1
    for connection in list(guard._open.values()):
        connection.disarm()


async def test_each_slow_reader_is_cut_at_its_own_deadline_and_a_busy_one_never() -> None:
    """The guard alone: one timer at the earliest deadline serves every connection's."""
    from graceful_drain.controller.serving.connections import GuardedConnection as _Connection

    loop = asyncio.get_running_loop()
    aborts: list[float] = []
    two_aborted = asyncio.Event()

    class Transport(asyncio.Transport):
        def __init__(self) -> None:
            super().__init__()
            self.aborted_at: float | None = None

        def abort(self) -> None:
            self.aborted_at = loop.time()
            aborts.append(self.aborted_at)
            if len(aborts) == 2:
                two_aborted.set()

    guard = ConnectionGuard(read_timeout=0.2, max_connections=8)
    busy, late, quiet = _Connection(), _Connection(), _Connection()
    transports = {connection: Transport() for connection in (busy, late, quiet)}
    deadlines: dict[_Connection, float] = {}
    for connection in (busy, late, quiet):
        assert guard.opened(connection, transports[connection])
        assert connection.deadline is not None
        deadlines[connection] = connection.deadline
        await asyncio.sleep(0)  # let the loop's clock move between the connections
    busy.disarm()  # its request arrived whole: a handler runs for it
    busy.busy = True
    guard.data(late)  # more bytes of the same request: the deadline stays
    assert late.deadline == deadlines[late]
    async with asyncio.timeout(DEADLINE):
        await two_aborted.wait()
    for connection in (late, quiet):
        aborted_at = transports[connection].aborted_at
        assert aborted_at is not None and aborted_at >= deadlines[connection]
    assert transports[busy].aborted_at is None
    assert guard.stats.timed_out == 2 and guard.stats.open == 1
