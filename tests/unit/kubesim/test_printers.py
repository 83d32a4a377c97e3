"""kube-apiserver's Table cells for Pods, Deployments, ReplicaSets and Nodes (pure), cases
after printers_test.go's TestPrintPod, TestPrintNodeStatus and friends."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from kubesim.apiserver import printer_columns
from kubesim.apiserver.printers import (
    format_hpa_metrics,
    print_deployment,
    print_generic,
    print_horizontal_pod_autoscaler,
    print_node,
    print_pod,
    print_replica_set,
)

Obj = dict[str, Any]
NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
CREATED = "2026-01-01T11:57:00Z"  # 3m before NOW
RESTARTED = "2026-01-01T11:59:00Z"  # 1m before NOW


def pod(status: Obj, *, spec: Obj | None = None, deleting: bool = False) -> Obj:
    meta: Obj = {"name": "p", "creationTimestamp": CREATED}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T11:59:30Z"
    containers = [{"name": "a", "image": "i"}, {"name": "b", "image": "i"}]
    return {"metadata": meta, "spec": spec or {"containers": containers}, "status": status}


def running(ready: bool = True, restarts: int = 0, finished: str | None = None) -> Obj:
    status: Obj = {"name": "a", "ready": ready, "restartCount": restarts,
                   "state": {"running": {"startedAt": CREATED}}}  # fmt: skip
    if finished:
        status["lastTerminationState"] = {"terminated": {"exitCode": 1, "finishedAt": finished}}
    return status


def waiting(reason: str) -> Obj:
    return {
        "name": "a",
        "ready": False,
        "restartCount": 0,
        "state": {"waiting": {"reason": reason}},
    }


def terminated(exit_code: int, reason: str = "", signal: int = 0) -> Obj:
    state: Obj = {"exitCode": exit_code, "reason": reason, "signal": signal}
    return {"name": "a", "ready": False, "restartCount": 0, "state": {"terminated": state}}


READY = [{"type": "Ready", "status": "True"}]


@pytest.mark.parametrize(
    ("case", "obj", "ready", "status", "restarts"),
    [
        ("pending, no statuses", pod({"phase": "Pending"}), "0/2", "Pending", "0"),
        ("status reason wins over phase", pod({"phase": "Failed", "reason": "Evicted"}),
         "0/2", "Evicted", "0"),
        ("scheduling gated",
         pod({"phase": "Pending",
              "conditions": [{"type": "PodScheduled", "reason": "SchedulingGated"}]}),
         "0/2", "SchedulingGated", "0"),
        ("two running, one ready",
         pod({"phase": "Running", "containerStatuses": [running(), running(ready=False)]}),
         "1/2", "Running", "0"),
        ("waiting reason",
         pod({"phase": "Running",
              "containerStatuses": [running(), waiting("ContainerCreating")]}),
         "1/2", "ContainerCreating", "0"),
        ("terminated with reason",
         pod({"phase": "Running", "containerStatuses": [terminated(1, "Error")]}),
         "0/2", "Error", "0"),
        ("terminated by a signal", pod({"phase": "Running",
                                        "containerStatuses": [terminated(137, signal=9)]}),
         "0/2", "Signal:9", "0"),
        ("terminated, exit code", pod({"phase": "Running",
                                       "containerStatuses": [terminated(2)]}),
         "0/2", "ExitCode:2", "0"),
        ("completed while another runs: Running when Ready",
         pod({"phase": "Running", "conditions": READY,
              "containerStatuses": [terminated(0, "Completed"), running()]}),
         "1/2", "Running", "0"),
        ("completed while another runs: NotReady otherwise",
         pod({"phase": "Running", "containerStatuses": [terminated(0, "Completed"), running()]}),
         "1/2", "NotReady", "0"),
        ("restarts with the last one's age",
         pod({"phase": "Running",
              "containerStatuses": [running(restarts=3, finished=RESTARTED)]}),
         "1/2", "Running", "3 (60s ago)"),
        ("deleting", pod({"phase": "Running", "containerStatuses": [running()]}, deleting=True),
         "1/2", "Terminating", "0"),
        ("deleting a terminal pod keeps its phase",
         pod({"phase": "Succeeded"}, deleting=True), "0/2", "Succeeded", "0"),
        ("deleting on a lost node", pod({"phase": "Running", "reason": "NodeLost"}, deleting=True),
         "0/2", "Unknown", "0"),
        ("init container waiting",
         pod({"phase": "Pending",
              "initContainerStatuses": [{"name": "init", "restartCount": 0,
                                         "state": {"waiting": {"reason": "PodInitializing"}}}]},
             spec={"initContainers": [{"name": "init"}], "containers": [{"name": "a"}]}),
         "0/1", "Init:0/1", "0"),
        ("init container crash looping",
         pod({"phase": "Pending",
              "initContainerStatuses": [{"name": "init", "restartCount": 2,
                                         "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]},
             spec={"initContainers": [{"name": "init"}], "containers": [{"name": "a"}]}),
         "0/1", "Init:CrashLoopBackOff", "2"),
        ("init container failed",
         pod({"phase": "Pending",
              "initContainerStatuses": [{"name": "init", "restartCount": 0,
                                         "state": {"terminated": {"exitCode": 3}}}]},
             spec={"initContainers": [{"name": "init"}], "containers": [{"name": "a"}]}),
         "0/1", "Init:ExitCode:3", "0"),
        ("sidecar counts as a container and its readiness",
         pod({"phase": "Running", "conditions": [{"type": "Initialized", "status": "True"}],
              "initContainerStatuses": [{"name": "side", "restartCount": 1, "started": True,
                                         "ready": True, "state": {"running": {}}}],
              "containerStatuses": [running()]},
             spec={"initContainers": [{"name": "side", "restartPolicy": "Always"}],
                   "containers": [{"name": "a"}]}),
         "2/2", "Running", "1"),
    ],
)  # fmt: skip
def test_pod_ready_status_restarts(case: str, obj: Obj, ready: str, status: str,
                                   restarts: str) -> None:  # fmt: skip
    cells = print_pod(obj, NOW).cells
    assert cells[1:5] == [ready, status, restarts, "3m"], case


def test_pod_wide_cells() -> None:
    bare = print_pod(pod({"phase": "Pending"}), NOW).cells
    assert bare[5:] == ["<none>", "<none>", "<none>", "<none>"]
    placed = pod(
        {"phase": "Running", "podIPs": [{"ip": "10.0.0.7"}, {"ip": "fd00::7"}],
         "nominatedNodeName": "n2",
         "conditions": [{"type": "gate/a", "status": "True"},
                        {"type": "gate/b", "status": "False"}]},
        spec={"containers": [{"name": "a"}], "nodeName": "n1",
              "readinessGates": [{"conditionType": "gate/a"}, {"conditionType": "gate/b"},
                                 {"conditionType": "gate/c"}]},
    )  # fmt: skip
    assert print_pod(placed, NOW).cells[5:] == ["10.0.0.7", "n1", "n2", "1/3"]


@pytest.mark.parametrize(
    ("phase", "conditions"),
    [
        ("Running", []),
        ("Succeeded", [{"type": "Completed", "status": "True", "reason": "Succeeded",
                        "message": "The pod has completed successfully."}]),
        ("Failed", [{"type": "Completed", "status": "True", "reason": "Failed",
                     "message": "The pod failed."}]),
    ],
)  # fmt: skip
def test_pod_row_conditions(phase: str, conditions: list[Obj]) -> None:
    assert print_pod(pod({"phase": phase}), NOW).conditions == conditions


TEMPLATE = {"spec": {"containers": [{"name": "web", "image": "nginx:1"},
                                    {"name": "log", "image": "busybox"}]}}  # fmt: skip
SELECTOR = {
    "matchLabels": {"app": "web", "tier": "a"},
    "matchExpressions": [{"key": "env", "operator": "In", "values": ["prod", "dev"]}],
}


def test_deployment_cells() -> None:
    deployment = {
        "metadata": {"name": "web", "creationTimestamp": CREATED},
        "spec": {"replicas": 3, "selector": SELECTOR, "template": TEMPLATE},
        "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 1},
    }
    assert print_deployment(deployment, NOW).cells == [
        "web", "2/3", 3, 1, "3m", "web,log", "nginx:1,busybox",
        "app=web,env in (dev,prod),tier=a",
    ]  # fmt: skip
    fresh = {"metadata": {"name": "web", "creationTimestamp": CREATED},
             "spec": {"replicas": 1, "selector": {}, "template": TEMPLATE}}  # fmt: skip
    assert print_deployment(fresh, NOW).cells[1:4] == ["0/1", 0, 0]
    assert print_deployment(fresh, NOW).cells[7] == ""


def test_replica_set_cells() -> None:
    rs: Obj = {
        "metadata": {"name": "web-1", "creationTimestamp": CREATED},
        "spec": {"replicas": 3, "selector": SELECTOR, "template": TEMPLATE},
        "status": {"replicas": 3, "readyReplicas": 1},
    }
    assert print_replica_set(rs, NOW).cells == [
        "web-1", 3, 3, 1, "3m", "web,log", "nginx:1,busybox", "app=web,env in (dev,prod),tier=a",
    ]  # fmt: skip
    empty = {"metadata": {"name": "x", "creationTimestamp": CREATED},
             "spec": {"replicas": 0, "selector": {}, "template": {}}}  # fmt: skip
    assert print_replica_set(empty, NOW).cells[1:] == [0, 0, 0, "3m", "", "", "<none>"]
    invalid = {**rs, "spec": {**rs["spec"], "selector": {"matchLabels": {"bad key!": "x"}}}}
    assert print_replica_set(invalid, NOW).cells[7] == "<error>"
    assert print_deployment(invalid, NOW).cells[7] == "<invalid>"


def node(*, conditions: list[Obj], unschedulable: bool = False,
         labels: dict[str, str] | None = None) -> Obj:  # fmt: skip
    return {
        "metadata": {"name": "n1", "creationTimestamp": CREATED, "labels": labels or {}},
        "spec": {"unschedulable": True} if unschedulable else {},
        "status": {
            "conditions": conditions,
            "addresses": [{"type": "Hostname", "address": "n1"},
                          {"type": "InternalIP", "address": "10.1.0.1"}],
            "nodeInfo": {"kubeletVersion": "v1.34.4", "osImage": "Linux",
                         "containerRuntimeVersion": "containerd://2"},
        },
    }  # fmt: skip


@pytest.mark.parametrize(
    ("conditions", "unschedulable", "status"),
    [
        ([{"type": "Ready", "status": "True"}], False, "Ready"),
        ([{"type": "Ready", "status": "False"}], False, "NotReady"),
        ([{"type": "Ready", "status": "Unknown"}], False, "NotReady"),
        ([{"type": "MemoryPressure", "status": "False"}], False, "Unknown"),
        ([], True, "Unknown,SchedulingDisabled"),
        ([{"type": "Ready", "status": "True"}], True, "Ready,SchedulingDisabled"),
        ([{"type": "Ready", "status": "False"}, {"type": "Ready", "status": "True"}], False,
         "Ready"),
    ],
)  # fmt: skip
def test_node_status(conditions: list[Obj], unschedulable: bool, status: str) -> None:
    cells = print_node(node(conditions=conditions, unschedulable=unschedulable), NOW).cells
    assert cells[1] == status


@pytest.mark.parametrize(
    ("labels", "roles"),
    [
        ({}, "<none>"),
        ({"node-role.kubernetes.io/control-plane": "", "node-role.kubernetes.io/worker": "x"},
         "control-plane,worker"),
        ({"node-role.kubernetes.io/": ""}, "<none>"),
        ({"kubernetes.io/role": "master", "node-role.kubernetes.io/master": ""}, "master"),
        ({"kubernetes.io/role": ""}, "<none>"),
    ],
)  # fmt: skip
def test_node_roles(labels: dict[str, str], roles: str) -> None:
    assert print_node(node(conditions=[], labels=labels), NOW).cells[2] == roles


def test_node_cells() -> None:
    cells = print_node(node(conditions=[{"type": "Ready", "status": "True"}]), NOW).cells
    assert cells == ["n1", "Ready", "<none>", "3m", "v1.34.4", "10.1.0.1", "<none>", "Linux",
                     "<unknown>", "containerd://2"]  # fmt: skip


def test_generic_cells() -> None:
    obj = {"metadata": {"name": "cm", "creationTimestamp": CREATED}}
    assert print_generic(obj, NOW).cells == ["cm", CREATED]


@pytest.mark.parametrize(
    ("columns", "printer", "obj"),
    [
        (printer_columns.POD, print_pod, pod({})),
        (printer_columns.NODE, print_node, node(conditions=[])),
        (printer_columns.DEPLOYMENT, print_deployment, {"metadata": {"name": "d"}}),
        (printer_columns.REPLICA_SET, print_replica_set, {"metadata": {"name": "r"}}),
        (printer_columns.HORIZONTAL_POD_AUTOSCALER, print_horizontal_pod_autoscaler,
         {"metadata": {"name": "h"}}),
    ],
)  # fmt: skip
def test_one_cell_per_column(columns: Any, printer: Any, obj: Obj) -> None:
    assert len(printer(obj, NOW).cells) == len(columns)


def _metric(type_: str, key: str, target: Obj, name: str = "m") -> Obj:
    return {"type": type_, key: {"name": name, "metric": {"name": name}, "target": target}}


UTIL = {"type": "Utilization", "averageUtilization": 50}
AVG = {"type": "AverageValue", "averageValue": "10"}
VALUE = {"type": "Value", "value": "3"}


@pytest.mark.parametrize(
    ("specs", "statuses", "shown"),
    [
        ([], [], "<none>"),
        ([_metric("Resource", "resource", UTIL, "cpu")], [], "cpu: <unknown>/50%"),
        ([_metric("Resource", "resource", UTIL, "cpu")],
         [{"resource": {"current": {"averageUtilization": 7}}}], "cpu: 7%/50%"),
        ([_metric("Resource", "resource", {"type": "Utilization"}, "cpu")], [],
         "cpu: <unknown>/<auto>"),
        ([_metric("ContainerResource", "containerResource", AVG, "memory")],
         [{"containerResource": {"current": {"averageValue": "4"}}}], "memory: 4/10"),
        ([_metric("Pods", "pods", AVG)], [], "<unknown>/10"),
        ([_metric("Object", "object", AVG)], [], "<unknown>/10 (avg)"),
        ([_metric("External", "external", VALUE)],
         [{"external": {"current": {"value": "2"}}}], "2/3"),
        ([{"type": "Other"}], [], "<unknown type>"),
        ([_metric("Pods", "pods", AVG)] * 4, [], "<unknown>/10, <unknown>/10 + 2 more..."),
    ],
)  # fmt: skip
def test_hpa_targets(specs: list[Obj], statuses: list[Obj], shown: str) -> None:
    assert format_hpa_metrics(specs, statuses) == shown


def test_hpa_cells() -> None:
    hpa = {"metadata": {"name": "h", "creationTimestamp": CREATED},
           "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 3},
           "status": {"currentReplicas": 2}}  # fmt: skip
    cells = print_horizontal_pod_autoscaler(hpa, NOW).cells
    assert cells[:6] == ["h", "Deployment/web", "<none>", "<unset>", 3, 2]
