"""Interactions for the API kinds a user meets exploring `kubesim serve` with kubectl:
autoscaling/v2 HorizontalPodAutoscalers, SelfSubjectRulesReviews and SelfSubjectAccessReviews,
CustomResourceDefinitions and the resources they serve, server-side apply.

`interactions.py` appends `API_INTERACTIONS` to its catalogue.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kubesim.client import MERGE_PATCH, resource_path

from .interactions import Api, Interaction, Kind, _crud, names_view, spec_view, status_only

WATCH_TIMEOUT = 20.0  # a guard against hangs only


def _hpa(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"tier": "a"}},
        "spec": {
            # No such Deployment: the real control plane's HPA controller only writes status.
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "absent"},
            "maxReplicas": 3,
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}},
        },
    }


HPA = Kind("autoscaling/v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler", _hpa,
           view=spec_view, strategic=True)  # fmt: skip


async def _hpa_specs(api: Api) -> None:
    """Defaulting and validation of an autoscaler's spec."""
    path = resource_path(HPA.api_version, HPA.plural, api.namespace)
    memory = {"name": "memory", "target": {"type": "AverageValue", "averageValue": "100Mi"}}
    qps = {"metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "10"}}
    metrics = [{"type": "Resource", "resource": memory}, {"type": "Pods", "pods": qps}]
    ref = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "absent"}

    def hpa(name: str, spec: dict[str, Any]) -> dict[str, Any]:
        return {"apiVersion": HPA.api_version, "kind": HPA.kind, "metadata": {"name": name},
                "spec": spec}  # fmt: skip

    await api.call("two metrics", "POST", path,
                   hpa("two", {"scaleTargetRef": ref, "minReplicas": 2, "maxReplicas": 5,
                               "metrics": metrics}), view=spec_view)  # fmt: skip
    await api.call(
        "max below min",
        "POST",
        path,
        hpa("low", {"scaleTargetRef": ref, "minReplicas": 4, "maxReplicas": 2}),
    )
    await api.call("no target", "POST", path, hpa("none", {"maxReplicas": 2}))
    await api.call("core group target", "POST", path,
                   hpa("core", {"scaleTargetRef": {**ref, "apiVersion": "v1"},
                                "maxReplicas": 2}))  # fmt: skip
    await api.call("list", "GET", path, view=names_view)
    await api.call("status", "GET", f"{path}/two/status", view=status_only)


async def _hpa_watch(api: Api) -> None:
    """A watch from a list's revision sees the create, the update and the delete."""
    path = resource_path(HPA.api_version, HPA.plural, api.namespace)
    _, listed = await api.call("list", "GET", path, view=names_view)
    manifest = {"apiVersion": HPA.api_version, "kind": HPA.kind, **_hpa("w")}
    await api.call("create", "POST", path, manifest, view=status_only)
    await api.call("scale bounds", "PATCH", f"{path}/w", {"spec": {"maxReplicas": 4}},
                   content_type=MERGE_PATCH, view=spec_view)  # fmt: skip
    await api.call("delete", "DELETE", f"{path}/w", view=status_only)
    events: list[tuple[str, str, int]] = []
    async with asyncio.timeout(WATCH_TIMEOUT):
        revision = listed["metadata"]["resourceVersion"]
        async for event in api.client.watch(path, revision, timeout_seconds=5):
            if event["type"] == "BOOKMARK":
                continue
            obj = event["object"]
            events.append((event["type"], obj["metadata"]["name"], obj["spec"]["maxReplicas"]))
            if event["type"] == "DELETED":
                break
    # The real HPA controller may write status between the create and the patch: keep the
    # first event of each type.
    api.note("watch events", [e for i, e in enumerate(events)
                              if e[0] not in {p[0] for p in events[:i]}])  # fmt: skip


API_INTERACTIONS: list[tuple[str, Interaction]] = [
    *_crud(HPA),
    ("horizontalpodautoscalers: defaults and validation", _hpa_specs),
    ("horizontalpodautoscalers: watch", _hpa_watch),
]
