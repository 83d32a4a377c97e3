"""The catalogue of API interactions the differential suite runs against both servers.

An interaction is an async function of an `Api`: it makes requests in its own namespace
(the same name on both servers) and records what it observed — status code and the
normalised body, or the part of it named by a view. The suite runs each interaction on
kubesim and on kube-apiserver with the same client and compares the observations.

The resources and verbs are those graceful-drain, its detector, kubectl and the drain
clients rely on.
"""

from __future__ import annotations

import asyncio
import copy
import functools
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubesim.client import (
    JSON_PATCH,
    MERGE_PATCH,
    STRATEGIC_MERGE_PATCH,
    ApiStatusError,
    KubeClient,
    resource_path,
)
from kubesim.cluster.runtime import Informer

from .normalise import Json, normalise

View = Callable[[Json], Json]
JSON = "application/json"
CONTROLLER_ANNOTATION_PREFIXES = ("deployment.kubernetes.io/",)
SELECTED = {"labelSelector": "tier=a"}
SETTLE_TIMEOUT = (
    30.0  # a guard against hangs only  # the interaction's own objects, not the controllers'
)


def whole(body: Json) -> Json:
    return body


def status_only(body: Json) -> Json:
    """A Status body, or only kind and metadata of an object (what a write returned)."""
    if isinstance(body, dict) and body.get("kind") == "Status":
        return body
    if isinstance(body, dict):
        return {"kind": body.get("kind"), "name": (body.get("metadata") or {}).get("name")}
    return body


def spec_view(body: Json) -> Json:
    """What the client wrote and the server defaulted, without controller-written status."""
    if isinstance(body, dict) and body.get("kind") == "Status":
        return body
    if not isinstance(body, dict):
        return body
    meta = body.get("metadata") or {}
    # What a controller writes into metadata (the Deployment controller's revision) depends
    # on when it ran, not on the API: left out.
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items()
                   if not k.startswith(CONTROLLER_ANNOTATION_PREFIXES)} or None  # fmt: skip
    return {
        "kind": body.get("kind"),
        "metadata": {
            **{k: meta.get(k) for k in ("name", "namespace", "labels")},
            "annotations": annotations,
        },
        "spec": body.get("spec"),
    }


def names_view(body: Json) -> Json:
    items = body.get("items") if isinstance(body, dict) else None
    if items is None:
        return body
    return {
        "kind": body.get("kind"),
        "names": [(i.get("metadata") or {}).get("name") for i in items],
        "continue": bool((body.get("metadata") or {}).get("continue")),
        "remainingItemCount": (body.get("metadata") or {}).get("remainingItemCount"),
    }


@dataclass
class Observation:
    step: str
    code: int
    body: Json


@dataclass
class Api:
    client: KubeClient
    namespace: str
    # Compacts the server's history (etcd's compaction; kubesim's own): blocking.
    compact: Callable[[], None] | None = None
    observations: list[Observation] = field(default_factory=list)

    async def call(
        self, step: str, method: str, path: str, body: Json = None, *,
        content_type: str = JSON, params: Mapping[str, str] | None = None,
        view: View = whole,
    ) -> tuple[int, Json]:  # fmt: skip
        try:
            answer = await self.client.request(
                method, path, body, params=params, content_type=content_type
            )
            code = 201 if method == "POST" and answer.get("kind") != "Status" else 200
        except ApiStatusError as error:
            code, answer = error.code, error.status
        self.observations.append(Observation(step, code, view(normalise(answer))))
        return code, answer

    def note(self, step: str, value: Json) -> None:
        self.observations.append(Observation(step, 0, normalise(value)))


Interaction = Callable[[Api], Awaitable[None]]


@dataclass(frozen=True)
class Kind:
    api_version: str
    plural: str
    kind: str
    sample: Callable[[str], dict[str, Any]]  # name -> manifest without namespace
    view: View = whole
    strategic: bool = True
    # Once true of a new object, its controller has written what it writes after a create.
    settled: Callable[[dict[str, Any]], bool] | None = None


def _configmap(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"tier": "a"}}, "data": {"k": "v"}}


def _secret(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"tier": "a"}}, "type": "Opaque",
            "stringData": {"k": "v"}}  # fmt: skip


def _serviceaccount(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"tier": "a"}}}


def _lease(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"tier": "a"}},
            "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}}  # fmt: skip


def _status_observed(obj: dict[str, Any]) -> bool:
    status = obj.get("status") or {}
    return bool(status.get("observedGeneration") == obj["metadata"].get("generation"))


