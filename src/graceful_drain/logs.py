"""structlog set-up: one JSON object per line (in a cluster) or readable console lines."""

from __future__ import annotations

import json
import logging
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TextIO

import msgspec
import structlog

# Loggers of the HTTP client stack that log every request at INFO.
_QUIET_LOGGERS = ("httpx", "httpx2", "httpcore", "httpcore2", "hpack")
# Tracebacks as JSON without frame locals: a frame of the webhook holds request bytes from any
# pod, and locals turn one error into kilobytes of log (structlog's default shows them).
_DICT_TRACEBACKS = structlog.processors.ExceptionRenderer(
    structlog.tracebacks.ExceptionDictTransformer(show_locals=False)
)


def get_logger(name: str) -> Any:
    """A structlog logger whose events carry `component=name`; it follows later configuration
    (a `.bind()` here would freeze the configuration of import time)."""
    return structlog.get_logger(component=name)


@dataclass(frozen=True, slots=True)
class _JsonOutput:
    stream: TextIO
    level: int


# Set by configure_logging in the "json" format: where EventLine writes directly.
_json_output: _JsonOutput | None = None
_encoder = msgspec.json.Encoder()


class EventLine:
    """A frequent info event (the webhook's one line per admission) written as the very JSON
    object the "json" format renders — component, the fields, level, timestamp, msg — without
    structlog's processor chain, which costs several times the encoding. In any other
    configuration it is an ordinary structlog event. Context variables are not merged in:
    nothing binds any."""

    def __init__(self, component: str) -> None:
        self._component = component
        self._fallback = get_logger(component)
        self._second = -1
        self._second_text = ""

    def _timestamp(self) -> str:
        """As the renderer's TimeStamper(fmt="iso", utc=True) writes it, the date and time
        formatted once per second."""
        now = time.time()
        second = int(now)
        if second != self._second:
            self._second = second
            self._second_text = datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S")
        return f"{self._second_text}.{int((now - second) * 1e6):06d}Z"

    def info(self, event: str, fields: dict[str, Any]) -> None:
        output = _json_output
        if output is None:
            self._fallback.info(event, **fields)
            return
        if output.level > logging.INFO:
            return
        record = {
            "component": self._component,
            **fields,
            "level": "info",
            "timestamp": self._timestamp(),
            "msg": event,
        }
        try:
            raw: bytes | None = _encoder.encode(record)
        except (TypeError, UnicodeEncodeError):
            raw = None
        if raw is None or not raw.isascii():
            # As the renderer does, json.dumps escapes non-ASCII and reprs what msgspec refuses.
            raw = json.dumps(record, default=repr).encode()
        output.stream.write(raw.decode() + "\n")
        output.stream.flush()


def configure_logging(log_format: str = "console", level: str = "info", *,
                      stream: TextIO | None = None) -> None:  # fmt: skip
    """Route structlog (and the stdlib loggers of aiohttp and friends) to `stream`."""
    global _json_output
    numeric = logging.getLevelNamesMapping()[level.upper()]
    output = stream or sys.stderr
    _json_output = _JsonOutput(output, numeric) if log_format == "json" else None
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: Any
    if log_format == "json":
        shared += [_DICT_TRACEBACKS, structlog.processors.EventRenamer("msg")]
        renderer = structlog.processors.JSONRenderer()
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=False)
    structlog.configure(
        processors=[*shared, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(output),
        cache_logger_on_first_use=False,
    )
    handler = logging.StreamHandler(output)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[structlog.stdlib.add_logger_name, *shared],
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(max(numeric, logging.INFO))
    for name in _QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
