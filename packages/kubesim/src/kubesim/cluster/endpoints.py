"""The Endpoints and EndpointSlice controllers, after pkg/controller/endpoint and
pkg/controller/endpointslice: for each Service with a selector, the addresses of the pods it
selects, so that `kubectl get endpoints,endpointslices` shows what a Service reaches.

Simplified, and kept so: one EndpointSlice per Service (upstream splits at 100 endpoints and
per distinct port mapping; here a named targetPort is resolved from the first pod that
names it), IPv4 only, no topology hints and no trigger-time annotations. kubesim runs no
kube-proxy: nothing routes to these addresses.
"""

from __future__ import annotations

import logging
from typing import Any

from kubesim.types import Key, Obj

from ..apiserver.selectors.labels import SelectorError, label_selector_from_object
from ..client import ApiStatusError, KubeClient, resource_path
from .podutil import condition
from .runtime import Controller, key_of

log = logging.getLogger(__name__)

SERVICE_NAME_LABEL = "kubernetes.io/service-name"
MANAGED_BY_LABEL = "endpointslice.kubernetes.io/managed-by"
MANAGED_BY = "endpointslice-controller.k8s.io"
TERMINAL_PHASES = ("Succeeded", "Failed")


def _selects(service: Obj, pod: Obj) -> bool:
    selector = (service.get("spec") or {}).get("selector")
    if not selector:
        return False
    try:
        chosen = label_selector_from_object({"matchLabels": selector})
    except SelectorError:
        return False
    return chosen.matches(pod["metadata"].get("labels") or {})


def _target_port(port: Obj, pods: list[Obj]) -> int | None:
    """The port a Service port reaches: its targetPort, a named one resolved from the first
    pod whose containers name it."""
    target = port.get("targetPort", port.get("port"))
    if isinstance(target, int):
        return target
    for pod in pods:
        for container in (pod.get("spec") or {}).get("containers") or []:
            for named in container.get("ports") or []:
                if named.get("name") == target:
                    return int(named["containerPort"])
    return None


def _ports(service: Obj, pods: list[Obj]) -> list[Obj]:
    out = []
    for port in (service.get("spec") or {}).get("ports") or []:
        number = _target_port(port, pods)
        if number is None:
            continue
        entry: Obj = {"port": number, "protocol": port.get("protocol", "TCP")}
        if port.get("name"):
            entry["name"] = port["name"]
        out.append(entry)
    return out


def _target_ref(pod: Obj) -> Obj:
    meta = pod["metadata"]
    return {"kind": "Pod", "namespace": meta.get("namespace", ""), "name": meta["name"],
            "uid": meta.get("uid", "")}  # fmt: skip


def _ready(pod: Obj) -> bool:
    ready = condition(pod, "Ready")
    return ready is not None and ready.get("status") == "True"


def desired_endpoints(service: Obj, pods: list[Obj]) -> Obj:
    """The Endpoints object of `service` over `pods` (those it selects)."""
    meta = service["metadata"]
    ready: list[Obj] = []
    not_ready: list[Obj] = []
    for pod in sorted(pods, key=lambda p: str((p.get("status") or {}).get("podIP"))):
        if pod["metadata"].get("deletionTimestamp") is not None:
            continue
        address: Obj = {"ip": pod["status"]["podIP"], "targetRef": _target_ref(pod)}
        if (pod.get("spec") or {}).get("nodeName"):
            address["nodeName"] = pod["spec"]["nodeName"]
        (ready if _ready(pod) else not_ready).append(address)
    endpoints: Obj = {
        "apiVersion": "v1", "kind": "Endpoints",
        "metadata": {"name": meta["name"], "namespace": meta.get("namespace", "")},
    }  # fmt: skip
    if meta.get("labels"):
        endpoints["metadata"]["labels"] = dict(meta["labels"])
    ports = _ports(service, pods)
    if (ready or not_ready) and ports:
        subset: Obj = {}
        if ready:
            subset["addresses"] = ready
        if not_ready:
            subset["notReadyAddresses"] = not_ready
        subset["ports"] = ports
        endpoints["subsets"] = [subset]
    return endpoints


def desired_slice_body(service: Obj, pods: list[Obj]) -> Obj:
    """An EndpointSlice's labels, ports and endpoints for `service` over `pods`."""
    meta = service["metadata"]
    endpoints = []
    for pod in sorted(pods, key=lambda p: str((p.get("status") or {}).get("podIP"))):
        terminating = pod["metadata"].get("deletionTimestamp") is not None
        serving = _ready(pod)
        endpoint: Obj = {
            "addresses": [pod["status"]["podIP"]],
            "conditions": {"ready": serving and not terminating, "serving": serving,
                           "terminating": terminating},
            "targetRef": _target_ref(pod),
        }  # fmt: skip
        if (pod.get("spec") or {}).get("nodeName"):
            endpoint["nodeName"] = pod["spec"]["nodeName"]
        endpoints.append(endpoint)
    labels = {**(meta.get("labels") or {}), SERVICE_NAME_LABEL: meta["name"],
              MANAGED_BY_LABEL: MANAGED_BY}  # fmt: skip
    return {"labels": labels, "addressType": "IPv4", "endpoints": endpoints,
            "ports": _ports(service, pods)}  # fmt: skip


