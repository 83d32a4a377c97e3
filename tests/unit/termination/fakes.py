"""A scripted ClusterReader and raw objects for the detector's unit tests.

Each read answers with its scripted value: a raw object, a :class:`ReadFailure` (or
any exception) to raise, :data:`HANG` to never answer (until cancelled, which is
recorded), or a :class:`Gate` to answer only once the test opens it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from graceful_drain.termination.evidence import UnavailableReason
from graceful_drain.termination.identity import PodIdentity
from graceful_drain.termination.reader import ReadFailure

Obj = dict[str, Any]
T = TypeVar("T")
UID = "6f1c2a9e-0000-4000-8000-000000000001"
NAMESPACE = "shop"
POD_NAME = "web-6d4cf56db6-x7k2p"
REPLICASET = "web-6d4cf56db6"
NODE = "node-1"
MEMORY_MESSAGE = (
    "The node was low on resource: memory. Threshold quantity: 100Mi, available: 87Mi. "
)


class _Hang:
    def __repr__(self) -> str:
        return "HANG"


HANG = _Hang()


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An event loop whose clock moves only when nothing is ready to run.

    Time jumps to the next live timer once every runnable callback has run, so a deadline
    passes exactly when every read that can answer has answered, however slowly the
    machine runs the loop: the scripted reader does no I/O. Run a coroutine in it with
    :func:`run_in_virtual_time`, and give a :class:`Deadline` the loop's ``time`` as its
    clock."""

    def __init__(self) -> None:
        super().__init__()
        self._now = 0.0

    def time(self) -> float:
        return self._now

    def _run_once(self) -> None:
        ready: Any = self._ready  # type: ignore[attr-defined]
        scheduled: Any = self._scheduled  # type: ignore[attr-defined]
        if not ready:
            live = [handle.when() for handle in scheduled if not handle.cancelled()]
            if live:
                self._now = max(self._now, min(live))
        super()._run_once()  # type: ignore[misc]


