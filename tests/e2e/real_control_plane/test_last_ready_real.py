"""Decision table v3 on the real control plane: the last Ready pod of a Deployment never
leaves through an eviction while a replacement can be made first (docs/decisions.md, "The
rule"), whatever `spec.replicas` says and whatever it does meanwhile.

Each scenario has its own namespace AND its own kwok nodes (`kubectl drain` evicts every pod
of a node, whatever its namespace), tainted so no other test's pod lands there, so the
scenarios run concurrently (asyncio.gather) on the session's control plane: they mostly
wait for readiness delays. One controller process serves them all, run with the
`--protect` value the test is parametrised with.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from graceful_drain.annotations import EVICTIONS_ANNOTATION, RESTARTED_AT_ANNOTATION
from kubesim.recorder import AvailabilityRecorder
from realcluster.cluster import RealCluster, node_manifest
from tests.e2e.controller.drain_cluster import KubectlRun
from tests.e2e.watching import annotations_of

from .apiproxy import ApiProxy, Seen
from .harness import (
    BOUND,
    HELD,
    ControllerProcess,
    Installation,
    Obj,
    admin_client,
    drain,
    fresh_namespace,
    kubectl,
    kubectl_json,
    pods,
    requests_of,
    start_cold_controller,
    until,
    until_audited,
    watch_objects,
    web,
)

pytestmark = [pytest.mark.e2e, pytest.mark.realcluster]

SCENARIO_KEY = "e2e.graceful-drain.stonal.com/scenario"
SLOW_READY = "30s"  # the replacement's Ready delay in the scale-up scenarios


# --- a scenario's own namespace, nodes and workload --------------------------------------------


@dataclass
class Stage:
    cluster: RealCluster
    namespace: str
    nodes: list[str]
    recorder: AvailabilityRecorder
    # the log lines of the controller replica answering this scenario's evictions
    controller_log: Callable[[], list[Obj]] = field(default=list)

    @property
    def kubeconfig(self) -> Path:
        return self.cluster.kubeconfig_path

    async def cordon(self, *nodes: str) -> None:
        for node in nodes:
            await kubectl(self.kubeconfig, "cordon", node)

    async def uncordon(self, *nodes: str) -> None:
        for node in nodes:
            await kubectl(self.kubeconfig, "uncordon", node)

    async def apply(self, manifest: Obj) -> None:
        await kubectl(self.kubeconfig, "apply", "-f", "-", stdin=json.dumps(manifest))

    async def until_ready(self, count: int) -> None:
        await until(self.recorder, lambda: self.recorder.ready("web", self.namespace) >= count)

    async def place(self, counts: dict[str, int], ready_delay: str = "3s") -> None:
        """web with `counts[node]` Ready pods on each node, placed by cordoning the others
        while each node's pods are created."""
        total = 0
        for node, count in counts.items():
            others = [n for n in self.nodes if n != node]
            await self.cordon(*others)
            total += count
            manifest = workload(self.namespace, total, ready_delay)
            await self.apply(manifest)
            await self.until_ready(total)
            await self.uncordon(*others)

    async def deployment(self) -> Obj:
        return await kubectl_json(self.kubeconfig, "get", "deployment", "web", "-n",
                                  self.namespace)  # fmt: skip

    async def until_deployment(self, predicate: Callable[[Obj], bool]) -> Obj:
        found = await watch_objects(
            self.cluster, "apps/v1", "deployments", "Deployment", self.namespace,
            lambda items: any(d["metadata"]["name"] == "web" and predicate(d) for d in items),
        )  # fmt: skip
        return next(d for d in found if d["metadata"]["name"] == "web")

    async def pods_on(self, node: str) -> list[Obj]:
        return [p for p in await pods(self.cluster, self.namespace)
                if p["spec"].get("nodeName") == node]  # fmt: skip

    def zero_ready_seconds(self, start: float) -> float:
        return self.recorder.timeline("web", self.namespace).zero_ready_seconds(
            start, self.recorder.clock()
        )

    def rollouts(self, start: float) -> list[str]:
        return self.recorder.timeline("web", self.namespace).rollouts(start, self.recorder.clock())


