"""structlog set-up: one JSON object per line (in a cluster) or readable console lines."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import io
import json
import logging
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, BinaryIO, TextIO, cast

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


@contextlib.contextmanager
def log_context(**fields: object) -> Iterator[None]:
    """Every line logged inside the block carries `fields` (structlog's context variables,
    merged by `configure_logging`'s processors into structlog's lines and the stdlib's alike),
    in this task and the tasks it starts meanwhile; not in other tasks, whose context is their
    own. The reconcile loop binds each reconcile's `reconcile_id` this way (kube/loop.py)."""
    with structlog.contextvars.bound_contextvars(**fields):
        yield


class _Sink(io.TextIOBase):
    """Where every log line goes: the configured stream, with the direct lines of `EventLine`
    gathered and written together once per event-loop iteration (one write for every admission
    answered in that iteration, instead of one per line). Any other line written through here
    (structlog, the stdlib handler) first writes out the gathered ones, so lines keep their
    order; outside a running event loop a direct line is written at once; at exit whatever is
    still gathered is written (atexit)."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__()
        self.stream = stream
        self._binary: BinaryIO | None = getattr(stream, "buffer", None)
        self._pending: list[bytes] = []
        self._scheduled = False

    def write(self, text: str) -> int:
        self.write_pending()
        return self.stream.write(text)

    def flush(self) -> None:
        self.write_pending()
        with contextlib.suppress(OSError, ValueError):  # closed or broken: logging must not raise
            self.stream.flush()

    def add_line(self, line: bytes) -> None:
        """One whole line (ending in a newline), written by the end of this loop iteration."""
        self._pending.append(line)
        if self._scheduled:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.write_pending()
            return
        self._scheduled = True
        loop.call_soon(self.write_pending)

    def write_pending(self) -> None:
        self._scheduled = False
        if not self._pending:
            return
        lines, self._pending = self._pending, []
        data = b"".join(lines)
        try:
            if self._binary is not None:
                # stderr's binary layer is a raw FileIO, which may write only part of a batch
                remaining = memoryview(data)
                while remaining:
                    written = self._binary.write(remaining)
                    if not written:  # None: a non-blocking stream that would block
                        break
                    remaining = remaining[written:]
                self._binary.flush()
            else:
                self.stream.write(data.decode())
                self.stream.flush()
        except (OSError, ValueError):  # a closed or broken stream: logging must not raise
            pass


@dataclass(frozen=True, slots=True)
class _JsonOutput:
    sink: _Sink
    level: int


# Set by configure_logging in the "json" format: where EventLine writes directly.
_json_output: _JsonOutput | None = None
_sinks: list[_Sink] = []  # every sink configured, written out at exit
_encoder = msgspec.json.Encoder()
_LEVEL_PARTS = {
    name: b',"level":"' + name.encode() + b'","timestamp":"' for name in ("info", "warning")
}


@atexit.register
def _write_pending_lines() -> None:
    for sink in _sinks:
        sink.write_pending()


class EventLine:
    """A frequent event (the webhook's one line per admission, at info or warning) written as
    the very JSON object the "json" format renders — component, the fields, level, timestamp,
    msg — without structlog's processor chain, which costs several times the encoding: the
    fixed parts are pre-rendered bytes, only the fields are encoded per line (msgspec), and the
    line is handed to the sink, which writes a loop iteration's lines at once. In any other
    configuration it is an ordinary structlog event. Context variables (`log_context`) are not
    merged in: the only ones bound are the reconcile loop's, in its workers, where no EventLine
    writes."""

    def __init__(self, component: str) -> None:
        self._component = component
        self._fallback = get_logger(component)
        self._head = b'{"component":' + _encoder.encode(component)
        self._second = -1
        self._second_text = b""
        self._tails: dict[str, bytes] = {}

    def _timestamp(self) -> str:
        """As the renderer's TimeStamper(fmt="iso", utc=True) writes it."""
        now = time.time()
        second = int(now)
        text = datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S")
        return f"{text}.{int((now - second) * 1e6):06d}Z"

    def info(self, event: str, fields: Mapping[str, Any] | msgspec.Struct) -> None:
        """`fields` in order: a mapping, or a struct (its UNSET fields left out, as
        `msgspec.to_builtins` gives it: cheaper to encode than a dict)."""
        self._write(logging.INFO, "info", event, fields)

    def warning(self, event: str, fields: Mapping[str, Any] | msgspec.Struct) -> None:
        """As `info`, at warning level."""
        self._write(logging.WARNING, "warning", event, fields)

    def _write(self, level: int, level_name: str, event: str,
               fields: Mapping[str, Any] | msgspec.Struct) -> None:  # fmt: skip
        output = _json_output
        if output is None:
            getattr(self._fallback, level_name)(event, **line_fields(fields))
            return
        if output.level > level:
            return
        try:
            encoded: bytes | None = _encoder.encode(fields)
        except (TypeError, UnicodeEncodeError):
            encoded = None
        if encoded is None or not encoded.isascii():
            # As the renderer does, json.dumps escapes non-ASCII and reprs what msgspec refuses.
            record = {"component": self._component, **line_fields(fields), "level": level_name,
                      "timestamp": self._timestamp(), "msg": event}  # fmt: skip
            output.sink.add_line(json.dumps(record, default=repr).encode() + b"\n")
            return
        now = time.time()
        second = int(now)
        if second != self._second:  # the date and time formatted once per second
            self._second = second
            self._second_text = (
                datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S").encode()
            )
        tail = self._tails.get(event)
        if tail is None:
            tail = self._tails[event] = b'Z","msg":' + _encoder.encode(event) + b"}\n"
        inner = encoded[1:-1]  # the fields' object without its braces
        output.sink.add_line(
            b"".join((self._head, b"," if inner else b"", inner, _LEVEL_PARTS[level_name],
                      self._second_text, b".%06d" % int((now - second) * 1e6), tail))
        )  # fmt: skip


def line_fields(fields: Mapping[str, Any] | msgspec.Struct) -> Mapping[str, Any]:
    """A log line's fields as a mapping: a struct's set fields (UNSET left out), in order."""
    if isinstance(fields, msgspec.Struct):
        mapping: dict[str, Any] = msgspec.to_builtins(fields)
        return mapping
    return fields


def configure_logging(log_format: str = "console", level: str = "info", *,
                      stream: TextIO | None = None) -> None:  # fmt: skip
    """Route structlog (and the stdlib loggers of aiohttp and friends) to `stream`."""
    global _json_output
    numeric = logging.getLevelNamesMapping()[level.upper()]
    for old in _sinks:
        old.write_pending()
    output = _Sink(stream or sys.stderr)
    _sinks[:] = [output]
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
        logger_factory=structlog.PrintLoggerFactory(cast(TextIO, output)),
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
