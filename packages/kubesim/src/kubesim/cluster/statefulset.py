"""The StatefulSet controller, after pkg/controller/statefulset (stateful_set_control.go):
pods named `<set>-<ordinal>` with a stable identity (hostname, subdomain, pod-name and
pod-index labels). OrderedReady creates them one at a time, each once the previous one is
Running and Ready; Parallel creates them all. A pod that is deleted (an eviction) is
recreated with the same name once it is gone; a failed one is deleted first. Scale-down
removes the highest ordinals. Rolling updates and ControllerRevisions are not simulated."""

from __future__ import annotations

import datetime as dt
import re

from kubesim.types import Key, Obj

from .podowner import PodOwnerController
from .podutil import is_pod_available, is_pod_ready
from .replicaset import pod_from_template

POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"


def ordinal_of(set_name: str, pod: Obj) -> int | None:
    """getParentNameAndOrdinal: the ordinal of `<set>-<n>`, None for another name."""
    match = re.fullmatch(re.escape(set_name) + r"-(\d+)", pod["metadata"]["name"])
    return int(match.group(1)) if match else None


def stateful_pod(sts: Obj, ordinal: int) -> Obj:
    """newStatefulSetPod: the template with the ordinal's identity."""
    pod = pod_from_template(sts)
    name = f"{sts['metadata']['name']}-{ordinal}"
    meta = pod["metadata"]
    del meta["generateName"]
    meta["name"] = name
    meta["labels"].update({POD_NAME_LABEL: name, POD_INDEX_LABEL: str(ordinal)})
    pod["spec"]["hostname"] = name
    service = (sts.get("spec") or {}).get("serviceName")
    if service:
        pod["spec"]["subdomain"] = service
    return pod


def _running_and_ready(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running" and is_pod_ready(pod)


def _terminal(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Failed", "Succeeded")


class StatefulSetController(PodOwnerController):
    name = "statefulset-controller"
    plural = "statefulsets"
    kind = "StatefulSet"

    async def reconcile(self, key: Key) -> float | None:
        sts = self.owners.get(*key)
        if sts is None:
            return None
        set_name = sts["metadata"]["name"]
        by_ordinal = {}
        for pod in await self.claimed_pods(sts):
            ordinal = ordinal_of(set_name, pod)
            if ordinal is not None:
                by_ordinal[ordinal] = pod
        spec = sts.get("spec") or {}
        replicas = int(spec.get("replicas", 1))
        ordered = spec.get("podManagementPolicy", "OrderedReady") == "OrderedReady"
        if not sts["metadata"].get("deletionTimestamp"):
            await self._scale(sts, by_ordinal, replicas, ordered)
        await self.write_status(sts, self._status(sts, by_ordinal, replicas))
        return None

    async def _scale(self, sts: Obj, pods: dict[int, Obj], replicas: int, ordered: bool) -> None:
        for ordinal in range(replicas):
            pod = pods.get(ordinal)
            if pod is None:
                await self.create_pod(sts, stateful_pod(sts, ordinal))
                if ordered:
                    return
                continue
            if _terminal(pod) and not pod["metadata"].get("deletionTimestamp"):
                await self.delete_pod(sts, pod)  # recreated once gone
                if ordered:
                    return
                continue
            if ordered and (
                pod["metadata"].get("deletionTimestamp") or not _running_and_ready(pod)
            ):
                return  # wait: a pod still terminating, or one not yet Running and Ready
        surplus = sorted((o for o in pods if o >= replicas), reverse=True)
        for ordinal in surplus[:1] if ordered else surplus:
            if not pods[ordinal]["metadata"].get("deletionTimestamp"):
                await self.delete_pod(sts, pods[ordinal])

    def _status(self, sts: Obj, pods: dict[int, Obj], replicas: int) -> Obj:
        now = dt.datetime.now(dt.UTC)
        min_ready = int((sts.get("spec") or {}).get("minReadySeconds") or 0)
        counted = [p for p in pods.values() if not _terminal(p)]
        current = [p for p in counted if not p["metadata"].get("deletionTimestamp")]
        return {
            "replicas": len(counted),
            "readyReplicas": sum(1 for p in counted if is_pod_ready(p)) or None,
            "currentReplicas": len(current) or None,
            "updatedReplicas": len(current) or None,
            "availableReplicas": sum(1 for p in counted if is_pod_available(p, min_ready, now)),
            "collisionCount": 0,
        }
