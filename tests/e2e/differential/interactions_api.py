"""Interactions for the API kinds a user meets exploring `kubesim serve` with kubectl:
autoscaling/v2 HorizontalPodAutoscalers, SelfSubjectRulesReviews and SelfSubjectAccessReviews,
CustomResourceDefinitions and the resources they serve, server-side apply.

`interactions.py` appends `API_INTERACTIONS` to its catalogue.
"""

from __future__ import annotations

import asyncio
import copy
import json
import re
from collections.abc import Callable
from typing import Any

from kubesim.client import MERGE_PATCH, STRATEGIC_MERGE_PATCH, ApiStatusError, resource_path

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


Seen = Callable[[Json], tuple[Any, ...]]


async def watch_until_deleted(
    api: Api, path: str, listed: Json, seen: Seen
) -> list[tuple[Any, ...]]:
    """The events of a watch from a list's revision up to the first DELETED, each as its
    type and what `seen` keeps of the object (bounded)."""
    events: list[tuple[Any, ...]] = []
    async with asyncio.timeout(WATCH_TIMEOUT):
        revision = listed["metadata"]["resourceVersion"]
        async for event in api.client.watch(path, revision, timeout_seconds=5):
            if event["type"] == "BOOKMARK":
                continue
            events.append((event["type"], *seen(event["object"])))
            if event["type"] == "DELETED":
                return events
    return events


async def _hpa_watch(api: Api) -> None:
    """A watch from a list's revision sees the create, the update and the delete."""
    path = resource_path(HPA.api_version, HPA.plural, api.namespace)
    _, listed = await api.call("list", "GET", path, view=names_view)
    manifest = {"apiVersion": HPA.api_version, "kind": HPA.kind, **_hpa("w")}
    await api.call("create", "POST", path, manifest, view=status_only)
    await api.call("scale bounds", "PATCH", f"{path}/w", {"spec": {"maxReplicas": 4}},
                   content_type=MERGE_PATCH, view=spec_view)  # fmt: skip
    await api.call("delete", "DELETE", f"{path}/w", view=status_only)
    events = await watch_until_deleted(api, path, listed, lambda obj: (
        obj["metadata"]["name"], obj["spec"]["maxReplicas"]))  # fmt: skip
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


async def call_with(api: Api, headers: dict[str, str], step: str, method: str, path: str,
                    body: Json = None, view: View = whole) -> Json:  # fmt: skip
    """A request with extra headers (kubectl's --as, a Table's Accept), recorded as
    `Api.call` records it."""
    data = None if body is None else json.dumps(body)
    content = {"Content-Type": JSON} if body is not None else {}
    async with api.client.session.request(method, api.client.server + path, data=data,
                                          headers={**content, **headers}) as response:  # fmt: skip
        answer = await response.json(content_type=None)
        api.observations.append(Observation(step, response.status, view(normalise(answer))))
    return answer


async def call_as(api: Api, user: str, step: str, path: str, body: Json,
                  view: View = whole) -> None:  # fmt: skip
    """A POST impersonating `user`."""
    await call_with(api, {"Impersonate-User": user}, step, "POST", path, body, view)


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


async def _until_allowed(api: Api, user: str, review: Json) -> None:
    """Ask (bounded, unrecorded) until `user` is allowed what `review` asks: a binding just
    written takes effect once the authorizer's informer has it."""
    path = api.client.server + f"{AUTHZ}/selfsubjectaccessreviews"
    headers = {"Content-Type": JSON, "Impersonate-User": user}
    async with asyncio.timeout(WATCH_TIMEOUT):
        while True:
            async with api.client.session.post(path, data=json.dumps(review),
                                               headers=headers) as response:  # fmt: skip
                answer = await response.json(content_type=None)
            if (answer.get("status") or {}).get("allowed"):
                return
            await asyncio.sleep(POLL_INTERVAL)


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
    for name, role_name in (("dangling", "no-such-role"), ("reader", "reader")):
        binding = {"apiVersion": rbac, "kind": "RoleBinding", "metadata": {"name": name},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                               "name": role_name}, "subjects": subject}  # fmt: skip
        await api.call(f"create binding {name}", "POST", resource_path(rbac, "rolebindings", ns),
                       binding, view=status_only)  # fmt: skip
    user = f"system:serviceaccount:{ns}:reader"
    # kube-apiserver's RBAC authorizer reads bindings from an informer: once the second
    # binding grants its reads, the first (dangling) one has been seen too.
    await _until_allowed(api, user, _access_review(ns, "list", "pods"))
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


CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
POLL_INTERVAL = 0.2


def _widget_crd(group: str) -> Json:
    """A namespaced Widget kind in a group of the interaction's own (CRDs are cluster-wide)."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {
            "group": group, "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"]},
            "versions": [{
                "name": "v1", "served": True, "storage": True,
                "subresources": {"status": {}},
                "additionalPrinterColumns": [
                    {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
                    {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
                    {"name": "Ready", "type": "string", "priority": 1,
                     "jsonPath": '.status.conditions[?(@.type=="Ready")].status'},
                ],
                "schema": {"openAPIV3Schema": {"type": "object", "required": ["spec"],
                                               "properties": {
                    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                    "status": {"type": "object",
                               "x-kubernetes-preserve-unknown-fields": True}}}},
            }],
        },
    }  # fmt: skip


def crd_view(body: Json) -> Json:
    """What the client wrote, the defaults, and the names and conditions the controllers
    accepted (without their timestamps)."""
    if not isinstance(body, dict) or body.get("kind") == "Status":
        return body
    status = body.get("status") or {}
    return {**spec_view(body), "status": {
        "acceptedNames": status.get("acceptedNames"),
        "storedVersions": status.get("storedVersions"),
        "conditions": [{k: c.get(k) for k in ("type", "status", "reason", "message")}
                       for c in status.get("conditions") or []],
    }}  # fmt: skip


def item_names(body: Json) -> Json:
    """The names listed (kube-apiserver's list of custom resources, served from its watch
    cache, may carry a continue token even when it is complete)."""
    items = body.get("items") if isinstance(body, dict) else None
    return body if items is None else [(i.get("metadata") or {}).get("name") for i in items]


def discovery_view(body: Json) -> Json:
    if not isinstance(body, dict):
        return body
    resources = [{k: v for k, v in r.items() if k != "storageVersionHash"}
                 for r in body.get("resources") or []]  # fmt: skip
    return {**body, "resources": resources}


def table_view(body: Json) -> Json:
    """A Table's columns and cells; the Age cell is the creation time, left out."""
    if not isinstance(body, dict) or body.get("kind") != "Table":
        return body
    names = [c.get("name") for c in body.get("columnDefinitions") or []]
    return {"columnDefinitions": body.get("columnDefinitions"),
            "cells": [[c for n, c in zip(names, r["cells"], strict=True) if n != "Age"]
                      for r in body.get("rows") or []]}  # fmt: skip


async def _until(api: Api, path: str, holds: Callable[[int, Json], bool]) -> None:
    """Poll `path` (bounded) until `holds(code, body)`: what kube-apiserver's apiextensions
    controllers do after a CRD write happens over a few hundred milliseconds."""
    async with asyncio.timeout(WATCH_TIMEOUT):
        while True:
            try:
                answer, code = await api.client.get(path), 200
            except ApiStatusError as error:
                answer, code = error.status, error.code
            if holds(code, answer):
                return
            await asyncio.sleep(POLL_INTERVAL)


def _established(code: int, crd: Json) -> bool:
    conditions = (crd.get("status") or {}).get("conditions") or []
    return code == 200 and any(
        c.get("type") == "Established" and c.get("status") == "True" for c in conditions
    )


