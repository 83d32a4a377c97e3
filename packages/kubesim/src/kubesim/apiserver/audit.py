"""An in-memory audit log of every request, for tests to assert on."""

from __future__ import annotations

import datetime as dt
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


class AuditLog:
    def __init__(self, limit: int = 200_000) -> None:
        self._records: list[AuditRecord] = []
        self._limit = limit

    def record(self, record: AuditRecord) -> None:
        if len(self._records) >= self._limit:
            del self._records[: self._limit // 10]
        self._records.append(record)

    def records(self, user: str | None = None) -> list[AuditRecord]:
        return [r for r in self._records if user is None or r.user == user]

    def clear(self) -> None:
        self._records.clear()


def now_stamp() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
