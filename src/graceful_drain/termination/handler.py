"""SIGTERM integration: decide drain-or-shed without ever blocking the signal context.

Three ways in, one behaviour.  The signal handler only notes when the signal arrived
and schedules a detection (:meth:`Detector.detect`, whose deadline runs from that
moment); the verdict then goes to ``on_verdict`` and, when ``record_event`` is set, is
posted as a ``TerminationClassified`` Event on this pod, after ``on_verdict`` ran so it
never delays the decision.  Only the first SIGTERM starts a detection.

* :func:`install` — asyncio programs.  ``loop.add_signal_handler`` (the callback runs on
  the loop, outside the signal context).  SIGTERM no longer ends the process by itself:
  ``on_verdict`` (sync or async) must stop the program.  A previous Python-level handler
  (``signal.signal``) is chained: called after the detection is scheduled.  A previous
  ``loop.add_signal_handler`` callback for SIGTERM is replaced (asyncio keeps one).
* :func:`install_uvicorn` — uvicorn servers.  uvicorn installs its own handlers when
  ``serve()`` starts (``Server.capture_signals``: ``signal.signal(sig, self.handle_exit)``
  for SIGINT and SIGTERM, restored and re-raised after shutdown; before 0.29,
  ``loop.add_signal_handler(sig, self.handle_exit, sig, None)``), and both look up
  ``self.handle_exit`` at that moment.  So the integration wraps ``handle_exit`` on the
  instance: on SIGTERM it schedules the detection on the running loop
  (``call_soon_threadsafe``, safe in a signal handler) and chains to uvicorn's own
  ``handle_exit`` at once, so uvicorn starts its graceful shutdown (stop accepting, let
  in-flight requests finish) without waiting for the verdict.  If the verdict is to shed
  load, the integration sets ``server.force_exit``, which uvicorn's shutdown polls: it
  stops waiting for connections and background tasks and skips the lifespan shutdown
  (uvicorn's own "second Ctrl+C").  Call it before ``serve()``; if uvicorn's handler is
  already installed, the process-level handler is swapped too.  uvicorn re-raises the
  SIGTERM it captured once serving ends, so the process always dies of it (status 143)
  and the verdict is lost to whoever reads the exit status.  With
  ``exit_with_verdict=True`` the wrapper starts uvicorn's shutdown itself
  (``should_exit``, exactly what uvicorn's handler does for SIGTERM) without letting it
  capture the signal, runs the detection in its own thread so that it outlives the
  server's loop, and :meth:`UvicornTermination.exit_code` gives the status to exit
  with: ``sys.exit(termination.exit_code())`` after ``server.run()``.
* :func:`install_threaded` — plain (synchronous) programs.  ``signal.signal`` from the
  main thread; the handler notes the time and writes one byte to a non-blocking pipe
  (it takes no lock, so it cannot wait on the code it interrupted), and a worker
  thread started at install time runs the
  detection with its own event loop and calls ``on_verdict`` in that thread.  The
  previous handler is chained unless it is ``SIG_DFL``/``SIG_IGN``; with ``SIG_DFL``
  SIGTERM no longer ends the process by itself: ``on_verdict`` (or the main thread,
  via :meth:`ThreadedTermination.wait`) must.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any, Protocol

from graceful_drain.termination.actions import EXIT_CODES, Outcome, exit_code_of
from graceful_drain.termination.detector import Detector
from graceful_drain.termination.verdict import Action, Verdict

log = logging.getLogger(__name__)

VerdictCallback = Callable[[Verdict], object]  # an awaitable result is awaited (asyncio)
SignalHandler = Callable[[int, FrameType | None], Any]
EXIT_CODE_WAIT_MARGIN_SECONDS = 1.0  # past the detection deadline, which detect() keeps


async def _deliver(
    detector: Detector, verdict: Verdict, on_verdict: VerdictCallback | None, record_event: bool
) -> None:
    log.info("termination verdict: %s", verdict.summary())
    if on_verdict is not None:
        try:
            result = on_verdict(verdict)
            if inspect.isawaitable(result):
                await result
        except Exception:
            log.exception("the on_verdict callback failed")
    if record_event:
        failure = await detector.record(verdict)
        if failure is not None:
            log.warning("could not record the verdict as an Event: %s", failure)


def _chainable(handler: object) -> SignalHandler | None:
    """A previous handler worth calling: a Python callable, not SIG_DFL/SIG_IGN/None."""
    if isinstance(handler, signal.Handlers) or not callable(handler):
        return None
    return handler


def _detector_or_default(detector: Detector | None) -> Detector:
    return detector if detector is not None else Detector.from_environment()


# --- asyncio programs -----------------------------------------------------------------


class AsyncioTermination:
    """The SIGTERM handler installed by :func:`install`."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        detector: Detector,
        on_verdict: VerdictCallback | None,
        record_event: bool,
        signum: int,
    ) -> None:
        self.loop = loop
        self.detector = detector
        self.signum = signum
        self._on_verdict = on_verdict
        self._record_event = record_event
        self._verdict: asyncio.Future[Verdict] = loop.create_future()
        self._task: asyncio.Task[None] | None = None
        self._previous: object = None

    def _install(self) -> None:
        self._previous = signal.getsignal(self.signum)
        self.loop.add_signal_handler(self.signum, self._on_signal)

    def uninstall(self) -> None:
        """Remove the handler and put the previous Python-level one back."""
        self.loop.remove_signal_handler(self.signum)
        if self._previous is not None:
            signal.signal(self.signum, self._previous)  # type: ignore[arg-type]

    @property
    def verdict(self) -> Verdict | None:
        return self._verdict.result() if self._verdict.done() else None

    async def wait(self) -> Verdict:
        """The verdict, once a SIGTERM has been received and classified."""
        return await asyncio.shield(self._verdict)

    async def finished(self) -> Verdict:
        """The verdict, once ``on_verdict`` has run and the Event (if any) is recorded."""
        verdict = await self.wait()
        if self._task is not None:
            await asyncio.shield(self._task)
        return verdict

    def _on_signal(self) -> None:
        started = time.monotonic()
        if self._task is None:
            self._task = self.loop.create_task(self._run(started))
        previous = _chainable(self._previous)
        if previous is not None:
            previous(self.signum, None)

    async def _run(self, started: float) -> None:
        verdict = await self.detector.detect(started_at=started)
        self._verdict.set_result(verdict)
        await _deliver(self.detector, verdict, self._on_verdict, self._record_event)


