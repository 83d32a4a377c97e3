"""One decision across every replica (issue 37), on kubesim: graceful-drain installed from
deploy/, its replicas answering evictions sent through the Eviction API (no cordon, as the
descheduler or two drain clients at once), and the API server pushing back on its writes.

What is asserted is the outcome the recorder saw (never 0 Ready pods, at most one rollout, the
evictions complete), plus which replica answered (the routing is the premise of the test).
The same on the real control plane: tests/e2e/real_control_plane (issue 37's Done-when 1-3).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from graceful_drain.annotations import EVICTIONS_ANNOTATION
from kubesim.apiserver.faults import FaultRule
from kubesim.client import ApiStatusError, KubeClient, resource_path
from kubesim.sim import KubeSim
from kubesim.watchlog import watch_until
from tests.e2e.watching import annotations_of

from .drain_cluster import DrainCluster, drain_cluster
from .drain_workloads import web
from .installed import BOUND, CONTROLLER_USER, WORKLOADS
from .replica import Replica

pytestmark = pytest.mark.e2e

Obj = dict[str, Any]
ROUNDS = 3
# How often the test's drain client retries a refused eviction (kubectl drain: 5 s; scaled).
RETRY_SECONDS = 0.2


def spread_pair(name: str, *, replicas: int = 2, ready_delay: str = "1s") -> Obj:
    """`web` without its preference for node-a, each pod asking for 1.5 of a node's 4 CPUs:
    the scheduler's LeastAllocated score puts the two pods on the two nodes."""
    manifest = web(name, replicas=replicas, ready_delay=ready_delay)
    spec = manifest["spec"]["template"]["spec"]
    del spec["affinity"]
    spec["containers"][0]["resources"] = {"requests": {"cpu": "1500m"}}
    return manifest


async def evict(admin: KubeClient, name: str) -> tuple[int, str]:
    """POST an Eviction: the HTTP status and message the API server answered."""
    body = {"apiVersion": "policy/v1", "kind": "Eviction",
            "metadata": {"name": name, "namespace": WORKLOADS}}  # fmt: skip
    try:
        await admin.create(resource_path("v1", "pods", WORKLOADS, name, "eviction"), body)
    except ApiStatusError as error:
        return error.code, str(error)
    return 201, ""


async def evict_until_done(admin: KubeClient, name: str) -> list[int]:
    """A drain client: retry a refused (429) eviction until it is allowed or the pod is gone."""
    answers: list[int] = []
    async with asyncio.timeout(BOUND):
        while True:
            code, _ = await evict(admin, name)
            answers.append(code)
            if code != 429:
                return answers
            await asyncio.sleep(RETRY_SECONDS)  # the client's retry interval, not a wait-for


def reviews(replica: Replica) -> float:
    """How many evictions this replica has answered (graceful_drain_decisions_total)."""
    return sum(
        sample.value
        for family in replica.app.metrics.registry.collect()
        for sample in family.samples
        if sample.name == "graceful_drain_decisions_total"
    )


async def remove(cluster: DrainCluster, name: str) -> None:
    """Delete the Deployment, and wait until its pods are gone."""
    await cluster.admin.delete(resource_path("apps/v1", "deployments", WORKLOADS, name),
                               {"kind": "DeleteOptions", "apiVersion": "v1",
                                "propagationPolicy": "Foreground"})  # fmt: skip
    await watch_until(
        cluster.admin, "v1", "pods", "Pod", WORKLOADS,
        lambda items: not any(p["metadata"]["labels"].get("app") == name for p in items),
    )  # fmt: skip


async def ready_pair(cluster: DrainCluster, name: str, replicas: int = 2) -> list[Obj]:
    await cluster.create(spread_pair(name, replicas=replicas))
    await cluster.until(lambda: cluster.recorder.ready(name, WORKLOADS) >= replicas)
    pods = await cluster.pods(name)
    assert len({p["spec"]["nodeName"] for p in pods}) == replicas, [
        (p["metadata"]["name"], p["spec"]["nodeName"]) for p in pods
    ]
    return pods