def workload(namespace: str, replicas: int, ready_delay: str) -> Obj:
    """harness.web (maxSurge 1, maxUnavailable 0, a readiness probe), kept on the scenario's
    own nodes (a nodeSelector, and a toleration of their taint)."""
    manifest = web(namespace, replicas=replicas, ready_delay=ready_delay)
    spec = manifest["spec"]["template"]["spec"]
    spec.pop("affinity", None)
    spec["nodeSelector"] = {SCENARIO_KEY: namespace}
    spec["tolerations"] = [{"key": SCENARIO_KEY, "operator": "Equal", "value": namespace,
                            "effect": "NoSchedule"}]  # fmt: skip
    return manifest


@contextlib.asynccontextmanager
async def stage(cluster: RealCluster, node_count: int) -> AsyncIterator[Stage]:
    """A fresh namespace, `node_count` kwok nodes of its own (Ready, tainted for it alone),
    and a recorder of its Ready pods. Afterwards the namespace and the nodes are deleted."""
    client = admin_client(cluster, "last-ready-stage")
    async with fresh_namespace(cluster) as namespace:
        nodes = [f"{namespace}-{letter}" for letter in "abc"[:node_count]]
        try:
            for node in nodes:
                manifest = node_manifest(node, {SCENARIO_KEY: namespace})
                manifest["spec"] = {
                    "taints": [{"key": SCENARIO_KEY, "value": namespace, "effect": "NoSchedule"}]
                }
                await client.request("POST", "/api/v1/nodes", manifest)
            await watch_objects(cluster, "v1", "nodes", "Node", None, lambda items: all(
                any(n["metadata"]["name"] == node and _node_ready(n) for n in items)
                for node in nodes
            ))  # fmt: skip
            async with AvailabilityRecorder(client, namespace=namespace) as recorder:
                yield Stage(cluster, namespace, nodes, recorder)
        finally:
            for node in nodes:
                await kubectl(cluster.kubeconfig_path, "delete", "node", node, "--wait=false",
                              check=False)  # fmt: skip
            await client.close()


def _node_ready(node: Obj) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or [])  # fmt: skip


def held_in(drained: KubectlRun, namespace: str) -> bool:
    """kubectl drain retried an eviction of this namespace refused by the webhook."""
    return any(HELD in line and f"{namespace}/" in line for line in drained.stderr.splitlines())


def controller_patches(cluster: RealCluster, namespace: str, user: str) -> list[int]:
    """HTTP codes of the controller's PATCHes of Deployment web in `namespace`, in order."""
    return [
        int((r.get("responseStatus") or {}).get("code") or 0)
        for r in requests_of(cluster, user)
        if r["verb"] == "patch"
        and (r.get("objectRef") or {}).get("resource") == "deployments"
        and r["objectRef"].get("namespace") == namespace
        and r["objectRef"].get("name") == "web"
        and not r["objectRef"].get("subresource")
    ]  # fmt: skip


def ledger_writes(stage: Stage) -> tuple[int, int]:
    """(records, cleanings): the controller's writes of web's evictions ledger, from its log:
    the admissions that recorded a pod, and the reconciler's cleanings."""
    ref = f"{stage.namespace}/web"
    lines = [line for line in stage.controller_log() if line.get("deployment") == ref]
    records = sum(1 for line in lines if line.get("msg") == "admission" and line.get("recorded"))
    cleanings = sum(1 for line in lines if line.get("msg") == "evictions ledger cleaned")
    return records, cleanings


