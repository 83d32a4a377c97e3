"""The process's logging configuration, put back as it was after a test that configures it
(`configure_logging` replaces structlog's configuration, the root handlers and the direct JSON
output of `EventLine`)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

import structlog

from graceful_drain import logs


@contextmanager
def logging_restored() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level, json_output = root.handlers[:], root.level, logs._json_output
    logs._json_output = None
    try:
        yield
    finally:
        structlog.reset_defaults()
        root.handlers[:] = handlers
        root.setLevel(level)
        logs._json_output = json_output
