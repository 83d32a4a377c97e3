"""What a demo run records while it happens, on one clock.

- `EvictionRecordingClient`: the drain client's own API client, noting every eviction request
  and the API server's answer (so refusals show for any drain client, as the client saw them);
- `DeploymentEvents`: the Events about the Deployment, each stamped when first seen;
- `PodDepartures`: when pods begin terminating and when they are gone.

The Deployment's Ready pods and its ReplicaSets come from kubesim's AvailabilityRecorder.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from graceful_drain.kube.meta import HTTP_CREATED
from kubesim.client import ApiStatusError, KubeClient
from kubesim.cluster.runtime import Informer

from .timeline import POD_DELETED, POD_TERMINATING, EvictionAttempt, ObservedEvent, PodChange

Obj = dict[str, Any]
Clock = Callable[[], float]
EVICTION_SUFFIX = "/eviction"


def status_message(error: ApiStatusError) -> str:
    return str(error.status.get("message") or error)


class EvictionRecordingClient(KubeClient):
    """A KubeClient that records each POST to a pods/eviction subresource and its outcome."""

    def __init__(
        self, server: str, token: str, ca_pem: bytes, *, user_agent: str, clock: Clock
    ) -> None:
        super().__init__(server, token, ca_pem, user_agent=user_agent)
        self.clock = clock
        self.evictions: list[EvictionAttempt] = []

    async def create(self, path: str, body: Obj) -> Obj:
        if not path.endswith(EVICTION_SUFFIX):
            return await super().create(path, body)
        meta = body.get("metadata") or {}
        pod = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        try:
            created = await super().create(path, body)
        except ApiStatusError as error:
            self.evictions.append(
                EvictionAttempt(self.clock(), pod, error.code, status_message(error))
            )
            raise
        self.evictions.append(EvictionAttempt(self.clock(), pod, HTTP_CREATED))
        return created


class DeploymentEvents:
    """Events whose involvedObject is one Deployment, in the order they were seen."""

    def __init__(self, client: KubeClient, namespace: str, name: str, *, clock: Clock) -> None:
        self.clock = clock
        self.seen: list[ObservedEvent] = []
        self._counts: dict[str, int] = {}
        self._name = name
        self._informer = Informer(client, "v1", "events", "Event", namespace=namespace)
        self._informer.add_handler(self._handle)
        self._waiters: list[asyncio.Future[None]] = []

    def _handle(self, type_: str, event: Obj, _old: Obj | None) -> None:
        involved = event.get("involvedObject") or {}
        if type_ == "DELETED" or involved.get("kind") != "Deployment":
            return
        if involved.get("name") != self._name:
            return
        uid = str(event["metadata"].get("uid", ""))
        count = int(event.get("count") or 1)
        if count <= self._counts.get(uid, 0):
            return
        self._counts[uid] = count
        self.seen.append(
            ObservedEvent(
                self.clock(),
                str(event.get("type", "")),
                str(event.get("reason", "")),
                str(event.get("message", "")),
            )
        )
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def reasons(self) -> list[str]:
        return [event.reason for event in self.seen]

    async def wait_until(self, predicate: Callable[[], bool]) -> None:
        """Return once `predicate()` holds, re-checked after each new event (bound it)."""
        while not predicate():
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            await waiter

    async def start(self) -> None:
        await self._informer.start()

    async def stop(self) -> None:
        await self._informer.stop()


class PodDepartures:
    """When each pod of a namespace was first seen terminating, and when it was deleted."""

    def __init__(self, client: KubeClient, namespace: str, *, clock: Clock) -> None:
        self.clock = clock
        self.seen: list[PodChange] = []
        self._terminating: set[str] = set()
        self._informer = Informer(client, "v1", "pods", "Pod", namespace=namespace)
        self._informer.add_handler(self._handle)

    def _handle(self, type_: str, pod: Obj, _old: Obj | None) -> None:
        meta = pod["metadata"]
        key = f"{meta.get('namespace', '')}/{meta['name']}"
        node = str((pod.get("spec") or {}).get("nodeName") or "")
        if type_ == "DELETED":
            self.seen.append(PodChange(self.clock(), key, node, POD_DELETED))
        elif meta.get("deletionTimestamp") and key not in self._terminating:
            self._terminating.add(key)
            self.seen.append(PodChange(self.clock(), key, node, POD_TERMINATING))

    async def start(self) -> None:
        await self._informer.start()

    async def stop(self) -> None:
        await self._informer.stop()
