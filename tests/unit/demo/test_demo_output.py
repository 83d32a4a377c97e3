"""What `graceful-drain demo` prints, text and --json, around recorded runs (no cluster)."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import TextIO

import pytest

from graceful_drain.demo import run as demo_run
from graceful_drain.demo.live import print_timeline
from graceful_drain.demo.options import DemoOptions
from graceful_drain.demo.timeline import EvictionAttempt, RunRecord

POD = "default/web-1"
WITH = RunRecord(
    client="kubectl", node="node-a", deployment="default/web", with_controller=True,
    started=0.0, finished=5.3, error=None, settled=5.4,
    evictions=(EvictionAttempt(0.2, POD, 429, "held"), EvictionAttempt(5.2, POD, 201)),
    ready=((-5.0, 1), (3.9, 2), (5.25, 1)), replicasets=((0.3, "web-new"),),
)  # fmt: skip
WITHOUT = replace(
    WITH, with_controller=False, finished=1.0, settled=3.7,
    evictions=(EvictionAttempt(0.05, POD, 201),), ready=((-5.0, 1), (0.07, 0), (3.6, 1)),
    replicasets=(),
)  # fmt: skip


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Replace the cluster runs by the records above; returns the with_controller flags used."""
    calls: list[bool] = []

    async def fake_run_once(options: DemoOptions, *, with_controller: bool, workdir: Path,
                            out: TextIO | None = None) -> RunRecord:  # fmt: skip
        calls.append(with_controller)
        record = WITH if with_controller else WITHOUT
        if out is not None:  # what run_once's live timeline prints at the end at the latest
            print_timeline(out, record)
        return record

    monkeypatch.setattr(demo_run, "run_once", fake_run_once)
    return calls


async def test_text_with_compare(recorded: list[bool]) -> None:
    out = io.StringIO()
    code = await demo_run.demo(DemoOptions(compare=True), out)
    text = out.getvalue()
    assert code == 0 and recorded == [True, False]
    assert "\nwith the graceful-drain controller\n" in text
    assert "\nwithout the controller (the same drain, nothing installed)\n" in text
    for line in (
        f"   0.20s  eviction of {POD} refused (429): held",
        "   0.30s  rollout started: new ReplicaSet web-new",
        "   3.90s  surge pod Ready: web has 2 Ready pods",
        f"   5.20s  eviction of {POD} allowed after 1 refusal",
        "   5.30s  node node-a drained",
        "   0.07s  web has no Ready pod: outage begins",
        "  time with no Ready pod      0.00s                3.53s",
    ):
        assert line in text.splitlines(), line


async def test_json_alone_is_one_object(recorded: list[bool]) -> None:
    out = io.StringIO()
    code = await demo_run.demo(DemoOptions(json=True, client="karpenter"), out)
    assert code == 0 and recorded == [True]
    document = json.loads(out.getvalue())
    assert document == {
        "client": "karpenter",
        "with_controller": {"drain_completed": True, "drain_seconds": 5.3,
                            "zero_ready_seconds": 0.0, "rollouts": 1},
    }  # fmt: skip


async def test_an_incomplete_drain_exits_1(
    recorded: list[bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    async def unfinished(options: DemoOptions, *, with_controller: bool, workdir: Path,
                         out: TextIO | None = None) -> RunRecord:  # fmt: skip
        return replace(WITH, finished=None, settled=40.0)

    monkeypatch.setattr(demo_run, "run_once", unfinished)
    out = io.StringIO()
    assert await demo_run.demo(DemoOptions(json=True, ready_delay=timedelta(0)), out) == 1
    assert json.loads(out.getvalue())["with_controller"]["drain_completed"] is False