async def _custom_resources(api: Api) -> None:
    """A CRD defines a kind; its objects are served like a built-in kind's, with a status
    subresource, the CRD's printer columns, and watch; deleting the CRD deletes them."""
    group = f"{api.namespace}.example.com"
    crd_path = f"{CRDS}/widgets.{group}"
    await api.call("create definition", "POST", CRDS, _widget_crd(group), view=status_only)
    await _until(api, crd_path, _established)
    await api.call("definition established", "GET", crd_path, view=crd_view)
    await _until(api, f"/apis/{group}/v1", lambda code, _: code == 200)
    await api.call("discovery", "GET", f"/apis/{group}/v1", view=discovery_view)
    path = resource_path(f"{group}/v1", "widgets", api.namespace)

    def widget(name: str, size: int) -> Json:
        meta = {"name": name, "labels": {"tier": "a"}}
        return {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": meta,
                "spec": {"size": size}}  # fmt: skip

    await _until(api, path, lambda code, _: code == 200)
    _, listed = await api.call("list empty", "GET", path, view=item_names)
    await api.call("create", "POST", path, widget("one", 1))
    await api.call("create again", "POST", path, widget("one", 1))
    await api.call("create invalid name", "POST", path, widget("Not_Valid", 1))
    await api.call("get", "GET", f"{path}/one")
    await api.call("merge patch", "PATCH", f"{path}/one", {"spec": {"size": 2}},
                   content_type=MERGE_PATCH)  # fmt: skip
    await api.call("strategic patch", "PATCH", f"{path}/one", {"spec": {"size": 3}},
                   content_type=STRATEGIC_MERGE_PATCH)  # fmt: skip
    await api.call("status ignored on the main resource", "PATCH", f"{path}/one",
                   {"status": {"phase": "Lost"}}, content_type=MERGE_PATCH)  # fmt: skip
    ready = [{"type": "Ready", "status": "True"}]
    await api.call("status", "PATCH", f"{path}/one/status",
                   {"status": {"phase": "Running", "conditions": ready}},
                   content_type=MERGE_PATCH)  # fmt: skip
    await call_with(api, {"Accept": TABLE}, "table", "GET", path, view=table_view)
    await api.call("delete", "DELETE", f"{path}/one", view=status_only)
    events = await watch_until_deleted(api, path, listed, lambda obj: (
        obj["spec"]["size"], (obj.get("status") or {}).get("phase")))  # fmt: skip
    api.note("watch events", events)
    await api.call("create before the definition goes", "POST", path, widget("two", 1),
                   view=status_only)  # fmt: skip
    await api.call("delete definition", "DELETE", crd_path, view=status_only)
    await _until(api, crd_path, lambda code, _: code == 404)
    await api.call("objects gone", "GET", f"{path}/two")


async def _custom_resource_schema(api: Api) -> None:
    """What the structural schema would refuse (kubesim does not validate it)."""
    group = f"{api.namespace}.example.com"
    crd_path = f"{CRDS}/widgets.{group}"
    await api.call("create definition", "POST", CRDS, _widget_crd(group), view=status_only)
    await _until(api, crd_path, _established)
    path = resource_path(f"{group}/v1", "widgets", api.namespace)
    await _until(api, path, lambda code, _: code == 200)
    await api.call("without the required spec", "POST", path,
                   {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "x"}},
                   view=status_only)  # fmt: skip
    await api.call("delete definition", "DELETE", crd_path, view=status_only)
    await api.call("misnamed definition", "POST", CRDS,
                   {**_widget_crd(group), "metadata": {"name": "other.example.com"}})  # fmt: skip


APPLY = "application/apply-patch+yaml"
EMBEDDED_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z")


def conflict_view(body: Json) -> Json:
    """A Status whose message names an Update manager's last write time: the time out."""
    if isinstance(body, dict) and body.get("kind") == "Status":
        return json.loads(EMBEDDED_TIME.sub("<time>", json.dumps(body)))
    return body


