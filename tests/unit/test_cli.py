"""`graceful-drain --version`: the installed distribution's version, through the console
script's module as a user runs it; `termination-cause` runs with the cyclic garbage collector
paused."""

from __future__ import annotations

import argparse
import gc
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from graceful_drain import cli, completion
from graceful_drain.termination import cli as termination_cli

REPO = Path(__file__).resolve().parents[2]


def test_version_is_the_one_pyproject_declares() -> None:
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    result = subprocess.run(
        [sys.executable, "-m", "graceful_drain.cli", "--version"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"graceful-drain {declared}\n"


def _collector_while_running(monkeypatch: pytest.MonkeyPatch, argv: list[str]) -> bool:
    """Whether the cyclic garbage collector was on while `argv`'s subcommand ran."""
    seen: list[bool] = []

    def run(_args: argparse.Namespace) -> int:
        seen.append(gc.isenabled())
        return 0

    def script(*_args: object) -> str:
        seen.append(gc.isenabled())
        return ""

    monkeypatch.setattr(termination_cli, "run_process", run)
    monkeypatch.setattr(completion, "script", script)
    assert cli.main(argv) == 0
    assert gc.isenabled(), "the collector is restored after the command"
    [enabled] = seen
    return enabled


def test_the_detector_runs_with_the_cyclic_collector_paused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A detection is a short process in a pod's grace period: the collector is paused from
    the parser's build (the detector's imports) to the verdict. The control: another
    subcommand runs with it on."""
    assert gc.isenabled()
    assert not _collector_while_running(monkeypatch, ["termination-cause"])
    assert _collector_while_running(monkeypatch, ["completion", "bash"])
