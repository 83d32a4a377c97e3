"""The shipped connection guard, counting what it is told of the webhook's connections: each
accept and each completed TLS handshake, with bounded waits for a count to be reached."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from graceful_drain.controller.serving.connections import ConnectionGuard, GuardedConnection


class CountingGuard(ConnectionGuard):
    def __init__(self, bound: float) -> None:
        super().__init__()
        self.bound = bound  # the longest a wait for a count may take
        self.accepted = 0
        self.handshakes = 0
        self._changed = asyncio.Event()

    def opened(self, connection: GuardedConnection, transport: asyncio.BaseTransport) -> bool:
        self.accepted += 1
        self._changed.set()
        return super().opened(connection, transport)

    def handshaken(self, connection: GuardedConnection) -> None:
        super().handshaken(connection)
        self.handshakes += 1
        self._changed.set()

    async def until_accepted(self, count: int) -> None:
        await self._until(lambda: self.accepted >= count)

    async def until_handshaken(self, count: int) -> None:
        await self._until(lambda: self.handshakes >= count)

    async def _until(self, reached: Callable[[], bool]) -> None:
        async with asyncio.timeout(self.bound):
            while not reached():
                self._changed.clear()
                await self._changed.wait()