def _paths(fields: Json, prefix: str = "") -> list[str]:
    out = []
    for key, child in (fields or {}).items():
        out += _paths(child, f"{prefix}/{key}") if child else [f"{prefix}/{key}"]
    return sorted(out)


async def note_managers(api: Api, step: str, path: str, with_fields: bool = True) -> None:
    """Who owns what: each managedFields entry's manager, operation and (unless a controller
    also writes the object) its fields. A controller's status writes are left out: kubesim's
    controllers are not kube-controller-manager."""
    obj = await api.client.get(path)
    api.note(step, sorted(
        [e.get("manager"), e.get("operation"), _paths(e.get("fieldsV1")) if with_fields else None]
        for e in obj["metadata"].get("managedFields") or [] if e.get("subresource") != "status"
    ))  # fmt: skip


async def apply(api: Api, step: str, path: str, body: Json, manager: str | None,
                force: bool = False, view: View = whole) -> None:  # fmt: skip
    params = {} if manager is None else {"fieldManager": manager}
    if force:
        params["force"] = "true"
    await api.call(step, "PATCH", path, body, content_type=APPLY, params=params,
                   view=lambda b: conflict_view(view(b)))  # fmt: skip


async def _apply_configmap(api: Api) -> None:
    """Field ownership between two appliers and an updater, on a ConfigMap."""
    path = resource_path("v1", "configmaps", api.namespace, "cm")

    def config(**data: str) -> Json:
        return {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "cm", "labels": {"tier": "a"}}, "data": data}  # fmt: skip

    await apply(api, "create by alice", path, config(a="1", b="2"), "alice")
    await note_managers(api, "managers after create", path)
    await apply(api, "bob changes alice's field", path, config(a="9"), "bob")
    await apply(api, "bob agrees with alice", path, config(a="1", c="3"), "bob")
    await apply(api, "alice gives b up", path, config(a="1"), "alice")
    await note_managers(api, "managers after sharing", path)
    await apply(api, "bob forces a", path, config(a="9", c="3"), "bob", force=True)
    await api.call("carol updates c", "PATCH", path, {"data": {"c": "4"}},
                   content_type=MERGE_PATCH, params={"fieldManager": "carol"})  # fmt: skip
    await apply(api, "bob changes carol's field", path, config(a="9", c="5"), "bob")
    await note_managers(api, "managers at the end", path)
    await apply(api, "no field manager", path, config(a="1"), None)
    await apply(api, "not an object", path, "- a\n- b\n", "alice")
    await api.call("strategic merge still served", "PATCH", path, {"data": {"d": "1"}},
                   content_type=STRATEGIC_MERGE_PATCH)  # fmt: skip


async def _apply_deployment(api: Api) -> None:
    """kubectl apply --server-side of a Deployment, a scaler's update, the conflict on
    replicas and --force-conflicts."""
    path = resource_path("apps/v1", "deployments", api.namespace, "web")

    def deployment(replicas: int, image: str) -> Json:
        labels = {"app": "web"}
        container = {"name": "web", "image": image, "ports": [{"containerPort": 80}],
                     "env": [{"name": "MODE", "value": "x"}]}  # fmt: skip
        return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                         "template": {"metadata": {"labels": labels},
                                      "spec": {"containers": [container]}}}}  # fmt: skip

    await apply(api, "create", path, deployment(0, "example/web:1"), "kubectl", view=spec_view)
    await api.call("scaler updates replicas", "PATCH", path, {"spec": {"replicas": 1}},
                   content_type=MERGE_PATCH, params={"fieldManager": "scaler"},
                   view=spec_view)  # fmt: skip
    await apply(api, "new image, replicas unchanged by the applier", path,
                deployment(0, "example/web:2"), "kubectl", view=spec_view)  # fmt: skip
    await apply(api, "forced", path, deployment(0, "example/web:2"), "kubectl", force=True,
                view=spec_view)  # fmt: skip
    await note_managers(api, "managers", path)


