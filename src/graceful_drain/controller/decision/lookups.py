"""What the caller of the decision table looked up, handed in as values: the pod
(`PodLookup`), its owning Deployment (`OwnerLookup`, resolved by `resolve_owner`), and how many
of the Deployment's other pods are Ready (`ReadyBesides`). No I/O here: the lookups are the
caller's (controller/cache/cluster.py, `graceful-drain plan`)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable

import msgspec

from graceful_drain.controller.decision.model import DeploymentInfo, PodInfo, ReplicaSetInfo

# Frozen msgspec structs, as EvictionRequest: a few are built per admission.


class PodFound(msgspec.Struct, frozen=True):
    pod: PodInfo


class PodGone(msgspec.Struct, frozen=True):
    """Not in the cache, and a live GET answered 404."""


class PodUnavailable(msgspec.Struct, frozen=True):
    """Not in the cache, and the live GET failed (any error other than 404)."""

    detail: str = ""


class PodOutOfScope(msgspec.Struct, frozen=True):
    """The pod's namespace is outside the controller's scope: not looked up."""


PodLookup = PodFound | PodGone | PodOutOfScope | PodUnavailable


class DeploymentFound(msgspec.Struct, frozen=True):
    deployment: DeploymentInfo


class NoDeployment(msgspec.Struct, frozen=True):
    """The pod is not run by a Deployment (bare pod, StatefulSet, DaemonSet, Job, bare RS)."""

    detail: str


class OwnerUnresolved(msgspec.Struct, frozen=True):
    """The pod's ReplicaSet or Deployment could not be read. `cold`: the caches have not
    synced and the live read failed too, so nothing is known (`Reason.CACHE_COLD`, 429)."""

    detail: str
    cold: bool = False


OwnerLookup = DeploymentFound | NoDeployment | OwnerUnresolved

# The Deployment's Ready pods other than `pod`, not terminating, as a pod cache holds them
# (`ready_besides`), or only those of them on a node that is not being drained
# (`ready_elsewhere`, v3).
ReadyBesides = Callable[[PodInfo, DeploymentInfo], int]


def ready_besides_among(pod: PodInfo, pods: Iterable[PodInfo], gone: Collection[str] = ()) -> int:
    """How many of `pods` (the Deployment's) are Ready, not terminating, not `pod`, and not
    counted as gone by the Deployment's ledger (`gone`: their uids, ledger.py `gone_uids`)."""
    return sum(1 for other in pods if other.ready and not other.terminating
               and other.name != pod.name and other.uid not in gone)  # fmt: skip


def ready_elsewhere_among(
    pod: PodInfo,
    pods: Iterable[PodInfo],
    being_drained: Callable[[str], bool],
    gone: Collection[str] = (),
) -> int:
    """How many of `pods` (the Deployment's) are Ready, not terminating, not `pod`, not counted
    as gone by the ledger (`gone`), and run on a node for which `being_drained(node name)` is
    false (draining.py; a node the caller does not know counts as being drained: it is no
    place that stays)."""
    return sum(1 for other in pods if other.ready and not other.terminating
               and other.name != pod.name and other.uid not in gone and other.node_name
               and not being_drained(other.node_name))  # fmt: skip


def resolve_owner(
    pod: PodInfo,
    find_replicaset: Callable[[str, str], ReplicaSetInfo | None],
    find_deployment: Callable[[str, str], DeploymentInfo | None],
) -> OwnerLookup:
    """pod -> ReplicaSet -> Deployment through two (namespace, name) lookups, e.g. the caches.
    Each step's owner is the slim view's `owner_replicaset` / `owner_deployment`: its
    controller reference as kube/owners.py's `read_controller` reads it (model.py), typed."""
    if pod.owner_kind is None:
        return NoDeployment("bare pod")
    if pod.owner_replicaset is None:
        return NoDeployment(f"controlled by a {pod.owner_kind}")
    replicaset = find_replicaset(pod.namespace, pod.owner_replicaset)
    if replicaset is None:
        return OwnerUnresolved(f"ReplicaSet {pod.namespace}/{pod.owner_replicaset} not found")
    if replicaset.owner_deployment is None:
        return NoDeployment(f"ReplicaSet {replicaset.ref} has no owning Deployment")
    deployment = find_deployment(pod.namespace, replicaset.owner_deployment)
    if deployment is None:
        return OwnerUnresolved(
            f"Deployment {pod.namespace}/{replicaset.owner_deployment} not found"
        )
    return DeploymentFound(deployment)
