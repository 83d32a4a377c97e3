"""Prints the fault table (fault → survived, evictions wrongly allowed, recovery) at the end."""

from __future__ import annotations

from _pytest.terminal import TerminalReporter

from tests.e2e.faults.suite import ROWS, table


def pytest_terminal_summary(terminalreporter: TerminalReporter) -> None:
    if ROWS:
        terminalreporter.section("graceful-drain fault suite")
        terminalreporter.write_line(table(ROWS))