async def until_drain_writes_add_up(stage: Stage, user: str, *, evicted: int) -> list[int]:
    """Once web carries neither restarted-at nor a ledger: the controller's PATCHes of web
    (audit log), once they are exactly one drain's (stamp, template, completion, cleanup) plus
    each ledger record (at most one per evicted pod) and each cleaning of the ledger (at least
    one once a pod was recorded, at most one per record). Polled, bounded: the cleaning's log
    line may be written just after its PATCH."""
    await stage.until_deployment(
        lambda d: not {RESTARTED_AT_ANNOTATION, EVICTIONS_ANNOTATION} & annotations_of(d).keys()
    )
    patches: list[int] = []
    records = cleanings = 0
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(BOUND):
            while True:
                patches = controller_patches(stage.cluster, stage.namespace, user)
                records, cleanings = ledger_writes(stage)
                if [code for code in patches if code != 409] == [200] * (4 + records + cleanings):
                    break
                await asyncio.sleep(0.2)
    assert [code for code in patches if code != 409] == [200] * (4 + records + cleanings), (
        patches, records, cleanings,
    )  # fmt: skip
    assert records <= evicted, records  # at most one extra write per allowed eviction
    assert (cleanings >= 1) if records else (cleanings == 0), (records, cleanings)
    assert cleanings <= records, (records, cleanings)
    return patches


# --- the scenarios ------------------------------------------------------------------------------


Scenario = Callable[[Stage, str, str], Awaitable[None]]  # (stage, protect, controller user)


async def scale_up_while_held(stage: Stage, how: str) -> tuple[KubectlRun, float]:
    """One Ready pod on node a, Ready 30 s after it starts; drain a; once the eviction is held
    (the Deployment stamped), the replica count goes to 2: by an HPA (autoscaling/v2)
    whose minReplicas is raised, or by `kubectl scale`."""
    a, _ = stage.nodes
    await stage.place({a: 1}, ready_delay=SLOW_READY)
    if how == "hpa":
        hpa = {
            "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web", "namespace": stage.namespace},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                                        "name": "web"},
                     "minReplicas": 1, "maxReplicas": 3},
        }  # fmt: skip
        await stage.apply(hpa)
    [old] = await stage.pods_on(a)
    start = stage.recorder.clock()
    draining = asyncio.create_task(drain(stage.cluster, stage.recorder, a))
    await stage.until_deployment(lambda d: RESTARTED_AT_ANNOTATION in annotations_of(d))
    if how == "hpa":
        await kubectl(stage.kubeconfig, "patch", "hpa", "web", "-n", stage.namespace,
                      "--type=merge", "-p", '{"spec":{"minReplicas":2}}')  # fmt: skip
    else:
        await kubectl(stage.kubeconfig, "scale", "deployment", "web", "-n", stage.namespace,
                      "--replicas=2")  # fmt: skip
    await stage.until_deployment(lambda d: d["spec"].get("replicas") == 2)
    # The precondition of the v2 bug: the count changed while the old pod was still held.
    assert not stage.recorder.pod_departed(stage.namespace, old["metadata"]["name"]), how
    return await draining, start


async def scenario_hpa(stage: Stage, protect: str, user: str) -> None:
    await _scaled(stage, "hpa", user)


async def scenario_scale(stage: Stage, protect: str, user: str) -> None:
    await _scaled(stage, "scale", user)


async def _scaled(stage: Stage, how: str, user: str) -> None:
    drained, start = await scale_up_while_held(stage, how)
    await stage.until_ready(2)
    assert drained.code == 0, drained.stderr
    assert held_in(drained, stage.namespace)
    assert stage.zero_ready_seconds(start) == 0
    assert len(stage.rollouts(start)) == 1  # one new ReplicaSet
    # The audit log of one protected drain (one pod): one stamp PATCH, one template PATCH,
    # one completion, one cleanup; and if the pod's eviction was allowed (rather than the
    # rollout deleting it first), its ledger record and the ledger's cleaning.
    await until_drain_writes_add_up(stage, user, evicted=1)


