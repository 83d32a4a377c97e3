"""The webhook Service's stand-in on loopback: a TCP proxy spreading connections over the
controller replicas that are up, round-robin, as kube-proxy spreads them over endpoints.

kube-apiserver calls the webhook at `clientConfig.url: https://127.0.0.1:PORT/...` (no
cluster network here); TLS passes through untouched. With no backend, or a backend that
refuses, the connection is closed at once, which the API server treats as a failed call
(failurePolicy: Ignore). It runs on its own thread, so it serves a whole test session
whatever event loop each test uses.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import socket
import threading
from typing import Protocol

_CHUNK = 64 * 1024


class Backends(Protocol):
    """What a controller replica registers its webhook port with while it serves: this load
    balancer, or a router standing in for it (reviewrouter.py)."""

    port: int

    def add(self, port: int) -> None: ...

    def remove(self, port: int) -> None: ...


class LoadBalancer:
    def __init__(self) -> None:
        self._backends: list[int] = []
        self._lock = threading.Lock()
        self._turn = itertools.count()
        self._loop = asyncio.new_event_loop()
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._thread = threading.Thread(target=self._run, name="webhook-service", daemon=True)
        self._started = threading.Event()
        self._stopping: asyncio.Event | None = None

    # backends ------------------------------------------------------------------------------

    def add(self, port: int) -> None:
        with self._lock:
            self._backends.append(port)

    def remove(self, port: int) -> None:
        with self._lock, contextlib.suppress(ValueError):
            self._backends.remove(port)

    def _next_backend(self) -> int | None:
        with self._lock:
            if not self._backends:
                return None
            return self._backends[next(self._turn) % len(self._backends)]

    # lifecycle -----------------------------------------------------------------------------

    def start(self) -> LoadBalancer:
        self._thread.start()
        self._started.wait(10)
        return self

    def stop(self) -> None:
        if self._stopping is not None:
            self._loop.call_soon_threadsafe(self._stopping.set)
        self._thread.join(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._serve())
        self._loop.close()

    async def _serve(self) -> None:
        self._stopping = asyncio.Event()
        server = await asyncio.start_server(self._relay, sock=self._listener)
        self._started.set()
        async with server:
            await self._stopping.wait()

    async def _relay(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        port = self._next_backend()
        try:
            if port is None:
                return
            try:
                backend_r, backend_w = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                return
            try:
                await asyncio.gather(_pipe(client_r, backend_w), _pipe(backend_r, client_w))
            finally:
                backend_w.close()
        finally:
            client_w.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError):
        while data := await reader.read(_CHUNK):
            writer.write(data)
            await writer.drain()
    with contextlib.suppress(OSError):
        if writer.can_write_eof():
            writer.write_eof()
