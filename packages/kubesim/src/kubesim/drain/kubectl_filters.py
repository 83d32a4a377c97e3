"""Which pods `kubectl drain` deletes, skips, warns about or refuses: its filter chain.

After staging/src/k8s.io/kubectl/pkg/drain/filters.go: skipDeleted,
daemonSet, mirrorPod, localStorage, unreplicated, in that order, the first
filter that does not delete a pod deciding for it. Pure: DaemonSet lookups are
done by the caller and passed in.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from kubesim.types import Obj

from ..apiserver.meta import controller_ref, parse_time

Reason = Literal["Okay", "Skip", "Warning", "Error"]

MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"
DAEMONSET_FATAL = "DaemonSet-managed Pods (use --ignore-daemonsets to ignore)"
DAEMONSET_WARNING = "ignoring DaemonSet-managed Pods"
LOCAL_STORAGE_FATAL = "Pods with local storage (use --delete-emptydir-data to override)"
LOCAL_STORAGE_WARNING = "deleting Pods with local storage"
UNMANAGED_FATAL = "cannot delete Pods that declare no controller (use --force to override)"
UNMANAGED_WARNING = "deleting Pods that declare no controller"

# A DaemonSet lookup: (HTTP code, error message); 200 means it exists.
DaemonSetLookup = tuple[int, str]


@dataclass(frozen=True, slots=True)
class PodDeleteStatus:
    delete: bool
    reason: Reason
    message: str = ""


OKAY = PodDeleteStatus(True, "Okay")
SKIP = PodDeleteStatus(False, "Skip")


@dataclass(frozen=True, slots=True)
class FilterOptions:
    force: bool = False
    ignore_all_daemonsets: bool = False
    delete_emptydir_data: bool = False
    skip_wait_for_delete_timeout_seconds: int = 0


@dataclass
class PodDeleteList:
    items: list[tuple[Obj, PodDeleteStatus]] = field(default_factory=list)

    def pods(self) -> list[Obj]:
        return [pod for pod, status in self.items if status.delete]

    def _grouped(self, reason: Reason) -> dict[str, list[str]]:
        grouped: dict[str, list[str]] = {}
        for pod, status in self.items:
            if status.reason == reason:
                message = status.message or ("unexpected error" if reason == "Error" else "")
                grouped.setdefault(message, []).append(_ref(pod))
        return grouped

    def warnings(self) -> str:
        return "; ".join(
            f"{msg}: {', '.join(pods)}" for msg, pods in self._grouped("Warning").items()
        )

    def errors(self) -> list[str]:
        return [
            f"cannot delete {msg}: {', '.join(pods)}"
            for msg, pods in self._grouped("Error").items()
        ]


def _ref(pod: Obj) -> str:
    meta = pod["metadata"]
    return f"{meta.get('namespace', '')}/{meta['name']}"


def _finished(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def should_skip_pod(pod: Obj, skip_seconds: int, now: dt.datetime) -> bool:
    stamp = pod["metadata"].get("deletionTimestamp")
    if skip_seconds <= 0 or not stamp:
        return False
    return int((now - parse_time(stamp)).total_seconds()) > skip_seconds


def daemonset_of(pod: Obj) -> tuple[str, str] | None:
    """The (namespace, name) of the DaemonSet controlling the pod, if one does."""
    ref = controller_ref(pod)
    if ref is None or ref.get("kind") != "DaemonSet":
        return None
    return (pod["metadata"].get("namespace", ""), str(ref["name"]))


def _daemonset_filter(
    pod: Obj, options: FilterOptions, daemonsets: Mapping[tuple[str, str], DaemonSetLookup]
) -> PodDeleteStatus:
    owner = daemonset_of(pod)
    if owner is None or _finished(pod):
        return OKAY
    code, message = daemonsets.get(owner, (200, ""))
    if code != 200:
        if code == 404 and options.force:
            return PodDeleteStatus(True, "Warning", message)
        return PodDeleteStatus(False, "Error", message)
    if not options.ignore_all_daemonsets:
        return PodDeleteStatus(False, "Error", DAEMONSET_FATAL)
    return PodDeleteStatus(False, "Warning", DAEMONSET_WARNING)


def _mirror_filter(pod: Obj) -> PodDeleteStatus:
    annotations = pod["metadata"].get("annotations") or {}
    return SKIP if MIRROR_POD_ANNOTATION in annotations else OKAY


def _local_storage_filter(pod: Obj, options: FilterOptions) -> PodDeleteStatus:
    volumes = (pod.get("spec") or {}).get("volumes") or []
    if not any(v.get("emptyDir") is not None for v in volumes) or _finished(pod):
        return OKAY
    if not options.delete_emptydir_data:
        return PodDeleteStatus(False, "Error", LOCAL_STORAGE_FATAL)
    return PodDeleteStatus(True, "Warning", LOCAL_STORAGE_WARNING)


def _unreplicated_filter(pod: Obj, options: FilterOptions) -> PodDeleteStatus:
    if _finished(pod) or controller_ref(pod) is not None:
        return OKAY
    if options.force:
        return PodDeleteStatus(True, "Warning", UNMANAGED_WARNING)
    return PodDeleteStatus(False, "Error", UNMANAGED_FATAL)


def filter_pods(
    pods: Iterable[Obj],
    options: FilterOptions,
    daemonsets: Mapping[tuple[str, str], DaemonSetLookup],
    now: dt.datetime,
) -> PodDeleteList:
    result = PodDeleteList()
    for pod in pods:
        status = OKAY
        for check in (
            lambda p: (
                SKIP
                if should_skip_pod(p, options.skip_wait_for_delete_timeout_seconds, now)
                else OKAY
            ),
            lambda p: _daemonset_filter(p, options, daemonsets),
            _mirror_filter,
            lambda p: _local_storage_filter(p, options),
            lambda p: _unreplicated_filter(p, options),
        ):
            status = check(pod)
            if not status.delete:
                break
        result.items.append((pod, status))
    return result