def install(
    loop: asyncio.AbstractEventLoop,
    on_verdict: VerdictCallback | None,
    *,
    detector: Detector | None = None,
    record_event: bool = False,
    signum: int = signal.SIGTERM,
) -> AsyncioTermination:
    """Classify on SIGTERM in an asyncio program; ``on_verdict`` decides what happens next.

    Call from the thread running ``loop`` (the main thread).  ``detector`` defaults to
    ``Detector.from_environment()`` (raises IdentityError if the pod name or namespace
    cannot be determined).
    """
    termination = AsyncioTermination(
        loop, _detector_or_default(detector), on_verdict, record_event, signum
    )
    termination._install()
    return termination


# --- uvicorn --------------------------------------------------------------------------


class UvicornServer(Protocol):
    """What the integration uses of ``uvicorn.Server``."""

    should_exit: bool
    force_exit: bool

    def handle_exit(self, sig: int, frame: FrameType | None) -> None: ...


class UvicornTermination:
    """The ``handle_exit`` wrapper installed by :func:`install_uvicorn`."""

    def __init__(
        self,
        server: UvicornServer,
        detector: Detector,
        on_verdict: VerdictCallback | None,
        record_event: bool,
        force_exit_on_shed: bool,
        exit_with_verdict: bool = False,
    ) -> None:
        self.server = server
        self.detector = detector
        self._on_verdict = on_verdict
        self._record_event = record_event
        self._force_exit_on_shed = force_exit_on_shed
        self._exit_with_verdict = exit_with_verdict
        self._previous: SignalHandler = server.handle_exit
        self._triggered = False
        self._done = threading.Event()
        self._verdict: Verdict | None = None
        self._task: asyncio.Task[None] | None = None

    def _install(self) -> None:
        previous = self._previous
        # An instance attribute shadows the method: uvicorn reads self.handle_exit when
        # it installs its handlers.
        self.server.handle_exit = self.handle_exit  # type: ignore[method-assign]
        # uvicorn already serving: its bound handle_exit is the process handler.
        if signal.getsignal(signal.SIGTERM) == previous:
            signal.signal(signal.SIGTERM, self.handle_exit)

    def uninstall(self) -> None:
        self.server.handle_exit = self._previous  # type: ignore[method-assign, assignment]
        if signal.getsignal(signal.SIGTERM) == self.handle_exit:
            signal.signal(signal.SIGTERM, self._previous)

    @property
    def verdict(self) -> Verdict | None:
        return self._verdict

    def wait(self, timeout: float | None = None) -> Verdict | None:
        """Block (outside the loop thread) until the verdict is known."""
        self._done.wait(timeout)
        return self._verdict

    def exit_code(self) -> int:
        """The process status for the verdict (graceful_drain.termination.actions): 0 when
        no SIGTERM came; when one did, waits for the verdict (bounded by the detection
        deadline) and answers 11, indeterminate, if there is none."""
        if not self._triggered:
            return 0
        self._done.wait(self.detector.budget_seconds() + EXIT_CODE_WAIT_MARGIN_SECONDS)
        if self._verdict is None:
            return EXIT_CODES[Outcome.INDETERMINATE]
        return exit_code_of(self._verdict)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if sig == signal.SIGTERM and not self._triggered:
            self._triggered = True
            started = time.monotonic()
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                loop = None
            if loop is None or self._exit_with_verdict:
                _start_thread(self._run_in_thread, started)
            else:
                loop.call_soon_threadsafe(self._start, loop, started)
            if self._exit_with_verdict:
                self.server.should_exit = True  # uvicorn's shutdown, without the re-raise
                return
        self._previous(sig, frame)

    def _start(self, loop: asyncio.AbstractEventLoop, started: float) -> None:
        self._task = loop.create_task(self._run(started))

    def _run_in_thread(self, started: float) -> None:
        asyncio.run(self._run(started))

    async def _run(self, started: float) -> None:
        verdict = await self.detector.detect(started_at=started)
        self._verdict = verdict
        self._done.set()
        if self._force_exit_on_shed and verdict.action is Action.SHED_LOAD_AND_EXIT_FAST:
            self.server.force_exit = True
        await _deliver(self.detector, verdict, self._on_verdict, self._record_event)


