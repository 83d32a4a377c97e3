"""Seeded, deterministic fault injection: latency, error responses, dropped watches, 410s,
and silent watches (a half-open connection: the stream stays open and carries nothing)."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

from .requestinfo import RequestInfo


@dataclass
class FaultRule:
    """Applies to requests matching every given field (None matches anything)."""

    verb: str | None = None
    resource: str | None = None
    subresource: str | None = None
    namespace: str | None = None
    name: str | None = None
    path_regex: str | None = None
    user: str | None = None
    latency_seconds: float = 0.0
    error_code: int | None = None  # 500, 503, 429, 504 ...
    probability: float = 1.0
    remaining: int | None = None  # apply at most this many times
    hang: bool = False  # never answer (until the client gives up)
    # Matching watches, open ones included, stop sending anything (events and bookmarks)
    # while the rule is installed, and never send again: the connection went half-open.
    silence_watch: bool = False
    _pattern: re.Pattern[str] | None = field(default=None, init=False, repr=False)

    def matches(self, info: RequestInfo, user: str) -> bool:
        if self.remaining is not None and self.remaining <= 0:
            return False
        if self.path_regex is not None:
            if self._pattern is None:
                self._pattern = re.compile(self.path_regex)
            if not self._pattern.search(info.path):
                return False
        checks = (
            (self.verb, info.verb),
            (self.resource, info.resource),
            (self.subresource, info.subresource),
            (self.namespace, info.namespace),
            (self.name, info.name),
            (self.user, user),
        )
        return all(want is None or want == got for want, got in checks)


@dataclass(frozen=True)
class FaultAction:
    latency_seconds: float
    error_code: int | None
    hang: bool


class FaultInjector:
    def __init__(self, seed: int = 0) -> None:
        self._rng = random.Random(seed)
        self.rules: list[FaultRule] = []

    def add(self, rule: FaultRule) -> FaultRule:
        self.rules.append(rule)
        return rule

    def remove(self, rule: FaultRule) -> None:
        if rule in self.rules:
            self.rules.remove(rule)

    def clear(self) -> None:
        self.rules.clear()

    def action_for(self, info: RequestInfo, user: str) -> FaultAction | None:
        for rule in self.rules:
            if rule.silence_watch or not rule.matches(info, user):
                continue
            if rule.probability < 1.0 and self._rng.random() >= rule.probability:
                continue
            if rule.remaining is not None:
                rule.remaining -= 1
            return FaultAction(rule.latency_seconds, rule.error_code, rule.hang)
        return None

    def watch_silenced(self, info: RequestInfo, user: str) -> bool:
        return any(rule.silence_watch and rule.matches(info, user) for rule in self.rules)
