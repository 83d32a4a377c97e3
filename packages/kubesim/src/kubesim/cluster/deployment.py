"""The Deployment controller, after pkg/controller/deployment (deployment_controller.go,
sync.go, rolling.go, recreate.go, progress.go).

It owns ReplicaSets named `<deployment>-<pod-template-hash>`, one per distinct pod
template, and moves replicas from the old ones to the new one: RollingUpdate within
maxSurge/maxUnavailable, scaling old ReplicaSets down only as new pods become
available, or Recreate (old to zero, wait for their pods to go, then the new one).
It writes revision and replica annotations, the status `kubectl rollout status`
reads, and `ScalingReplicaSet` events. The decisions are pure functions in
`rollout_plan`, `deployment_util` and `deployment_status`; this module does the I/O.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
from collections.abc import Sequence
from typing import Any

from kubesim import jsoncodec
from kubesim.cluster.event_recorder import EventRecorder
from kubesim.types import Key, Obj

from ..client import ApiStatusError, KubeClient, resource_path
from . import deployment_status as ds
from . import deployment_util as du
from . import ownership
from .labels import labels_of, selector_matches, selects_everything
from .rollout_plan import (
    ScaleStep,
    cleanup_candidates,
    is_scaling_event,
    new_rs_initial_replicas,
    new_rs_target,
    old_rs_scale_down,
    proportional_scale,
    recreate_scale_down,
)
from .runtime import Controller, key_of

log = logging.getLogger(__name__)


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _selector(obj: Obj) -> Any:
    return (obj.get("spec") or {}).get("selector")


def _ns(obj: Obj) -> str:
    return str(obj["metadata"].get("namespace", ""))


def old_pods_running(
    new_rs: Obj | None, old_rss: Sequence[Obj], pod_map: dict[str, list[Obj]]
) -> bool:
    """recreate.go oldPodsRunning: old ReplicaSets report pods, or old pods still exist
    (terminating ones included) in a non-terminal phase."""
    if sum(du.status_int(rs, "replicas") for rs in old_rss) > 0:
        return True
    new_uid = du.uid(new_rs) if new_rs is not None else None
    for rs_uid, pods in pod_map.items():
        if rs_uid == new_uid:
            continue
        for pod in pods:
            if (pod.get("status") or {}).get("phase") not in ("Failed", "Succeeded"):
                return True
    return False


class DeploymentController(Controller):
    name = "deployment-controller"

    def __init__(self, client: KubeClient) -> None:
        super().__init__(client)
        self.deployments = self.informer("apps/v1", "deployments", "Deployment")
        self.replicasets = self.informer("apps/v1", "replicasets", "ReplicaSet")
        self.pods = self.informer("v1", "pods", "Pod")
        self.recorder = EventRecorder(client, "deployment-controller")
        self.deployments.add_handler(lambda _t, obj, _old: self.queue.add(key_of(obj)))
        self.replicasets.add_handler(self._on_replicaset)
        self.pods.add_handler(self._on_pod)

    # event handlers

    def _deployment_for(self, obj: Obj) -> Obj | None:
        ref = ownership.controller_of(obj)
        if ref is None or ref.get("kind") != "Deployment" or ownership.ref_group(ref) != "apps":
            return None
        d = self.deployments.get(_ns(obj), str(ref.get("name")))
        if d is None or d["metadata"].get("uid") != ref.get("uid"):
            return None
        return d

    def _on_replicaset(self, type_: str, rs: Obj, old: Obj | None) -> None:
        owner = self._deployment_for(rs)
        if owner is not None:
            self.queue.add(key_of(owner))
        elif type_ != "DELETED":
            # An orphan: every Deployment that could adopt it takes a look.
            for d in self.deployments.items():
                if _ns(d) == _ns(rs) and selector_matches(_selector(d), labels_of(rs)):
                    self.queue.add(key_of(d))
        if old is not None:
            previous = self._deployment_for(old)
            if previous is not None and (owner is None or key_of(previous) != key_of(owner)):
                self.queue.add(key_of(previous))

    def _on_pod(self, type_: str, pod: Obj, _old: Obj | None) -> None:
        # Recreate waits for old pods to be gone, so their deletion is what wakes it.
        if type_ != "DELETED":
            return
        ref = ownership.controller_of(pod)
        if ref is None or ref.get("kind") != "ReplicaSet":
            return
        rs = self.replicasets.get(_ns(pod), str(ref.get("name")))
        d = self._deployment_for(rs) if rs is not None else None
        if d is not None and du.is_recreate(d):
            self.queue.add(key_of(d))

    # reads

    async def _replica_sets_for(self, d: Obj) -> list[Obj]:
        """getReplicaSetsForDeployment: claim (adopt/release) by selector and controllerRef."""
        # Only its own and orphans: plan_claim passes over those another controller owns.
        owner_uid = du.uid(d)
        mine_or_orphans = self.replicasets.controlled_by("") + (
            self.replicasets.controlled_by(owner_uid) if owner_uid else []
        )
        candidates = [rs for rs in mine_or_orphans if _ns(rs) == _ns(d)]
        selector = _selector(d)
        return await ownership.claim(
            self.client,
            d,
            candidates,
            "replicasets",
            lambda rs: selector_matches(selector, labels_of(rs)),
            lambda: ownership.fresh_and_alive(self.client, d, "deployments"),
        )

    def _pod_map(self, d: Obj, rss: Sequence[Obj]) -> dict[str, list[Obj]]:
        """getPodMapForDeployment: the Deployment's pods grouped by owning ReplicaSet UID."""
        pod_map: dict[str, list[Obj]] = {du.uid(rs): [] for rs in rss}
        selector = _selector(d)
        for rs_uid, pods in pod_map.items():
            for pod in self.pods.controlled_by(rs_uid):
                if _ns(pod) == _ns(d) and selector_matches(selector, labels_of(pod)):
                    pods.append(pod)
        return pod_map

    # writes

    def _path(self, obj: Obj, plural: str, sub: str | None = None) -> str:
        return resource_path("apps/v1", plural, _ns(obj), obj["metadata"]["name"], sub)

    async def _update_status(self, d: Obj) -> Obj:
        """UpdateStatus with the whole object: status and (as upstream) annotations change."""
        updated = await self.client.replace(self._path(d, "deployments", "status"), d)
        # Later writes in this sync start from what the server now holds.
        d["metadata"]["resourceVersion"] = updated["metadata"]["resourceVersion"]
        return updated

    async def _update_rs(self, rs: Obj) -> Obj:
        updated = await self.client.replace(self._path(rs, "replicasets"), rs)
        updated.setdefault("apiVersion", "apps/v1")
        updated.setdefault("kind", "ReplicaSet")
        return updated

    async def _scale(
        self, rs: Obj, new_scale: int, d: Obj, operation: str | None
    ) -> tuple[bool, Obj]:
        """scaleReplicaSetAndRecordEvent (operation None) / scaleReplicaSet."""
        old_scale = du.replicas(rs)
        if operation is None:
            if old_scale == new_scale:
                return False, rs
            operation = "up" if old_scale < new_scale else "down"
        size_changes = old_scale != new_scale
        desired, most = du.replicas(d), du.replicas(d) + du.max_surge(d)
        if not size_changes and not du.replicas_annotations_need_update(rs, desired, most):
            return False, rs
        body = jsoncodec.copy(rs)
        body["spec"]["replicas"] = new_scale
        du.set_replicas_annotations(body, desired, most)
        updated = await self._update_rs(body)
        if size_changes:
            name = updated["metadata"]["name"]
            await self.recorder.emit(
                d,
                "Normal",
                "ScalingReplicaSet",
                f"Scaled {operation} replica set {name} from {old_scale} to {new_scale}",
            )
        return size_changes, updated

    async def _run_steps(
        self, steps: Sequence[ScaleStep], rss: Sequence[Obj], d: Obj
    ) -> tuple[bool, dict[str, Obj]]:
        latest = {rs["metadata"]["name"]: rs for rs in rss}
        scaled_any = False
        for step in steps:
            scaled, latest[step.name] = await self._scale(
                latest[step.name], step.replicas, d, step.operation
            )
            scaled_any = scaled_any or scaled
        return scaled_any, latest

    # the sync

    async def reconcile(self, key: Key) -> float | None:
        cached = self.deployments.get(*key)
        if cached is None:
            return None
        d = jsoncodec.copy(cached)
        if selects_everything(_selector(d)):
            await self.recorder.emit(
                d,
                "Warning",
                "SelectingAll",
                "This deployment is selecting all pods. A non-empty selector is required.",
            )
            status = d.setdefault("status", {})
            if int(status.get("observedGeneration", 0)) < int(d["metadata"].get("generation", 0)):
                status["observedGeneration"] = d["metadata"]["generation"]
                await self._update_status(d)
            return None
        rss = await self._replica_sets_for(d)
        pod_map = self._pod_map(d, rss)
        # Upstream re-runs getAllReplicaSetsAndSyncRevision in each branch over the same
        # cached list (and conflicts with its own writes); one pass gives the same result.
        new_rs, old_rss = await self._all_replica_sets(d, rss, create=False)
        if d["metadata"].get("deletionTimestamp"):
            await self._write_plain_status(d, [*old_rss, new_rs], new_rs)
            return None
        if await self._check_paused_conditions(d):
            return None  # the status write brings us back with a fresh object
        if (d.get("spec") or {}).get("paused") or is_scaling_event(d, new_rs, old_rss):
            await self._sync(d, new_rs, old_rss)
            return None
        if du.is_recreate(d):
            return await self._rollout_recreate(d, rss, new_rs, old_rss, pod_map)
        return await self._rollout_rolling(d, rss, new_rs, old_rss)

    async def _check_paused_conditions(self, d: Obj) -> bool:
        if du.progress_deadline(d) is None:
            return False
        status = d.setdefault("status", {})
        cond = ds.get_condition(status, ds.PROGRESSING)
        if cond is not None and cond.get("reason") == ds.TIMED_OUT:
            return False
        paused = bool((d.get("spec") or {}).get("paused"))
        paused_cond = cond is not None and cond.get("reason") == ds.PAUSED
        if paused and not paused_cond:
            new = ds.new_condition(
                ds.PROGRESSING, "Unknown", ds.PAUSED, "Deployment is paused", _now()
            )
        elif not paused and paused_cond:
            new = ds.new_condition(
                ds.PROGRESSING, "Unknown", ds.RESUMED, "Deployment is resumed", _now()
            )
        else:
            return False
        status.setdefault("conditions", [])
        ds.set_condition(status, new)
        await self._update_status(d)
        return True

    async def _all_replica_sets(
        self, d: Obj, rss: Sequence[Obj], create: bool
    ) -> tuple[Obj | None, list[Obj]]:
        """getAllReplicaSetsAndSyncRevision."""
        _, all_old = du.find_old_replica_sets(d, rss)
        new_rs = await self._new_replica_set(d, rss, all_old, create)
        return new_rs, all_old

    async def _new_replica_set(
        self, d: Obj, rss: Sequence[Obj], old_rss: Sequence[Obj], create: bool
    ) -> Obj | None:
        """getNewReplicaSet: find (and sync annotations of) or create the new ReplicaSet."""
        existing = du.find_new_replica_set(d, rss)
        new_revision = du.max_revision(old_rss) + 1
        status = d.setdefault("status", {})
        status.setdefault("conditions", [])
        has_deadline = du.progress_deadline(d) is not None
        if existing is not None:
            rs: Obj = jsoncodec.copy(existing)
            changed = du.set_new_replica_set_annotations(d, rs, new_revision, exists=True)
            if changed or du.min_ready_seconds(rs) != du.min_ready_seconds(d):
                rs["spec"]["minReadySeconds"] = du.min_ready_seconds(d)
                return await self._update_rs(rs)
            needs_update = du.set_deployment_revision(
                d, du.get_annotations(rs).get(du.REVISION, "")
            )
            if has_deadline and ds.get_condition(status, ds.PROGRESSING) is None:
                name = rs["metadata"]["name"]
                ds.set_condition(
                    status,
                    ds.new_condition(
                        ds.PROGRESSING,
                        "True",
                        ds.FOUND_NEW_RS,
                        f'Found new replica set "{name}"',
                        _now(),
                    ),
                )
                needs_update = True
            if needs_update:
                await self._update_status(d)
            return rs
        if not create:
            return None
        created, already_existed = await self._create_replica_set(d, old_rss, new_revision)
        needs_update = du.set_deployment_revision(d, str(new_revision))
        if not already_existed and has_deadline:
            name = created["metadata"]["name"]
            ds.set_condition(
                status,
                ds.new_condition(
                    ds.PROGRESSING,
                    "True",
                    ds.NEW_REPLICA_SET,
                    f'Created new replica set "{name}"',
                    _now(),
                ),
            )
            needs_update = True
        if needs_update:
            await self._update_status(d)
        return created

    def _new_rs_object(self, d: Obj, old_rss: Sequence[Obj], revision: int) -> Obj:
        template = jsoncodec.copy(du.template_of(d))
        status = d.get("status") or {}
        pod_hash = du.compute_hash(template, status.get("collisionCount"))
        meta = template.setdefault("metadata", {})
        meta["labels"] = {**(meta.get("labels") or {}), du.POD_TEMPLATE_HASH: pod_hash}
        selector = jsoncodec.copy(_selector(d)) or {}
        selector["matchLabels"] = {
            **(selector.get("matchLabels") or {}),
            du.POD_TEMPLATE_HASH: pod_hash,
        }
        rs: Obj = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "name": f"{d['metadata']['name']}-{pod_hash}",
                "namespace": _ns(d),
                "ownerReferences": [ownership.new_controller_ref(d)],
                "labels": dict(meta["labels"]),
            },
            "spec": {
                "replicas": new_rs_initial_replicas(d, old_rss),
                "minReadySeconds": du.min_ready_seconds(d),
                "selector": selector,
                "template": template,
            },
        }
        du.set_new_replica_set_annotations(d, rs, revision, exists=False)
        return rs

    async def _create_replica_set(
        self, d: Obj, old_rss: Sequence[Obj], revision: int
    ) -> tuple[Obj, bool]:
        rs = self._new_rs_object(d, old_rss, revision)
        name = rs["metadata"]["name"]
        try:
            created = await self.client.create(resource_path("apps/v1", "replicasets", _ns(d)), rs)
        except ApiStatusError as err:
            if err.code == 409 and err.reason == "AlreadyExists":
                return await self._existing_or_collision(d, name, err), True
            if err.code == 403 and "being terminated" in str(err.status.get("message", "")):
                raise
            message = f'Failed to create new replica set "{name}": {err.status.get("message", err)}'
            status = d.setdefault("status", {})
            if du.progress_deadline(d) is not None:
                ds.set_condition(
                    status,
                    ds.new_condition(ds.PROGRESSING, "False", ds.FAILED_RS_CREATE, message, _now()),
                )
                with contextlib.suppress(ApiStatusError):
                    await self._update_status(d)
            await self.recorder.emit(d, "Warning", ds.FAILED_RS_CREATE, message)
            raise
        created.setdefault("apiVersion", "apps/v1")
        created.setdefault("kind", "ReplicaSet")
        count = du.replicas(created)
        if count > 0:
            await self.recorder.emit(
                d, "Normal", "ScalingReplicaSet", f"Scaled up replica set {name} from 0 to {count}"
            )
        return created, False

    async def _existing_or_collision(self, d: Obj, name: str, err: ApiStatusError) -> Obj:
        """Ours if we control it and its template is ours; else a hash collision."""
        rs = self.replicasets.get(_ns(d), name)
        if rs is None:
            raise err
        if ownership.controlled_by(rs, d) and du.same_template_ignoring_hash(d, rs):
            return rs
        status = d.setdefault("status", {})
        status["collisionCount"] = int(status.get("collisionCount") or 0) + 1
        with contextlib.suppress(ApiStatusError):
            await self._update_status(d)
        raise err

    async def _cleanup(self, old_rss: Sequence[Obj], d: Obj) -> None:
        """cleanupDeployment: drop old ReplicaSets beyond revisionHistoryLimit."""
        for rs in cleanup_candidates(d, old_rss):
            try:
                await self.client.delete(self._path(rs, "replicasets"))
            except ApiStatusError as err:
                if err.code != 404:
                    raise

    async def _sync_rollout_status(
        self, all_rss: Sequence[Obj | None], new_rs: Obj | None, d: Obj
    ) -> float | None:
        now = _now()
        status = ds.rollout_status(all_rss, new_rs, d, now)
        if ds.same_status(d.get("status"), status):
            return ds.requeue_for_progress_check(d, status, now)
        d["status"] = status
        await self._update_status(d)
        return None

    async def _write_plain_status(
        self, d: Obj, all_rss: Sequence[Obj | None], new_rs: Obj | None
    ) -> None:
        status = ds.status_only(all_rss, new_rs, d, _now())
        if not ds.same_status(d.get("status"), status):
            d["status"] = status
            await self._update_status(d)

    async def _sync(self, d: Obj, new_rs: Obj | None, old_rss: list[Obj]) -> None:
        """sync.go `sync`: scaling events and paused Deployments."""
        everything = [*old_rss, *([new_rs] if new_rs is not None else [])]
        _, latest = await self._run_steps(proportional_scale(d, new_rs, old_rss), everything, d)
        if new_rs is not None:
            new_rs = latest[new_rs["metadata"]["name"]]
        old_rss = [latest[rs["metadata"]["name"]] for rs in old_rss]
        if (d.get("spec") or {}).get("paused"):
            await self._cleanup(old_rss, d)
        await self._write_plain_status(d, [*old_rss, new_rs], new_rs)

    async def _rollout_rolling(
        self, d: Obj, rss: Sequence[Obj], new_rs: Obj | None, old_rss: list[Obj]
    ) -> float | None:
        if new_rs is None:
            new_rs = await self._new_replica_set(d, rss, old_rss, create=True)
            assert new_rs is not None
        scaled_up, new_rs = await self._scale(
            new_rs, new_rs_target(d, [*old_rss, new_rs], new_rs), d, None
        )
        if scaled_up:
            return await self._sync_rollout_status([*old_rss, new_rs], new_rs, d)
        steps = old_rs_scale_down(d, [*old_rss, new_rs], du.active(old_rss), new_rs)
        scaled_down, latest = await self._run_steps(steps, old_rss, d)
        old_rss = [latest[rs["metadata"]["name"]] for rs in old_rss]
        if scaled_down:
            return await self._sync_rollout_status([*old_rss, new_rs], new_rs, d)
        if ds.deployment_complete(d, d.get("status") or {}):
            await self._cleanup(old_rss, d)
        return await self._sync_rollout_status([*old_rss, new_rs], new_rs, d)

    async def _rollout_recreate(
        self,
        d: Obj,
        rss: Sequence[Obj],
        new_rs: Obj | None,
        old_rss: list[Obj],
        pod_map: dict[str, list[Obj]],
    ) -> float | None:
        scaled_down, latest = await self._run_steps(
            recreate_scale_down(du.active(old_rss)), old_rss, d
        )
        old_rss = [latest[rs["metadata"]["name"]] for rs in old_rss]
        if scaled_down:
            return await self._sync_rollout_status([*old_rss, new_rs], new_rs, d)
        if old_pods_running(new_rs, old_rss, pod_map):
            return await self._sync_rollout_status([*old_rss, new_rs], new_rs, d)
        if new_rs is None:
            new_rs = await self._new_replica_set(d, rss, old_rss, create=True)
            assert new_rs is not None
        _, new_rs = await self._scale(new_rs, du.replicas(d), d, None)
        if ds.deployment_complete(d, d.get("status") or {}):
            await self._cleanup(old_rss, d)
        return await self._sync_rollout_status([*old_rss, new_rs], new_rs, d)