def install_uvicorn(
    server: UvicornServer,
    on_verdict: VerdictCallback | None = None,
    *,
    detector: Detector | None = None,
    record_event: bool = False,
    force_exit_on_shed: bool = True,
    exit_with_verdict: bool = False,
) -> UvicornTermination:
    """Classify on SIGTERM in a ``uvicorn.Server``, chaining uvicorn's own shutdown.

    Use ``uvicorn.Server(config)`` + ``install_uvicorn(server)`` + ``server.run()`` (or
    ``await server.serve()``) instead of ``uvicorn.run(...)``.  With
    ``exit_with_verdict``, end the program with ``sys.exit(termination.exit_code())``:
    uvicorn would otherwise re-raise SIGTERM and the process would exit 143.
    """
    termination = UvicornTermination(
        server,
        _detector_or_default(detector),
        on_verdict,
        record_event,
        force_exit_on_shed,
        exit_with_verdict,
    )
    termination._install()
    return termination


# --- plain programs -------------------------------------------------------------------


_WAKE = b"T"


class ThreadedTermination:
    """The SIGTERM handler and worker thread installed by :func:`install_threaded`."""

    def __init__(
        self,
        detector: Detector,
        on_verdict: Callable[[Verdict], object] | None,
        record_event: bool,
        signum: int,
    ) -> None:
        self.detector = detector
        self.signum = signum
        self._on_verdict = on_verdict
        self._record_event = record_event
        self._arrivals: list[float] = []
        self._done = threading.Event()
        self._verdict: Verdict | None = None
        self._previous: object = None
        self._read_fd, self._write_fd = os.pipe()
        os.set_blocking(self._write_fd, False)
        self._worker = threading.Thread(
            target=self._work, name="graceful-drain-termination", daemon=True
        )

    def _install(self) -> None:
        self._worker.start()
        self._previous = signal.signal(self.signum, self._on_signal)

    def uninstall(self) -> None:
        """Restore the previous handler and stop the worker (after a running detection)."""
        if signal.getsignal(self.signum) == self._on_signal:
            signal.signal(self.signum, self._previous)  # type: ignore[arg-type]
        try:
            os.close(self._write_fd)  # the worker reads end-of-file and exits
        except OSError:
            return

    @property
    def verdict(self) -> Verdict | None:
        return self._verdict

    def wait(self, timeout: float | None = None) -> Verdict | None:
        """Block until the verdict is known (or ``timeout``); never call from the handler."""
        self._done.wait(timeout)
        return self._verdict

    def join(self, timeout: float | None = None) -> bool:
        """Block until ``on_verdict`` has run and the Event (if any) is recorded."""
        self._worker.join(timeout)
        return not self._worker.is_alive()

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._arrivals.append(time.monotonic())
        with contextlib.suppress(OSError):  # pipe full (a detection is pending) or closed
            os.write(self._write_fd, _WAKE)
        previous = _chainable(self._previous)
        if previous is not None:
            previous(signum, frame)

    def _work(self) -> None:
        try:
            if os.read(self._read_fd, 1) != _WAKE:
                return
            asyncio.run(self._run(self._arrivals[0]))
        except Exception:
            log.exception("termination detection failed")
        finally:
            os.close(self._read_fd)

    async def _run(self, started: float) -> None:
        verdict = await self.detector.detect(started_at=started)
        self._verdict = verdict
        self._done.set()
        await _deliver(self.detector, verdict, self._on_verdict, self._record_event)


def install_threaded(
    on_verdict: Callable[[Verdict], object] | None,
    *,
    detector: Detector | None = None,
    record_event: bool = False,
    signum: int = signal.SIGTERM,
) -> ThreadedTermination:
    """Classify on SIGTERM in a plain program; ``on_verdict`` runs in a worker thread.

    Call from the main thread (``signal.signal`` requires it).
    """
    termination = ThreadedTermination(
        _detector_or_default(detector), on_verdict, record_event, signum
    )
    termination._install()
    return termination


def _start_thread(target: Callable[[float], None], started: float) -> None:
    threading.Thread(
        target=target, args=(started,), name="graceful-drain-termination", daemon=True
    ).start()
