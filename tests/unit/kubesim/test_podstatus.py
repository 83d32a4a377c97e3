"""The kubelet's pod status generation: getPhase, conditions, lastTransitionTime (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from kubesim.cluster.podstatus import ContainerRecord, PodRecord, pod_phase, render_status

Obj = dict[str, Any]
T0, T1 = "2024-01-01T00:00:00Z", "2024-01-01T00:00:05Z"


def running(name: str = "app", ready: bool = True) -> ContainerRecord:
    return ContainerRecord(name, "nginx", "running", "", started_at=T0, ready=ready,
                           container_id="containerd://x")  # fmt: skip


def terminated(code: int, name: str = "app") -> ContainerRecord:
    return ContainerRecord(name, "nginx", "terminated", "Completed" if code == 0 else "Error",
                           exit_code=code, container_id="containerd://x")  # fmt: skip


def crash_looping() -> ContainerRecord:
    c = ContainerRecord("app", "nginx", "waiting", "CrashLoopBackOff")
    c.last_terminated = {"exitCode": 1, "reason": "Error"}
    return c


def the_pod(restart_policy: str = "Always", **status: Any) -> Obj:
    return {"metadata": {"name": "p", "namespace": "default", "uid": "u"},
            "spec": {"restartPolicy": restart_policy, "containers": [{"name": "app"}]},
            "status": {"phase": "Pending", "qosClass": "BestEffort", **status}}  # fmt: skip


@pytest.mark.parametrize(
    ("containers", "policy", "terminal", "phase"),
    [
        ([ContainerRecord("app", "nginx")], "Always", False, "Pending"),
        ([running()], "Always", False, "Running"),
        ([running(), ContainerRecord("b", "x")], "Always", False, "Pending"),
        ([crash_looping()], "Always", False, "Running"),
        ([terminated(1)], "Always", False, "Running"),  # about to restart
        ([terminated(0)], "Never", False, "Succeeded"),
        ([terminated(1)], "Never", False, "Failed"),
        ([terminated(1)], "OnFailure", False, "Running"),
        ([terminated(0)], "Always", True, "Succeeded"),  # deleted pod whose process exited 0
        ([terminated(137)], "Always", True, "Failed"),  # killed at the grace deadline
        ([terminated(0), terminated(137, "b")], "Always", True, "Failed"),
        ([running(), terminated(0, "b")], "Never", False, "Running"),
    ],
)
def test_get_phase(containers: list[ContainerRecord], policy: str, terminal: bool,
                   phase: str) -> None:  # fmt: skip
    record = PodRecord(containers=containers, terminal=terminal)
    assert pod_phase({"restartPolicy": policy}, record) == phase


def conditions(status: Obj) -> dict[str, Obj]:
    return {c["type"]: c for c in status["conditions"]}


def test_pending_pod_conditions_and_container_status() -> None:
    record = PodRecord([ContainerRecord("app", "nginx")], host_ip="10.0.0.2", start_time=T0)
    status = render_status(the_pod(), record, T0)
    assert status["phase"] == "Pending"
    assert [c["type"] for c in status["conditions"]] == [
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
    ]
    by_type = conditions(status)
    assert by_type["PodReadyToStartContainers"]["status"] == "False"
    assert by_type["Initialized"]["status"] == "True"
    for kind in ("Ready", "ContainersReady"):
        assert by_type[kind] == {
            "type": kind,
            "status": "False",
            "lastProbeTime": None,
            "lastTransitionTime": T0,
            "reason": "ContainersNotReady",
            "message": "containers with unready status: [app]",
        }
    assert status["containerStatuses"] == [
        {
            "name": "app",
            "state": {"waiting": {"reason": "ContainerCreating"}},
            "lastState": {},
            "ready": False,
            "restartCount": 0,
            "image": "nginx",
            "imageID": "",
            "started": False,
        }
    ]
    assert "podIP" not in status and status["hostIPs"] == [{"ip": "10.0.0.2"}]
    assert status["qosClass"] == "BestEffort" and status["startTime"] == T0


def test_last_transition_time_kept_while_status_unchanged() -> None:
    record = PodRecord([running(ready=False)], sandbox_ready=True, pod_ip="10.244.0.2")
    first = render_status(the_pod(), record, T0)
    record.containers[0].ready = True
    second = render_status(the_pod(**first), record, T1)
    by_type = conditions(second)
    assert by_type["PodReadyToStartContainers"]["lastTransitionTime"] == T0
    assert by_type["Ready"] == {"type": "Ready", "status": "True", "lastProbeTime": None,
                                "lastTransitionTime": T1}  # fmt: skip
    assert render_status(the_pod(**second), record, "2030-01-01T00:00:00Z") == second


def test_terminal_phase_conditions_and_kubelet_disruption_target() -> None:
    record = PodRecord([terminated(0)], terminal=True, force_phase="Failed", reason="Evicted",
                       message="low", disruption={"type": "DisruptionTarget", "status": "True",
                                                  "reason": "TerminationByKubelet",
                                                  "message": "low"})  # fmt: skip
    status = render_status(the_pod(phase="Running"), record, T1)
    assert status["phase"] == "Failed"
    assert (status["reason"], status["message"]) == ("Evicted", "low")
    assert status["conditions"][0] == {
        "type": "DisruptionTarget",
        "status": "True",
        "lastProbeTime": None,
        "lastTransitionTime": T1,
        "reason": "TerminationByKubelet",
        "message": "low",
    }
    by_type = conditions(status)
    assert by_type["Ready"]["reason"] == by_type["ContainersReady"]["reason"] == "PodFailed"
    assert by_type["PodReadyToStartContainers"]["status"] == "False"


def test_disruption_target_waits_for_the_terminal_phase() -> None:
    record = PodRecord([running()], disruption={"type": "DisruptionTarget", "status": "True"})
    status = render_status(the_pod(phase="Running"), record, T1)
    assert "DisruptionTarget" not in conditions(status)


def test_conditions_set_by_others_are_kept_first() -> None:
    scheduler_condition = {"type": "DisruptionTarget", "status": "True",
                           "reason": "PreemptionByScheduler", "lastTransitionTime": T0}  # fmt: skip
    status = render_status(the_pod(phase="Running", conditions=[scheduler_condition]),
                           PodRecord([running()], sandbox_ready=True), T1)  # fmt: skip
    assert status["conditions"][0] == scheduler_condition


def test_readiness_gates() -> None:
    p = the_pod(phase="Running")
    p["spec"]["readinessGates"] = [{"conditionType": "example.com/lb"}]
    record = PodRecord([running()], sandbox_ready=True)
    ready = conditions(render_status(p, record, T0))["Ready"]
    assert ready["reason"] == "ReadinessGatesNotReady"
    assert ready["message"] == (
        'corresponding condition of pod readiness gate "example.com/lb" does not exist.'
    )
    p["status"]["conditions"] = [{"type": "example.com/lb", "status": "True"}]
    assert conditions(render_status(p, record, T0))["Ready"]["status"] == "True"


def test_pods_never_leave_a_terminal_phase() -> None:
    status = render_status(the_pod(phase="Failed", reason="Evicted", message="m"),
                           PodRecord([running()]), T0)  # fmt: skip
    assert (status["phase"], status["reason"], status["message"]) == ("Failed", "Evicted", "m")


def test_rejected_pod_status() -> None:
    message = "Pod was rejected: The node had condition: [DiskPressure]. "
    record = PodRecord([], rejected=True, reason="Evicted", message=message)
    assert render_status(the_pod(), record, T0) == {
        "phase": "Failed", "reason": "Evicted",
        "message": message,
        "qosClass": "BestEffort", "conditions": []}  # fmt: skip


def test_container_status_after_restart_shows_last_state() -> None:
    c = running()
    c.restart_count = 1
    c.last_terminated = {"exitCode": 137, "reason": "OOMKilled"}
    out = c.to_status()
    assert out["lastState"] == {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}
    assert out["restartCount"] == 1 and out["started"] is True
