"""How `kubectl drain` treats one pod before any eviction: its filter chain.

After staging/src/k8s.io/kubectl/pkg/drain/filters.go (daemonSet, mirrorPod, localStorage,
unreplicated): DaemonSet pods are never evicted (the drain refuses to start without
--ignore-daemonsets), mirror pods are skipped, pods with an emptyDir need
--delete-emptydir-data and pods without a controller need --force. Finished pods are deleted
without any flag. Karpenter and Cluster Autoscaler leave DaemonSet and mirror pods alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from graceful_drain.controller.decision.model import TERMINAL_POD_PHASES
from graceful_drain.kube.owners import controller_ref

MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"

Category = Literal["daemonset", "mirror-pod", "finished", "evictable"]


@dataclass(frozen=True, slots=True)
class KubectlTreatment:
    category: Category
    evicted: bool  # kubectl drain sends an eviction for it (given `flags`)
    flags: tuple[str, ...]  # what kubectl drain needs to go past this pod
    note: str


def kubectl_treatment(pod: Mapping[str, Any]) -> KubectlTreatment:
    metadata = pod.get("metadata") or {}
    if (pod.get("status") or {}).get("phase") in TERMINAL_POD_PHASES:
        return KubectlTreatment("finished", True, (), "finished; deleted without a flag")
    owner = controller_ref(pod)
    if owner is not None and owner.get("kind") == "DaemonSet":
        return KubectlTreatment(
            "daemonset", False, ("--ignore-daemonsets",),
            "DaemonSet pod: left running (kubectl drain refuses without --ignore-daemonsets)",
        )  # fmt: skip
    if MIRROR_POD_ANNOTATION in (metadata.get("annotations") or {}):
        return KubectlTreatment("mirror-pod", False, (), "static (mirror) pod: skipped")
    flags: list[str] = []
    notes: list[str] = []
    volumes = (pod.get("spec") or {}).get("volumes") or []
    if any(isinstance(volume, Mapping) and "emptyDir" in volume for volume in volumes):
        flags.append("--delete-emptydir-data")
        notes.append("its emptyDir data is lost")
    if owner is None:
        flags.append("--force")
        notes.append("no controller: nothing recreates it")
    return KubectlTreatment("evictable", True, tuple(flags), "; ".join(notes))