async def all_on_the_drained_node(stage: Stage, protect: str, user: str, *,
                                  budget: bool) -> None:  # fmt: skip
    """3 replicas, every pod on node a (no anti-affinity), with or without a PDB
    maxUnavailable: 1; drain a."""
    a, _ = stage.nodes
    await stage.place({a: 3})
    if budget:
        pdb = {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": stage.namespace},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}},
        }
        await stage.apply(pdb)  # fmt: skip
    start = stage.recorder.clock()
    drained = await drain(stage.cluster, stage.recorder, a)
    await stage.until_ready(3)
    assert drained.code == 0, drained.stderr
    if protect == "single-replica":  # v2: a PDB's business, and without one an outage
        assert not held_in(drained, stage.namespace)
        assert stage.rollouts(start) == []
        if not budget:
            assert stage.zero_ready_seconds(start) > 0
        return
    assert held_in(drained, stage.namespace)
    assert stage.zero_ready_seconds(start) == 0
    assert len(stage.rollouts(start)) == 1
    if not budget:  # three evictions at once: their stamps conflict (409), one lands
        await until_drain_writes_add_up(stage, user, evicted=3)


async def scenario_all_on_a(stage: Stage, protect: str, user: str) -> None:
    await all_on_the_drained_node(stage, protect, user, budget=False)


async def scenario_all_on_a_with_pdb(stage: Stage, protect: str, user: str) -> None:
    await all_on_the_drained_node(stage, protect, user, budget=True)


async def scenario_two_drains(stage: Stage, protect: str, user: str) -> None:
    """2 replicas, one on node a and one on node b; a and b drained at once by two `kubectl
    drain` processes; node c stays."""
    a, b, c = stage.nodes
    await stage.cordon(c)
    await stage.place({a: 1, b: 1})
    await stage.uncordon(c)
    start = stage.recorder.clock()
    first, second = await asyncio.gather(drain(stage.cluster, stage.recorder, a),
                                         drain(stage.cluster, stage.recorder, b))  # fmt: skip
    await stage.until_ready(2)
    assert first.code == 0, first.stderr
    assert second.code == 0, second.stderr
    assert held_in(first, stage.namespace) or held_in(second, stage.namespace)
    assert stage.zero_ready_seconds(start) == 0
    # Once every pod left is scheduled and none is being deleted (the old ReplicaSet may
    # still make and then drop a pod while the rollout finishes): all of them on c.
    settled = await watch_objects(
        stage.cluster, "v1", "pods", "Pod", stage.namespace,
        lambda items: all(p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")
                          for p in items),
    )  # fmt: skip
    assert {p["spec"]["nodeName"] for p in settled} == {c}


async def scenario_one_stays(stage: Stage, protect: str, user: str) -> None:
    """3 replicas, two on node a and one on node b; drain a: evicted at once, no rollout."""
    a, b = stage.nodes
    await stage.place({a: 2, b: 1})
    start = stage.recorder.clock()
    drained = await drain(stage.cluster, stage.recorder, a)
    await stage.until_ready(3)
    assert drained.code == 0, drained.stderr
    assert not held_in(drained, stage.namespace)
    assert stage.rollouts(start) == []  # no new ReplicaSet
    assert stage.zero_ready_seconds(start) == 0
    assert RESTARTED_AT_ANNOTATION not in annotations_of(await stage.deployment())


# (scenario, nodes it needs); single-replica runs the two that show the difference
LAST_READY: list[tuple[Scenario, int]] = [
    (scenario_hpa, 2), (scenario_scale, 2), (scenario_all_on_a, 2),
    (scenario_all_on_a_with_pdb, 2), (scenario_two_drains, 3), (scenario_one_stays, 2),
]  # fmt: skip
SINGLE_REPLICA: list[tuple[Scenario, int]] = [(scenario_all_on_a, 2), (scenario_one_stays, 2)]