async def until(api: Api, path: str, check: Callable[[list[dict[str, Any]]], bool]) -> None:
    """Wait (on a watch, bounded) until `check` holds of the objects at the collection
    `path`: what a controller does after a request takes its own time."""
    informer = Informer.at_path(api.client, path)
    changed = asyncio.Event()
    informer.add_handler(lambda *_: changed.set())
    await informer.start()
    try:
        async with asyncio.timeout(SETTLE_TIMEOUT):
            while not check(informer.items()):
                changed.clear()
                await changed.wait()
    finally:
        await informer.stop()


async def until_settled(api: Api, kind: Kind, name: str) -> None:
    """Wait until `kind.settled` holds for the object `name`."""
    settled = kind.settled
    if settled is None:
        return
    path = resource_path(kind.api_version, kind.plural, api.namespace)
    await until(api, path, lambda objs: any(o["metadata"]["name"] == name and settled(o)
                                            for o in objs))  # fmt: skip


def _pdb(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"tier": "a"}},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": name}}}}  # fmt: skip


def _deployment(name: str) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "metadata": {"name": name, "labels": {"tier": "a"}},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels},
                         "spec": {"containers": [{"name": "app", "image": "example/app:1"}]}},
        },
    }  # fmt: skip


KINDS = (
    Kind("v1", "configmaps", "ConfigMap", _configmap),
    Kind("v1", "secrets", "Secret", _secret),
    Kind("v1", "serviceaccounts", "ServiceAccount", _serviceaccount),
    Kind("coordination.k8s.io/v1", "leases", "Lease", _lease),
    Kind(
        "policy/v1",
        "poddisruptionbudgets",
        "PodDisruptionBudget",
        _pdb,
        view=spec_view,
        settled=_status_observed,
    ),
    Kind("apps/v1", "deployments", "Deployment", _deployment, view=spec_view),
)


def _manifest(kind: Kind, name: str) -> dict[str, Any]:
    body = kind.sample(name)
    return {"apiVersion": kind.api_version, "kind": kind.kind, **body}


