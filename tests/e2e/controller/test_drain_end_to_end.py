"""graceful-drain installed from deploy/ and exercised by real `kubectl drain` on kubesim.

See drain_cluster.py for what runs for real. kubectl drain retries a refused eviction every
5s (staging/src/k8s.io/kubectl/pkg/drain/drain.go), so each protected drain takes that long.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from graceful_drain.annotations import RESTARTED_AT_ANNOTATION
from graceful_drain.controller.writes.events import DRAIN_COMPLETED, DRAIN_STARTED, DRAIN_TIMEOUT
from kubesim.client import STRATEGIC_MERGE_PATCH
from kubesim.cluster.behaviour import NEVER_READY
from kubesim.sim import KubeSim
from tests.e2e.watching import annotations_of

from .drain_cluster import drain_cluster
from .drain_workloads import TemplateRestartBlocker, pod_on, statefulset, template_restarted_at
from .installed import BOUND, NAMESPACE

pytestmark = pytest.mark.e2e


async def test_a_single_replica_deployment_keeps_a_ready_pod_through_kubectl_drain(
    sim: KubeSim, tmp_path: Path
) -> None:
    async with drain_cluster(sim, tmp_path) as cluster:
        await cluster.start_replica()
        await cluster.create_web()
        [old] = await cluster.pods("web")
        assert old["spec"]["nodeName"] == "node-a"

        drained = await cluster.kubectl_drain("node-a")
        window = await cluster.settle_after_drain("node-a")
        completed = await cluster.until_event(DRAIN_COMPLETED)
        deployment = await cluster.until_unstamped()

        assert drained.code == 0, drained.stderr
        assert drained.lines[-1] == "node/node-a drained"
        assert "(will retry after 5s): admission webhook" in drained.stderr
        assert "graceful-drain: waiting for a replacement of Deployment default/web" in (
            drained.stderr
        )
        assert cluster.zero_ready_seconds(window) == 0
        assert len(cluster.rollouts(window)) == 1
        [new] = await cluster.pods("web")
        assert new["spec"]["nodeName"] == "node-b"
        assert RESTARTED_AT_ANNOTATION not in annotations_of(deployment)
        [started] = await cluster.events(DRAIN_STARTED)
        assert old["metadata"]["name"] in started["message"]
        assert completed["involvedObject"]["name"] == "web"


async def test_with_the_controller_stopped_the_drain_completes_with_the_outage_it_always_had(
    sim: KubeSim, tmp_path: Path
) -> None:
    async with drain_cluster(sim, tmp_path) as cluster:
        replica = await cluster.start_replica()  # installed, its caBundle published...
        await replica.stop()  # ...then down: the Service has nowhere to send the review
        await cluster.create_web()

        drained = await cluster.kubectl_drain("node-a")
        window = await cluster.settle_after_drain("node-a")

        assert drained.code == 0, drained.stderr
        assert drained.lines[-1] == "node/node-a drained"
        assert "will retry" not in drained.stderr
        assert cluster.zero_ready_seconds(window) > 0  # no surge: the outage the recorder saw
        assert cluster.rollouts(window) == []
        [call] = [c for c in sim.admission.calls if c.review is not None
                  and c.review["request"]["namespace"] == "default"]  # fmt: skip
        assert call.outcome == "ignored"  # failurePolicy: Ignore
        assert "connection refused" in call.error
        assert RESTARTED_AT_ANNOTATION not in annotations_of(await cluster.deployment())


async def test_pods_a_budget_or_nobody_protects_are_evicted_at_once(
    sim: KubeSim, tmp_path: Path
) -> None:
    """NO_DEPLOYMENT and, under `--protect=single-replica` (v2), REPLICAS_NOT_ONE: a
    replicas=2 Deployment, a StatefulSet pod and a bare pod. (Under the default last-ready
    rule the pair, both pods on the drained node, is held and rolled out:
    tests/e2e/real_control_plane/test_last_ready_real.py.)"""
    async with drain_cluster(sim, tmp_path) as cluster:
        replica = await cluster.start_replica(env={"GRACEFUL_DRAIN_PROTECT": "single-replica"})
        await cluster.create_web("pair", replicas=2)
        await cluster.create(statefulset("db"))
        bare = await cluster.create(pod_on("node-a", "scratch"))
        await cluster.until_pods_ready(["db-0", "scratch"])
        [stateful] = await cluster.pods("db")
        assert stateful["spec"]["nodeName"] == "node-a"
        pair = [p["metadata"]["name"] for p in await cluster.pods("pair")]
        assert {p["spec"]["nodeName"] for p in await cluster.pods("pair")} == {"node-a"}

        drained = await cluster.kubectl_drain("node-a", "--force")

        assert drained.code == 0, drained.stderr
        assert "will retry" not in drained.stderr
        assert "Warning: deleting Pods that declare no controller: default/scratch" in (
            drained.stderr
        )
        evictions = [
            (r.name, r.code)
            for r in sim.audit.records(user="kubernetes-admin")
            if r.subresource == "eviction" and r.namespace == "default"
        ]
        expected = {*pair, stateful["metadata"]["name"], bare["metadata"]["name"]}
        assert sorted(evictions) == sorted((name, 201) for name in expected)  # one try each
        assert replica.decisions("replicas-not-one", allowed=True) == 2
        assert replica.decisions("no-deployment", allowed=True) == 2
        assert RESTARTED_AT_ANNOTATION not in annotations_of(await cluster.deployment("pair"))
        # The controller's own pod on node-a was drained too, without asking it
        # (the webhook's namespaceSelector leaves its namespace out).
        assert any(r.subresource == "eviction" and r.namespace == NAMESPACE and r.code == 201
                   for r in sim.audit.records(user="kubernetes-admin"))  # fmt: skip
        reviewed = {c.review["request"]["namespace"] for c in sim.admission.calls if c.review}
        assert reviewed == {"default"}


async def test_a_replacement_that_never_becomes_ready_holds_the_eviction_only_until_the_timeout(
    sim: KubeSim, tmp_path: Path
) -> None:
    """A release whose image never passes its readiness probe is stuck mid-rollout (the old
    pod still serves) when the node is drained: evictions are held for rolloutTimeout, then
    the drain proceeds and the Deployment carries a GracefulDrainTimeout warning."""
    async with drain_cluster(sim, tmp_path) as cluster:
        await cluster.start_replica(env={"GRACEFUL_DRAIN_ROLLOUT_TIMEOUT": "2s"})
        await cluster.create_web()
        broken = {"spec": {"template": {
            "metadata": {"annotations": {NEVER_READY: "true"}},
            "spec": {"containers": [{"name": "app", "image": "registry.example/web:broken"}]},
        }}}  # fmt: skip
        await cluster.admin.patch(
            "/apis/apps/v1/namespaces/default/deployments/web", broken, STRATEGIC_MERGE_PATCH
        )
        await cluster.until_deployment(
            lambda d: (
                (d.get("status") or {}).get("updatedReplicas") == 1
                and d["status"].get("readyReplicas") == 1
            )
        )

        # A drain that is let through after 2s ends within two of kubectl's 5s retries.
        drained = await cluster.kubectl_drain("node-a", "--timeout=20s")
        timed_out = await cluster.until_event(DRAIN_TIMEOUT)

        assert drained.code == 0, drained.stderr
        assert drained.lines[-1] == "node/node-a drained"
        assert "(will retry after 5s): admission webhook" in drained.stderr
        assert timed_out["type"] == "Warning"
        # Kept until the rollout completes: the escape hatch (ROLLOUT_TIMEOUT) keeps answering
        # "allow" rather than a fresh stamp starting another rollout that cannot become Ready
        # either.
        assert RESTARTED_AT_ANNOTATION in annotations_of(await cluster.deployment())


async def test_a_controller_killed_mid_drain_and_started_again_finishes_it_from_the_annotation(
    sim: KubeSim, tmp_path: Path
) -> None:
    async with drain_cluster(sim, tmp_path) as cluster:
        blocker = TemplateRestartBlocker(sim)  # the first process only gets to stamp
        first = await cluster.start_replica("graceful-drain-0")
        await cluster.create_web()

        drain = asyncio.create_task(cluster.kubectl_drain("node-a"))
        stamped = await cluster.until_stamped()
        async with asyncio.timeout(BOUND):
            await blocker.attempts.wait()
        await first.stop()  # killed: its cache, queues and timers are gone
        assert template_restarted_at(await cluster.deployment()) is None  # no rollout yet

        blocker.blocking = False
        second = await cluster.start_replica("graceful-drain-1")  # a new process
        drained = await drain
        window = await cluster.settle_after_drain("node-a")
        completed = await cluster.until_event(DRAIN_COMPLETED)
        deployment = await cluster.until_unstamped()

        assert drained.code == 0, drained.stderr
        assert drained.lines[-1] == "node/node-a drained"
        assert cluster.zero_ready_seconds(window) == 0
        assert len(cluster.rollouts(window)) == 1
        # The second process started the rollout the first one had only asked for.
        restarted_at = annotations_of(stamped)[RESTARTED_AT_ANNOTATION]
        assert template_restarted_at(deployment) == restarted_at
        assert second.decisions("rollout-requested", allowed=False) == 0
        assert completed["reportingInstance"] == "graceful-drain-1"


@pytest.mark.parametrize("leader_elect", ["true", "false"], ids=["as-shipped", "no-lease"])
async def test_two_controller_replicas_produce_exactly_one_rollout(
    sim: KubeSim, tmp_path: Path, leader_elect: str
) -> None:
    """The first eviction reaches one replica, the retries the other; with or without the
    Lease (correctness must not depend on leader election), one new ReplicaSet.

    The replacement takes longer to be Ready than kubectl waits between two tries (5s), so
    the other replica answers at least one retry while the rollout is under way."""
    env = {"GRACEFUL_DRAIN_LEADER_ELECT": leader_elect}
    async with drain_cluster(sim, tmp_path) as cluster:
        first = await cluster.start_replica("graceful-drain-0", env=env)
        second = await cluster.start_replica("graceful-drain-1", env=env, route=False)
        await cluster.create_web(ready_delay="6.5s")

        drain = asyncio.create_task(cluster.kubectl_drain("node-a"))
        await cluster.until_stamped()
        await cluster.route_to(second)  # the Service now sends the retries to the other one
        drained = await drain
        window = await cluster.settle_after_drain("node-a")
        await cluster.until_event(DRAIN_COMPLETED)
        deployment = await cluster.until_unstamped()

        assert drained.code == 0, drained.stderr
        assert cluster.zero_ready_seconds(window) == 0
        assert len(cluster.rollouts(window)) == 1
        assert deployment["metadata"]["generation"] == 2  # one template change
        assert first.decisions("rollout-requested", allowed=False) == 1
        assert second.decisions("rollout-requested", allowed=False) == 0
        assert second.decisions("rollout-in-progress", allowed=False) >= 1
        assert [e["count"] for e in await cluster.events(DRAIN_COMPLETED)] == [1]
        reconciling = [r.app.reconciler.running for r in (first, second)]
        assert reconciling == ([True, False] if leader_elect == "true" else [True, True])


async def test_dry_run_evictions_change_nothing(sim: KubeSim, tmp_path: Path) -> None:
    """`kubectl drain --dry-run=server` puts dryRun: [All] in each Eviction's deleteOptions, not
    in the request: the API server asks the webhook with request.dryRun false, as upstream's
    EvictionREST does (pkg/registry/core/pod/storage/eviction.go, propagateDryRun), and the
    controller reads the Eviction's own options (DRY_RUN) and stamps nothing."""
    async with drain_cluster(sim, tmp_path) as cluster:
        replica = await cluster.start_replica()
        before = await cluster.create_web()
        [pod] = await cluster.pods("web")

        drained = await cluster.kubectl_drain("node-a", "--dry-run=server")

        assert drained.code == 0, drained.stderr
        assert drained.lines[-1] == "node/node-a drained (server dry run)"
        assert replica.decisions("dry-run", allowed=True) >= 1
        dry = [c for c in sim.admission.calls if c.review
               and c.review["request"]["namespace"] == "default"]  # fmt: skip
        assert [(c.dry_run, c.outcome) for c in dry] == [(False, "allowed")], dry
        assert dry[0].review is not None
        assert dry[0].review["request"]["object"]["deleteOptions"]["dryRun"] == ["All"]
        node = await cluster.admin.get("/api/v1/nodes/node-a")
        assert not node["spec"].get("unschedulable")
        after = await cluster.deployment()
        assert after["metadata"]["generation"] == before["metadata"]["generation"]
        assert RESTARTED_AT_ANNOTATION not in annotations_of(after)
        [still] = await cluster.pods("web")
        assert still["metadata"]["uid"] == pod["metadata"]["uid"]
        assert still["metadata"].get("deletionTimestamp") is None
        assert [
            r.verb
            for r in cluster.controller_requests()
            if r.resource in ("deployments", "events") and r.verb in ("patch", "create")
        ] == []
