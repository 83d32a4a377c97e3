"""``graceful-drain termination-cause`` as a preStop hook runs it: a separate process with
the Downward API environment and the workload's credentials, against kubesim."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from graceful_drain.termination.actions import EXIT_CODES, Outcome
from graceful_drain.termination.evidence import Trigger
from graceful_drain.termination.verdict import SCHEMA
from kubesim.apiserver.faults import FaultRule
from kubesim.client import resource_path
from kubesim.cluster.nodestatus import NodeShape
from kubesim.sim import KubeSim
from kubesim.watchlog import WatchLog
from tests.e2e import cli
from tests.e2e.termination.scenario import (
    HOLD_SIGTERM_WINDOW,
    IGNORES_SIGTERM,
    KUBELET,
    NS,
    Obj,
    Workload,
    admin_client,
    events_log,
    memory_eviction,
    oom_kill,
    preemption,
    real_nodes,
)

pytestmark = pytest.mark.e2e

PROCESS_SAFETY_NET_SECONDS = 60.0  # only so that a broken deadline fails instead of hanging


@pytest.fixture
async def workload(sim: KubeSim, tmp_path: Path) -> Any:
    async with admin_client(sim) as admin:
        yield await Workload(sim, admin, tmp_path).setup()


async def run_cli(
    workload: Workload, pod: Obj, *args: str, grace_env: dict[str, str] | None = None
) -> tuple[int, str, str]:  # exit status, stdout, stderr
    """The CLI as the pod runs it; its manifest sets TERMINATION_GRACE_PERIOD_SECONDS to the
    pod's grace period (docs/termination-detector.md), unless `grace_env` replaces it."""
    if grace_env is None:
        grace_env = {"TERMINATION_GRACE_PERIOD_SECONDS": str(workload.grace_period(pod))}
    env = {"PATH": os.environ.get("PATH", ""), **workload.downward_env(pod), **grace_env}
    code, out, err = await cli.run_cli(
        "termination-cause", "--kubeconfig", str(workload.kubeconfig), *args,
        env=env, bound=PROCESS_SAFETY_NET_SECONDS,
    )  # fmt: skip
    return code, out.decode(), err.decode()


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


async def test_the_cli_reports_an_oom_kill_after_the_restart(kubelet_workload: Workload) -> None:
    async with real_nodes(kubelet_workload.admin):
        pod = await oom_kill(kubelet_workload)
        code, out, _ = await run_cli(kubelet_workload, pod, "--after-restart")
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


@pytest.fixture
async def kubelet_workload(sim: KubeSim, tmp_path: Path) -> Any:
    async with admin_client(sim) as admin:
        yield await Workload(sim, admin, tmp_path).setup(create_node=False)


def tainted(node: Obj) -> bool:
    return bool((node.get("spec") or {}).get("taints"))


@pytest.mark.parametrize("scenario", ["kubelet-eviction", "preemption", "oom-report"])
async def test_cli_and_library_give_the_same_verdict(
    kubelet_workload: Workload, scenario: str
) -> None:
    """The same cluster state, held still, read by the library and by the CLI process."""
    workload = kubelet_workload
    trigger = Trigger.SIGTERM
    # A crash back-off longer than the test keeps an OOM-killed container's lastState still.
    config = (
        HOLD_SIGTERM_WINDOW
        if scenario != "oom-report"
        else replace(KUBELET, backoff_initial=600.0, backoff_max=600.0)
    )
    shape = NodeShape(cpu="1") if scenario == "preemption" else NodeShape()
    async with real_nodes(workload.admin, shape, config) as nodes:
        events = await events_log(workload.admin)
        node_log = await WatchLog(workload.admin, "/api/v1/nodes").start()
        try:
            if scenario == "kubelet-eviction":
                name = await memory_eviction(workload, nodes, IGNORES_SIGTERM)
                pod = await workload.sigterm_delivered(events, name)
                await node_log.until(lambda _t, n: tainted(n), within=30)
            elif scenario == "preemption":
                name = await preemption(workload)
                pod = await workload.sigterm_delivered(events, name)
                await events.until(lambda _t, e: e.get("reason") == "Preempted", within=30)
            else:
                pod = await oom_kill(workload)
                trigger = Trigger.AFTER_RESTART
            args = ["--json"] + (["--after-restart"] if trigger is Trigger.AFTER_RESTART else [])

            library = (await workload.detector(pod).detect(trigger)).to_dict()
            code, out, _ = await run_cli(workload, pod, *args)
        finally:
            await events.stop()
            await node_log.stop()

    assert comparable(json.loads(out)) == comparable(library)
    assert json.loads(out)["schema"] == SCHEMA
    expected = {"involuntary_eviction": 10, "preempted": 10, "oom_killed": 0}
    assert code == expected[str(library["cause"])]


# --- v2: the deadline holds before the pod is read ------------------------------------


@pytest.mark.parametrize(
    ("env", "reads_deadline"),
    [
        ({"TERMINATION_GRACE_PERIOD_SECONDS": "4"}, "1.80s"),  # half of 4s, less the reserve
        ({"TERMINATION_GRACE_PERIOD_SECONDS": "2"}, "0.80s"),
        ({}, "1.80s"),  # nothing known: an assumed 4s grace period, not Kubernetes' 30s
    ],
    ids=["env 4", "env 2", "no env"],
)
async def test_a_hanging_pod_read_cannot_push_the_verdict_past_a_short_grace_period(
    sim: KubeSim, workload: Workload, env: dict[str, str], reads_deadline: str
) -> None:
    """Before v2 the deadline started from a 30s grace period and was only tightened once the
    pod was read: with the read hanging, a pod with 4s got its verdict after SIGKILL."""
    pod = await workload.running_pod("web-0", grace=4)
    sim.faults.add(FaultRule(hang=True))  # every request, from anyone
    code, out, _ = await run_cli(workload, pod, "--json", grace_env=env)
    verdict = json.loads(out)
    assert code == EXIT_CODES[Outcome.INDETERMINATE]
    [pod_read] = [i for i in verdict["evidence"] if i["fact"] == "pod_unavailable"]
    assert pod_read["values"]["reason"] == "timeout"
    assert (
        f"no answer within the {reads_deadline} detection deadline" in (pod_read["values"]["error"])
    )