def _crud(kind: Kind) -> list[tuple[str, Interaction]]:
    """The verbs every client relies on, for one kind."""

    def path(api: Api, name: str | None = None) -> str:
        return resource_path(kind.api_version, kind.plural, api.namespace, name)

    async def create(api: Api) -> None:
        await api.call("create", "POST", path(api), _manifest(kind, "one"), view=kind.view)
        await api.call("create again", "POST", path(api), _manifest(kind, "one"))

    async def get(api: Api) -> None:
        await api.call("create", "POST", path(api), _manifest(kind, "one"), view=status_only)
        await api.call("get", "GET", path(api, "one"), view=kind.view)
        await api.call("get missing", "GET", path(api, "missing"))

    async def list_(api: Api) -> None:
        for name in ("a", "b", "c"):
            await api.call(f"create {name}", "POST", path(api), _manifest(kind, name),
                           view=status_only)  # fmt: skip
        await api.call("list", "GET", path(api), params=SELECTED, view=names_view)
        await api.call("list with a set selector", "GET", path(api),
                       params={"labelSelector": "tier in (a, c)"}, view=names_view)  # fmt: skip
        await api.call("list none", "GET", path(api), params={"labelSelector": "tier=b"},
                       view=names_view)  # fmt: skip
        _, first = await api.call("page 1", "GET", path(api), params={**SELECTED, "limit": "2"},
                                  view=names_view)  # fmt: skip
        token = first.get("metadata", {}).get("continue", "")
        await api.call("page 2", "GET", path(api),
                       params={**SELECTED, "limit": "2", "continue": token},
                       view=names_view)  # fmt: skip
        await api.call("bad selector", "GET", path(api), params={"labelSelector": "a b"})

    async def update(api: Api) -> None:
        await api.call("create", "POST", path(api), _manifest(kind, "one"), view=status_only)
        # Read back once the kind's controller wrote its status after the create: a write
        # between this read and "update stale" would make it stale on one server only.
        await until_settled(api, kind, "one")
        _, current = await api.call("read", "GET", path(api, "one"), view=status_only)
        changed = copy.deepcopy(current)
        changed["metadata"].setdefault("labels", {})["changed"] = "yes"
        # Unconditional (no resourceVersion): a controller may write status at any moment.
        unconditional = copy.deepcopy(changed)
        unconditional["metadata"].pop("resourceVersion")
        await api.call("update", "PUT", path(api, "one"), unconditional, view=kind.view)
        # Stale once the unconditional update went through; for the kinds that refuse an
        # unconditional update (Lease, PodDisruptionBudget) it is still current.
        await api.call("update stale", "PUT", path(api, "one"), changed, view=kind.view)
        renamed = copy.deepcopy(changed)
        renamed["metadata"]["name"] = "other"
        renamed["metadata"].pop("resourceVersion", None)
        await api.call("update wrong name", "PUT", path(api, "one"), renamed)
        await api.call(
            "update missing",
            "PUT",
            path(api, "missing"),
            {**_manifest(kind, "missing"), "metadata": {"name": "missing"}},
            view=status_only,
        )

    async def patches(api: Api) -> None:
        await api.call("create", "POST", path(api), _manifest(kind, "one"), view=status_only)
        await api.call("merge", "PATCH", path(api, "one"),
                       {"metadata": {"labels": {"m": "1"}}}, content_type=MERGE_PATCH,
                       view=kind.view)  # fmt: skip
        await api.call("json add", "PATCH", path(api, "one"),
                       [{"op": "add", "path": "/metadata/annotations", "value": {"j": "1"}}],
                       content_type=JSON_PATCH, view=kind.view)  # fmt: skip
        await api.call("json failed test", "PATCH", path(api, "one"),
                       [{"op": "test", "path": "/metadata/labels/m", "value": "2"}],
                       content_type=JSON_PATCH)  # fmt: skip
        await api.call("json bad path", "PATCH", path(api, "one"),
                       [{"op": "replace", "path": "/metadata/nothing/here", "value": "x"}],
                       content_type=JSON_PATCH)  # fmt: skip
        if kind.strategic:
            await api.call("strategic", "PATCH", path(api, "one"),
                           {"metadata": {"labels": {"s": "1"}}},
                           content_type=STRATEGIC_MERGE_PATCH, view=kind.view)  # fmt: skip
        await api.call(
            "patch missing",
            "PATCH",
            path(api, "missing"),
            {"metadata": {"labels": {"m": "1"}}},
            content_type=MERGE_PATCH,
        )
        await api.call("patch bad body", "PATCH", path(api, "one"), "not json",
                       content_type=MERGE_PATCH)  # fmt: skip

    async def delete(api: Api) -> None:
        _, created = await api.call("create", "POST", path(api), _manifest(kind, "one"),
                                    view=status_only)  # fmt: skip
        await api.call(
            "delete wrong uid",
            "DELETE",
            path(api, "one"),
            {
                "apiVersion": "v1",
                "kind": "DeleteOptions",
                "preconditions": {"uid": "00000000-0000-0000-0000-000000000000"},
            },
        )
        await api.call(
            "delete",
            "DELETE",
            path(api, "one"),
            {
                "apiVersion": "v1",
                "kind": "DeleteOptions",
                "preconditions": {"uid": created["metadata"]["uid"]},
            },
            view=status_only,
        )
        await api.call("delete missing", "DELETE", path(api, "one"))

    async def dry_run(api: Api) -> None:
        await api.call("create dry run", "POST", path(api), _manifest(kind, "one"),
                       params={"dryRun": "All"}, view=kind.view)  # fmt: skip
        await api.call("not stored", "GET", path(api, "one"))
        await api.call("bad dry run", "POST", path(api), _manifest(kind, "one"),
                       params={"dryRun": "Some"})  # fmt: skip

    async def invalid(api: Api) -> None:
        await api.call("invalid name", "POST", path(api), _manifest(kind, "Not_Valid"))
        await api.call("no name", "POST", path(api), {**_manifest(kind, "x"), "metadata": {}})
        await api.call(
            "generated name",
            "POST",
            path(api),
            {**_manifest(kind, "x"), "metadata": {"generateName": "gen-"}},
            view=kind.view,
        )
        await api.call("wrong kind", "POST", path(api), {**_manifest(kind, "x"),
                                                         "kind": "Pod"})  # fmt: skip
        await api.call(
            "other namespace",
            "POST",
            path(api),
            {**_manifest(kind, "x"), "metadata": {"name": "x", "namespace": "elsewhere"}},
        )

    async def collection(api: Api) -> None:
        for name in ("a", "b"):
            await api.call(f"create {name}", "POST", path(api), _manifest(kind, name),
                           view=status_only)  # fmt: skip
        await api.call("delete collection", "DELETE", path(api),
                       params={"labelSelector": "tier=a"}, view=names_view)  # fmt: skip
        await api.call("list after", "GET", path(api), params=SELECTED, view=names_view)

    return [
        (f"{kind.plural}: create", create),
        (f"{kind.plural}: get", get),
        (f"{kind.plural}: list, selectors, pages", list_),
        (f"{kind.plural}: update", update),
        (f"{kind.plural}: patches", patches),
        (f"{kind.plural}: delete with preconditions", delete),
        (f"{kind.plural}: dry run", dry_run),
        (f"{kind.plural}: invalid writes", invalid),
        (f"{kind.plural}: delete collection", collection),
    ]