async def test_two_replicas_answering_two_simultaneous_evictions_keep_a_ready_pod(
    sim: KubeSim, tmp_path: Path
) -> None:
    """The chart's default two replicas, a 2-replica Deployment with a pod on each node, both
    pods evicted at the same moment, each eviction answered by a different replica: one is
    let go, the other held until the rollout's replacement is Ready. Before the ledger each
    replica allowed its pod as ready-elsewhere (issue 37: 5 times out of 5)."""
    async with drain_cluster(sim, tmp_path) as cluster:
        a = await cluster.start_replica("graceful-drain-0")
        b = await cluster.start_replica("graceful-drain-1", route=False)
        await cluster.route_to(a, b)
        for round_ in range(ROUNDS):
            name = f"pair-{round_}"
            pods = [p["metadata"]["name"] for p in await ready_pair(cluster, name)]
            before = (reviews(a), reviews(b))
            start = cluster.recorder.clock()

            first = await asyncio.gather(*(evict(cluster.admin, pod) for pod in pods))

            assert (reviews(a) - before[0], reviews(b) - before[1]) == (1, 1), "one each"
            codes = sorted(code for code, _ in first)
            assert codes == [201, 429], first
            [held] = [pod for pod, (code, _) in zip(pods, first, strict=True) if code == 429]
            answers = await evict_until_done(cluster.admin, held)
            assert answers[-1] in (201, 404), answers  # allowed, or the rollout removed it
            await cluster.until(lambda: cluster.recorder.ready(name, WORKLOADS) >= 2)  # noqa: B023
            window = (start, cluster.recorder.clock())

            recorded_pods = set(json.loads(annotations_of(await cluster.deployment(name)).get(
                EVICTIONS_ANNOTATION, "{}")))  # fmt: skip
            assert cluster.zero_ready_seconds(window, name) == 0
            assert len(cluster.rollouts(window, name)) <= 1
            remaining = {p["metadata"]["name"] for p in await cluster.pods(name)
                         if not p["metadata"].get("deletionTimestamp")}  # fmt: skip
            assert not remaining & set(pods), "both evictions completed"
            await remove(cluster, name)  # its CPUs, for the next pair
            # The pods let go were recorded on the Deployment, in the API server.
            assert set(recorded_pods) <= set(pods) and recorded_pods, recorded_pods


@pytest.mark.parametrize(
    "fault",
    [
        pytest.param(FaultRule(error_code=503), id="503"),
        pytest.param(FaultRule(error_code=429), id="429"),
        # slower than the webhook's 4 s budget: the PATCH may land after the answer
        pytest.param(FaultRule(latency_seconds=4.5, remaining=1), id="past-the-budget"),
    ],
)
async def test_a_stamp_the_api_server_pushes_back_on_holds_the_eviction(
    sim: KubeSim, tmp_path: Path, fault: FaultRule
) -> None:
    """The last Ready pod's eviction, while the API server answers the controller's PATCH of
    the Deployment 503, 429 or too slowly: held (write-deferred, 429, "the controller will
    retry"), never let go without its replacement; once the API answers, the rollout happens
    and the eviction completes, with 0 s without a Ready pod. Before: `stamp-failed`, allow."""
    async with drain_cluster(sim, tmp_path) as cluster:
        replica = await cluster.start_replica()
        await cluster.create_web(ready_delay="1s")
        [pod] = [p["metadata"]["name"] for p in await cluster.pods("web")]
        fault.verb, fault.resource, fault.user = "patch", "deployments", CONTROLLER_USER
        fault.namespace = WORKLOADS
        sim.faults.add(fault)
        start = cluster.recorder.clock()

        code, message = await evict(cluster.admin, pod)

        assert code == 429, message
        assert "the controller will retry" in message
        assert replica.decisions("write-deferred", allowed=False) == 1
        sim.faults.remove(fault)
        answers = await evict_until_done(cluster.admin, pod)
        assert answers[-1] in (201, 404), answers
        await cluster.until(lambda: cluster.recorder.ready("web", WORKLOADS) >= 1)
        window = (start, cluster.recorder.clock())

        assert cluster.zero_ready_seconds(window) == 0
        assert len(cluster.rollouts(window)) == 1
        assert replica.decisions("stamp-failed", allowed=True) == 0
        deferred = await cluster.until_event("GracefulDrainWriteDeferred")
        assert "failed for now" in deferred["message"]


async def test_a_deployment_that_cannot_be_written_is_held_until_the_rollout_timeout(
    sim: KubeSim, tmp_path: Path
) -> None:
    """The liveness bound: every PATCH of the Deployment fails (as behind another validating
    webhook with failurePolicy Fail that is down): held, then allowed once --rollout-timeout
    has passed since the first failure, with the Warning naming the write."""
    async with drain_cluster(sim, tmp_path) as cluster:
        replica = await cluster.start_replica(env={"GRACEFUL_DRAIN_ROLLOUT_TIMEOUT": "2s"})
        await cluster.create_web()
        [pod] = [p["metadata"]["name"] for p in await cluster.pods("web")]
        sim.faults.add(FaultRule(verb="patch", resource="deployments", user=CONTROLLER_USER,
                                 namespace=WORKLOADS, error_code=500))  # fmt: skip

        answers = await evict_until_done(cluster.admin, pod)

        assert answers[0] == 429 and answers[-1] == 201, answers
        assert replica.decisions("write-deferred", allowed=False) >= 1
        assert replica.decisions("write-timeout", allowed=True) == 1
        warning = await cluster.until_event("GracefulDrainWriteFailed")
        assert (
            "the rollout request (restarted-at) on Deployment default/web" in (warning["message"])
        )


