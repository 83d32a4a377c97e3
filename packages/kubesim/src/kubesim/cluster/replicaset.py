"""The ReplicaSet controller, after pkg/controller/replicaset/replica_set.go.

It keeps `spec.replicas` active pods per ReplicaSet: creates missing ones from the
template (slow-start batches, `SuccessfulCreate` events), deletes surplus ones in
upstream's order (`SuccessfulDelete`), and writes status. Terminating and
terminal pods do not count. Expectations stop it acting again on a cache that has
not yet seen its own creates and deletes.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from kubesim import jsoncodec
from kubesim.cluster.event_recorder import EventRecorder
from kubesim.types import Key, Obj

from ..client import ApiStatusError, KubeClient, resource_path
from . import ownership
from .deployment_util import replicas, template_of
from .labels import labels_of, selector_matches
from .podutil import is_pod_active, pods_to_delete
from .replicaset_status import calculate_status, next_availability_check, status_is_current
from .runtime import Controller, key_of

log = logging.getLogger(__name__)

BURST_REPLICAS = 500
SLOW_START_INITIAL_BATCH = 1
EXPECTATIONS_TIMEOUT = 300.0  # controller.ExpectationsTimeout


@dataclass
class _Expectations:
    """ControllerExpectations: pod creations still to be seen, deletions still to be seen."""

    since: float
    adds: int = 0
    deletes: set[str] = field(default_factory=set)

    def satisfied(self, now: float) -> bool:
        return (self.adds <= 0 and not self.deletes) or now - self.since > EXPECTATIONS_TIMEOUT


async def slow_start_batch(
    count: int, initial: int, fn: Callable[[], Awaitable[None]]
) -> tuple[int, BaseException | None]:
    """Run `fn` `count` times in doubling batches; stop after the first batch with a failure."""
    remaining, successes = count, 0
    batch = min(remaining, initial)
    while batch > 0:
        results = await asyncio.gather(*(fn() for _ in range(batch)), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        successes += batch - len(errors)
        if errors:
            return successes, errors[0]
        remaining -= batch
        batch = min(2 * batch, remaining)
    return successes, None


def pod_from_template(rs: Obj) -> Obj:
    """GetPodFromTemplate: labels, annotations and finalizers of the template, its spec."""
    template = template_of(rs)
    meta = template.get("metadata") or {}
    name = rs["metadata"]["name"]
    pod_meta: Obj = {
        "generateName": f"{name}-",
        "labels": dict(meta.get("labels") or {}),
        "ownerReferences": [ownership.new_controller_ref(rs)],
    }
    if meta.get("annotations"):
        pod_meta["annotations"] = dict(meta["annotations"])
    if meta.get("finalizers"):
        pod_meta["finalizers"] = list(meta["finalizers"])
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": pod_meta,
        "spec": jsoncodec.copy(template.get("spec") or {}),
    }


def _message(err: BaseException) -> str:
    if isinstance(err, ApiStatusError):
        return str(err.status.get("message") or err)
    return str(err)


class ReplicaSetController(Controller):
    name = "replicaset-controller"

    def __init__(self, client: KubeClient, *, burst_replicas: int = BURST_REPLICAS) -> None:
        super().__init__(client)
        self.burst_replicas = burst_replicas
        self.replicasets = self.informer("apps/v1", "replicasets", "ReplicaSet")
        self.pods = self.informer("v1", "pods", "Pod")
        self.recorder = EventRecorder(client, "replicaset-controller")
        self._expectations: dict[Key, _Expectations] = {}
        self.replicasets.add_handler(self._on_replicaset)
        self.pods.add_handler(self._on_pod)

    # event handlers

    def _on_replicaset(self, type_: str, obj: Obj, old: Obj | None) -> None:
        if type_ == "DELETED":
            self._expectations.pop(key_of(obj), None)
        self.queue.add(key_of(obj))

    def _owner_key(self, pod: Obj) -> Key | None:
        ref = ownership.controller_of(pod)
        if ref is None or ref.get("kind") != "ReplicaSet" or ownership.ref_group(ref) != "apps":
            return None
        namespace = pod["metadata"].get("namespace", "")
        rs = self.replicasets.get(namespace, str(ref.get("name")))
        if rs is None or rs["metadata"].get("uid") != ref.get("uid"):
            return None
        return key_of(rs)

    def _enqueue_matching(self, pod: Obj) -> None:
        """An orphan: wake every ReplicaSet that could adopt it."""
        namespace = pod["metadata"].get("namespace", "")
        for rs in self.replicasets.items():
            if rs["metadata"].get("namespace", "") == namespace and selector_matches(
                (rs.get("spec") or {}).get("selector"), labels_of(pod)
            ):
                self.queue.add(key_of(rs))

    def _observe_deletion(self, owner: Key, pod: Obj) -> None:
        exp = self._expectations.get(owner)
        if exp is not None:
            exp.deletes.discard(pod["metadata"]["name"])

    def _on_pod(self, type_: str, pod: Obj, old: Obj | None) -> None:
        owner = self._owner_key(pod)
        if type_ == "ADDED":
            if owner is not None:
                exp = self._expectations.get(owner)
                if exp is not None:
                    exp.adds -= 1
                if pod["metadata"].get("deletionTimestamp"):
                    self._observe_deletion(owner, pod)
                self.queue.add(owner)
            else:
                self._enqueue_matching(pod)
            return
        if type_ == "DELETED":
            if owner is not None:
                self._observe_deletion(owner, pod)
                self.queue.add(owner)
            return
        if owner is not None and pod["metadata"].get("deletionTimestamp"):
            self._observe_deletion(owner, pod)
        if old is not None:
            old_owner = self._owner_key(old)
            if old_owner is not None and old_owner != owner:
                self.queue.add(old_owner)
            if labels_of(old) != labels_of(pod) and owner is None:
                self._enqueue_matching(old)
        if owner is not None:
            self.queue.add(owner)
        else:
            self._enqueue_matching(pod)

    # reconcile

    async def reconcile(self, key: Key) -> float | None:
        rs = self.replicasets.get(*key)
        if rs is None:
            self._expectations.pop(key, None)
            return None
        loop_now = asyncio.get_running_loop().time()
        exp = self._expectations.get(key)
        needs_sync = exp is None or exp.satisfied(loop_now)
        namespace = key[0]
        # Only its own and orphans: the claim passes over pods another controller owns.
        owner_uid = rs["metadata"].get("uid")
        mine_or_orphans = self.pods.controlled_by("") + (
            self.pods.controlled_by(str(owner_uid)) if owner_uid else []
        )
        candidates = [
            p
            for p in mine_or_orphans
            if p["metadata"].get("namespace", "") == namespace and is_pod_active(p)
        ]
        selector = (rs.get("spec") or {}).get("selector")
        pods = await ownership.claim(
            self.client,
            rs,
            candidates,
            "pods",
            lambda p: selector_matches(selector, labels_of(p)),
            lambda: ownership.fresh_and_alive(self.client, rs, "replicasets"),
        )
        manage_error: BaseException | None = None
        if needs_sync and not rs["metadata"].get("deletionTimestamp"):
            manage_error = await self._manage_replicas(key, rs, pods)
        now = dt.datetime.now(dt.UTC)
        new_status = calculate_status(
            rs, pods, _message(manage_error) if manage_error else None, now
        )
        if not status_is_current(rs, new_status):
            await self._write_status(rs, new_status)
        if manage_error is not None:
            raise manage_error
        return next_availability_check(rs, pods, now)

    async def _write_status(self, rs: Obj, status: Obj) -> None:
        body = jsoncodec.copy(rs)
        status = dict(status)
        generation = int(rs["metadata"].get("generation", 0))
        if generation:
            status["observedGeneration"] = generation
        body["status"] = status
        meta = rs["metadata"]
        path = resource_path(
            "apps/v1", "replicasets", meta.get("namespace"), meta["name"], "status"
        )
        try:
            await self.client.replace(path, body)
        except ApiStatusError as err:
            if err.code != 409:
                raise
            # updateReplicaSetStatus retries once on the latest copy (statusUpdateRetries).
            latest = await self.client.get(path[: -len("/status")])
            latest["status"] = status
            await self.client.replace(path, latest)

    async def _manage_replicas(self, key: Key, rs: Obj, pods: list[Obj]) -> BaseException | None:
        diff = len(pods) - replicas(rs)
        loop_now = asyncio.get_running_loop().time()
        if diff < 0:
            count = min(-diff, self.burst_replicas)
            exp = self._expectations[key] = _Expectations(since=loop_now, adds=count)

            async def create() -> None:
                await self._create_pod(rs)

            successes, err = await slow_start_batch(count, SLOW_START_INITIAL_BATCH, create)
            # Creations that were never attempted or failed will not be observed.
            exp.adds -= count - successes
            return err
        if diff > 0:
            count = min(diff, self.burst_replicas)
            doomed = pods_to_delete(pods, self._related_pods(rs), count, dt.datetime.now(dt.UTC))
            exp = self._expectations[key] = _Expectations(since=loop_now)
            exp.deletes = {p["metadata"]["name"] for p in doomed}
            results = await asyncio.gather(
                *(self._delete_pod(rs, p, exp) for p in doomed), return_exceptions=True
            )
            errors = [r for r in results if isinstance(r, BaseException)]
            return errors[0] if errors else None
        return None

    def _related_pods(self, rs: Obj) -> list[Obj]:
        """getIndirectlyRelatedPods: pods of every ReplicaSet sharing this one's controller."""
        ref = ownership.controller_of(rs)
        if ref is None:
            return []
        namespace = rs["metadata"].get("namespace", "")
        siblings = [
            r
            for r in self.replicasets.controlled_by(str(ref.get("uid", "")))
            if r["metadata"].get("namespace", "") == namespace
        ]
        seen: dict[str, Obj] = {}
        for sibling in siblings:
            selector = (sibling.get("spec") or {}).get("selector")
            for pod in self.pods.items():
                if pod["metadata"].get("namespace", "") == namespace and selector_matches(
                    selector, labels_of(pod)
                ):
                    seen.setdefault(str(pod["metadata"].get("uid")), pod)
        return list(seen.values())

    async def _create_pod(self, rs: Obj) -> None:
        namespace = rs["metadata"].get("namespace", "")
        try:
            created = await self.client.create(
                resource_path("v1", "pods", namespace), pod_from_template(rs)
            )
        except ApiStatusError as err:
            await self.recorder.emit(
                rs, "Warning", "FailedCreate", f"Error creating: {_message(err)}"
            )
            raise
        name = created["metadata"]["name"]
        await self.recorder.emit(rs, "Normal", "SuccessfulCreate", f"Created pod: {name}")

    async def _delete_pod(self, rs: Obj, pod: Obj, exp: _Expectations) -> None:
        meta = pod["metadata"]
        path = resource_path("v1", "pods", meta.get("namespace"), meta["name"])
        try:
            await self.client.delete(path)
        except ApiStatusError as err:
            # The informer will not observe a deletion that did not happen.
            exp.deletes.discard(meta["name"])
            if err.code == 404:
                return  # already gone: no event, as RealPodControl.DeletePod
            await self.recorder.emit(
                rs, "Warning", "FailedDelete", f"Error deleting: {_message(err)}"
            )
            raise
        await self.recorder.emit(rs, "Normal", "SuccessfulDelete", f"Deleted pod: {meta['name']}")