async def _evict_without_budget(api: Api) -> None:
    pod_path = resource_path("v1", "pods", api.namespace)
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "p", "labels": {"app": "p"}},
           "spec": {"nodeName": "no-such-node",
                    "containers": [{"name": "c", "image": "example/app:1"}]}}  # fmt: skip
    await api.call("create pod", "POST", pod_path, pod, view=status_only)
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": "p", "namespace": api.namespace}}  # fmt: skip
    await api.call("evict missing", "POST", f"{pod_path}/missing/eviction",
                   {**eviction, "metadata": {"name": "missing"}})  # fmt: skip
    await api.call("evict wrong name", "POST", f"{pod_path}/p/eviction",
                   {**eviction, "metadata": {"name": "q"}})  # fmt: skip
    await api.call("evict dry run", "POST", f"{pod_path}/p/eviction", eviction,
                   params={"dryRun": "All"})  # fmt: skip
    await api.call("evict", "POST", f"{pod_path}/p/eviction", eviction)
    _, after = await api.call("pod after", "GET", f"{pod_path}/p", view=status_only)
    conditions = (after.get("status") or {}).get("conditions") or []
    api.note(
        "pod conditions",
        [{k: c.get(k) for k in ("type", "status", "reason", "message")} for c in conditions],
    )
    api.note("deletion requested", bool(after.get("metadata", {}).get("deletionTimestamp")))


async def _evict_with_budget(api: Api) -> None:
    pod_path = resource_path("v1", "pods", api.namespace)
    pdb_path = resource_path("policy/v1", "poddisruptionbudgets", api.namespace)
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "p", "labels": {"app": "p"}},
           "spec": {"nodeName": "no-such-node",
                    "containers": [{"name": "c", "image": "example/app:1"}]}}  # fmt: skip
    await api.call("create pod", "POST", pod_path, pod, view=status_only)
    await api.call("create budget", "POST", pdb_path, _manifest(KINDS[4], "p"),
                   view=status_only)  # fmt: skip
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": "p", "namespace": api.namespace}}  # fmt: skip
    # Until the disruption controller has computed the budget's status, or once it has and
    # the pod is not Ready: either way the eviction is refused with 429.
    await api.call("evict", "POST", f"{pod_path}/p/eviction", eviction)


async def _watch_sequence(api: Api) -> None:
    path = resource_path("v1", "configmaps", api.namespace)
    _, listed = await api.call("list", "GET", path, params=SELECTED, view=names_view)
    start = listed["metadata"]["resourceVersion"]
    await api.call("create", "POST", path, _manifest(KINDS[0], "w"), view=status_only)
    await api.call("label", "PATCH", f"{path}/w", {"metadata": {"labels": {"tier": "b"}}},
                   content_type=MERGE_PATCH, view=status_only)  # fmt: skip
    await api.call("delete", "DELETE", f"{path}/w", view=status_only)
    events: list[tuple[str, str, str]] = []
    selected: list[tuple[str, str, str]] = []

    async def collect(into: list[tuple[str, str, str]], params: dict[str, str]) -> None:
        async with asyncio.timeout(20):
            async for event in api.client.watch(path, start, timeout_seconds=5, params=params):
                obj = event["object"]
                # kube-controller-manager may publish kube-root-ca.crt into the namespace
                # after `start`: only this interaction's own object counts.
                if event["type"] == "BOOKMARK" or obj["metadata"].get("name") != "w":
                    continue
                into.append(
                    (
                        event["type"],
                        obj["metadata"]["name"],
                        (obj["metadata"].get("labels") or {}).get("tier", ""),
                    )
                )
                if len(into) == (3 if not params else 2):
                    return

    await collect(events, {})
    await collect(selected, {"labelSelector": "tier=a"})
    api.note("watch events", events)
    api.note("selector transitions", selected)


async def _watch_too_old(api: Api) -> None:
    path = resource_path("v1", "configmaps", api.namespace)
    try:
        async for _ in api.client.watch(path, "1", timeout_seconds=2):
            break
        api.note("watch from revision 1", "accepted")
    except ApiStatusError as error:
        api.observations.append(Observation("watch from revision 1", error.code,
                                            normalise(error.status)))  # fmt: skip


