"""A held pod deleted instead of evicted: `GracefulDrainBypassed`.

graceful-drain holds a pod's eviction until its replacement is Ready. A drain client with a
deadline does not wait that long: Karpenter deletes the pods still on a node when the
NodeClaim's `terminationGracePeriod` runs out ("This bypasses the PDB of the pod"), and a
person may `kubectl delete pod` (or `kubectl drain --disable-eviction`). A DELETE never
reaches the eviction webhook. This watcher notices it on the pod informer: a Ready pod of a
Deployment whose drain rollout is in progress (restarted-at, no completed-at) starts
terminating, or disappears, while no other Ready pod of that Deployment runs. That is the
outage graceful-drain exists to prevent; it is reported as a Warning on the Deployment and
counted (`graceful_drain_bypassed_total`), and the rollout's completion is no longer
reported as "evictions proceed" (`DrainEvents.completed`).

The ReplicaSet controller's own scale-down of the old pod at the end of the rollout is not
a bypass: it happens only once a new pod is Ready, so another Ready pod exists.

    watcher = BypassWatcher(cache, events, metrics, active=lambda: reconciler.running)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from graceful_drain.controller.decision.lookups import DeploymentFound, resolve_owner
from graceful_drain.controller.decision.model import DeploymentInfo, PodInfo, ReplicaSetInfo
from graceful_drain.kube.informer import Change
from graceful_drain.logs import get_logger

_log = get_logger("bypass")


def drain_in_progress(deployment: DeploymentInfo) -> bool:
    """graceful-drain requested a rollout for a held eviction and it has not completed."""
    return deployment.restarted_at_raw is not None and deployment.completed_at_raw is None


def was_bypassed(old: PodInfo | None, new: PodInfo | None) -> bool:
    """`old` -> `new` is a Ready pod starting to terminate (or gone at once: a deletion with
    grace period 0)."""
    if old is None or not old.ready or old.terminating:
        return False
    return new is None or new.terminating


class PodView(Protocol):
    """What the watcher reads (controller/cache/cluster.py's ClusterCache)."""

    def replicaset(self, namespace: str, name: str) -> ReplicaSetInfo | None: ...

    def deployment(self, namespace: str, name: str) -> DeploymentInfo | None: ...

    def ready_besides(self, pod: PodInfo, deployment: DeploymentInfo) -> int: ...


class BypassReporter(Protocol):
    def bypassed(self, deployment: DeploymentInfo, *, pod: PodInfo) -> None: ...


class BypassMetrics(Protocol):
    def record_bypassed(self) -> None: ...


class BypassWatcher:
    """A pod-informer handler; reports only while `active()` (the replica running the
    reconciler, so one replica reports each bypass)."""

    def __init__(
        self, view: PodView, reporter: BypassReporter, metrics: BypassMetrics,
        active: Callable[[], bool],
    ) -> None:  # fmt: skip
        self._view = view
        self._reporter = reporter
        self._metrics = metrics
        self._active = active

    def on_pod_change(self, change: Change[PodInfo]) -> None:
        try:
            self._check(change.old, change.new)
        except Exception as error:  # a handler never breaks the informer
            _log.warning("bypass check failed", error=str(error))

    def _check(self, old: PodInfo | None, new: PodInfo | None) -> None:
        if not was_bypassed(old, new) or old is None or not self._active():
            return
        owner = resolve_owner(old, self._view.replicaset, self._view.deployment)
        if not isinstance(owner, DeploymentFound):
            return
        deployment = owner.deployment
        if not drain_in_progress(deployment) or self._view.ready_besides(old, deployment) > 0:
            return
        _log.warning("held pod deleted without its eviction", deployment=str(deployment.ref),
                     pod=old.name, node=old.node_name,
                     restarted_at=deployment.restarted_at_raw)  # fmt: skip
        self._metrics.record_bypassed()
        self._reporter.bypassed(deployment, pod=old)
