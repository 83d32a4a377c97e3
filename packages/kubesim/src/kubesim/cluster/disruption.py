"""The disruption controller, after pkg/controller/disruption/disruption.go.

For each PodDisruptionBudget it counts the selected pods that are healthy (Ready,
not terminating, not just evicted), the pods expected (from the owning
controllers' scale for maxUnavailable and percentage minAvailable), and writes
desiredHealthy, disruptionsAllowed and the DisruptionAllowed condition, which the
eviction handler reads. It prunes `status.disruptedPods` (written by the eviction
handler) once those pods are deleted, or after the deletion timeout, and resets
stale DisruptionTarget pod conditions. The arithmetic is in `pdb_status`.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Awaitable

from kubesim import jsoncodec
from kubesim.cluster.event_recorder import EventRecorder
from kubesim.lifecycle import cancel_and_wait
from kubesim.types import Key, Obj

from ..apiserver.meta import parse_time, rfc3339
from ..client import ApiStatusError, KubeClient, resource_path
from . import pdb_status as ps
from .ownership import controller_of, ref_group
from .podutil import condition
from .runtime import Controller, WorkQueue, key_of

log = logging.getLogger(__name__)

STALE_POD_DISRUPTION_TIMEOUT = 120.0
_WORKLOAD_PLURALS = {
    ("apps", "ReplicaSet"): "replicasets",
    ("apps", "Deployment"): "deployments",
    ("apps", "StatefulSet"): "statefulsets",
}


class SyncError(Exception):
    """trySync failed: the fail-safe status is written instead."""


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class DisruptionController(Controller):
    name = "disruption-controller"

    def __init__(
        self,
        client: KubeClient,
        *,
        deletion_timeout: float = ps.DELETION_TIMEOUT,
        stale_pod_disruption_timeout: float = STALE_POD_DISRUPTION_TIMEOUT,
    ) -> None:
        super().__init__(client)
        self.deletion_timeout = deletion_timeout
        self.stale_timeout = stale_pod_disruption_timeout
        self.pdbs = self.informer("policy/v1", "poddisruptionbudgets", "PodDisruptionBudget")
        self.pods = self.informer("v1", "pods", "Pod")
        self.replicasets = self.informer("apps/v1", "replicasets", "ReplicaSet")
        self.deployments = self.informer("apps/v1", "deployments", "Deployment")
        self.statefulsets = self.informer("apps/v1", "statefulsets", "StatefulSet")
        self.recorder = EventRecorder(client, "controllermanager")
        self.stale_queue = WorkQueue()
        self._background: set[asyncio.Task[None]] = set()
        self.pdbs.add_handler(lambda _t, pdb, _old: self.queue.add(key_of(pdb)))
        self.pods.add_handler(self._on_pod)
        self.add_loop("stale DisruptionTarget", self.stale_queue, self._reset_stale_condition)

    async def stop(self) -> None:
        await cancel_and_wait(*self._background)
        await super().stop()

    def _spawn(self, coro: Awaitable[None]) -> None:
        async def run() -> None:
            await coro

        task = asyncio.get_running_loop().create_task(run())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # event handlers

    def _on_pod(self, type_: str, pod: Obj, _old: Obj | None) -> None:
        matching = ps.pdbs_for_pod(self.pdbs.items(), pod)
        if matching:
            if len(matching) > 1 and type_ != "DELETED":
                meta = pod["metadata"]
                chosen = matching[0]["metadata"]["name"]
                message = (
                    f'Pod "{meta.get("namespace", "")}"/"{meta["name"]}" matches multiple '
                    f'PodDisruptionBudgets.  Chose "{chosen}" arbitrarily.'
                )
                self._spawn(
                    self.recorder.emit(pod, "Warning", "MultiplePodDisruptionBudgets", message)
                )
            self.queue.add(key_of(matching[0]))
        if type_ != "DELETED":
            wait = self._stale_condition_wait(pod)
            if wait is not None:
                self.stale_queue.add_after(key_of(pod), wait)

    # PodDisruptionBudget sync

    async def reconcile(self, key: Key) -> float | None:
        pdb = self.pdbs.get(*key)
        if pdb is None:
            return None
        try:
            return await self._try_sync(pdb)
        except ApiStatusError as err:
            if err.code == 409:
                raise
            await self._fail_safe(pdb, str(err.status.get("message") or err))
        except SyncError as err:
            await self._fail_safe(pdb, str(err))
        return None

    def _pods_for(self, pdb: Obj) -> list[Obj]:
        namespace = pdb["metadata"].get("namespace", "")
        return [
            p
            for p in self.pods.items()
            if p["metadata"].get("namespace", "") == namespace and ps.selects(pdb, p)
        ]

    async def _try_sync(self, pdb: Obj) -> float | None:
        pods = self._pods_for(pdb)
        if not pods:
            await self.recorder.emit(pdb, "Normal", "NoPods", "No matching pods found")
        try:
            expected, desired, unmanaged = await self._expected_pod_count(pdb, pods)
        except SyncError as err:
            message = f"Failed to calculate the number of expected pods: {err}"
            await self.recorder.emit(pdb, "Warning", "CalculateExpectedPodCountFailed", message)
            raise
        if unmanaged:
            selector = ps.go_label_selector(ps.spec(pdb).get("selector"))
            await self.recorder.emit(
                pdb,
                "Warning",
                "UnmanagedPods",
                f"Pods selected by this PodDisruptionBudget (selector: {selector}) were "
                "found to be unmanaged. As a result, the status of the PDB cannot be "
                "calculated correctly, which may result in undefined behavior. To account for "
                'these pods please set ".spec.minAvailable" field of the PDB to an integer '
                "value.",
            )
        now = _now()
        disrupted = ps.build_disrupted_pods(pods, pdb, now, self.deletion_timeout)
        for name in disrupted.overdue:
            pod = next(p for p in pods if p["metadata"]["name"] == name)
            namespace = pdb["metadata"].get("namespace", "")
            # Upstream prints the namespace twice here; kept so the text matches.
            await self.recorder.emit(
                pod,
                "Warning",
                "NotDeleted",
                f"Pod was expected by PDB {namespace}/{namespace} to be deleted but it wasn't",
            )
        healthy = ps.count_healthy(pods, disrupted.kept, now, self.deletion_timeout)
        status = ps.new_status(pdb, healthy, desired, expected, disrupted.kept, now)
        if status is not None:
            await self._write_status(pdb, status)
        if disrupted.recheck_at is not None:
            return max((disrupted.recheck_at - now).total_seconds(), 0.0) + 0.001
        return None

    async def _expected_pod_count(self, pdb: Obj, pods: list[Obj]) -> tuple[int, int, list[str]]:
        unmanaged: list[str] = []
        scale = 0
        if ps.needs_controller_scale(pdb):
            scale, unmanaged = await self._expected_scale(pods)
        expected, desired = ps.expected_and_desired(pdb, len(pods), scale)
        return expected, desired, unmanaged

    async def _expected_scale(self, pods: list[Obj]) -> tuple[int, list[str]]:
        """getExpectedScale: the sum of the scale of every controller of the selected pods."""
        scales: dict[str, int] = {}
        unmanaged: list[str] = []
        for pod in pods:
            ref = controller_of(pod)
            if ref is None:
                unmanaged.append(pod["metadata"]["name"])
                continue
            if ref.get("uid") in scales:
                continue
            found = await self._controller_scale(ref, pod["metadata"].get("namespace", ""))
            if found is None:
                raise SyncError(f'found no controllers for pod "{pod["metadata"]["name"]}"')
            scales[found[0]] = found[1]
        return sum(scales.values()), unmanaged

    async def _controller_scale(self, ref: Obj, namespace: str) -> tuple[str, int] | None:
        """The finders, in upstream order: Deployment (through its ReplicaSet), a bare
        ReplicaSet, StatefulSet, then any kind with a scale subresource."""
        kind, group, uid = ref.get("kind"), ref_group(ref), ref.get("uid")
        if kind == "ReplicaSet" and group in ("apps", "extensions"):
            rs = self.replicasets.get(namespace, str(ref.get("name")))
            if rs is not None and rs["metadata"].get("uid") == uid:
                owner = controller_of(rs)
                if owner is None or owner.get("kind") != "Deployment":
                    return str(uid), _replicas(rs)
                d = self.deployments.get(namespace, str(owner.get("name")))
                if (
                    ref_group(owner) in ("apps", "extensions")
                    and d is not None
                    and d["metadata"].get("uid") == owner.get("uid")
                ):
                    return str(owner["uid"]), _replicas(d)
        if kind == "StatefulSet" and group == "apps":
            ss = self.statefulsets.get(namespace, str(ref.get("name")))
            if ss is not None and ss["metadata"].get("uid") == uid:
                return str(uid), _replicas(ss)
        # Not in the caches (or another kind): the generic finder, through /scale.
        return await self._scale_subresource(ref, namespace)

    async def _scale_subresource(self, ref: Obj, namespace: str) -> tuple[str, int] | None:
        """getScaleController: discovery finds the resource, then its /scale."""
        api_version = str(ref.get("apiVersion", ""))
        plural = _WORKLOAD_PLURALS.get((ref_group(ref), str(ref.get("kind"))))
        resources: list[Obj] = []
        try:
            discovery = await self.client.get(
                f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
            )
            resources = [r for r in discovery.get("resources") or [] if isinstance(r, dict)]
        except ApiStatusError as err:
            raise SyncError(
                f'no matches for kind "{ref.get("kind")}" in version "{api_version}"'
            ) from err
        if plural is None:
            plural = next(
                (
                    r["name"]
                    for r in resources
                    if r.get("kind") == ref.get("kind") and "/" not in r.get("name", "")
                ),
                None,
            )
        if plural is None:
            raise SyncError(f'no matches for kind "{ref.get("kind")}" in version "{api_version}"')
        path = resource_path(api_version, plural, namespace, str(ref.get("name")), "scale")
        try:
            scale = await self.client.get(path)
        except ApiStatusError as err:
            if err.code != 404:
                raise
            if not any(r.get("name") == f"{plural}/scale" for r in resources):
                group = ref_group(ref)
                resource = f"{plural}.{group}" if group else plural
                raise SyncError(f"{resource} does not implement the scale subresource") from err
            return None
        if (scale.get("metadata") or {}).get("uid") != ref.get("uid"):
            return None
        return str(ref["uid"]), int((scale.get("spec") or {}).get("replicas", 0) or 0)

    async def _write_status(self, pdb: Obj, status: Obj) -> None:
        body = jsoncodec.copy(pdb)
        body["status"] = status
        meta = pdb["metadata"]
        await self.client.replace(
            resource_path(
                "policy/v1", "poddisruptionbudgets", meta.get("namespace"), meta["name"], "status"
            ),
            body,
        )

    async def _fail_safe(self, pdb: Obj, message: str) -> None:
        await self._write_status(pdb, ps.fail_safe_status(pdb, message, _now()))

    # stale DisruptionTarget conditions

    def _stale_condition_wait(self, pod: Obj) -> float | None:
        """nonTerminatingPodHasStaleDisruptionCondition: seconds left before the reset."""
        if pod["metadata"].get("deletionTimestamp"):
            return None
        cond = condition(pod, "DisruptionTarget")
        phase = (pod.get("status") or {}).get("phase")
        if (
            cond is None
            or cond.get("status") != "True"
            or cond.get("reason") == "TerminationByKubelet"
            or phase in ("Succeeded", "Failed")
        ):
            return None
        try:
            since = parse_time(str(cond.get("lastTransitionTime", "")))
        except ValueError:
            return 0.0
        return max(self.stale_timeout - (_now() - since).total_seconds(), 0.0)

    async def _reset_stale_condition(self, key: Key) -> None:
        pod = self.pods.get(*key)
        if pod is None:
            return
        wait = self._stale_condition_wait(pod)
        if wait is None:
            return
        if wait > 0:
            self.stale_queue.add_after(key, wait)
            return
        body = jsoncodec.copy(pod)
        conditions = body["status"]["conditions"]
        for index, cond in enumerate(conditions):
            if cond.get("type") == "DisruptionTarget":
                conditions[index] = {
                    "type": "DisruptionTarget",
                    "status": "False",
                    "lastTransitionTime": rfc3339(_now()),
                }
        meta = pod["metadata"]
        await self.client.replace(
            resource_path("v1", "pods", meta.get("namespace"), meta["name"], "status"), body
        )


def _replicas(obj: Obj) -> int:
    value = (obj.get("spec") or {}).get("replicas", 1)
    return int(value) if isinstance(value, int) else 1


__all__ = ["DisruptionController", "SyncError"]
