"""Prints the fault table (fault → survived, evictions wrongly allowed, recovery) at the end;
a pytest-xdist worker sends its rows to the controlling process instead (tests/conftest.py),
which prints them all in one table."""

from __future__ import annotations

import dataclasses

import pytest
from _pytest.terminal import TerminalReporter

from tests.conftest import FAULT_ROWS, send_to_controller
from tests.e2e.faults.suite import ROWS, table


def pytest_sessionfinish(session: pytest.Session) -> None:
    send_to_controller(session.config, FAULT_ROWS, [dataclasses.astuple(row) for row in ROWS])


def pytest_terminal_summary(terminalreporter: TerminalReporter) -> None:
    if ROWS and not hasattr(terminalreporter.config, "workeroutput"):
        terminalreporter.section("graceful-drain fault suite")
        terminalreporter.write_line(table(ROWS))
