"""One decision across every replica (docs/decisions.md, "The ledger") on the real control
plane: several controller replicas answer evictions of one Deployment's pods at the same
moment, each eviction answered by a different replica, and the Deployment never has 0 Ready
pods, every eviction completes, and at most one rollout (a new ReplicaSet) starts.

Which replica answers which eviction is set by a `ReviewRouter` (reviewrouter.py) between
the session's load balancer and the replicas: per pod, and the first reviews of a round's
pods are held until all of them have arrived, then forwarded together. The evictions go
through the Eviction API with no cordon (as the descheduler, or two drain clients, send
them), or through the real descheduler.

Rounds run concurrently on the module's control plane, each in a namespace of its own,
its pods spread one per node (a topology spread constraint) over kwok nodes of the test's
own (`own_nodes`), which rounds share: nothing is cordoned, so they do not see each other.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import pytest

from kubesim.client import ApiStatusError, KubeClient
from kubesim.recorder import AvailabilityRecorder
from realcluster.addons import Descheduler
from realcluster.binaries import ensure_built
from realcluster.cluster import RealCluster

from .apiproxy import ApiProxy
from .harness import (
    BOUND,
    Installation,
    Obj,
    Routed,
    admin_client,
    evict,
    evict_once,
    fresh_namespace,
    kubectl,
    kubectl_json,
    own_nodes,
    pods,
    routed_replicas,
    until,
    web,
)
from .reviewrouter import Answered
from .testwebhook import HoldingWebhook, configuration

pytestmark = [pytest.mark.e2e, pytest.mark.realcluster]

POOL_KEY = "e2e.graceful-drain.stonal.com/pool"
DESCHEDULE_TAINT = "e2e.graceful-drain.stonal.com/deschedule"
ROUNDS = 10
CONCURRENT_ROUNDS = 5  # rounds at once: they mostly wait on the pods' Ready delay
READY_DELAY = "3s"


# --- the workload ------------------------------------------------------------------------------


def spread_web(namespace: str, replicas: int, pool: str, *, one_per_node: bool = False) -> Obj:
    """harness.web (maxSurge 1, maxUnavailable 0, a readiness probe) with `replicas` pods, on
    the kwok nodes of `pool` only, at most one more pod on a node than on any other (so its
    pods start one per node, and a surge or replacement pod always has somewhere to go);
    `one_per_node`: never two on a node (a pod waits, Pending, for a node of its own)."""
    manifest = web(namespace, replicas=replicas, ready_delay=READY_DELAY)
    spec = manifest["spec"]["template"]["spec"]
    spec.pop("affinity", None)
    spec["nodeSelector"] = {POOL_KEY: pool}
    spec["tolerations"] = [{"key": POOL_KEY, "operator": "Equal", "value": pool,
                            "effect": "NoSchedule"}]  # fmt: skip
    selector = {"matchLabels": {"app": "web"}}
    if one_per_node:
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": selector, "topologyKey": "kubernetes.io/hostname"}]}}  # fmt: skip
    else:
        spec["topologySpreadConstraints"] = [{
            "maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "DoNotSchedule", "nodeTaintsPolicy": "Honor",
            "labelSelector": selector,
        }]  # fmt: skip
    return manifest


async def apply(cluster: RealCluster, manifest: Obj) -> None:
    await kubectl(cluster.kubeconfig_path, "apply", "-f", "-", stdin=json.dumps(manifest))


async def ready_pods(cluster: RealCluster, recorder: AvailabilityRecorder, namespace: str,
                     replicas: int) -> list[Obj]:  # fmt: skip
    """web's pods once `replicas` are Ready and the Deployment's status says so too (the
    replicas' caches have seen them Ready by then), one per node."""
    await until(recorder, lambda: recorder.ready("web", namespace) >= replicas)
    async with asyncio.timeout(BOUND):
        while True:
            deployment = await kubectl_json(cluster.kubeconfig_path, "get", "deployment",
                                            "web", "-n", namespace)  # fmt: skip
            if (deployment.get("status") or {}).get("availableReplicas") == replicas:
                break
            await asyncio.sleep(0.5)
    listed = await pods(cluster, namespace)
    assert len({p["spec"]["nodeName"] for p in listed}) == len(listed) == replicas, listed
    return listed


# --- a round: every pod evicted at once, each by a different replica ---------------------------


@dataclass
class Round:
    namespace: str
    answers: list[list[int]]  # per pod, the API server's answers to its evictions
    first: list[Answered]  # per pod, its first review as the router forwarded it
    together: bool  # those first reviews were forwarded together
    zero_ready_seconds: float
    rollouts: list[str]

    def problems(self, replicas: int) -> list[str]:
        found = []
        if len({a.port for a in self.first}) != replicas or not self.together:
            found.append(f"not answered by {replicas} replicas at once: {self.first}")
        if self.zero_ready_seconds != 0:
            found.append(f"{self.zero_ready_seconds:.1f} s without a Ready pod")
        if len(self.rollouts) > 1:
            found.append(f"{len(self.rollouts)} rollouts: {self.rollouts}")
        return [f"{self.namespace}: {p} (first answers {self.first}, evictions {self.answers})"
                for p in found]  # fmt: skip


async def evicted_at_once(cluster: RealCluster, routed: Routed, pool: str, replicas: int) -> Round:
    admin = admin_client(cluster, "replicas-round")
    try:
        async with fresh_namespace(cluster) as namespace, AvailabilityRecorder(
            admin, namespace=namespace
        ) as recorder:  # fmt: skip
            await apply(cluster, spread_web(namespace, replicas, pool))
            listed = await ready_pods(cluster, recorder, namespace, replicas)
            names = sorted(p["metadata"]["name"] for p in listed)
            for name, replica in zip(names, routed.replicas, strict=False):
                routed.router.route(namespace, name, replica.webhook_port)
            together = routed.router.gather(namespace, names)
            start = recorder.clock()
            answers = await asyncio.gather(*(evict(admin, namespace, name) for name in names))
            await until(recorder, lambda: recorder.ready("web", namespace) >= replicas)
            end = recorder.clock()
            timeline = recorder.timeline("web", namespace)
            first = [routed.router.answers_for(namespace, name)[0] for name in names]
            return Round(namespace, list(answers), first, together.complete,
                         timeline.zero_ready_seconds(start, end),
                         timeline.rollouts(start, end))  # fmt: skip
    finally:
        await admin.close()


async def in_waves(count: int, concurrent: int, run: Callable[[], Awaitable[Round]]) -> list[
    Round | BaseException
]:  # fmt: skip
    results: list[Round | BaseException] = []
    while len(results) < count:
        wave = min(concurrent, count - len(results))
        results.extend(await asyncio.gather(*(run() for _ in range(wave)),
                                            return_exceptions=True))  # fmt: skip
    return results


@pytest.mark.parametrize("replicas", [2, 3])
async def test_pods_evicted_at_once_through_different_replicas_keep_a_ready_pod(
    installation: Installation, real_cluster: RealCluster, replicas: int
) -> None:
    """`replicas` controller replicas; a Deployment with `replicas` pods, one per kwok node;
    every pod evicted at the same moment through the Eviction API, no cordon, each eviction
    answered by a different replica; a drain client's retries after each 429. Ten times.
    Before the ledger, each replica counted the pods the others were letting go as staying
    and allowed its own (`ready-elsewhere`): no Ready pod for the whole Ready delay."""
    pool = [f"replicas-{replicas}-{letter}" for letter in "abcd"]
    names = [f"graceful-drain-r{replicas}-{i}" for i in range(replicas)]
    async with (
        own_nodes(real_cluster, pool, POOL_KEY, pool[0]),
        routed_replicas(installation, names) as routed,
    ):
        async with asyncio.timeout(4 * BOUND):
            results = await in_waves(ROUNDS, CONCURRENT_ROUNDS, lambda: evicted_at_once(
                real_cluster, routed, pool[0], replicas))  # fmt: skip
    errors = [repr(r) for r in results if isinstance(r, BaseException)]
    rounds = [r for r in results if isinstance(r, Round)]
    problems = [p for r in rounds for p in r.problems(replicas)]
    assert not errors and not problems, "\n".join(errors + problems)


# --- the real descheduler ----------------------------------------------------------------------


def taint_policy(namespaces: list[str]) -> Obj:
    """RemovePodsViolatingNodeTaints in `namespaces`: every pod on a node with a NoSchedule
    taint it does not tolerate is evicted, in one cycle."""
    return {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "profiles": [{
            "name": "graceful-drain-e2e-replicas",
            "pluginConfig": [
                {"name": "DefaultEvictor", "args": {}},
                {"name": "RemovePodsViolatingNodeTaints",
                 "args": {"namespaces": {"include": namespaces}}},
            ],
            "plugins": {"deschedule": {"enabled": ["RemovePodsViolatingNodeTaints"]}},
        }],
    }  # fmt: skip


DESCHEDULED_ROUNDS = 4
WATCH_LAG = 2.0


async def test_the_descheduler_evicting_from_two_nodes_in_one_cycle_keeps_a_ready_pod(
    installation: Installation, real_cluster: RealCluster
) -> None:
    """Two controller replicas; `DESCHEDULED_ROUNDS` Deployments of two pods, one on each of
    two kwok nodes; both nodes get a NoSchedule taint the pods do not tolerate, and the real
    descheduler (RemovePodsViolatingNodeTaints) evicts every pod of both nodes in one cycle,
    each pod's eviction answered by a different replica, both seeing pods WATCH_LAG late
    (before the ledger: the second replica let its pod go too). It does not retry a refused
    eviction within its cycle; its next cycles evict what is still on the tainted nodes.
    Each Deployment keeps a Ready pod, its pods all leave the tainted nodes, one rollout at
    most."""
    first_two = ["desched-a", "desched-b"]
    spare = ["desched-c", "desched-d"]
    admin = admin_client(real_cluster, "descheduler-rounds")
    # The replicas see pods WATCH_LAG late (their watches relayed late by the API proxy), as
    # a loaded informer does: the replica answering the second eviction has not seen the
    # first pod leave, whichever node the descheduler takes first.
    api = await ApiProxy(real_cluster.server, real_cluster.ca_pem).start()
    api.lag = lambda seen: WATCH_LAG if seen.path.endswith("/pods") else 0.0
    async with contextlib.AsyncExitStack() as stack:
        stack.push_async_callback(api.stop)
        await stack.enter_async_context(own_nodes(real_cluster, first_two, POOL_KEY, first_two[0]))
        routed = await stack.enter_async_context(routed_replicas(
            installation, ["graceful-drain-d-0", "graceful-drain-d-1"], api=api))  # fmt: skip
        namespaces = [await stack.enter_async_context(fresh_namespace(real_cluster))
                      for _ in range(DESCHEDULED_ROUNDS)]  # fmt: skip
        recorders = [await stack.enter_async_context(AvailabilityRecorder(admin, namespace=ns))
                     for ns in namespaces]  # fmt: skip
        for namespace in namespaces:
            await apply(real_cluster, spread_web(namespace, 2, first_two[0]))
        old: dict[str, list[str]] = {}
        for namespace, recorder in zip(namespaces, recorders, strict=True):
            listed = await ready_pods(real_cluster, recorder, namespace, 2)
            old[namespace] = [p["metadata"]["name"] for p in listed]
            for pod in listed:  # the pod on desched-a to one replica, on desched-b to the other
                replica = routed.replicas[first_two.index(pod["spec"]["nodeName"])]
                routed.router.route(namespace, pod["metadata"]["name"], replica.webhook_port)
        # Somewhere to go, then the two first nodes tainted.
        await stack.enter_async_context(own_nodes(real_cluster, spare, POOL_KEY, first_two[0]))
        starts = [recorder.clock() for recorder in recorders]
        for node in first_two:
            await kubectl(real_cluster.kubeconfig_path, "taint", "node", node,
                          f"{DESCHEDULE_TAINT}=yes:NoSchedule")  # fmt: skip
        # Started off the event loop, which serves the router: the descheduler's first cycle
        # runs while Descheduler.start waits for it.
        descheduler = Descheduler(real_cluster, ensure_built(), taint_policy(namespaces),
                                  interval="3s")  # fmt: skip
        await asyncio.to_thread(descheduler.start)
        stack.callback(descheduler.stop)
        async with asyncio.timeout(2 * BOUND):
            for namespace, recorder in zip(namespaces, recorders, strict=True):
                await until(recorder, moved(recorder, namespace, old[namespace]))
        problems = []
        for namespace, recorder, start in zip(namespaces, recorders, starts, strict=True):
            timeline = recorder.timeline("web", namespace)
            zero = timeline.zero_ready_seconds(start, recorder.clock())
            rollouts = timeline.rollouts(start, recorder.clock())
            firsts = [routed.router.answers_for(namespace, pod)[:1] for pod in old[namespace]]
            if zero != 0 or len(rollouts) > 1:
                problems.append(f"{namespace}: {zero:.1f} s without a Ready pod, rollouts "
                                f"{rollouts}, first answers {firsts}")  # fmt: skip
            ports = {a.port for first in firsts for a in first}
            assert len(ports) == 2, f"{namespace}: not answered by two replicas: {firsts}"
        assert not problems, "\n".join(problems)
    await admin.close()


def moved(recorder: AvailabilityRecorder, namespace: str, old: list[str]) -> Callable[[], bool]:
    """The pods `old` have all left, and web has two Ready pods again."""
    return lambda: (all(recorder.pod_departed(namespace, pod) for pod in old)
                    and recorder.ready("web", namespace) >= 2)  # fmt: skip


# --- a restart between the record and the pod's deletion -----------------------------------------


async def until_reviewed(
    admin: KubeClient, holder: HoldingWebhook, namespace: str, pod: str
) -> None:
    """Until the API server calls `holder` for evictions in `namespace` (it picks a new
    configuration up within a second or so): dry-run evictions of `pod`, no side effects."""
    body = {"apiVersion": "policy/v1", "kind": "Eviction",
            "metadata": {"name": pod, "namespace": namespace},
            "deleteOptions": {"dryRun": ["All"]}}  # fmt: skip
    path = f"/api/v1/namespaces/{namespace}/pods/{pod}/eviction"
    async with asyncio.timeout(BOUND):
        while not any(r.get("namespace") == namespace for r in holder.reviews):
            with contextlib.suppress(ApiStatusError):
                await admin.request("POST", path, body, params={"dryRun": "All"})
            await asyncio.sleep(0.5)


EVICTION_RULES = [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                   "resources": ["pods/eviction"], "scope": "Namespaced"}]  # fmt: skip


