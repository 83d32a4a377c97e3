"""structlog set-up: one JSON object per line (in a cluster) or readable console lines."""

from __future__ import annotations

import logging
import sys
from typing import Any, TextIO

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


def configure_logging(log_format: str = "console", level: str = "info", *,
                      stream: TextIO | None = None) -> None:  # fmt: skip
    """Route structlog (and the stdlib loggers of aiohttp and friends) to `stream`."""
    numeric = logging.getLevelNamesMapping()[level.upper()]
    output = stream or sys.stderr
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
