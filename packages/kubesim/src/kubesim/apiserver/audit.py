"""An in-memory audit log of every request, for tests to assert on."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class AuditRecord:
    timestamp: str
    user: str
    groups: tuple[str, ...]
    verb: str
    api_group: str
    resource: str
    subresource: str
    name: str
    namespace: str
    code: int
    uri: str
    user_agent: str = ""

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["groups"] = list(self.groups)
        return out


Predicate = Callable[[list[AuditRecord]], bool]


class AuditLog:
    def __init__(self, limit: int = 200_000) -> None:
        self._records: list[AuditRecord] = []
        self._limit = limit
        self._waiters: list[tuple[Predicate, asyncio.Future[None]]] = []

    def record(self, record: AuditRecord) -> None:
        if len(self._records) >= self._limit:
            del self._records[: self._limit // 10]
        self._records.append(record)
        for predicate, future in self._waiters:
            if not future.done() and predicate(self._records):
                future.set_result(None)

    async def wait_for(self, predicate: Predicate) -> None:
        """Until `predicate(records)` holds, re-checked as each request is recorded (bound it
        with asyncio.timeout). The log lives on the server's event loop: call it there."""
        if predicate(self._records):
            return
        waiter = (predicate, asyncio.get_running_loop().create_future())
        self._waiters.append(waiter)
        try:
            await waiter[1]
        finally:
            self._waiters.remove(waiter)

    def records(self, user: str | None = None) -> list[AuditRecord]:
        return [r for r in self._records if user is None or r.user == user]

    def clear(self) -> None:
        self._records.clear()


def now_stamp() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