async def _forbidden(api: Api) -> None:
    """An unknown resource and a verb the server does not serve."""
    await api.call("unknown resource", "GET", f"/api/v1/namespaces/{api.namespace}/nothings")
    await api.call("unknown group", "GET", "/apis/example.com/v1/widgets")
    await api.call("namespace missing", "POST",
                   resource_path("v1", "configmaps", "no-such-namespace"),
                   _manifest(KINDS[0], "x"))  # fmt: skip


async def _unserved_methods(api: Api) -> None:
    """A method a resource or subresource does not serve: 405 from the router, whether or not
    the object exists."""
    pods = f"/api/v1/namespaces/{api.namespace}/pods"
    scale = f"/apis/apps/v1/namespaces/{api.namespace}/deployments/none/scale"
    await api.call("get an eviction", "GET", f"{pods}/none/eviction")
    await api.call("delete a scale", "DELETE", scale)
    await api.call("post a scale", "POST", scale, {"spec": {"replicas": 1}})
    await api.call("list access reviews", "GET",
                   "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews")  # fmt: skip
    await api.call("delete every service", "DELETE", f"/api/v1/namespaces/{api.namespace}/services")
    for group_version, names in DISCOVERED_VERBS.items():
        await api.call(f"verbs of {group_version}", "GET", group_version,
                       view=functools.partial(_verbs, names=names))  # fmt: skip


# Resources (and subresources) whose verbs, as discovery lists them, are compared: what
# kubectl and client-go decide from (`kubectl api-resources -o wide`, `--verbs=list`).
DISCOVERED_VERBS = {
    "/api/v1": ("namespaces", "namespaces/status", "namespaces/finalize", "nodes", "pods",
                "pods/status", "pods/eviction", "pods/binding", "pods/log", "pods/exec",
                "services", "configmaps", "secrets", "serviceaccounts",
                "serviceaccounts/token", "events", "endpoints"),
    "/apis/apps/v1": ("deployments", "deployments/scale", "deployments/status", "replicasets",
                      "statefulsets", "daemonsets"),
}  # fmt: skip


def _verbs(body: Json, names: tuple[str, ...]) -> Json:
    if not isinstance(body, dict) or "resources" not in body:
        return body
    listed = {r["name"]: r["verbs"] for r in body["resources"]}
    return {name: listed.get(name) for name in names}


async def _new_namespace(api: Api) -> None:
    """What the control plane's controllers put into a new namespace."""
    for plural in ("configmaps", "serviceaccounts", "secrets"):
        await api.call(plural, "GET", resource_path("v1", plural, api.namespace), view=names_view)


async def _default_account_made_again(api: Api) -> None:
    """The serviceaccount controller makes `default` again once it is deleted."""
    path = resource_path("v1", "serviceaccounts", api.namespace)
    await api.call("delete default", "DELETE", f"{path}/default", view=status_only)
    await until(api, path, lambda objs: any(o["metadata"]["name"] == "default"
                                            and not o["metadata"].get("deletionTimestamp")
                                            for o in objs))  # fmt: skip
    await api.call("default again", "GET", f"{path}/default", view=status_only)


SPECIAL: list[tuple[str, Interaction]] = [
    ("namespaces: what a new one holds", _new_namespace),
    ("namespaces: the default ServiceAccount made again", _default_account_made_again),
    ("eviction without a budget", _evict_without_budget),
    ("eviction with a budget", _evict_with_budget),
    ("watch: events and selector transitions", _watch_sequence),
    ("watch: too old a revision", _watch_too_old),
    ("errors: unknown resources and namespaces", _forbidden),
    ("errors: methods a resource does not serve", _unserved_methods),
]

INTERACTIONS: list[tuple[str, Interaction]] = [
    *(interaction for kind in KINDS for interaction in _crud(kind)),
    *SPECIAL,
]

# Catalogues of their own, added here (imported last: they build on the helpers above).
from .interactions_admission import ADMISSION  # noqa: E402
from .interactions_api import API_INTERACTIONS  # noqa: E402
from .interactions_batch import BATCH_INTERACTIONS  # noqa: E402
from .interactions_coordination import COORDINATION  # noqa: E402
from .interactions_delete import DELETE  # noqa: E402
from .interactions_rollout import ROLLOUT  # noqa: E402
from .interactions_watch import COMPACTING, WATCH  # noqa: E402

INTERACTIONS += [
    *WATCH,
    *DELETE,
    *ADMISSION,
    *ROLLOUT,
    *COORDINATION,
    *API_INTERACTIONS,
    *BATCH_INTERACTIONS,
]
INTERACTIONS += COMPACTING  # keep last (see there)
