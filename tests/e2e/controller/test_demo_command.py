"""`graceful-drain demo` for real: kubesim, the controller and a drain client in one process."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from graceful_drain.demo.options import DemoOptions
from graceful_drain.demo.run import run_once
from graceful_drain.demo.timeline import (
    DRAIN_FINISHED,
    EVICTION_REFUSED,
    OUTAGE_STARTED,
    ROLLOUT_STARTED,
    SURGE_READY,
    timeline,
)

pytestmark = pytest.mark.e2e


SRC = Path(__file__).resolve().parents[3] / "src"
BOUND = 120.0  # a guard against hangs only


def test_json_with_compare_shows_the_outage_the_controller_avoids() -> None:
    """The command as a process: stdout is one JSON document, nothing else (logs go to stderr)."""
    done = subprocess.run(
        [sys.executable, "-m", "graceful_drain.cli", "demo", "--json", "--compare",
         "--ready-delay", "1s"],
        capture_output=True, text=True, timeout=BOUND,
        env={**os.environ, "PYTHONPATH": str(SRC)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["client"] == "kubectl"
    protected, unprotected = document["with_controller"], document["without_controller"]
    assert protected["drain_completed"] and unprotected["drain_completed"]
    assert protected["zero_ready_seconds"] == 0
    assert protected["rollouts"] == 1
    assert unprotected["zero_ready_seconds"] > 0
    assert unprotected["rollouts"] == 0
    assert protected["drain_seconds"] > 0 and unprotected["drain_seconds"] > 0


async def test_the_timeline_tells_the_eviction_dance(tmp_path: Path) -> None:
    options = DemoOptions(client="karpenter", ready_delay=timedelta(milliseconds=500))
    record = await run_once(options, with_controller=True, workdir=tmp_path)
    kinds = [entry.kind for entry in timeline(record)]
    story = [EVICTION_REFUSED, ROLLOUT_STARTED, SURGE_READY, DRAIN_FINISHED]
    assert [kind for kind in kinds if kind in story][:1] == [EVICTION_REFUSED]
    for earlier, later in itertools.pairwise(story):
        assert kinds.index(earlier) < kinds.index(later), (earlier, later, kinds)
    assert OUTAGE_STARTED not in kinds
    assert {event.reason for event in record.events} >= {
        "GracefulDrainStarted", "GracefulDrainCompleted",
    }  # fmt: skip


def test_the_text_timeline_is_printed_as_the_drain_happens() -> None:
    """The command as a process, text mode, as ./scripts/demo runs it (--compare): the held
    eviction, then progress lines while the replacement gets Ready (only a timeline printed
    during the run has them), then the drain's end, then the summary. Each run's output ends
    with its outcome: no progress line after "node drained", though the run without the
    controller then waits seconds for its pod to be Ready again."""
    done = subprocess.run(
        [sys.executable, "-m", "graceful_drain.cli", "demo", "--compare", "--ready-delay", "6s"],
        capture_output=True, text=True, timeout=BOUND,
        env={**os.environ, "PYTHONPATH": str(SRC)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()

    def first(text: str) -> int:
        return next(index for index, line in enumerate(lines) if text in line)

    refused = first("refused (429)")
    waiting = first("... drain of node-a running: web has 1 Ready pod")
    drained = first("node node-a drained")
    assert refused < waiting < drained, done.stdout
    assert "eviction refused so far" in lines[waiting]
    without, summary = first("without the controller"), first("summary")
    drained_again = without + lines[without:].index(
        next(line for line in lines[without:] if "node node-a drained" in line)
    )
    assert sum("node node-a drained" in line for line in lines) == 2  # once a run
    assert drained < without < drained_again < summary
    for after_drain in (lines[drained:without], lines[drained_again:summary]):
        assert not [line for line in after_drain if "... drain of" in line], done.stdout
