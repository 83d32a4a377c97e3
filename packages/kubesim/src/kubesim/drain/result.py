"""What a drain client did: its timeline of output lines and the outcome.

Each client writes the lines its upstream counterpart prints or logs
(`kubectl drain` on stdout/stderr, Karpenter and Cluster Autoscaler in their
logs), stamped with the client's injected clock, so tests and scenarios read
a drain the way an operator reads its output.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol

Clock = Callable[[], float]
Stream = Literal["stdout", "stderr", "log"]


@dataclass(frozen=True, slots=True)
class LogLine:
    at: float
    stream: Stream
    text: str


class DrainLog:
    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.lines: list[LogLine] = []

    def out(self, text: str) -> None:
        self.lines.append(LogLine(self.clock(), "stdout", text))

    def err(self, text: str) -> None:
        self.lines.append(LogLine(self.clock(), "stderr", text))

    def log(self, text: str) -> None:
        self.lines.append(LogLine(self.clock(), "log", text))

    def texts(self, stream: Stream | None = None) -> list[str]:
        return [line.text for line in self.lines if stream is None or line.stream == stream]


@dataclass(frozen=True)
class DrainResult:
    """The outcome of one `drain(node)` call.

    `evicted` left through the Eviction API, `deleted` through a direct DELETE;
    `remaining` were still on the node when the client gave up. `attempts`
    counts eviction requests per pod ("namespace/name"), `rejections` the 429s.
    """

    client: str
    node: str
    drained: bool
    error: str | None
    started: float
    finished: float
    evicted: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()
    remaining: tuple[str, ...] = ()
    attempts: Mapping[str, int] = field(default_factory=dict)
    rejections: Mapping[str, int] = field(default_factory=dict)
    log: tuple[LogLine, ...] = ()

    def texts(self, stream: Stream | None = None) -> list[str]:
        return [line.text for line in self.log if stream is None or line.stream == stream]


class DrainClient(Protocol):
    name: str

    async def drain(self, node: str) -> DrainResult: ...
