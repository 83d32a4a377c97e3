"""``graceful-drain termination-cause`` as a preStop hook runs it: a separate process with
the Downward API environment and the workload's credentials, against kubesim."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

import graceful_drain
from graceful_drain.termination.actions import EXIT_CODES, Outcome
from graceful_drain.termination.evidence import Trigger
from graceful_drain.termination.verdict import SCHEMA
from kubesim.apiserver.faults import FaultRule
from kubesim.client import resource_path
from kubesim.sim import KubeSim
from tests.e2e.termination.scenario import (
    MEMORY_EVICTION_MESSAGE,
    NS,
    Obj,
    Workload,
    admin_client,
)

pytestmark = pytest.mark.e2e

SRC = Path(graceful_drain.__file__).resolve().parents[1]
PROCESS_SAFETY_NET_SECONDS = 60.0  # only so that a broken deadline fails instead of hanging


@pytest.fixture
async def workload(sim: KubeSim, tmp_path: Path) -> Any:
    async with admin_client(sim) as admin:
        yield await Workload(sim, admin, tmp_path).setup()


async def run_cli(
    workload: Workload, pod: Obj, *args: str
) -> tuple[int, str, str]:  # exit status, stdout, stderr
    env = {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": str(SRC),
        **workload.downward_env(pod),
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "graceful_drain.cli", "termination-cause",
        "--kubeconfig", str(workload.kubeconfig), *args,
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        async with asyncio.timeout(PROCESS_SAFETY_NET_SECONDS):
            out, err = await process.communicate()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def comparable(document: dict[str, Any]) -> dict[str, Any]:
    """A verdict without what depends on the moment it was made (time, wording of ages)."""
    return {
        **{k: v for k, v in document.items() if k != "decided_at"},
        "evidence": [
            {k: v for k, v in item.items() if k != "detail"} for item in document["evidence"]
        ],
    }


async def test_the_cli_answers_within_its_deadline_when_the_api_hangs(
    sim: KubeSim, workload: Workload, tmp_path: Path
) -> None:
    pod = await workload.running_pod("web-0")
    sim.faults.add(FaultRule(hang=True))  # every request, from anyone
    output = tmp_path / "verdict.json"
    code, out, _ = await run_cli(
        workload, pod, "--json", "--deadline", "1", "--output", str(output)
    )
    verdict = json.loads(out)
    assert code == EXIT_CODES[Outcome.INDETERMINATE]
    assert (verdict["cause"], verdict["action"]) == ("indeterminate", "shed_load_and_exit_fast")
    unavailable = {
        item["fact"]: item["values"]
        for item in verdict["evidence"]
        if item["fact"].endswith("_unavailable")
    }
    assert set(unavailable) == {"pod_unavailable", "events_unavailable", "node_unavailable",
                                "owner_unavailable"}  # fmt: skip
    assert {values["reason"] for values in unavailable.values()} == {"timeout"}
    assert json.loads(output.read_text()) == verdict


async def test_the_cli_reports_an_oom_kill_after_the_restart(workload: Workload) -> None:
    pod = await workload.running_pod("web-0")
    await workload.kubelet_reports_oom(pod)
    code, out, _ = await run_cli(workload, pod, "--after-restart")
    assert code == EXIT_CODES[Outcome.REPORT_ONLY] == 0
    assert "cause:      oom_killed" in out
    assert "action:     report_only (exit 0)" in out


async def test_the_cli_exits_0_only_for_a_drain(workload: Workload) -> None:
    pod = await workload.running_pod("web-0")
    await workload.admin.delete(resource_path("v1", "pods", NS, "web-0"))
    code, out, _ = await run_cli(workload, pod)
    assert code == EXIT_CODES[Outcome.DRAIN_GRACEFULLY] == 0
    assert out.startswith("cause:      voluntary\naction:     drain_gracefully (exit 0)\n")


async def test_a_missing_identity_is_a_usage_error(workload: Workload) -> None:
    pod = await workload.running_pod("web-0")
    pod = {**pod, "metadata": {**pod["metadata"], "namespace": ""}}
    code, out, err = await run_cli(workload, pod)
    assert code == EXIT_CODES[Outcome.USAGE_ERROR] == 2
    assert out == ""
    assert "cannot determine this pod's namespace" in err


@pytest.mark.parametrize("scenario", ["kubelet-eviction", "preemption", "oom-report"])
async def test_cli_and_library_give_the_same_verdict(workload: Workload, scenario: str) -> None:
    pod = await workload.running_pod("batch-0")
    trigger = Trigger.SIGTERM
    if scenario == "kubelet-eviction":
        await workload.node_pressure("MemoryPressure", "node.kubernetes.io/memory-pressure")
        await workload.kubelet_evicted_event(pod, MEMORY_EVICTION_MESSAGE, "memory")
        await workload.kubelet_evicted_status(pod, MEMORY_EVICTION_MESSAGE)
    elif scenario == "preemption":
        await workload.scheduler_preempts(pod, "5f0c7a1e-critical")
    else:
        await workload.kubelet_reports_oom(pod)
        trigger = Trigger.AFTER_RESTART
    args = ["--json"] + (["--after-restart"] if trigger is Trigger.AFTER_RESTART else [])

    library = (await workload.detector(pod).detect(trigger)).to_dict()
    code, out, _ = await run_cli(workload, pod, *args)

    assert comparable(json.loads(out)) == comparable(library)
    assert json.loads(out)["schema"] == SCHEMA
    assert (
        code
        == {"involuntary_eviction": 10, "preempted": 10, "oom_killed": 0}[str(library["cause"])]
    )
