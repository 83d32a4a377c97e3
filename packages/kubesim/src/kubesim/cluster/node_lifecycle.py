"""The NoSchedule half of the node lifecycle controller: taints that mirror node state.

pkg/controller/nodelifecycle `doNoScheduleTaintingPass`: a node condition in a
bad state (MemoryPressure=True, Ready=False, ...) and `spec.unschedulable` each
carry a NoSchedule taint, added with timeAdded (`SwapNodeControllerTaint`) and
removed when the state clears. Taint-based NoExecute eviction is not modelled.
"""

from __future__ import annotations

import datetime as dt

from kubesim import jsoncodec
from kubesim.types import Key, Obj

from ..apiserver.meta import rfc3339
from ..client import KubeClient, resource_path
from .runtime import Controller

TAINT_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
# nodeConditionToTaintKeyStatusMap
CONDITION_TAINTS: dict[tuple[str, str], str] = {
    ("Ready", "False"): "node.kubernetes.io/not-ready",
    ("Ready", "Unknown"): "node.kubernetes.io/unreachable",
    ("MemoryPressure", "True"): "node.kubernetes.io/memory-pressure",
    ("DiskPressure", "True"): "node.kubernetes.io/disk-pressure",
    ("NetworkUnavailable", "True"): "node.kubernetes.io/network-unavailable",
    ("PIDPressure", "True"): "node.kubernetes.io/pid-pressure",
}
MANAGED_KEYS = frozenset([*CONDITION_TAINTS.values(), TAINT_UNSCHEDULABLE])


def wanted_taint_keys(node: Obj) -> list[str]:
    keys = []
    for condition in (node.get("status") or {}).get("conditions") or []:
        key = CONDITION_TAINTS.get((condition.get("type", ""), condition.get("status", "")))
        if key is not None:
            keys.append(key)
    if (node.get("spec") or {}).get("unschedulable"):
        keys.append(TAINT_UNSCHEDULABLE)
    return keys


def reconciled_taints(node: Obj, now: str) -> list[Obj] | None:
    """The node's taints after one tainting pass, or None when nothing changes."""
    taints = [t for t in (node.get("spec") or {}).get("taints") or [] if isinstance(t, dict)]
    managed = {
        t.get("key")
        for t in taints
        if t.get("effect") == "NoSchedule" and t.get("key") in MANAGED_KEYS
    }
    wanted = wanted_taint_keys(node)
    to_add = [k for k in wanted if k not in managed]
    to_remove = managed - set(wanted)
    if not to_add and not to_remove:
        return None
    kept = [
        t for t in taints if not (t.get("effect") == "NoSchedule" and t.get("key") in to_remove)
    ]
    return kept + [{"key": k, "effect": "NoSchedule", "timeAdded": now} for k in to_add]


class NodeLifecycleController(Controller):
    name = "node-lifecycle-controller"

    def __init__(self, client: KubeClient) -> None:
        super().__init__(client)
        self.nodes = self.informer("v1", "nodes", "Node")
        self.nodes.add_handler(lambda _t, node, _o: self.queue.add(("", node["metadata"]["name"])))

    async def reconcile(self, key: Key) -> float | None:
        node = self.nodes.get(*key)
        if node is None:
            return None
        taints = reconciled_taints(node, rfc3339(dt.datetime.now(dt.UTC)))
        if taints is None:
            return None
        updated = jsoncodec.copy(node)
        updated.setdefault("spec", {})["taints"] = taints
        if not taints:
            del updated["spec"]["taints"]
        await self.client.replace(resource_path("v1", "nodes", None, key[1]), updated)
        return None