async def test_a_record_outlives_the_replica_that_wrote_it(sim: KubeSim, tmp_path: Path) -> None:
    """A controller restart between the record and the pod's deletion loses nothing. Replica
    A lets pod 1 go (ready-elsewhere: pod 2 stays), and records it; a PodDisruptionBudget then
    refuses that eviction, so pod 1 stays Ready and is not deleted. A is stopped. Replica B,
    started afterwards and never told anything by A, answers pod 2's eviction: it reads the
    record from the Deployment and counts pod 1 as gone, so it holds pod 2 with a rollout
    instead of letting it go on pod 1's account."""
    async with drain_cluster(sim, tmp_path) as cluster:
        a = await cluster.start_replica("graceful-drain-0")
        first, second = [p["metadata"]["name"] for p in await ready_pair(cluster, "pair")]
        await cluster.admin.create(
            resource_path("policy/v1", "poddisruptionbudgets", WORKLOADS),
            {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
             "metadata": {"name": "pair", "namespace": WORKLOADS},
             "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "pair"}}}},
        )  # fmt: skip
        await watch_until(
            cluster.admin, "policy/v1", "poddisruptionbudgets", "PodDisruptionBudget", WORKLOADS,
            lambda items: any(p["metadata"]["name"] == "pair"
                              and (p.get("status") or {}).get("currentHealthy") == 2
                              for p in items),
        )  # fmt: skip

        code, message = await evict(cluster.admin, first)
        assert code == 429 and "disruption budget" in message, message  # refused by the PDB
        assert a.decisions("ready-elsewhere", allowed=True) == 1
        recorded = json.loads(
            annotations_of(await cluster.deployment("pair"))[EVICTIONS_ANNOTATION]
        )
        assert set(recorded) == {first}
        await a.stop()
        b = await cluster.start_replica("graceful-drain-1")

        code, message = await evict(cluster.admin, second)

        assert code == 429 and "waiting for a replacement" in message, message
        assert b.decisions("rollout-requested", allowed=False) == 1
        assert b.decisions("ready-elsewhere", allowed=True) == 0
        assert {p["metadata"]["name"] for p in await cluster.pods("pair")} >= {first, second}


async def test_three_replicas_answering_three_simultaneous_evictions_keep_a_ready_pod(
    sim: KubeSim, tmp_path: Path
) -> None:
    """Three controller replicas, a 3-replica Deployment over the two nodes, its three pods
    evicted at the same moment, each eviction at a different replica: two pods may go on the
    third's account, never all three; whatever was held completes once the rollout's
    replacement is Ready (retried as a drain client does). What each replica answered first
    depends on the order of the writes; the outcome does not."""
    async with drain_cluster(sim, tmp_path) as cluster:
        replicas = [await cluster.start_replica("graceful-drain-0")]
        for n in (1, 2):
            replicas.append(await cluster.start_replica(f"graceful-drain-{n}", route=False))
        await cluster.route_to(*replicas)
        for round_ in range(ROUNDS):
            name = f"trio-{round_}"
            await cluster.create(spread_pair(name, replicas=3))
            await cluster.until(lambda: cluster.recorder.ready(name, WORKLOADS) >= 3)  # noqa: B023
            placed = await cluster.pods(name)
            assert {p["spec"]["nodeName"] for p in placed} == {"node-a", "node-b"}
            pods = [p["metadata"]["name"] for p in placed]
            before = [reviews(r) for r in replicas]
            start = cluster.recorder.clock()

            first = await asyncio.gather(*(evict(cluster.admin, pod) for pod in pods))

            assert [reviews(r) - b for r, b in zip(replicas, before, strict=True)] == [1, 1, 1]
            allowed = sum(1 for code, _ in first if code == 201)
            assert allowed <= 2, first  # never all three at once
            held = [pod for pod, (code, _) in zip(pods, first, strict=True) if code == 429]
            for pod in held:
                answers = await evict_until_done(cluster.admin, pod)
                assert answers[-1] in (201, 404), answers
            await cluster.until(lambda: cluster.recorder.ready(name, WORKLOADS) >= 3)  # noqa: B023
            window = (start, cluster.recorder.clock())

            assert cluster.zero_ready_seconds(window, name) == 0
            assert len(cluster.rollouts(window, name)) <= 1
            remaining = {p["metadata"]["name"] for p in await cluster.pods(name)
                         if not p["metadata"].get("deletionTimestamp")}  # fmt: skip
            assert not remaining & set(pods), "every eviction completed"
            await remove(cluster, name)