class EndpointsController(Controller):
    """Keeps an Endpoints object and an EndpointSlice for each Service with a selector."""

    name = "endpoints-controller"

    def __init__(self, client: KubeClient) -> None:
        super().__init__(client)
        self.services = self.informer("v1", "services", "Service")
        self.pods = self.informer("v1", "pods", "Pod")
        self.endpoints = self.informer("v1", "endpoints", "Endpoints")
        self.slices = self.informer("discovery.k8s.io/v1", "endpointslices", "EndpointSlice")
        self.services.add_handler(lambda _t, svc, _old: self.queue.add(key_of(svc)))
        self.pods.add_handler(self._on_pod)
        self.endpoints.add_handler(lambda _t, ep, _old: self.queue.add(key_of(ep)))
        self.slices.add_handler(self._on_slice)

    def _on_pod(self, _type: str, pod: Obj, old: Obj | None) -> None:
        namespace = pod["metadata"].get("namespace", "")
        for service in self.services.items():
            if service["metadata"].get("namespace", "") != namespace:
                continue
            if _selects(service, pod) or (old is not None and _selects(service, old)):
                self.queue.add(key_of(service))

    def _on_slice(self, _type: str, endpoint_slice: Obj, _old: Obj | None) -> None:
        service = (endpoint_slice["metadata"].get("labels") or {}).get(SERVICE_NAME_LABEL)
        if service:
            self.queue.add((endpoint_slice["metadata"].get("namespace", ""), service))

    def _selected(self, service: Obj) -> list[Obj]:
        namespace = service["metadata"].get("namespace", "")
        return [
            pod for pod in self.pods.items()
            if pod["metadata"].get("namespace", "") == namespace
            and (pod.get("status") or {}).get("podIP")
            and (pod.get("status") or {}).get("phase") not in TERMINAL_PHASES
            and _selects(service, pod)
        ]  # fmt: skip

    def _slices_of(self, key: Key) -> list[Obj]:
        namespace, name = key
        return [
            s for s in self.slices.items()
            if s["metadata"].get("namespace", "") == namespace
            and (s["metadata"].get("labels") or {}).get(SERVICE_NAME_LABEL) == name
            and (s["metadata"].get("labels") or {}).get(MANAGED_BY_LABEL) == MANAGED_BY
        ]  # fmt: skip

    async def reconcile(self, key: Key) -> float | None:
        namespace, name = key
        service = self.services.get(*key)
        endpoints_path = resource_path("v1", "endpoints", namespace)
        if service is None or not (service.get("spec") or {}).get("selector"):
            # A Service gone: its Endpoints go too (its slices are collected by their owner
            # reference); one without a selector keeps the Endpoints its user writes.
            if service is None and self.endpoints.get(*key) is not None:
                await _ignore_not_found(self.client.delete(f"{endpoints_path}/{name}"))
            return None
        pods = self._selected(service)
        await self._sync_endpoints(endpoints_path, key, desired_endpoints(service, pods))
        await self._sync_slice(service, desired_slice_body(service, pods))
        return None

    async def _sync_endpoints(self, path: str, key: Key, desired: Obj) -> None:
        current = self.endpoints.get(*key)
        if current is None:
            await self.client.create(path, desired)
            return
        if (current.get("subsets") or []) == (desired.get("subsets") or []) and (
            current["metadata"].get("labels") or {}
        ) == (desired["metadata"].get("labels") or {}):
            return
        desired["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        await self.client.replace(f"{path}/{key[1]}", desired)

    async def _sync_slice(self, service: Obj, body: Obj) -> None:
        meta = service["metadata"]
        namespace = meta.get("namespace", "")
        path = resource_path("discovery.k8s.io/v1", "endpointslices", namespace)
        existing = self._slices_of(key_of(service))
        if not existing:
            owner = {"apiVersion": "v1", "kind": "Service", "name": meta["name"],
                     "uid": meta.get("uid", ""), "controller": True,
                     "blockOwnerDeletion": True}  # fmt: skip
            await self.client.create(path, {
                "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                "metadata": {"generateName": f"{meta['name']}-", "namespace": namespace,
                             "labels": body["labels"], "ownerReferences": [owner]},
                "addressType": body["addressType"], "endpoints": body["endpoints"],
                "ports": body["ports"],
            })  # fmt: skip
            return
        current, *extra = existing
        for surplus in extra:
            await _ignore_not_found(self.client.delete(f"{path}/{surplus['metadata']['name']}"))
        unchanged = (current["metadata"].get("labels") or {}) == body["labels"] and all(
            (current.get(field) or []) == body[field] for field in ("endpoints", "ports")
        )
        if unchanged:
            return
        updated = {**current, "metadata": {**current["metadata"], "labels": body["labels"]},
                   "endpoints": body["endpoints"], "ports": body["ports"]}  # fmt: skip
        await self.client.replace(f"{path}/{current['metadata']['name']}", updated)


async def _ignore_not_found(call: Any) -> None:
    try:
        await call
    except ApiStatusError as err:
        if err.code != 404:
            raise
