"""SIGTERM integrations: the handler schedules, the verdict arrives later, handlers chain.

Real signals are raised at this process.  Every test first installs a recording Python
handler for SIGTERM (the ``previous`` fixture), so a stray SIGTERM can never end the
test run, and so chaining to a previous handler is observable.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from types import FrameType
from typing import Any

import pytest

from graceful_drain.termination.detector import Detector
from graceful_drain.termination.handler import install, install_threaded, install_uvicorn
from graceful_drain.termination.verdict import Action, Cause, Verdict
from tests.unit.termination.fakes import (
    MEMORY_MESSAGE,
    FakeReader,
    Gate,
    ReaderFactory,
    ThreadGate,
    identity,
    pod_obj,
)

NOW = datetime(2026, 11, 11, 12, 0, tzinfo=UTC)
SAFETY_NET = 30.0  # only so that a broken integration fails instead of hanging

DELETED = pod_obj(deleted=True)  # → voluntary, drain
EVICTED = pod_obj(
    disruption="TerminationByKubelet",
    status={"phase": "Failed", "reason": "Evicted", "message": MEMORY_MESSAGE},
)  # → involuntary_eviction, shed


class Recorder:
    """A Python-level signal handler that records and can wake an asyncio waiter."""

    def __init__(self) -> None:
        self.calls: list[int] = []
        self.called = threading.Event()

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.calls.append(signum)
        self.called.set()


@pytest.fixture
def previous() -> Iterator[Recorder]:
    recorder = Recorder()
    original = signal.signal(signal.SIGTERM, recorder)
    try:
        yield recorder
    finally:
        signal.signal(signal.SIGTERM, original)


def detector_for(pod: object) -> tuple[Detector, ReaderFactory, FakeReader]:
    reader = FakeReader(pod=pod)
    factory = ReaderFactory(reader)
    return Detector(identity(), reader_factory=factory, now=lambda: NOW), factory, reader


async def in_time(awaitable: Any) -> Any:
    async with asyncio.timeout(SAFETY_NET):
        return await awaitable


# --- asyncio ----------------------------------------------------------------------------


async def test_asyncio_classifies_the_first_sigterm_and_chains_every_one(
    previous: Recorder,
) -> None:
    detector, factory, _ = detector_for(DELETED)
    seen: list[Verdict] = []
    termination = install(asyncio.get_running_loop(), seen.append, detector=detector)
    try:
        signal.raise_signal(signal.SIGTERM)
        verdict = await in_time(termination.finished())
        previous.called.clear()
        signal.raise_signal(signal.SIGTERM)
        await in_time(asyncio.to_thread(previous.called.wait))
    finally:
        termination.uninstall()
    assert (verdict.cause, verdict.action) == (Cause.VOLUNTARY, Action.DRAIN_GRACEFULLY)
    assert seen == [verdict] and termination.verdict == verdict
    assert len(factory.timeouts) == 1  # one detection, however many signals
    assert previous.calls == [signal.SIGTERM, signal.SIGTERM]
    assert signal.getsignal(signal.SIGTERM) is previous


async def test_asyncio_handler_only_schedules_the_detection(previous: Recorder) -> None:
    gate = Gate(EVICTED)
    detector, _, _ = detector_for(gate)
    termination = install(asyncio.get_running_loop(), None, detector=detector)
    try:
        signal.raise_signal(signal.SIGTERM)
        await in_time(gate.reached.wait())  # the loop runs on while the pod read waits
        assert termination.verdict is None
        gate.opened.set()
        verdict = await in_time(termination.wait())
    finally:
        termination.uninstall()
    assert verdict.action is Action.SHED_LOAD_AND_EXIT_FAST


async def test_asyncio_awaits_an_async_callback_before_recording(previous: Recorder) -> None:
    detector, _, reader = detector_for(DELETED)
    order: list[str] = []

    async def on_verdict(verdict: Verdict) -> None:
        order.append(f"on_verdict:{verdict.cause}")

    termination = install(
        asyncio.get_running_loop(), on_verdict, detector=detector, record_event=True
    )
    try:
        signal.raise_signal(signal.SIGTERM)
        await in_time(termination.finished())
    finally:
        termination.uninstall()
    order.extend(call[0] for call in reader.calls if call[0] == "create_event")
    assert order == ["on_verdict:voluntary", "create_event"]
    assert len(reader.created) == 1


async def test_a_failing_callback_does_not_stop_the_recording(previous: Recorder) -> None:
    detector, _, reader = detector_for(DELETED)

    def on_verdict(verdict: Verdict) -> None:
        raise RuntimeError("the application's bug")

    termination = install(
        asyncio.get_running_loop(), on_verdict, detector=detector, record_event=True
    )
    try:
        signal.raise_signal(signal.SIGTERM)
        await in_time(termination.finished())
    finally:
        termination.uninstall()
    assert len(reader.created) == 1


# --- uvicorn ----------------------------------------------------------------------------


class FakeUvicornServer:
    """uvicorn.Server's signal surface (uvicorn/server.py, 0.29 and later).

    ``capture_signals`` installs ``self.handle_exit`` with ``signal.signal`` for SIGINT
    and SIGTERM, and restores the previous handlers when serving ends (uvicorn then
    re-raises the captured signals; left out here, it would reach the test's handler).
    ``handle_exit`` sets ``should_exit``; shutdown waits for open connections unless
    ``force_exit`` is set.  Changes wake ``serve`` through an asyncio.Event instead of
    uvicorn's 0.1 s polling.
    """

    def __init__(self) -> None:
        self.should_exit = False
        self._force_exit = False
        self.exits: list[int] = []
        self.connections_open = True
        self.serving = asyncio.Event()
        self._changed = asyncio.Event()
        self._loop = asyncio.get_running_loop()

    @property
    def force_exit(self) -> bool:
        return self._force_exit

    @force_exit.setter
    def force_exit(self, value: bool) -> None:
        self._force_exit = value
        self._wake()

    def _wake(self) -> None:
        self._loop.call_soon_threadsafe(self._changed.set)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self.exits.append(sig)
        self.should_exit = True
        self._wake()

    def close_connections(self) -> None:
        self.connections_open = False
        self._wake()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        handled = (signal.SIGINT, signal.SIGTERM)
        original = {sig: signal.signal(sig, self.handle_exit) for sig in handled}
        try:
            yield
        finally:
            for sig, handler in original.items():
                signal.signal(sig, handler)

    async def serve(self) -> None:
        with self.capture_signals():
            self.serving.set()
            while not self.should_exit:
                await self._next_change()
            while self.connections_open and not self.force_exit:
                await self._next_change()

    async def _next_change(self) -> None:
        await self._changed.wait()
        self._changed.clear()


async def test_uvicorn_shutdown_starts_at_once_and_a_shed_verdict_forces_the_exit(
    previous: Recorder,
) -> None:
    gate = Gate(EVICTED)
    detector, _, _ = detector_for(gate)
    server = FakeUvicornServer()
    termination = install_uvicorn(server, detector=detector)
    serving = asyncio.create_task(server.serve())
    await in_time(server.serving.wait())
    signal.raise_signal(signal.SIGTERM)
    await in_time(gate.reached.wait())
    assert server.should_exit and not server.force_exit  # uvicorn drains while we decide
    assert termination.verdict is None
    gate.opened.set()
    await in_time(serving)  # connections still open: only force_exit ends it
    assert server.force_exit
    assert termination.verdict is not None
    assert termination.verdict.action is Action.SHED_LOAD_AND_EXIT_FAST
    assert server.exits == [signal.SIGTERM]
    assert signal.getsignal(signal.SIGTERM) is previous  # uvicorn restored its predecessor


async def test_uvicorn_drain_verdict_lets_connections_finish(previous: Recorder) -> None:
    detector, _, _ = detector_for(DELETED)
    server = FakeUvicornServer()
    decided = asyncio.Event()
    install_uvicorn(server, lambda verdict: decided.set(), detector=detector)
    serving = asyncio.create_task(server.serve())
    await in_time(server.serving.wait())
    signal.raise_signal(signal.SIGTERM)
    await in_time(decided.wait())
    assert not serving.done() and not server.force_exit
    server.close_connections()
    await in_time(serving)
    assert not server.force_exit


async def test_uvicorn_already_serving_gets_the_wrapper_too(previous: Recorder) -> None:
    detector, factory, _ = detector_for(EVICTED)
    server = FakeUvicornServer()
    serving = asyncio.create_task(server.serve())
    await in_time(server.serving.wait())
    termination = install_uvicorn(server, detector=detector)
    assert signal.getsignal(signal.SIGTERM) == termination.handle_exit
    signal.raise_signal(signal.SIGTERM)
    await in_time(serving)
    assert server.force_exit and len(factory.timeouts) == 1


async def test_uvicorn_sigint_passes_straight_through(previous: Recorder) -> None:
    detector, factory, _ = detector_for(EVICTED)
    server = FakeUvicornServer()
    install_uvicorn(server, detector=detector)
    serving = asyncio.create_task(server.serve())
    await in_time(server.serving.wait())
    signal.raise_signal(signal.SIGINT)
    server.close_connections()
    await in_time(serving)
    assert server.exits == [signal.SIGINT]
    assert factory.timeouts == []  # no detection for Ctrl+C


async def test_real_uvicorn_force_exits_with_a_request_in_flight(previous: Recorder) -> None:
    uvicorn = pytest.importorskip("uvicorn")
    in_flight, release = asyncio.Event(), asyncio.Event()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        in_flight.set()
        await release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    detector, _, _ = detector_for(EVICTED)
    listener = socket.create_server(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, lifespan="off", log_level="warning"))
    termination = install_uvicorn(server, detector=detector)
    serving = asyncio.create_task(server.serve(sockets=[listener]))
    _, writer = await asyncio.open_connection(*listener.getsockname()[:2])
    try:
        writer.write(b"GET / HTTP/1.1\r\nHost: test\r\n\r\n")
        await writer.drain()
        await in_time(in_flight.wait())
        signal.raise_signal(signal.SIGTERM)
        # uvicorn waits for in-flight requests with no time limit by default: only
        # force_exit ends serve() while the request is still held.
        await in_time(serving)
    finally:
        release.set()
        writer.close()
        listener.close()
    assert server.force_exit
    assert (
        termination.verdict is not None and termination.verdict.cause is Cause.INVOLUNTARY_EVICTION
    )
    assert signal.SIGTERM in previous.calls  # uvicorn re-raised it to the restored handler


@pytest.mark.parametrize(
    ("found", "code"), [(EVICTED, 10), (DELETED, 0)], ids=["evicted", "deleted"]
)
async def test_real_uvicorn_with_exit_with_verdict_does_not_re_raise_sigterm(
    previous: Recorder, found: Any, code: int
) -> None:
    """Case 11 of v2: uvicorn re-raises the SIGTERM it captured, so the process exits 143
    whatever the verdict; with exit_with_verdict it ends normally and exit_code() is the
    verdict's."""
    uvicorn = pytest.importorskip("uvicorn")
    started = asyncio.Event()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        assert scope["type"] == "lifespan"  # no request is made
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                started.set()  # serve() has captured the signals by now
                await send({"type": "lifespan.startup.complete"})
            else:
                await send({"type": "lifespan.shutdown.complete"})
                return

    detector, _, _ = detector_for(found)
    listener = socket.create_server(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, lifespan="on", log_level="warning"))
    termination = install_uvicorn(server, detector=detector, exit_with_verdict=True)
    serving = asyncio.create_task(server.serve(sockets=[listener]))
    try:
        await in_time(started.wait())
        signal.raise_signal(signal.SIGTERM)
        await in_time(serving)
    finally:
        listener.close()
    assert await asyncio.to_thread(termination.exit_code) == code
    assert signal.SIGTERM not in previous.calls  # nothing left to kill the process with


