"""The controller's informer cache of the cluster and its live reads: Pods, ReplicaSets and
Deployments as slim objects, Nodes, Karpenter's NodeClaims.

This is where the controller reads the cluster; what it decides from those reads is the
pure controller/decision/ (the lookups' types and rules, decision/lookups.py), which does no
I/O. Every object is kept as its slim view (controller/decision/model.py) in the informers of
kube/cache.py. Pods are indexed by their owning ReplicaSet, ReplicaSets by their owning
Deployment. Nodes (cluster-wide, whatever --namespaces says) are kept only as whether they are
being drained (draining.py): `ready_elsewhere` counts a Deployment's Ready pods on
the nodes that stay.

Until every cache has synced, a pod's owner the cache cannot resolve is read live
(`resolve_owner_live`); if that fails too the eviction is answered 429 (`Reason.CACHE_COLD`):
a cold replica never allows on ignorance.

A pod missing from the cache (`cached_pod`) is read live (`read_pod`): the cache may simply
be cold.
A 404 then means the pod is gone (`Reason.POD_GONE`), any other failure that it is
unavailable (`Reason.CACHE_COLD`).

Karpenter's NodeClaims (cluster-wide) are kept as their node and termination deadline
(decision/deadline.py), for `node_deadline`. They are optional (nodeclaims.py: read once
served); they never hold readiness back (`resources` leaves them out).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from lightkube import AsyncClient
from lightkube.core.resource import Resource
from lightkube.resources.apps_v1 import Deployment, ReplicaSet
from lightkube.resources.core_v1 import Node, Pod

from graceful_drain.controller.cache.nodeclaims import (
    NODECLAIMS_BY_NODE,
    NODECLAIMS_RECHECK_SECONDS,
    NodeClaim,
    claim_node,
    run_once_served,
)
from graceful_drain.controller.decision.deadline import NodeClaimInfo
from graceful_drain.controller.decision.ledger import PodUid, gone_uids
from graceful_drain.controller.decision.lookups import (
    DeploymentFound,
    NoDeployment,
    OwnerLookup,
    OwnerUnresolved,
    PodFound,
    PodGone,
    PodLookup,
    PodUnavailable,
    ready_besides_among,
    ready_elsewhere_among,
    resolve_owner,
)
from graceful_drain.controller.decision.model import (
    DeploymentInfo,
    NodeInfo,
    PodInfo,
    ReplicaSetInfo,
)
from graceful_drain.kube.backoff import Backoff
from graceful_drain.kube.cache import BackoffFactory, ListWatchFactory, ResourceCache
from graceful_drain.kube.client import RawApi, error_detail, http_status
from graceful_drain.kube.informer import (
    DEFAULT_SILENCE_LIMIT_SECONDS,
    FastDecode,
    Indexer,
    Informer,
    LightkubeListWatch,
    ListWatch,
)
from graceful_drain.kube.meta import HTTP_NOT_FOUND, utc_now

T = TypeVar("T")

PODS_BY_REPLICASET = "replicaset"
REPLICASETS_BY_DEPLOYMENT = "deployment"
STALE_AFTER_FACTOR = 1.2


@dataclass(frozen=True)
class _Informers:
    """How the cache builds a resource's informers: one per scope (each watched namespace,
    or the whole cluster), each from `source` with its own back-off."""

    source: ListWatchFactory
    scopes: tuple[str | None, ...]
    backoff: BackoffFactory
    silence_limit: float

    def cache(
        self,
        resource: type[Resource],
        plural: str,
        transform: Callable[[Mapping[str, Any]], T],
        indexers: Mapping[str, Indexer[T]],
        fast_decode: FastDecode[T] | None = None,
    ) -> ResourceCache[T]:
        return ResourceCache(
            plural,
            {
                scope: Informer(
                    plural if scope is None else f"{plural}/{scope}",
                    self.source(resource, scope),
                    transform,
                    indexers=indexers,
                    backoff=self.backoff(),
                    silence_limit=self.silence_limit,
                    fast_decode=fast_decode,
                )
                for scope in self.scopes
            },
        )

    def cluster_wide(self) -> _Informers:
        """The same for a cluster-scoped resource: one informer whatever the namespaces."""
        return dataclasses.replace(self, scopes=(None,))


class ClusterCache:
    """Pods, ReplicaSets and Deployments; a component of the controller app (start/stop)."""

    name = "cluster-cache"

    def __init__(
        self,
        client: AsyncClient,
        *,
        namespaces: Iterable[str] | None = None,
        enabled_annotation: str | None = None,
        backoff: BackoffFactory = Backoff,
        page_size: int = 500,
        list_watch: ListWatchFactory | None = None,
        silence_limit: float = DEFAULT_SILENCE_LIMIT_SECONDS,
        nodeclaims_recheck: float = NODECLAIMS_RECHECK_SECONDS,
    ) -> None:
        self.raw = RawApi(client)
        self._nodeclaims_recheck = nodeclaims_recheck
        # Past this, a cache no longer counts as fresh (/readyz): a silent watch was detected
        # at silence_limit and the re-list that follows has not succeeded either.
        self.stale_after = silence_limit * STALE_AFTER_FACTOR
        self.namespaces: tuple[str, ...] | None = None if namespaces is None else tuple(namespaces)
        self._enabled_annotation = enabled_annotation
        self._tasks: list[asyncio.Task[None]] = []

        def lightkube_source(resource: type[Resource], scope: str | None) -> ListWatch:
            return LightkubeListWatch(self.raw, resource, scope, page_size)

        informers = _Informers(
            list_watch or lightkube_source,
            self.namespaces if self.namespaces is not None else (None,),
            backoff,
            silence_limit,
        )
        self._build_caches(informers)
        # Karpenter's NodeClaims: read once served (`_run_nodeclaims`); a ListWatch
        # factory given by the caller (in-memory benchmarks) has none.
        self.nodeclaims: ResourceCache[NodeClaimInfo] | None = None
        if list_watch is None:
            self.nodeclaims = informers.cluster_wide().cache(
                NodeClaim, "nodeclaims", NodeClaimInfo.from_object, {NODECLAIMS_BY_NODE: claim_node}
            )

    def _build_caches(self, informers: _Informers) -> None:
        """The caches readiness waits for: Pods, ReplicaSets and Deployments in the watched
        namespaces, indexed by owner; Nodes cluster-wide."""
        self.pods: ResourceCache[PodInfo] = informers.cache(
            Pod,
            "pods",
            PodInfo.from_object,
            {PODS_BY_REPLICASET: _owner_replicaset},
            PodInfo.from_listed,
        )
        self.replicasets: ResourceCache[ReplicaSetInfo] = informers.cache(
            ReplicaSet,
            "replicasets",
            ReplicaSetInfo.from_object,
            {REPLICASETS_BY_DEPLOYMENT: _owner_deployment},
        )
        self.deployments: ResourceCache[DeploymentInfo] = informers.cache(
            Deployment,
            "deployments",
            functools.partial(
                DeploymentInfo.from_object, enabled_annotation=self._enabled_annotation
            ),
            {},
        )
        self.nodes: ResourceCache[NodeInfo] = informers.cluster_wide().cache(
            Node, "nodes", NodeInfo.from_object, {}
        )

    # --- lifecycle (the app's Component protocol) ----------------------------------------------

    @property
    def resources(self) -> tuple[ResourceCache[Any], ...]:
        return (self.pods, self.replicasets, self.deployments, self.nodes)

    async def start(self) -> None:
        for cache in self.resources:
            for informer in cache.informers:
                self._tasks.append(
                    asyncio.create_task(informer.run(), name=f"informer-{informer.name}")
                )
        if self.nodeclaims is not None:
            [informer] = self.nodeclaims.informers
            self._tasks.append(
                asyncio.create_task(self._run_nodeclaims(informer), name="informer-nodeclaims")
            )

    async def _run_nodeclaims(self, informer: Informer[NodeClaimInfo]) -> None:
        """NodeClaims once this API server serves them to us (nodeclaims.py)."""
        await run_once_served(self.raw, informer, self._nodeclaims_recheck)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()

    @property
    def synced(self) -> bool:
        return all(cache.synced for cache in self.resources)

    def sync_status(self) -> dict[str, bool]:
        return {cache.resource: cache.synced for cache in self.resources}

    def staleness_status(self) -> dict[str, float]:
        return {cache.resource: cache.staleness() for cache in self.resources}

    def silent_watch_counts(self) -> dict[str, int]:
        return {cache.resource: cache.silent_watches for cache in self.resources}

    def list_counts(self) -> dict[str, int]:
        return {cache.resource: cache.lists for cache in self.resources}

    def list_watch_error_counts(self) -> dict[str, int]:
        return {cache.resource: cache.list_watch_errors for cache in self.resources}

    @property
    def fresh(self) -> bool:
        """Every informer heard from the API server within `stale_after` seconds."""
        return all(cache.staleness() <= self.stale_after for cache in self.resources)

    async def wait_synced(self) -> None:
        await asyncio.gather(*(cache.wait_synced() for cache in self.resources))

    # --- lookups for the webhook ---------------------------------------------------------------

    def replicaset(self, namespace: str, name: str) -> ReplicaSetInfo | None:
        return self.replicasets.get(namespace, name)

    def deployment(self, namespace: str, name: str) -> DeploymentInfo | None:
        return self.deployments.get(namespace, name)

    def pods_of_replicaset(self, namespace: str, replicaset: str) -> list[PodInfo]:
        return self.pods.by_index(PODS_BY_REPLICASET, namespace, replicaset)

    def replicasets_of_deployment(self, namespace: str, deployment: str) -> list[ReplicaSetInfo]:
        return self.replicasets.by_index(REPLICASETS_BY_DEPLOYMENT, namespace, deployment)

    def ready_besides(self, pod: PodInfo, deployment: DeploymentInfo) -> int:
        """The Deployment's Ready pods other than `pod`, not terminating, not counted as gone
        by its ledger, as cached (`surge-ready`: its status may still count a pod that is
        gone)."""
        return ready_besides_among(pod, (
            other
            for replicaset in self.replicasets_of_deployment(deployment.namespace, deployment.name)
            for other in self.pods_of_replicaset(deployment.namespace, replicaset.name)
        ), _gone(deployment))  # fmt: skip

    def being_drained(self, node_name: str) -> bool:
        """draining.py's definition, on the cached Node; a node the cache does not
        hold (gone, or not listed yet) is no place that stays."""
        node = self.nodes.get("", node_name)
        return node is None or node.being_drained

    def node_deadline(self, node_name: str) -> datetime | None:
        """The termination deadline Karpenter enforces on `node_name` (deadline.py), if its
        NodeClaim carries one; the earliest if (never) several do."""
        if self.nodeclaims is None or not node_name:
            return None
        deadlines = [
            claim.terminates_at
            for claim in self.nodeclaims.by_index(NODECLAIMS_BY_NODE, "", node_name)
            if claim.terminates_at is not None
        ]
        return min(deadlines, default=None)

    def ready_elsewhere(self, pod: PodInfo, deployment: DeploymentInfo) -> int:
        """The Deployment's Ready pods other than `pod`, not terminating, on nodes that are not
        being drained, as cached (`ready-elsewhere`), leaving out those its ledger counts as
        gone (ledger.py): let go by any replica, even while this cache still shows them."""
        return ready_elsewhere_among(pod, (
            other
            for replicaset in self.replicasets_of_deployment(deployment.namespace, deployment.name)
            for other in self.pods_of_replicaset(deployment.namespace, replicaset.name)
        ), self.being_drained, _gone(deployment))  # fmt: skip

    def pod_uid(self, namespace: str, name: str) -> str | None:
        """The uid of the cached pod `namespace/name`, None if the cache holds none (ledger.py
        `PodUid`: only meaningful once the pod cache has synced, see `ledger_pod_uid`)."""
        cached = self.pods.get(namespace, name)
        return None if cached is None else cached.uid

    @property
    def ledger_pod_uid(self) -> PodUid | None:
        """`pod_uid` once the pod cache has synced (a pod it lacks is then gone), else None:
        a cold cache observes no deletion."""
        return self.pod_uid if self.pods.synced else None

    async def resolve_owner_live(self, pod: PodInfo, *, budget: float) -> OwnerLookup:
        """pod -> ReplicaSet -> Deployment from the cache, each one the cache lacks read live
        while the caches have not synced (a synced cache that lacks it: `OwnerUnresolved`,
        allowed). A live read failing other than 404 gives `OwnerUnresolved(cold=True)`."""
        cached = resolve_owner(pod, self.replicaset, self.deployment)
        if not isinstance(cached, OwnerUnresolved) or self.synced:
            return cached
        deadline = asyncio.get_running_loop().time() + budget

        def left() -> float:
            return max(0.0, deadline - asyncio.get_running_loop().time())

        assert pod.owner_replicaset is not None  # resolve_owner: NoDeployment otherwise
        replicaset = self.replicaset(pod.namespace, pod.owner_replicaset)
        if replicaset is None:
            try:
                async with asyncio.timeout(left()):
                    raw = await self.raw.get(ReplicaSet, pod.owner_replicaset, pod.namespace)
                replicaset = ReplicaSetInfo.from_object(raw)
            except Exception as error:
                what = f"ReplicaSet {pod.namespace}/{pod.owner_replicaset}"
                if http_status(error) == HTTP_NOT_FOUND:
                    return OwnerUnresolved(f"{what} no longer exists")
                return OwnerUnresolved(f"live GET of {what} failed: {_failure(error)}", cold=True)
        if replicaset.owner_deployment is None:
            return NoDeployment(f"ReplicaSet {replicaset.ref} has no owning Deployment")
        deployment = self.deployment(pod.namespace, replicaset.owner_deployment)
        if deployment is not None:
            return DeploymentFound(deployment)
        found = await self.read_deployment(pod.namespace, replicaset.owner_deployment,
                                           budget=left())  # fmt: skip
        if isinstance(found, NoDeployment):
            return OwnerUnresolved(found.detail)
        if isinstance(found, OwnerUnresolved):
            return OwnerUnresolved(found.detail, cold=True)
        return found

    def cached_pod(self, namespace: str, name: str) -> PodInfo | None:
        """The pod as the cache holds it; None when it does not (read it live: `read_pod`)."""
        return self.pods.get(namespace, name)

    async def read_pod(self, namespace: str, name: str, *, budget: float) -> PodLookup:
        """A live GET of the pod, past the cache: 404 -> PodGone, any other failure ->
        PodUnavailable."""
        try:
            async with asyncio.timeout(budget):
                raw = await self.raw.get(Pod, name, namespace)
            return PodFound(PodInfo.from_object(raw))
        except Exception as error:
            if http_status(error) == HTTP_NOT_FOUND:
                return PodGone()
            if isinstance(error, TimeoutError):
                return PodUnavailable(f"live GET timed out after {budget:.1f}s")
            return PodUnavailable(f"live GET failed: {error_detail(error)}")

    async def read_deployment(self, namespace: str, name: str, *, budget: float) -> OwnerLookup:
        """A live GET of the Deployment (after a 409 on the stamp): the freshest view."""
        try:
            async with asyncio.timeout(budget):
                raw = await self.raw.get(Deployment, name, namespace)
            return DeploymentFound(
                DeploymentInfo.from_object(raw, enabled_annotation=self._enabled_annotation)
            )
        except Exception as error:
            if http_status(error) == HTTP_NOT_FOUND:
                return NoDeployment(f"Deployment {namespace}/{name} no longer exists")
            if isinstance(error, TimeoutError):
                return OwnerUnresolved(f"live GET of Deployment {namespace}/{name} timed out")
            return OwnerUnresolved(
                f"live GET of Deployment {namespace}/{name} failed: {error_detail(error)}"
            )


def _gone(deployment: DeploymentInfo) -> frozenset[str] | tuple[()]:
    """The uids the Deployment's ledger counts as gone now (most Deployments have none: no
    clock read on the webhook's hot path)."""
    return gone_uids(deployment.evictions, utc_now()) if deployment.evictions else ()


def _failure(error: BaseException) -> str:
    return "timed out" if isinstance(error, TimeoutError) else error_detail(error)


def _owner_replicaset(pod: PodInfo) -> str | None:
    return pod.owner_replicaset


def _owner_deployment(replicaset: ReplicaSetInfo) -> str | None:
    return replicaset.owner_deployment