def service_view(body: Json) -> Json:
    """What the client wrote and the server defaulted, without the cluster IP allocation and
    IP families kubesim does not simulate (docs/kubesim-fidelity.md)."""
    viewed = spec_view(body)
    if isinstance(viewed, dict) and isinstance(viewed.get("spec"), dict):
        allocated = ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy",
                     "internalTrafficPolicy")  # fmt: skip
        viewed["spec"] = {k: v for k, v in viewed["spec"].items() if k not in allocated}
    return viewed


async def _apply_service(api: Api) -> None:
    """Apply of a Service (ports keyed by port) and a second applier adding a port."""
    path = resource_path("v1", "services", api.namespace, "svc")

    def service(*ports: int) -> Json:
        return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc"},
                "spec": {"selector": {"app": "web"},
                         "ports": [{"name": f"p{p}", "port": p} for p in ports]}}  # fmt: skip

    await apply(api, "create", path, service(80), "alice", view=service_view)
    await apply(api, "bob adds a port", path, service(80, 443), "bob", view=service_view)
    await apply(api, "alice drops hers", path, service(443), "alice", view=service_view)
    await note_managers(api, "managers", path)


def webhooks_view(body: Json) -> Json:
    if isinstance(body, dict) and body.get("kind") != "Status":
        return {"name": (body.get("metadata") or {}).get("name"), "webhooks": body.get("webhooks")}
    return body


async def _apply_webhook_configuration(api: Api) -> None:
    """The cert-manager overlay's pattern: kubectl applies the webhook configuration, the CA
    injector writes the caBundle (an update), and the next apply leaves it alone."""
    name = f"ssa-{api.namespace}"
    path = resource_path("admissionregistration.k8s.io/v1", "validatingwebhookconfigurations",
                         None, name)  # fmt: skip

    def config(timeout: int) -> Json:
        hook = {"name": "deny.example.com", "admissionReviewVersions": ["v1"],
                "sideEffects": "None", "failurePolicy": "Ignore", "timeoutSeconds": timeout,
                "clientConfig": {"service": {"namespace": api.namespace, "name": "web"}},
                "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                           "resources": ["configmaps"]}],
                "namespaceSelector": {"matchLabels": {"no-such-label": "x"}}}  # fmt: skip
        return {"apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingWebhookConfiguration", "metadata": {"name": name},
                "webhooks": [hook]}  # fmt: skip

    try:
        await apply(api, "create", path, config(5), "kubectl", view=webhooks_view)
        _, current = await api.call("read", "GET", path, view=status_only)
        injected = copy.deepcopy(current)
        injected["webhooks"][0]["clientConfig"]["caBundle"] = "Y2E="
        await api.call("injector writes the caBundle", "PUT", path, injected,
                       params={"fieldManager": "cainjector"}, view=status_only)  # fmt: skip
        await apply(api, "re-apply", path, config(7), "kubectl", view=webhooks_view)
        await api.call("after", "GET", path, view=webhooks_view)
        await note_managers(api, "managers", path)
    finally:
        await api.call("delete", "DELETE", path, view=status_only)


API_INTERACTIONS: list[tuple[str, Interaction]] = [
    *_crud(HPA),
    ("horizontalpodautoscalers: defaults and validation", _hpa_specs),
    ("horizontalpodautoscalers: watch", _hpa_watch),
    ("access reviews: the admin", _reviews_as_admin),
    ("access reviews: a service account", _reviews_as_service_account),
    ("custom resources: definition, CRUD, status, table, watch", _custom_resources),
    ("custom resources: schema", _custom_resource_schema),
    ("server-side apply: configmap ownership and conflicts", _apply_configmap),
    ("server-side apply: deployment", _apply_deployment),
    ("server-side apply: service", _apply_service),
    (
        "server-side apply: webhook configuration and an injected caBundle",
        _apply_webhook_configuration,
    ),
]