async def test_a_replica_killed_after_letting_a_pod_go_loses_nothing(
    installation: Installation, real_cluster: RealCluster
) -> None:
    """Two replicas, A and B; a Deployment with two pods on two nodes. The eviction of the
    first pod is answered by A (allowed: the other pod is Ready) while another admission
    webhook (the test's) holds it inside the API server, so the pod is not deleted yet; A
    is killed (SIGKILL) right after answering. The eviction of the second pod, answered by
    B, then by A's successor (a new process), is held: what A let go is on the Deployment,
    not in A's memory. Then the first eviction is released; the drain of both completes
    with a Ready pod throughout and one rollout at most."""
    pool = ["restart-a", "restart-b"]
    admin = admin_client(real_cluster, "restart-evictions")
    holder = await HoldingWebhook().start()
    async with contextlib.AsyncExitStack() as stack:
        stack.push_async_callback(admin.close)
        stack.push_async_callback(holder.stop)
        await stack.enter_async_context(own_nodes(real_cluster, pool, POOL_KEY, pool[0]))
        routed = await stack.enter_async_context(routed_replicas(
            installation, ["graceful-drain-a", "graceful-drain-b"]))  # fmt: skip
        a, b = routed.replicas
        namespace = await stack.enter_async_context(fresh_namespace(real_cluster))
        recorder = await stack.enter_async_context(AvailabilityRecorder(admin, namespace=namespace))
        hold_name = f"e2e-hold-{namespace}"
        # failurePolicy Fail: a hold that outlives the API server's 30 s is an error, retried,
        # and held again; never the first pod's deletion before the test releases it.
        await apply(real_cluster, configuration(hold_name, holder.url, holder.ca_pem,
                                                EVICTION_RULES, namespace,
                                                failure_policy="Fail"))  # fmt: skip
        stack.push_async_callback(kubectl, real_cluster.kubeconfig_path, "delete",
                                  "validatingwebhookconfiguration", hold_name, "--wait=false",
                                  check=False)  # fmt: skip
        # One pod per node on two nodes: the rollout's surge pod waits, Pending, until a pod
        # has left, so the second pod stays the last Ready one until the first has gone.
        await apply(real_cluster, spread_web(namespace, 2, pool[0], one_per_node=True))
        listed = await ready_pods(real_cluster, recorder, namespace, 2)
        first, second = sorted(p["metadata"]["name"] for p in listed)
        routed.router.route(namespace, first, a.webhook_port)
        routed.router.route(namespace, second, b.webhook_port)
        await until_reviewed(admin, holder, namespace, second)
        hold = holder.hold(lambda request: request.get("name") == first)
        start = recorder.clock()

        letting_go = asyncio.create_task(evict(admin, namespace, first, retried=(429, 500)))
        async with asyncio.timeout(BOUND):
            await routed.router.until(lambda: bool(routed.router.answers_for(namespace, first)))
            await hold.received.wait()
        [by_a] = routed.router.answers_for(namespace, first)
        assert by_a.port == a.webhook_port and by_a.allowed, by_a
        a.kill()
        successor = asyncio.create_task(routed.start_replica("graceful-drain-a2"))

        async def still_held_pod() -> None:
            """The precondition of each check: the first pod is still Ready, not deleted
            (the test's webhook still holds its eviction)."""
            [pod] = [p for p in await pods(real_cluster, namespace)
                     if p["metadata"]["name"] == first]  # fmt: skip
            assert not pod["metadata"].get("deletionTimestamp"), pod["metadata"]

        by_b = await evict_once(admin, namespace, second)
        await still_held_pod()
        assert by_b == 429, f"B let {second} go while {first} was leaving: {by_b}"
        a2 = await successor
        routed.router.route(namespace, second, a2.webhook_port)
        by_a2 = await evict_once(admin, namespace, second)
        await still_held_pod()
        assert by_a2 == 429, f"A's successor let {second} go: {by_a2}"
        answered = [x.port for x in routed.router.answers_for(namespace, second)]
        assert answered[:2] == [b.webhook_port, a2.webhook_port], answered

        hold.release()
        answers = await asyncio.gather(letting_go, evict(admin, namespace, second))
        await until(recorder, lambda: recorder.ready("web", namespace) >= 2)
        timeline = recorder.timeline("web", namespace)
        assert timeline.zero_ready_seconds(start, recorder.clock()) == 0, answers
        assert len(timeline.rollouts(start, recorder.clock())) <= 1