@pytest.mark.parametrize("protect", ["last-ready", "single-replica"])
async def test_the_last_ready_pod_never_leaves_through_an_eviction(
    installation: Installation, real_cluster: RealCluster, protect: str
) -> None:
    scenarios = LAST_READY if protect == "last-ready" else SINGLE_REPLICA
    replica = await installation.start_controller(env={"GRACEFUL_DRAIN_PROTECT": protect})
    user = installation.controller_user

    async def run(scenario: Scenario, nodes: int) -> None:
        async with stage(real_cluster, nodes) as staged:
            staged.controller_log = replica.log_lines
            try:
                await scenario(staged, protect, user)
            except BaseException as error:
                raise AssertionError(f"{scenario.__name__} ({protect}): {error!r}") from error

    try:
        async with asyncio.timeout(4 * BOUND):
            results = await asyncio.gather(*(run(s, n) for s, n in scenarios),
                                           return_exceptions=True)  # fmt: skip
        failures = [r for r in results if isinstance(r, BaseException)]
        assert not failures, "\n".join(str(failure) for failure in failures)
        if protect == "single-replica":
            assert replica_decisions(replica, "replicas-not-one") >= 3
        else:
            assert replica_decisions(replica, "ready-elsewhere") >= 2
    finally:
        replica.stop()


def replica_decisions(replica: ControllerProcess, reason: str) -> float:
    return replica.decisions(reason, allowed=True)


# --- a cold replica -----------------------------------------------------------------------------


async def test_a_cold_replica_answers_429_rather_than_allow_on_an_owner_it_cannot_read(
    installation: Installation, real_cluster: RealCluster
) -> None:
    """The controller's pod and Deployment lists are held back by the API proxy for at least
    15 s, and its live GET of the Deployment fails meanwhile: the replica serves the webhook
    with cold caches. Before v3 it answered `owner-unresolved` (allowed, no rollout); now it
    answers 429 `cache-cold`, and the pod keeps Ready until its replacement is."""
    api = await ApiProxy(real_cluster.server, real_cluster.ca_pem).start()
    warm = asyncio.Event()

    async def cold(seen: Seen) -> int | None:
        path = seen.path
        listing = (
            seen.method == "GET"
            and not seen.watch
            and (path.endswith("/pods") or path.endswith("/deployments"))
        )
        if listing:
            await warm.wait()
            return None
        if seen.method == "GET" and "/deployments/" in path and not warm.is_set():
            return 503  # the live read of the owner fails too
        return None

    api.rules.append(cold)
    replica: ControllerProcess | None = None
    try:
        async with stage(real_cluster, 2) as staged:
            a, _ = staged.nodes
            await staged.place({a: 1}, ready_delay="5s")
            replica = await start_cold_controller(installation, api)
            start = staged.recorder.clock()
            draining = asyncio.create_task(drain(real_cluster, staged.recorder, a))
            # at least 15 s cold, and until the replica has answered cache-cold
            await asyncio.sleep(15)  # the fault's duration, not a synchronisation
            namespace = staged.namespace
            await until_audited(real_cluster, lambda r: (
                (r.get("objectRef") or {}).get("namespace") == namespace
                and (r.get("objectRef") or {}).get("subresource") == "eviction"
                and (r.get("responseStatus") or {}).get("code") == 429
            ))  # fmt: skip
            assert replica.decisions("cache-cold", allowed=False) >= 1
            warm.set()
            drained = await draining
            await staged.until_ready(1)
            assert drained.code == 0, drained.stderr
            assert held_in(drained, staged.namespace)
            assert replica.decisions("owner-unresolved", allowed=True) == 0
            assert staged.zero_ready_seconds(start) == 0
            assert len(staged.rollouts(start)) == 1
            patches = controller_patches(real_cluster, staged.namespace,
                                         installation.controller_user)  # fmt: skip
            assert patches, "the drain was never stamped"
    finally:
        warm.set()
        if replica is not None:
            replica.stop()
        await api.stop()