def run_in_virtual_time(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` on a :class:`VirtualTimeLoop`."""
    with asyncio.Runner(loop_factory=VirtualTimeLoop) as runner:
        return runner.run(main)


@dataclass
class Gate:
    """Answer ``value`` once opened; ``reached`` is set when the read starts."""

    value: object
    reached: asyncio.Event = field(default_factory=asyncio.Event)
    opened: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass
class ThreadGate:
    """Like Gate, for a reader driven from another thread's event loop."""

    value: object
    reached: threading.Event = field(default_factory=threading.Event)
    opened: threading.Event = field(default_factory=threading.Event)


def forbidden(what: str = "forbidden") -> ReadFailure:
    return ReadFailure(UnavailableReason.FORBIDDEN, f"HTTP 403: {what}")


def not_found(what: str = "not found") -> ReadFailure:
    return ReadFailure(UnavailableReason.NOT_FOUND, f"HTTP 404: {what}")


def identity(
    *, name: str = POD_NAME, uid: str | None = UID, node: str | None = NODE
) -> PodIdentity:
    return PodIdentity(name, NAMESPACE, uid, node, "env:POD_NAME", "env:POD_NAMESPACE")


def pod_obj(
    *,
    uid: str = UID,
    name: str = POD_NAME,
    owner: str | None = REPLICASET,
    deleted: bool = False,
    grace: int | None = 30,
    deletion_grace: int | None = None,
    disruption: str | None = None,
    status: Obj | None = None,
) -> Obj:
    meta: Obj = {"name": name, "namespace": NAMESPACE, "uid": uid}
    if owner is not None:
        meta["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner, "uid": "rs-uid",
             "controller": True}
        ]  # fmt: skip
    if deleted:
        meta["deletionTimestamp"] = "2026-11-11T12:00:30Z"
        meta["deletionGracePeriodSeconds"] = deletion_grace if deletion_grace is not None else 30
    spec: Obj = {"nodeName": NODE, "containers": [{"name": "web", "image": "nginx"}]}
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    # As the API server writes it: a scheduled pod always has conditions.
    pod_status: Obj = {
        "phase": "Running",
        "conditions": [{"type": "PodScheduled", "status": "True"}],
        **(status or {}),
    }
    if disruption is not None:
        pod_status["conditions"] = [
            {"type": "DisruptionTarget", "status": "True", "reason": disruption,
             "message": "Eviction API: evicting", "lastTransitionTime": "2026-11-11T12:00:00Z"}
        ]  # fmt: skip
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec,
            "status": pod_status}  # fmt: skip


def replicaset_obj(name: str = REPLICASET, deployment: str | None = "web") -> Obj:
    meta: Obj = {"name": name, "namespace": NAMESPACE}
    if deployment is not None:
        meta["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": "Deployment", "name": deployment, "uid": "d-uid",
             "controller": True}
        ]  # fmt: skip
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": meta}


def deployment_obj(name: str = "web", restarted_at: str | None = None) -> Obj:
    meta: Obj = {"name": name, "namespace": NAMESPACE}
    if restarted_at is not None:
        meta["annotations"] = {"graceful-drain.stonal.com/restarted-at": restarted_at}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta}


def node_obj(*pressure: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": NODE},
        "spec": {},
        "status": {
            "conditions": [{"type": kind, "status": "True"} for kind in pressure]
            + [{"type": "Ready", "status": "True"}]
        },
    }


def evicted_event(uid: str = UID, message: str = MEMORY_MESSAGE) -> Obj:
    return {
        "metadata": {"name": "e1", "namespace": NAMESPACE,
                     "annotations": {"starved_resource": "memory"}},
        "involvedObject": {"kind": "Pod", "name": POD_NAME, "uid": uid},
        "reason": "Evicted",
        "type": "Warning",
        "message": message,
        "source": {"component": "kubelet", "host": NODE},
        "lastTimestamp": "2026-11-11T11:59:58Z",
    }  # fmt: skip


def events_list(*items: Obj) -> Obj:
    return {"kind": "EventList", "apiVersion": "v1", "items": list(items)}


class FakeReader:
    """A :class:`ClusterReader` answering from a script; records calls and cancellations."""

    def __init__(
        self,
        *,
        pod: object = None,
        events: object = None,
        node: object = None,
        replicasets: Mapping[str, object] | None = None,
        deployments: Mapping[str, object] | None = None,
        create_event: object = None,
    ) -> None:
        self.script: dict[str, object] = {
            "pod": pod if pod is not None else pod_obj(),
            "events": events if events is not None else events_list(),
            "node": node if node is not None else node_obj(),
            "create_event": create_event,
        }
        self.replicasets = (
            replicasets if replicasets is not None else {REPLICASET: replicaset_obj()}
        )
        self.deployments = deployments if deployments is not None else {"web": deployment_obj()}
        self.calls: list[tuple[str, ...]] = []
        self.cancelled: list[str] = []
        self.created: list[tuple[str, dict[str, object]]] = []
        self.closed = False

    async def _answer(self, what: str, value: object) -> object:
        try:
            if value is HANG:
                await asyncio.Event().wait()
            if isinstance(value, Gate):
                value.reached.set()
                await value.opened.wait()
                value = value.value
            if isinstance(value, ThreadGate):
                value.reached.set()
                await asyncio.get_running_loop().run_in_executor(None, value.opened.wait)
                value = value.value
        except asyncio.CancelledError:
            self.cancelled.append(what)
            raise
        if isinstance(value, BaseException):
            raise value
        return value

    async def get_pod(self, namespace: str, name: str) -> object:
        self.calls.append(("get_pod", namespace, name))
        return await self._answer("pod", self.script["pod"])

    async def list_events(self, namespace: str, field_selector: str) -> object:
        self.calls.append(("list_events", namespace, field_selector))
        return await self._answer("events", self.script["events"])

    async def get_node(self, name: str) -> object:
        self.calls.append(("get_node", name))
        return await self._answer("node", self.script["node"])

    async def get_replicaset(self, namespace: str, name: str) -> object:
        self.calls.append(("get_replicaset", namespace, name))
        return await self._answer("replicaset", self.replicasets.get(name, not_found(name)))

    async def get_deployment(self, namespace: str, name: str) -> object:
        self.calls.append(("get_deployment", namespace, name))
        return await self._answer("deployment", self.deployments.get(name, not_found(name)))

    async def create_event(self, namespace: str, event: dict[str, object]) -> None:
        self.calls.append(("create_event", namespace))
        await self._answer("create_event", self.script["create_event"])
        self.created.append((namespace, event))

    async def close(self) -> None:
        self.closed = True


class ReaderFactory:
    """``Detector(reader_factory=...)``: hands out one FakeReader per detection."""

    def __init__(self, reader: FakeReader | BaseException) -> None:
        self.reader = reader
        self.timeouts: list[float] = []

    def __call__(self, timeout_seconds: float) -> FakeReader:
        self.timeouts.append(timeout_seconds)
        if isinstance(self.reader, BaseException):
            raise self.reader
        return self.reader
