"""The pod status a kubelet writes, computed from what its container runtime knows.

Pure functions after pkg/kubelet/kubelet_pods.go (`generateAPIPodStatus`,
`getPhase`, `convertToAPIContainerStatuses`), pkg/kubelet/status/generate.go
(the conditions) and status_manager.go (`mergePodStatus`, lastTransitionTime).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from kubesim.types import Obj

ContainerState = Literal["waiting", "running", "terminated"]

KUBELET_CONDITIONS = (
    "PodReadyToStartContainers",
    "Initialized",
    "Ready",
    "ContainersReady",
    "PodScheduled",
)
TERMINAL_PHASES = ("Succeeded", "Failed")

# generate.go reasons
CONTAINERS_NOT_READY = "ContainersNotReady"
CONTAINERS_NOT_INITIALIZED = "ContainersNotInitialized"
POD_COMPLETED = "PodCompleted"
POD_FAILED = "PodFailed"
READINESS_GATES_NOT_READY = "ReadinessGatesNotReady"


@dataclass
class ContainerRecord:
    """One container as the runtime sees it."""

    name: str
    image: str  # as written in the spec
    state: ContainerState = "waiting"
    reason: str = "ContainerCreating"  # waiting or terminated reason
    message: str = ""
    exit_code: int = 0
    started_at: str = ""
    finished_at: str = ""
    container_id: str = ""
    image_ref: str = ""  # the resolved image name, once pulled
    image_id: str = ""
    restart_count: int = 0
    ready: bool = False
    last_terminated: Obj | None = None

    def terminated_view(self) -> Obj:
        out: Obj = {
            "exitCode": self.exit_code,
            "reason": self.reason,
            "startedAt": self.started_at or None,
            "finishedAt": self.finished_at or None,
        }
        if self.message:
            out["message"] = self.message
        if self.container_id:
            out["containerID"] = self.container_id
        return out

    def to_status(self) -> Obj:
        state: Obj
        if self.state == "running":
            state = {"running": {"startedAt": self.started_at}}
        elif self.state == "terminated":
            state = {"terminated": self.terminated_view()}
        else:
            waiting: Obj = {"reason": self.reason}
            if self.message:
                waiting["message"] = self.message
            state = {"waiting": waiting}
        out: Obj = {
            "name": self.name,
            "state": state,
            "lastState": {"terminated": dict(self.last_terminated)} if self.last_terminated else {},
            "ready": self.ready,
            "restartCount": self.restart_count,
            "image": self.image_ref or self.image,
            "imageID": self.image_id,
            "started": self.state == "running",
        }
        if self.container_id:
            out["containerID"] = self.container_id
        return out


@dataclass
class PodRecord:
    """A pod as its kubelet tracks it."""

    containers: list[ContainerRecord]
    init_containers: list[ContainerRecord] = field(default_factory=list)
    sandbox_ready: bool = False
    pod_ip: str = ""
    host_ip: str = ""
    start_time: str = ""
    terminal: bool = False  # podIsTerminal: stopped for good, containers will not restart
    force_phase: str = ""  # an eviction or rejection decides the phase
    reason: str = ""
    message: str = ""
    disruption: Obj | None = None  # DisruptionTarget, written together with the terminal phase
    rejected: bool = False


def go_list(names: list[str]) -> str:
    """How Go's %s prints a []string: [a b]."""
    return "[" + " ".join(names) + "]"


def pod_phase(spec: Obj, record: PodRecord) -> str:
    """`getPhase`."""
    pending_init = failed_init = 0
    for c in record.init_containers:
        if c.state == "running":
            pending_init += 1
        elif c.state == "terminated":
            failed_init += c.exit_code != 0
        elif c.last_terminated is not None:
            failed_init += c.last_terminated.get("exitCode", 0) != 0
        else:
            pending_init += 1
    running = stopped = succeeded = waiting = 0
    any_started = False
    for c in record.containers:
        if c.state == "running":
            running += 1
            any_started = True
        elif c.state == "terminated":
            stopped += 1
            succeeded += c.exit_code == 0
            any_started = True
        elif c.last_terminated is not None:
            stopped += 1
            any_started = True
        else:
            waiting += 1
    restart_policy = spec.get("restartPolicy", "Always")
    if failed_init and restart_policy == "Never":
        return "Failed"
    if (pending_init and not any_started) or waiting:
        return "Pending"
    if running:
        return "Running"
    if stopped:
        if record.terminal:
            return "Succeeded" if stopped == succeeded else "Failed"
        if restart_policy == "Always":
            return "Running"
        if stopped == succeeded:
            return "Succeeded"
        return "Failed" if restart_policy == "Never" else "Running"
    return "Pending"


