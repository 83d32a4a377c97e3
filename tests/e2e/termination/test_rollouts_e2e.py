"""Rollouts and scale-downs made by kubesim's real Deployment and ReplicaSet controllers.

No scheduler or kubelet runs here: :class:`PodPlayer` binds each new pod to the node
and starts it through the API, and leaves terminating pods terminating (the detector
runs inside them).  Every wait is a watch on the API, never the clock.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from types import TracebackType

import pytest
from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError

from graceful_drain.controller.decision.model import DeploymentInfo
from graceful_drain.controller.decision.stamp import StampIntent
from graceful_drain.controller.reconcile.rollout import copy_patch
from graceful_drain.controller.writes.patcher import LightkubeDeploymentPatcher
from graceful_drain.kube.client import http_status
from graceful_drain.kube.meta import HTTP_CONFLICT
from graceful_drain.termination.evidence import UnavailableReason
from graceful_drain.termination.verdict import Action, Cause, Fact, Source, Verdict
from kubesim.client import ApiStatusError, KubeClient, resource_path
from kubesim.cluster.cluster import Cluster
from kubesim.cluster.runtime import Informer, key_of
from kubesim.sim import KubeSim
from tests.e2e.termination.scenario import (
    NS,
    Obj,
    Workload,
    admin_client,
    deployment_manifest,
    now,
    pod_until,
)
from tests.e2e.watching import condition

pytestmark = pytest.mark.e2e

STAMP_ATTEMPTS = 5


class PodPlayer:
    """Scheduler and kubelet stand-in: binds new pods and starts them; no more."""

    def __init__(self, workload: Workload) -> None:
        self.workload = workload
        self.informer = Informer(workload.admin, "v1", "pods", "Pod", namespace=NS)
        self.informer.add_handler(lambda _t, pod, _old: self._queue.put_nowait(key_of(pod)))
        self._queue: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        self._worker: asyncio.Task[None] | None = None

    async def __aenter__(self) -> PodPlayer:
        await self.informer.start()
        self._worker = asyncio.get_running_loop().create_task(self._work())
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker
        await self.informer.stop()

    async def _work(self) -> None:
        while True:
            pod = self.informer.get(*await self._queue.get())
            if pod is None or pod["metadata"].get("deletionTimestamp"):
                continue
            with contextlib.suppress(ApiStatusError):
                if not pod["spec"].get("nodeName"):
                    await self.workload.bind(pod["metadata"]["name"])
                elif pod["status"].get("phase") != "Running":
                    await self.workload.start(pod)


def running(pod: Obj) -> bool:
    ready = condition(pod, "Ready")
    return (
        ready is not None
        and ready["status"] == "True"
        and not pod["metadata"].get("deletionTimestamp")
    )


@pytest.fixture
async def workload(sim: KubeSim, tmp_path: Path) -> AsyncIterator[Workload]:
    async with admin_client(sim) as admin:
        workload = await Workload(sim, admin, tmp_path).setup()
        async with Cluster(sim, controllers=["deployment", "replicaset"]), PodPlayer(workload):
            yield workload


def decisive(verdict: Verdict) -> tuple[Source, Fact]:
    return verdict.deciding_item.source, verdict.deciding_item.fact


def facts(verdict: Verdict) -> dict[Fact, dict[str, str]]:
    return {item.fact: dict(item.values) for item in verdict.evidence}


async def stamp_as_the_controller_does(lk: AsyncClient, admin: KubeClient) -> str:
    """The webhook's stamp, then the reconciler's copy into the template: the controller's own
    patches (decide's StampIntent, rollout.copy_patch) through its own patcher. Returns the
    restarted-at value written."""
    patcher = LightkubeDeploymentPatcher(lk)
    path = resource_path("apps/v1", "deployments", NS, "web")
    for _ in range(STAMP_ATTEMPTS):  # a 409: the Deployment controller wrote status meanwhile
        intent = StampIntent(DeploymentInfo.from_object(await admin.get(path)), now())
        try:
            await patcher.patch_json(NS, "web", intent.patch)
            break
        except ApiError as error:
            if http_status(error) != HTTP_CONFLICT:
                raise
    else:
        pytest.fail(f"the stamp met {STAMP_ATTEMPTS} conflicts in a row")
    stamped = DeploymentInfo.from_object(await admin.get(path))
    assert stamped.restarted_at_raw == intent.value  # the controller reads back what it wrote
    await patcher.patch_json(NS, "web", copy_patch(stamped, intent.value))
    return intent.value


async def test_a_graceful_drain_rollout_is_voluntary(workload: Workload, lk: AsyncClient) -> None:
    """The detector classifies, from the very object the controller stamped, the rollout the
    controller started: both sides agree on the restarted-at key (graceful_drain/annotations)."""
    admin: KubeClient = workload.admin
    await admin.create(resource_path("apps/v1", "deployments", NS), deployment_manifest())
    old = await pod_until(admin, running, "the first pod runs")

    stamp = await stamp_as_the_controller_does(lk, admin)
    await pod_until(
        admin,
        lambda p: (
            p["metadata"]["uid"] == old["metadata"]["uid"]
            and bool(p["metadata"].get("deletionTimestamp"))
        ),
        "the rollout terminates the old pod",
    )
    detector = workload.detector(old)
    while_terminating = await detector.detect()
    await workload.finish_deletion(old["metadata"]["name"])
    after_removal = await detector.detect()

    for verdict in (while_terminating, after_removal):
        assert (verdict.cause, verdict.action) == (Cause.VOLUNTARY, Action.DRAIN_GRACEFULLY)
        assert facts(verdict)[Fact.ROLLOUT_MARKER] == {"deployment": "web", "restarted_at": stamp}
    # The pod's own object decides while it exists; once it is gone, the marker does
    # (its owner found from the pod's generated name).
    assert decisive(while_terminating) == (Source.POD, Fact.DELETION_REQUESTED)
    assert decisive(after_removal) == (Source.OWNER, Fact.ROLLOUT_MARKER)
    assert facts(after_removal)[Fact.POD_UNAVAILABLE]["reason"] == UnavailableReason.NOT_FOUND


async def test_a_scale_down_is_voluntary(workload: Workload) -> None:
    admin: KubeClient = workload.admin
    await admin.create(resource_path("apps/v1", "deployments", NS), deployment_manifest(replicas=2))
    running_names: set[str] = set()

    def two_running(pod: Obj) -> bool:
        if running(pod):
            running_names.add(pod["metadata"]["name"])
        return len(running_names) == 2

    await pod_until(admin, two_running, "two pods run")
    await admin.patch(resource_path("apps/v1", "deployments", NS, "web"), {"spec": {"replicas": 1}})
    removed = await pod_until(
        admin,
        lambda p: bool(p["metadata"].get("deletionTimestamp")),
        "the scale-down terminates a pod",
    )
    verdict = await workload.detector(removed).detect()
    assert (verdict.cause, verdict.action) == (Cause.VOLUNTARY, Action.DRAIN_GRACEFULLY)
    assert decisive(verdict) == (Source.POD, Fact.DELETION_REQUESTED)
    assert facts(verdict)[Fact.NO_ROLLOUT_MARKER] == {"deployment": "web"}