async def test_exit_code_without_a_sigterm_is_0() -> None:
    detector, _, _ = detector_for(EVICTED)
    termination = install_uvicorn(FakeUvicornServer(), detector=detector, exit_with_verdict=True)
    assert termination.exit_code() == 0


# --- plain programs ---------------------------------------------------------------------


def test_threaded_classifies_in_a_worker_and_chains(previous: Recorder) -> None:
    detector, factory, _ = detector_for(DELETED)
    seen: list[tuple[Verdict, str]] = []
    termination = install_threaded(
        lambda verdict: seen.append((verdict, threading.current_thread().name)),
        detector=detector,
    )
    try:
        signal.raise_signal(signal.SIGTERM)
        verdict = termination.wait(SAFETY_NET)
        assert termination.join(SAFETY_NET)
        signal.raise_signal(signal.SIGTERM)  # the worker is done: chained only
    finally:
        termination.uninstall()
    assert verdict is not None and verdict.cause is Cause.VOLUNTARY
    assert seen == [(verdict, "graceful-drain-termination")]
    assert previous.calls == [signal.SIGTERM, signal.SIGTERM]
    assert len(factory.timeouts) == 1
    assert signal.getsignal(signal.SIGTERM) is previous


def test_threaded_handler_returns_before_the_verdict(previous: Recorder) -> None:
    gate = ThreadGate(EVICTED)
    detector, _, _ = detector_for(gate)
    termination = install_threaded(None, detector=detector)
    try:
        signal.raise_signal(signal.SIGTERM)
        assert gate.reached.wait(SAFETY_NET)
        assert termination.verdict is None  # the handler returned; the worker is reading
        gate.opened.set()
        verdict = termination.wait(SAFETY_NET)
    finally:
        termination.uninstall()
    assert verdict is not None and verdict.action is Action.SHED_LOAD_AND_EXIT_FAST


def test_threaded_uninstall_stops_an_idle_worker(previous: Recorder) -> None:
    detector, factory, _ = detector_for(DELETED)
    termination = install_threaded(None, detector=detector)
    termination.uninstall()
    assert termination.join(SAFETY_NET)
    assert factory.timeouts == []
    assert signal.getsignal(signal.SIGTERM) is previous
