"""Leader election and Events in the differential catalogue: a Lease taken, renewed and
taken over with optimistic concurrency (what client-go's leaderelection does), and Events
written through core/v1 and events.k8s.io/v1, counted up, read across the two versions and
selected by field."""

from __future__ import annotations

import copy
from typing import Any

from kubesim.client import MERGE_PATCH, resource_path

from .interactions import Api, Interaction, names_view, status_only

NOW = "2026-01-01T00:00:00.000000Z"
LATER = "2026-01-01T00:00:10.000000Z"


def _lease(holder: str) -> dict[str, Any]:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "leader"},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15,
                     "acquireTime": NOW, "renewTime": NOW, "leaseTransitions": 0}}  # fmt: skip


async def _leader_election(api: Api) -> None:
    path = resource_path("coordination.k8s.io/v1", "leases", api.namespace)
    _, taken = await api.call("a acquires", "POST", path, _lease("a"))
    await api.call("b acquires too", "POST", path, _lease("b"))
    renewed = copy.deepcopy(taken)
    renewed["spec"]["renewTime"] = LATER
    _, current = await api.call("a renews", "PUT", f"{path}/leader", renewed)
    # b read the Lease before a renewed it: its takeover carries a stale resourceVersion.
    stale = copy.deepcopy(taken)
    stale["spec"].update(holderIdentity="b", acquireTime=LATER, renewTime=LATER,
                         leaseTransitions=1)  # fmt: skip
    await api.call("b takes over stale", "PUT", f"{path}/leader", stale)
    fresh = {**stale, "metadata": current["metadata"]}
    await api.call("b takes over", "PUT", f"{path}/leader", fresh)
    await api.call("a renews stale", "PUT", f"{path}/leader", renewed)
    await api.call("release", "PATCH", f"{path}/leader",
                   {"spec": {"holderIdentity": None, "leaseDurationSeconds": 1}},
                   content_type=MERGE_PATCH)  # fmt: skip
    await api.call("invalid duration", "PATCH", f"{path}/leader",
                   {"spec": {"leaseDurationSeconds": 0, "leaseTransitions": -1}},
                   content_type=MERGE_PATCH)  # fmt: skip
    await api.call("bad time", "PATCH", f"{path}/leader", {"spec": {"renewTime": "yesterday"}},
                   content_type=MERGE_PATCH)  # fmt: skip


def _core_event(api: Api, name: str, reason: str, pod: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name},
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": pod,
                               "namespace": api.namespace},
            "reason": reason, "message": f"{reason} {pod}", "type": "Normal",
            "source": {"component": "differential"}, "count": 1,
            "firstTimestamp": "2026-01-01T00:00:00Z",
            "lastTimestamp": "2026-01-01T00:00:00Z"}  # fmt: skip


def _new_event(api: Api, name: str, reason: str, pod: str) -> dict[str, Any]:
    return {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": name},
            "eventTime": NOW, "reportingController": "example.com/differential",
            "reportingInstance": "differential-1", "action": "Evicting", "reason": reason,
            "regarding": {"apiVersion": "v1", "kind": "Pod", "name": pod,
                          "namespace": api.namespace},
            "note": f"{reason} {pod}", "type": "Warning"}  # fmt: skip


async def _events(api: Api) -> None:
    core = resource_path("v1", "events", api.namespace)
    new = resource_path("events.k8s.io/v1", "events", api.namespace)
    await api.call("core create", "POST", core, _core_event(api, "e1", "Evicted", "p"))
    await api.call("core create other", "POST", core, _core_event(api, "e2", "Pulled", "q"),
                   view=status_only)  # fmt: skip
    await api.call("core count up", "PATCH", f"{core}/e1",
                   {"count": 2, "lastTimestamp": "2026-01-01T00:00:10Z"},
                   content_type=MERGE_PATCH)  # fmt: skip
    await api.call("core without involved object", "POST", core,
                   {**_core_event(api, "e3", "Evicted", "p"), "involvedObject": {}})  # fmt: skip
    await api.call("new create", "POST", new, _new_event(api, "n1", "Evicted", "p"))
    await api.call("new series", "PATCH", f"{new}/n1",
                   {"series": {"count": 2, "lastObservedTime": LATER}},
                   content_type=MERGE_PATCH)  # fmt: skip
    await api.call("new without eventTime", "POST", new,
                   {**_new_event(api, "n2", "Evicted", "p"), "eventTime": None})  # fmt: skip
    await api.call("new read as core", "GET", f"{core}/n1")
    await api.call("core read as new", "GET", f"{new}/e1")
    for selector in ("reason=Evicted", "involvedObject.name=q", "involvedObject.kind=Pod,"
                     "reason!=Evicted", "type=Warning", "source=differential",
                     "reportingComponent=example.com/differential"):  # fmt: skip
        await api.call(f"core select {selector}", "GET", core,
                       params={"fieldSelector": selector}, view=names_view)  # fmt: skip
    for selector in ("reason=Evicted", "regarding.name=p", "reportingController="
                     "example.com/differential"):  # fmt: skip
        await api.call(f"new select {selector}", "GET", new,
                       params={"fieldSelector": selector}, view=names_view)  # fmt: skip
    await api.call("core bad field", "GET", core, params={"fieldSelector": "spec.nothing=x"})


COORDINATION: list[tuple[str, Interaction]] = [
    ("leases: leader election", _leader_election),
    ("events: both versions, counts, field selectors", _events),
]
