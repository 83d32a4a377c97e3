"""Interactions for the API kinds a user meets exploring `kubesim serve` with kubectl:
autoscaling/v2 HorizontalPodAutoscalers, SelfSubjectRulesReviews and SelfSubjectAccessReviews,
CustomResourceDefinitions and the resources they serve, server-side apply.

`interactions.py` appends `API_INTERACTIONS` to its catalogue.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from kubesim.client import MERGE_PATCH, resource_path

from .interactions import (
    JSON,
    Api,
    Interaction,
    Kind,
    Observation,
    View,
    _crud,
    names_view,
    spec_view,
    status_only,
    whole,
)
from .normalise import Json, normalise

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


def rules_view(body: Json) -> Json:
    """A rules review's status with its rules sorted: kube-apiserver visits the bindings in
    its informer cache's order, which is no order."""
    status = body.get("status") if isinstance(body, dict) else None
    if not isinstance(status, dict):
        return body
    ordered = {key: sorted(status.get(key) or [], key=lambda r: json.dumps(r, sort_keys=True))
               for key in ("resourceRules", "nonResourceRules")}  # fmt: skip
    return {**body, "status": {**status, **ordered}}


async def call_as(api: Api, user: str, step: str, path: str, body: Json,
                  view: View = whole) -> None:  # fmt: skip
    """A POST impersonating `user` (kubectl's --as), recorded as `Api.call` records."""
    headers = {"Impersonate-User": user, "Content-Type": JSON}
    async with api.client.session.post(api.client.server + path, data=json.dumps(body),
                                       headers=headers) as response:  # fmt: skip
        answer = await response.json(content_type=None)
        api.observations.append(Observation(step, response.status, view(normalise(answer))))


AUTHZ = "/apis/authorization.k8s.io/v1"


def _rules_review(namespace: str) -> Json:
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview",
            "spec": {"namespace": namespace}}  # fmt: skip


def _access_review(namespace: str, verb: str, resource: str, name: str = "") -> Json:
    attributes = {"namespace": namespace, "verb": verb, "resource": resource, "name": name}
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attributes}}  # fmt: skip


async def _reviews_as_admin(api: Api) -> None:
    """`kubectl auth can-i --list` and `kubectl auth can-i VERB RESOURCE` as the admin."""
    reviews = f"{AUTHZ}/selfsubjectrulesreviews"
    await api.call("rules", "POST", reviews, _rules_review(api.namespace), view=rules_view)
    await api.call("rules without a namespace", "POST", reviews, _rules_review(""))
    await api.call("can create pods", "POST", f"{AUTHZ}/selfsubjectaccessreviews",
                   _access_review(api.namespace, "create", "pods"))  # fmt: skip


async def _reviews_as_service_account(api: Api) -> None:
    """The same for a ServiceAccount a Role and a RoleBinding grant some reads, and a
    RoleBinding to a Role that does not exist."""
    ns = api.namespace
    rbac = "rbac.authorization.k8s.io/v1"
    await api.call("create service account", "POST", resource_path("v1", "serviceaccounts", ns),
                   {"apiVersion": "v1", "kind": "ServiceAccount",
                    "metadata": {"name": "reader"}}, view=status_only)  # fmt: skip
    role = {"apiVersion": rbac, "kind": "Role", "metadata": {"name": "reader"},
            "rules": [{"apiGroups": [""], "resources": ["pods", "pods/log"],
                       "verbs": ["get", "list", "watch"]},
                      {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"],
                       "resourceNames": ["settings"]}]}  # fmt: skip
    await api.call("create role", "POST", resource_path(rbac, "roles", ns), role,
                   view=status_only)  # fmt: skip
    subject = [{"kind": "ServiceAccount", "name": "reader", "namespace": ns}]
    for name, role_name in (("reader", "reader"), ("dangling", "no-such-role")):
        binding = {"apiVersion": rbac, "kind": "RoleBinding", "metadata": {"name": name},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                               "name": role_name}, "subjects": subject}  # fmt: skip
        await api.call(f"create binding {name}", "POST", resource_path(rbac, "rolebindings", ns),
                       binding, view=status_only)  # fmt: skip
    user = f"system:serviceaccount:{ns}:reader"
    await call_as(api, user, "rules", f"{AUTHZ}/selfsubjectrulesreviews", _rules_review(ns),
                  view=rules_view)  # fmt: skip
    await call_as(api, user, "rules elsewhere", f"{AUTHZ}/selfsubjectrulesreviews",
                  _rules_review("default"), view=rules_view)  # fmt: skip
    for verb, resource, name in (
        ("list", "pods", ""),
        ("delete", "pods", "p"),
        ("get", "configmaps", "settings"),
        ("get", "configmaps", "other"),
    ):
        await call_as(api, user, f"can {verb} {resource} {name}".strip(),
                      f"{AUTHZ}/selfsubjectaccessreviews",
                      _access_review(ns, verb, resource, name))  # fmt: skip


API_INTERACTIONS: list[tuple[str, Interaction]] = [
    *_crud(HPA),
    ("horizontalpodautoscalers: defaults and validation", _hpa_specs),
    ("horizontalpodautoscalers: watch", _hpa_watch),
    ("access reviews: the admin", _reviews_as_admin),
    ("access reviews: a service account", _reviews_as_service_account),
]
