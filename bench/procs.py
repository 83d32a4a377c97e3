"""Child processes for the benchmarks: fresh interpreters (spawn), a pipe each, bounded waits.

Every benchmark process is spawned, never forked: it starts with nothing the parent built, so
memory figures are its own and no event loop is shared. Waits are bounded; a child that
overruns is killed (by its own pid) and reported as an error.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import subprocess
import sys
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.context import SpawnProcess
from pathlib import Path
from typing import Any

_SPAWN = multiprocessing.get_context("spawn")
ROOT = Path(__file__).resolve().parent.parent  # where `python -m bench...` finds bench


class ChildFailed(RuntimeError):
    pass


class Child:
    """One spawned process running `target(connection, *args)`."""

    def __init__(
        self, name: str, target: Callable[..., None], *args: Any, daemon: bool = True
    ) -> None:
        """`daemon=False` for a child that starts children of its own (it is then not killed
        with the parent: `finish` must reap it)."""
        self.name = name
        parent, child = _SPAWN.Pipe()
        self.connection: Connection = parent
        self.process: SpawnProcess = _SPAWN.Process(
            target=target, args=(child, *args), name=name, daemon=daemon
        )
        self.process.start()
        child.close()

    def receive(self, timeout: float) -> Any:
        """The next message; ChildFailed if none comes in time or the child died."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ChildFailed(f"{self.name}: no answer within {timeout:.0f}s")
            try:
                if self.connection.poll(min(remaining, 0.5)):
                    message = self.connection.recv()
                    if isinstance(message, ChildError):
                        raise ChildFailed(f"{self.name} failed: {message.text}")
                    return message
            except (EOFError, OSError):
                raise ChildFailed(f"{self.name} exited (code {self._exit_code()})") from None
            if not self._alive() and not self.connection.poll(0):
                raise ChildFailed(f"{self.name} exited (code {self._exit_code()})")

    def _alive(self) -> bool:
        return self.process.is_alive()

    def _exit_code(self) -> int | None:
        return self.process.exitcode

    def ask(self, message: Any, timeout: float) -> Any:
        self.connection.send(message)
        return self.receive(timeout)

    def finish(self, timeout: float = 10.0) -> None:
        """Wait for the child to exit; kill it (by its pid) if it does not."""
        self.process.join(timeout)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(5)
        self.connection.close()


class Subprocess(Child):
    """`python -m module FD` in a plain subprocess (`environment` its whole environment), on
    Child's protocol over a socket pair: for a child that must not import what a spawned one
    would (the parent's `__main__`, and so this checkout's product). `first` is sent at once;
    the child builds its end with `multiprocessing.connection.Connection(FD)`."""

    def __init__(self, name: str, module: str, first: Any, environment: dict[str, str]) -> None:
        self.name = name
        parent, child = _SPAWN.Pipe()
        self.connection = parent
        descriptor = child.fileno()
        self.popen = subprocess.Popen(
            [sys.executable, "-m", module, str(descriptor)],
            pass_fds=(descriptor,), env=environment, cwd=ROOT,
        )  # fmt: skip
        child.close()
        parent.send(first)

    def _alive(self) -> bool:
        return self.popen.poll() is None

    def _exit_code(self) -> int | None:
        return self.popen.poll()

    def finish(self, timeout: float = 10.0) -> None:
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()  # by its own pid
            self.popen.wait(5)
        self.connection.close()


class ChildError:
    """Sent by a child whose work raised, so the parent fails fast with the reason."""

    def __init__(self, text: str) -> None:
        self.text = text


def run_child(connection: Connection, main: Coroutine[Any, Any, None], *, uvloop: bool) -> None:
    """Run a child's coroutine on its own loop (uvloop when asked), reporting a failure."""
    try:
        if uvloop:
            import uvloop as _uvloop

            _uvloop.run(main)
        else:
            asyncio.run(main)
    except BaseException as error:
        with contextlib.suppress(OSError):
            connection.send(ChildError(f"{type(error).__name__}: {error}"))
        raise


async def receive_async(connection: Connection) -> Any:
    """A message from the parent without blocking the child's event loop."""
    return await asyncio.get_running_loop().run_in_executor(None, connection.recv)


def rss_bytes(pid: int | None = None) -> int:
    """Resident set size of process `pid` (this one by default), from /proc (Linux)."""
    path = f"/proc/{os.getpid() if pid is None else pid}/status"
    with open(path, encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"VmRSS not found in {path}")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds process `pid` has used so far, from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        # the command name (field 2) may hold spaces: the fields after its ')' are fixed
        fields = stat.read().rpartition(")")[2].split()
    utime, stime = int(fields[11]), int(fields[12])  # fields 14 and 15 of proc(5)
    return (utime + stime) / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Usage:
    cpu_seconds: float
    rss_max_bytes: int


class UsageSampler:
    """Another process's CPU seconds and peak RSS over a window (`async with`), its RSS read
    every `interval` seconds and at both ends."""

    def __init__(self, pid: int, interval: float = 0.25) -> None:
        self.pid = pid
        self.interval = interval
        self._cpu_start = 0.0
        self._rss_max = 0
        self._task: asyncio.Task[None] | None = None
        self.usage: Usage | None = None

    async def _sample(self) -> None:
        while True:
            self._rss_max = max(self._rss_max, rss_bytes(self.pid))
            await asyncio.sleep(self.interval)  # a sampling period, not a synchronisation

    async def __aenter__(self) -> UsageSampler:
        self._cpu_start = cpu_seconds(self.pid)
        self._rss_max = rss_bytes(self.pid)
        self._task = asyncio.get_running_loop().create_task(self._sample())
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self.usage = Usage(cpu_seconds(self.pid) - self._cpu_start,
                           max(self._rss_max, rss_bytes(self.pid)))  # fmt: skip