def _containers_ready(spec: Obj, record: PodRecord, phase: str) -> Obj:
    """`GenerateContainersReadyCondition`."""
    if phase == "Succeeded":
        return {"type": "ContainersReady", "status": "False", "reason": POD_COMPLETED}
    if phase == "Failed":
        return {"type": "ContainersReady", "status": "False", "reason": POD_FAILED}
    known = {c.name: c for c in record.containers}
    unknown = [c["name"] for c in spec.get("containers") or [] if c.get("name") not in known]
    unready = [c.name for c in record.containers if not c.ready]
    messages = []
    if unknown:
        messages.append(f"containers with unknown status: {go_list(unknown)}")
    if unready:
        messages.append(f"containers with unready status: {go_list(unready)}")
    if messages:
        return {
            "type": "ContainersReady",
            "status": "False",
            "reason": CONTAINERS_NOT_READY,
            "message": ", ".join(messages),
        }
    return {"type": "ContainersReady", "status": "True"}


def _ready(spec: Obj, containers_ready: Obj, conditions: list[Obj]) -> Obj:
    """`GeneratePodReadyCondition`, readiness gates included."""
    if containers_ready["status"] != "True":
        out = dict(containers_ready)
        out["type"] = "Ready"
        return out
    by_type = {c.get("type"): c for c in conditions}
    messages = []
    for gate in spec.get("readinessGates") or []:
        kind = gate.get("conditionType", "")
        found = by_type.get(kind)
        if found is None:
            messages.append(
                f'corresponding condition of pod readiness gate "{kind}" does not exist.'
            )
        elif found.get("status") != "True":
            state = found.get("status")
            messages.append(f'the status of pod readiness gate "{kind}" is not "True", but {state}')
    if messages:
        return {
            "type": "Ready",
            "status": "False",
            "reason": READINESS_GATES_NOT_READY,
            "message": ", ".join(messages),
        }
    return {"type": "Ready", "status": "True"}


def _initialized(record: PodRecord, phase: str) -> Obj:
    """`GeneratePodInitializedCondition`."""
    if phase == "Succeeded":
        return {"type": "Initialized", "status": "True", "reason": POD_COMPLETED}
    started = any(c.state != "waiting" or c.last_terminated for c in record.containers)
    incomplete = [
        c.name for c in record.init_containers if not (c.state == "terminated" and c.exit_code == 0)
    ]
    if started or not incomplete:
        return {"type": "Initialized", "status": "True"}
    return {
        "type": "Initialized",
        "status": "False",
        "reason": CONTAINERS_NOT_INITIALIZED,
        "message": f"containers with incomplete status: {go_list(incomplete)}",
    }


def _timed(condition: Obj, old: list[Obj], now: str) -> Obj:
    """Stamp lastTransitionTime: kept while the status is unchanged (`updateLastTransitionTime`)."""
    out: Obj = {
        "type": condition["type"],
        "status": condition["status"],
        "lastProbeTime": None,
        "lastTransitionTime": now,
    }
    for previous in old:
        if previous.get("type") == condition["type"] and previous.get("status") == out["status"]:
            out["lastTransitionTime"] = previous.get("lastTransitionTime") or now
    for key in ("reason", "message"):
        if condition.get(key):
            out[key] = condition[key]
    return out


def render_status(pod: Obj, record: PodRecord, now: str) -> Obj:
    """The full status the kubelet would write for `pod` (the latest API object)."""
    spec = pod.get("spec") or {}
    old: Obj = pod.get("status") or {}
    old_conditions = [c for c in old.get("conditions") or [] if isinstance(c, dict)]
    kept = [c for c in old_conditions if c.get("type") not in KUBELET_CONDITIONS]
    old_phase = old.get("phase", "")

    if record.rejected:
        return {
            "phase": "Failed",
            "reason": record.reason,
            "message": record.message,
            "qosClass": old.get("qosClass"),
            "conditions": kept,
        }

    phase = record.force_phase or pod_phase(spec, record)
    if old_phase in TERMINAL_PHASES and phase != old_phase:
        phase = old_phase  # pods never leave a terminal phase
    if phase in TERMINAL_PHASES and record.disruption is not None:
        kept = [c for c in kept if c.get("type") != record.disruption["type"]]
        kept.insert(0, _timed(record.disruption, old_conditions, now))

    containers_ready = _containers_ready(spec, record, phase)
    generated = [
        {
            "type": "PodReadyToStartContainers",
            "status": "True" if record.sandbox_ready else "False",
        },
        _initialized(record, phase),
        _ready(spec, containers_ready, kept),
        containers_ready,
        {"type": "PodScheduled", "status": "True"},
    ]
    status: Obj = {
        "phase": phase,
        "conditions": kept + [_timed(c, old_conditions, now) for c in generated],
        "qosClass": old.get("qosClass"),
        "containerStatuses": [c.to_status() for c in record.containers],
    }
    if record.init_containers:
        status["initContainerStatuses"] = [c.to_status() for c in record.init_containers]
    if record.host_ip:
        status["hostIP"] = record.host_ip
        status["hostIPs"] = [{"ip": record.host_ip}]
    if record.pod_ip:
        status["podIP"] = record.pod_ip
        status["podIPs"] = [{"ip": record.pod_ip}]
    if record.start_time:
        status["startTime"] = record.start_time
    if record.reason:
        status["reason"], status["message"] = record.reason, record.message
    elif phase == old_phase and old.get("reason"):
        status["reason"], status["message"] = old.get("reason"), old.get("message", "")
    return {k: v for k, v in status.items() if v is not None}
