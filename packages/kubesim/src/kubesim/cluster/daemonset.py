"""The DaemonSet controller, after pkg/controller/daemon (daemon_controller.go, util/):
one pod per node the DaemonSet should run on, pinned there by a `metadata.name` node
affinity and carrying the tolerations every daemon pod gets (so a cordoned or not-ready
node keeps its daemons), surplus and failed pods deleted, status written. Rolling updates
and ControllerRevisions are not simulated: pods carry no `controller-revision-hash`."""

from __future__ import annotations

import datetime as dt

from kubesim import jsoncodec
from kubesim.types import Key, Obj

from ..client import KubeClient
from .podowner import PodOwnerController
from .podutil import is_pod_available, is_pod_ready
from .replicaset import pod_from_template
from .scheduling import first_untolerated_taint, pod_matches_node_affinity

POD_TEMPLATE_GENERATION_LABEL = "pod-template-generation"
# util.AddOrUpdateDaemonPodTolerations
DAEMON_TOLERATIONS: tuple[Obj, ...] = tuple(
    {"key": key, "operator": "Exists", "effect": effect}
    for key, effect in (
        ("node.kubernetes.io/not-ready", "NoExecute"),
        ("node.kubernetes.io/unreachable", "NoExecute"),
        ("node.kubernetes.io/disk-pressure", "NoSchedule"),
        ("node.kubernetes.io/memory-pressure", "NoSchedule"),
        ("node.kubernetes.io/pid-pressure", "NoSchedule"),
        ("node.kubernetes.io/unschedulable", "NoSchedule"),
    )
)
NETWORK_UNAVAILABLE: Obj = {
    "key": "node.kubernetes.io/network-unavailable", "operator": "Exists", "effect": "NoSchedule",
}  # fmt: skip


def daemon_tolerations(pod_spec: Obj) -> list[Obj]:
    """The template's tolerations plus the daemon ones it lacks (keyed by key and effect)."""
    tolerations = list(pod_spec.get("tolerations") or [])
    extra = [*DAEMON_TOLERATIONS, *((NETWORK_UNAVAILABLE,) if pod_spec.get("hostNetwork") else ())]
    for toleration in extra:
        if not any(t.get("key") == toleration["key"] and t.get("effect") == toleration["effect"]
                   for t in tolerations):  # fmt: skip
            tolerations.append(dict(toleration))
    return tolerations


def pinned_to(node_name: str, affinity: Obj | None) -> Obj:
    """util.ReplaceDaemonSetPodNodeNameNodeAffinity: a single required term on the node name."""
    pinned: Obj = jsoncodec.copy(affinity or {})
    node_affinity = pinned.setdefault("nodeAffinity", {})
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
        "nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [node_name]}
        ]}]
    }  # fmt: skip
    return pinned


def target_node(pod: Obj) -> str | None:
    """util.GetTargetNodeName: the bound node, else the node its affinity pins it to."""
    spec = pod.get("spec") or {}
    if spec.get("nodeName"):
        return str(spec["nodeName"])
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    for term in required.get("nodeSelectorTerms") or []:
        for field in term.get("matchFields") or []:
            if field.get("key") == "metadata.name" and len(field.get("values") or []) == 1:
                return str(field["values"][0])
    return None


def should_run(ds: Obj, node: Obj, effects: tuple[str, ...] = ("NoSchedule", "NoExecute")) -> bool:
    """nodeShouldRunDaemonPod: the template's node selector and affinity, and no untolerated
    taint of `effects` (the daemon tolerations included). With NoExecute alone: whether a
    pod already there should continue running (`shouldContinueRunning`)."""
    spec = (ds.get("spec") or {}).get("template", {}).get("spec") or {}
    if not pod_matches_node_affinity({"spec": spec}, node):
        return False
    taints = (node.get("spec") or {}).get("taints") or []
    return first_untolerated_taint(taints, daemon_tolerations(spec), effects) is None


def daemon_pod(ds: Obj, node_name: str) -> Obj:
    pod = pod_from_template(ds)
    labels = pod["metadata"]["labels"]
    labels[POD_TEMPLATE_GENERATION_LABEL] = str(ds["metadata"].get("generation", 1))
    spec = pod["spec"]
    spec["affinity"] = pinned_to(node_name, spec.get("affinity"))
    spec["tolerations"] = daemon_tolerations(spec)
    return pod


class DaemonSetController(PodOwnerController):
    name = "daemonset-controller"
    plural = "daemonsets"
    kind = "DaemonSet"

    def __init__(self, client: KubeClient) -> None:
        super().__init__(client)
        self.nodes = self.informer("v1", "nodes", "Node")
        self.nodes.add_handler(self._on_node)

    def _on_node(self, _type: str, _node: Obj, _old: Obj | None) -> None:
        for ds in self.owners.items():
            self.queue.add((ds["metadata"].get("namespace", ""), ds["metadata"]["name"]))

    async def reconcile(self, key: Key) -> float | None:
        ds = self.owners.get(*key)
        if ds is None:
            return None
        pods = await self.claimed_pods(ds)
        by_node: dict[str, list[Obj]] = {}
        for pod in pods:
            if not pod["metadata"].get("deletionTimestamp"):
                by_node.setdefault(target_node(pod) or "", []).append(pod)
        nodes = {n["metadata"]["name"]: n for n in self.nodes.items()}
        wanted = {name for name, node in nodes.items() if should_run(ds, node)}
        deleting = ds["metadata"].get("deletionTimestamp") is not None
        for name in sorted(wanted):
            running = by_node.get(name, [])
            failed = [p for p in running if (p.get("status") or {}).get("phase") == "Failed"]
            for pod in failed:
                await self.delete_pod(ds, pod)
            alive = [p for p in running if p not in failed]
            if not alive and not deleting:
                await self.create_pod(ds, daemon_pod(ds, name))
            for surplus in alive[1:]:
                await self.delete_pod(ds, surplus)
        for name, misplaced in by_node.items():
            if name in wanted or (name in nodes and should_run(ds, nodes[name], ("NoExecute",))):
                continue
            for pod in misplaced:
                await self.delete_pod(ds, pod)
        await self.write_status(ds, self._status(ds, by_node, wanted, nodes))
        return None

    def _status(self, ds: Obj, by_node: dict[str, list[Obj]], wanted: set[str],
                nodes: dict[str, Obj]) -> Obj:  # fmt: skip
        now = dt.datetime.now(dt.UTC)
        min_ready = int((ds.get("spec") or {}).get("minReadySeconds") or 0)
        scheduled = [n for n in wanted if by_node.get(n)]
        ready = [n for n in scheduled if is_pod_ready(by_node[n][0])]
        available = [n for n in scheduled if is_pod_available(by_node[n][0], min_ready, now)]
        misscheduled = [n for n in by_node if n in nodes and n not in wanted]
        unavailable = len(wanted) - len(available)
        return {
            "currentNumberScheduled": len(scheduled),
            "numberMisscheduled": len(misscheduled),
            "desiredNumberScheduled": len(wanted),
            "numberReady": len(ready),
            "updatedNumberScheduled": len(scheduled),
            "numberAvailable": len(available) or None,
            "numberUnavailable": unavailable or None,
        }
