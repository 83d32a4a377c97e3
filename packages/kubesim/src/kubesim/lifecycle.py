"""Starting and stopping kubesim's long-running parts: `async with`, and ending their tasks."""

from __future__ import annotations

import asyncio
import contextlib
from abc import ABC, abstractmethod
from types import TracebackType
from typing import Any, Self


class Lifecycle(ABC):
    @abstractmethod
    async def start(self) -> Self: ...

    @abstractmethod
    async def stop(self) -> None: ...

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()


async def cancel_and_wait(*tasks: asyncio.Task[Any] | None) -> None:
    """Cancel the tasks, then wait for each to end: a CancelledError is expected and swallowed,
    any other error a task ended with is raised."""
    live = [task for task in tasks if task is not None]
    for task in live:
        task.cancel()
    for task in live:
        with contextlib.suppress(asyncio.CancelledError):
            await task
