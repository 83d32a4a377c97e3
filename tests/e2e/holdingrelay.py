"""A TCP relay in front of a webhook that holds what a new connection's client sends, for
the tests of the webhook's budget (docs/decisions.md, "The webhook's budget"): it stands for
the time a request waits after the webhook's `accept` and before the webhook reads it (the
TLS handshake and the event loop of a CPU-starved controller).

    relay = await HoldingRelay().start()
    relay.add(webhook_port)              # the backend (one at a time is enough here)
    relay.hold = until_released          # async (Held) -> None: what each new connection waits
    ... the API server calls https://127.0.0.1:{relay.port} ...
    relay.hold = None                    # connections accepted from now on are not held
    await relay.stop()

Each connection the relay accepts is connected to the backend at once (so the webhook's
accept, where its budget starts, comes first), then `hold(held)` is awaited before anything
the client sent is relayed; what the webhook sends back is relayed at once. TLS passes
through untouched. `held` counts the connections that were held.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

_CHUNK = 64 * 1024


@dataclass
class Held:
    """One held connection, as its hold sees it."""

    number: int  # 1 for the first connection the relay held


Hold = Callable[[Held], Awaitable[None]]


@dataclass
class HoldingRelay:
    hold: Hold | None = None
    held: int = 0
    port: int = 0
    _backends: list[int] = field(default_factory=list)
    _server: asyncio.Server | None = None
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    def add(self, port: int) -> None:
        self._backends.append(port)

    def remove(self, port: int) -> None:
        with contextlib.suppress(ValueError):
            self._backends.remove(port)

    async def start(self) -> HoldingRelay:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            if not self._backends:
                return
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self._backends[-1])
            try:
                back = asyncio.create_task(_pump(up_reader, writer))
                hold = self.hold
                if hold is not None:
                    self.held += 1
                    await hold(Held(self.held))
                await _pump(reader, up_writer)
                await back
            finally:
                up_writer.close()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()
            self._tasks.discard(task)


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(_CHUNK):
            writer.write(chunk)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        writer.close()
