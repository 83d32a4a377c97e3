"""Real Karpenter (its KWOK provider, built from `sigs.k8s.io/karpenter`) and the real
descheduler drain nodes on the real control plane, with and without graceful-drain.

One Karpenter process serves the module (`karpenter` fixture) on the session's cluster;
every scenario has a NodePool and a namespace of its own, and the scenarios of one test
run concurrently (they mostly wait on Karpenter's timers and the pods' ready delay).
Karpenter's nodes are tainted (`KARPENTER_TAINT`), so the other tests' pods never land
on them; the scenarios' pods select their pool and tolerate the taint.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from lightkube import AsyncClient
from lightkube.config.kubeconfig import KubeConfig

from graceful_drain.annotations import DEFAULT_ENABLED_ANNOTATION, RESTARTED_AT_ANNOTATION
from graceful_drain.controller.cache.cluster import ClusterCache
from graceful_drain.controller.decision.deadline import (
    KARPENTER_TERMINATION_ANNOTATION,
    parse_termination_timestamp,
)
from graceful_drain.controller.writes.events import (
    DRAIN_BYPASSED,
    DRAIN_COMPLETED,
    DRAIN_DEADLINE,
    DRAIN_HOLDING,
)
from graceful_drain.kube.timefmt import format_rfc3339, parse_go_duration
from kubesim.recorder import AvailabilityRecorder
from kubesim.watchlog import watch_until
from realcluster.addons import (
    KARPENTER_NAMESPACE,
    Descheduler,
    Karpenter,
    kubectl_apply,
    node_pool,
    on_pool,
    service_account_kubeconfig,
)
from realcluster.binaries import ensure_built
from realcluster.cluster import RealCluster
from tests.conftest import run_kubectl
from tests.e2e.cli import run_cli
from tests.e2e.watching import is_ready

from .harness import (
    Installation,
    admin_client,
    events,
    fresh_namespace,
    kubectl,
    kubectl_json,
    pods,
    until,
    until_audited,
    web,
)

pytestmark = [pytest.mark.e2e, pytest.mark.realcluster, pytest.mark.karpenter]

# Karpenter's FailedDraining messages for a pod whose eviction is refused (terminator.go,
# eviction.go): "Failed to drain node, 1 pods are waiting to be evicted" or "Failed to
# drain node, evicting pod violates a PDB (Pod=NS/NAME)".
HELD_BY_KARPENTER = re.compile(r"^Failed to drain node, (\d+ pods are waiting to be evicted|"
                               r"evicting pod violates a PDB)")  # fmt: skip
SCENARIO_BOUND = 240.0  # guards against a hang only: nothing is asserted on time
READY_DELAY = "5s"
Obj = dict[str, object]


@pytest.fixture(scope="module")
def karpenter(real_cluster: RealCluster) -> Iterator[Karpenter]:
    """Karpenter for the module; afterwards its NodePools are deleted and, before it stops,
    their nodes are gone (the later tests of the session see node-a and node-b only)."""
    with Karpenter(real_cluster, ensure_built()) as running:
        yield running
        run_kubectl(real_cluster.kubeconfig_path, "delete", "nodepools", "--all",
                    "--wait=false", check=False)  # fmt: skip
        run_kubectl(real_cluster.kubeconfig_path, "wait", "--for=delete", "nodeclaims",
                    "--all", f"--timeout={SCENARIO_BOUND:.0f}s", check=False,
                    timeout=SCENARIO_BOUND + 30)  # fmt: skip


# --- workloads ------------------------------------------------------------------------------


def pool_web(
    namespace: str, pool: str, *, name: str = "web", replicas: int = 1,
    ready_delay: str = READY_DELAY, protected: bool = True, cpu: str = "100m",
) -> dict[str, object]:  # fmt: skip
    """harness.web (maxSurge 1, maxUnavailable 0, a readiness probe) on NodePool `pool`."""
    manifest = web(namespace, name, replicas=replicas, ready_delay=ready_delay)
    spec = manifest["spec"]["template"]["spec"]
    spec.pop("affinity", None)
    on_pool(spec, pool)
    spec["containers"][0]["resources"] = {"requests": {"cpu": cpu, "memory": "64Mi"}}
    if not protected:
        manifest["metadata"]["annotations"] = {DEFAULT_ENABLED_ANNOTATION: "false"}
    return manifest


async def apply(cluster: RealCluster, manifest: object) -> None:
    await kubectl(cluster.kubeconfig_path, "apply", "-f", "-", stdin=json.dumps(manifest))


async def watch(
    cluster: RealCluster, api_version: str, plural: str, kind: str, namespace: str | None,
    predicate: Callable[[list[dict[str, object]]], bool],
) -> list[dict[str, object]]:  # fmt: skip
    client = admin_client(cluster, "karpenter-e2e-watch")
    try:
        return await watch_until(client, api_version, plural, kind, namespace, predicate,
                                 bound=SCENARIO_BOUND)  # fmt: skip
    finally:
        await client.close()


async def node_gone(cluster: RealCluster, node: str) -> None:
    await watch(cluster, "v1", "nodes", "Node", None,
                lambda nodes: all(n["metadata"]["name"] != node for n in nodes))  # type: ignore[index]  # fmt: skip


def node_claim_of(claims: list[dict[str, object]], node: str) -> dict[str, object] | None:
    for claim in claims:
        if (claim.get("status") or {}).get("nodeName") == node:  # type: ignore[attr-defined]
            return claim
    return None


# --- one scenario ---------------------------------------------------------------------------


@dataclass
class Outcome:
    """What one scenario measured between its trigger and the end of the disruption."""

    name: str
    protected: bool
    zero_ready_seconds: float
    rollouts: list[str]
    node: str
    namespace: str = ""
    completed_events: list[Obj] = field(default_factory=list)
    karpenter_events: list[Obj] = field(default_factory=list)
    bypassed_events: list[Obj] = field(default_factory=list)
    notes: dict[str, object] = field(default_factory=dict)

    def __str__(self) -> str:
        side = "with" if self.protected else "without"
        return (f"{self.name} {side} graceful-drain: {self.zero_ready_seconds:.1f} s without a "
                f"Ready pod, {len(self.rollouts)} new ReplicaSet(s), node {self.node}")  # fmt: skip


@dataclass
class Scenario:
    cluster: RealCluster
    karpenter: Karpenter
    name: str
    protected: bool
    pool: dict[str, object]

    @property
    def pool_name(self) -> str:
        return str(self.pool["metadata"]["name"])  # type: ignore[index]

    async def run(
        self, prepare: Callable[[str, AvailabilityRecorder], Awaitable[None]],
        trigger: Callable[[str, str, AvailabilityRecorder], Awaitable[None]],
        settled: Callable[[str, AvailabilityRecorder], bool] | None = None,
    ) -> Outcome:  # fmt: skip
        """In a namespace of its own, on NodePool `pool`: `prepare` the workload, note the
        nodes of web's pods, `trigger` the disruption (given the first node), then wait until
        those nodes are deleted and web is Ready again (`settled`, by default one Ready
        pod)."""
        self.karpenter.apply_node_pool(self.pool)
        client = admin_client(self.cluster, f"recorder-{self.name}")
        try:
            async with fresh_namespace(self.cluster) as namespace, AvailabilityRecorder(
                client, namespace=namespace
            ) as recorder:  # fmt: skip
                async with asyncio.timeout(SCENARIO_BOUND):
                    await prepare(namespace, recorder)
                    web_pods = await pods(self.cluster, namespace)
                    assert web_pods and all(is_ready(p) for p in web_pods), web_pods
                    nodes = sorted({str(p["spec"]["nodeName"]) for p in web_pods})
                    node = nodes[0]
                    start = recorder.clock()
                    await trigger(namespace, node, recorder)
                    await asyncio.gather(*(node_gone(self.cluster, n) for n in nodes))
                    done = settled or (lambda ns, r: r.ready("web", ns) >= 1)
                    await until(recorder, lambda: done(namespace, recorder))
                    end = recorder.clock()
                timeline = recorder.timeline("web", namespace)
                return Outcome(
                    name=self.name, protected=self.protected,
                    zero_ready_seconds=timeline.zero_ready_seconds(start, end),
                    rollouts=timeline.rollouts(start, end), node=", ".join(nodes),
                    namespace=namespace,
                    completed_events=await events(self.cluster, namespace, DRAIN_COMPLETED),
                    karpenter_events=await node_events(self.cluster, node),
                    bypassed_events=await events(self.cluster, namespace, DRAIN_BYPASSED),
                    notes={"disrupted": await events(self.cluster, namespace, "Disrupted"),
                           "deadline events": await events(self.cluster, namespace,
                                                           DRAIN_DEADLINE)},
                )  # fmt: skip
        finally:
            await client.close()
            await kubectl(self.cluster.kubeconfig_path, "delete", "nodepool", self.pool_name,
                          "--wait=false", check=False)  # fmt: skip


async def node_events(cluster: RealCluster, node: str) -> list[Obj]:
    listed = await kubectl_json(cluster.kubeconfig_path, "get", "events", "-A",
                                "--field-selector", f"involvedObject.name={node}")  # fmt: skip
    return list(listed["items"])


async def web_ready(cluster: RealCluster, recorder: AvailabilityRecorder, namespace: str,
                    manifest: object, replicas: int = 1) -> None:  # fmt: skip
    await apply(cluster, manifest)
    await until(recorder, lambda: recorder.ready("web", namespace) >= replicas)


# --- scenarios ------------------------------------------------------------------------------


def consolidation(cluster: RealCluster, karpenter: Karpenter, protected: bool) -> Scenario:
    """A big pod makes Karpenter launch a big node; web (100m) is scheduled beside it; the
    big pod goes away, the node is underutilized, and Karpenter replaces it with a cheaper
    one (single-node consolidation: launch the replacement, taint, drain, delete)."""
    return Scenario(cluster, karpenter, "consolidation", protected,
                    node_pool(f"consolidation-{'on' if protected else 'off'}",
                              consolidate_after="0s"))  # fmt: skip


async def run_consolidation(scenario: Scenario) -> Outcome:
    cluster, pool = scenario.cluster, scenario.pool_name

    async def prepare(namespace: str, recorder: AvailabilityRecorder) -> None:
        load = pool_web(namespace, pool, name="load", cpu="2500m")
        await apply(cluster, load)
        await watch(cluster, "v1", "pods", "Pod", namespace,
                    lambda ps: any(is_ready(p) for p in ps))  # fmt: skip
        await web_ready(cluster, recorder, namespace,
                        pool_web(namespace, pool, protected=scenario.protected))  # fmt: skip
        [load_pod] = await pods(cluster, namespace, "load")
        [web_pod] = await pods(cluster, namespace, "web")
        assert web_pod["spec"]["nodeName"] == load_pod["spec"]["nodeName"]

    async def trigger(namespace: str, node: str, recorder: AvailabilityRecorder) -> None:
        recorder.mark("load-removed", node=node)
        await kubectl(cluster.kubeconfig_path, "delete", "deployment", "load", "-n", namespace)

    return await scenario.run(prepare, trigger)


def node_claim_deletion(cluster: RealCluster, karpenter: Karpenter, protected: bool,
                        grace: str | None = None, name: str = "nodeclaim") -> Scenario:  # fmt: skip
    pool = node_pool(f"{name}-{'on' if protected else 'off'}", termination_grace_period=grace)
    return Scenario(cluster, karpenter, name, protected, pool)


async def run_node_claim_deletion(scenario: Scenario, ready_delay: str = READY_DELAY) -> Outcome:
    """`kubectl delete nodeclaim` of web's node."""
    cluster, pool = scenario.cluster, scenario.pool_name

    async def prepare(namespace: str, recorder: AvailabilityRecorder) -> None:
        await web_ready(cluster, recorder, namespace, pool_web(
            namespace, pool, protected=scenario.protected, ready_delay=ready_delay))  # fmt: skip

    async def trigger(namespace: str, node: str, recorder: AvailabilityRecorder) -> None:
        claims = await watch(cluster, "karpenter.sh/v1", "nodeclaims", "NodeClaim", None,
                             lambda cs: node_claim_of(cs, node) is not None)  # fmt: skip
        claim = node_claim_of(claims, node)
        assert claim is not None
        recorder.mark("nodeclaim-deleted", node=node)
        await kubectl(cluster.kubeconfig_path, "delete", "nodeclaim",
                      str(claim["metadata"]["name"]), "--wait=false")  # type: ignore[index]  # fmt: skip

    return await scenario.run(prepare, trigger)


# The terminationGracePeriod scenario: a NodePool grace period the replacement's Ready time
# exceeds. Karpenter deletes the held pod at the NodeClaim's deadline less the pod's 5 s grace
# period (TGP - 5 s after the NodeClaim's deletion); the window before it is wide enough for
# `plan` and `status` to run in it even on loaded cores.
TGP = "25s"
TGP_READY_DELAY = "35s"
KARPENTER_USER = f"system:serviceaccount:{KARPENTER_NAMESPACE}:karpenter"


def termination_deadline(cluster: RealCluster, karpenter: Karpenter) -> Scenario:
    return node_claim_deletion(cluster, karpenter, True, grace=TGP, name="tgp")


def annotated_claim(claims: list[Obj], node: str) -> Obj | None:
    claim = node_claim_of(claims, node)
    annotations = ((claim or {}).get("metadata") or {}).get("annotations") or {}  # type: ignore[attr-defined]
    return claim if KARPENTER_TERMINATION_ANNOTATION in annotations else None


async def graceful_drain_json(cluster: RealCluster, *args: str) -> Obj:
    """`graceful-drain ARGS --json` as an operator runs it (admin kubeconfig)."""
    env = {"KUBECONFIG": str(cluster.kubeconfig_path), "PATH": os.environ.get("PATH", "")}
    code, out, err = await run_cli(*args, "--json", env=env, bound=SCENARIO_BOUND)
    assert code in (0, 1), (args, code, err.decode())  # 1: plan's verdict is an outage
    document: Obj = json.loads(out)
    return document


async def run_termination_deadline(scenario: Scenario) -> Outcome:
    """`kubectl delete nodeclaim` of web's node under a NodePool terminationGracePeriod
    shorter than the replacement's Ready time. While the eviction is held and before
    Karpenter's deadline: the NodeClaim's termination timestamp, then `plan NODE` and
    `status` (once the drain's rollout is requested) as JSON, kept in the outcome's notes."""
    cluster, pool = scenario.cluster, scenario.pool_name
    seen: dict[str, object] = {}

    async def prepare(namespace: str, recorder: AvailabilityRecorder) -> None:
        await web_ready(cluster, recorder, namespace, pool_web(
            namespace, pool, ready_delay=TGP_READY_DELAY))  # fmt: skip

    async def trigger(namespace: str, node: str, recorder: AvailabilityRecorder) -> None:
        claims = await watch(cluster, "karpenter.sh/v1", "nodeclaims", "NodeClaim", None,
                             lambda cs: node_claim_of(cs, node) is not None)  # fmt: skip
        claim = node_claim_of(claims, node)
        assert claim is not None
        recorder.mark("nodeclaim-deleted", node=node)
        await kubectl(cluster.kubeconfig_path, "delete", "nodeclaim",
                      str(claim["metadata"]["name"]), "--wait=false")  # type: ignore[index]  # fmt: skip
        claims = await watch(cluster, "karpenter.sh/v1", "nodeclaims", "NodeClaim", None,
                             lambda cs: annotated_claim(cs, node) is not None)  # fmt: skip
        seen["claim"] = annotated_claim(claims, node)
        await watch(cluster, "apps/v1", "deployments", "Deployment", namespace, lambda ds: any(
            RESTARTED_AT_ANNOTATION in (d["metadata"].get("annotations") or {})  # type: ignore[attr-defined]
            for d in ds))  # fmt: skip
        seen["plan"], seen["status"] = await asyncio.gather(
            graceful_drain_json(cluster, "plan", node), graceful_drain_json(cluster, "status")
        )
        seen["inspected by"] = datetime.now().astimezone()

    outcome = await scenario.run(prepare, trigger)
    outcome.notes.update(seen)
    outcome.notes["held 429s"] = [
        r for r in cluster.audit_records()
        if r["user"]["username"] == KARPENTER_USER
        and (r.get("objectRef") or {}).get("subresource") == "eviction"
        and (r.get("objectRef") or {}).get("namespace") == outcome.namespace
        and (r.get("responseStatus") or {}).get("code") == 429
    ]  # fmt: skip
    return outcome


def check_termination_deadline(tgp: Outcome) -> None:
    """What graceful-drain said of Karpenter's deadline, and that it said it in time."""
    claim = tgp.notes["claim"]
    assert isinstance(claim, dict)
    metadata = claim["metadata"]
    node_deadline = parse_termination_timestamp(
        metadata["annotations"][KARPENTER_TERMINATION_ANNOTATION]
    )
    assert node_deadline is not None, metadata
    # Karpenter's deadline: the NodeClaim's deletion + the NodePool's terminationGracePeriod,
    # to the second (docs/install.md: measured from when the node's deletion began).
    deleted = parse_termination_timestamp(metadata["deletionTimestamp"])
    assert deleted is not None and node_deadline == deleted + parse_go_duration(TGP), metadata
    delete_at = node_deadline - timedelta(seconds=5)  # the pod's terminationGracePeriodSeconds
    said = f"Karpenter deletes this pod at {format_rfc3339(delete_at)}"
    print(
        f"tgp: NodeClaim deadline {format_rfc3339(node_deadline)}, pod deleted at "
        f"{format_rfc3339(delete_at)}"
    )
    # The 429s Karpenter was answered, from the API server's audit log: one names it, before.
    held = tgp.notes["held 429s"]
    assert isinstance(held, list) and held, "no 429 answered to Karpenter"
    naming = [r for r in held if said in str(r["responseStatus"].get("message"))]
    assert naming, [r["responseStatus"] for r in held]
    print(f"tgp: the 429 Karpenter got: {naming[0]['responseStatus']['message']}")
    first_said = min(datetime.fromisoformat(r["stageTimestamp"]) for r in naming)
    assert first_said < delete_at, (first_said, delete_at)
    # The Warning on the Deployment: once for this drain, naming the deadline, before it.
    warnings = tgp.notes["deadline events"]
    assert isinstance(warnings, list) and len(warnings) == 1, warnings
    warning: dict[str, Any] = warnings[0]
    assert warning["type"] == "Warning", warning
    assert warning["involvedObject"]["kind"] == "Deployment", warning
    assert f"at {format_rfc3339(delete_at)}" in warning["message"], warning
    written = parse_termination_timestamp(warning["firstTimestamp"])
    assert written is not None and written <= delete_at, warning
    print(f"tgp: {DRAIN_DEADLINE}: {warning['message']}")
    # plan NODE and status, run while the eviction was held: the deadline per pod/Deployment.
    inspected = tgp.notes["inspected by"]
    assert isinstance(inspected, datetime) and inspected < delete_at, (inspected, delete_at)
    plan, status = tgp.notes["plan"], tgp.notes["status"]
    assert isinstance(plan, dict) and isinstance(status, dict)
    [planned] = [p for p in plan["pods"] if p["workload"] == "Deployment/web"]
    assert planned["outcome"] == "held", planned
    assert planned["terminationDeadline"]["deleteAt"] == format_rfc3339(delete_at), planned
    assert planned["terminationDeadline"]["outage"] == "may", planned
    assert said in planned["message"], planned
    [held_web] = [h for h in status["held"] if h["namespace"] == tgp.namespace]
    assert held_web["terminationDeadline"]["nodeDeadline"] == format_rfc3339(node_deadline)
    assert said in held_web["decision"]["message"], held_web


def expiry(cluster: RealCluster, karpenter: Karpenter) -> Scenario:
    return Scenario(cluster, karpenter, "expiry", True,
                    node_pool("expiry-on", expire_after="40s"))  # fmt: skip


async def run_expiry(scenario: Scenario) -> Outcome:
    """`expireAfter`: Karpenter deletes the NodeClaim itself when the node is 40 s old."""
    cluster, pool = scenario.cluster, scenario.pool_name

    async def prepare(namespace: str, recorder: AvailabilityRecorder) -> None:
        await web_ready(cluster, recorder, namespace, pool_web(namespace, pool))

    async def trigger(namespace: str, node: str, recorder: AvailabilityRecorder) -> None:
        recorder.mark("expiry-awaited", node=node)  # Karpenter's own timer disrupts it

    return await scenario.run(prepare, trigger)


# --- the tests ------------------------------------------------------------------------------


async def test_real_karpenter_and_the_descheduler_drain_without_an_outage_under_graceful_drain(
    installation: Installation, real_cluster: RealCluster, karpenter: Karpenter,
) -> None:  # fmt: skip
    """Concurrently, under one controller replica:
    - consolidation, `kubectl delete nodeclaim` and `expireAfter` of a protected web: the
      node is deleted, web never has 0 Ready pods, one new ReplicaSet, GracefulDrainCompleted;
    - the same consolidation and NodeClaim deletion of an opted-out web: an outage, no
      rollout (the run would catch a Karpenter that does not evict);
    - a NodePool `terminationGracePeriod` (25 s) shorter than the replacement's Ready time
      (35 s): before Karpenter's deadline, its 429s, a GracefulDrainDeadline Warning, `plan`
      and `status` name it; Karpenter deletes the held pod at the deadline less the pod's grace
      period, bypassing the Eviction API, and web has no Ready pod until the replacement is
      Ready (docs/install.md: keep the grace period above the rollout time);
    - the descheduler (RemovePodsViolatingNodeAffinity): held, moved by the rollout, 0 s, and
      its next cycles evict nothing.
    Karpenter's own record of the held evictions (docs/operations.md quotes it) is read from
    the Node's Events and its metrics."""
    replica = await installation.start_controller()
    try:
        results = await asyncio.gather(
            run_consolidation(consolidation(real_cluster, karpenter, protected=True)),
            run_consolidation(consolidation(real_cluster, karpenter, protected=False)),
            run_node_claim_deletion(node_claim_deletion(real_cluster, karpenter, True)),
            run_node_claim_deletion(node_claim_deletion(real_cluster, karpenter, False)),
            run_expiry(expiry(real_cluster, karpenter)),
            run_termination_deadline(termination_deadline(real_cluster, karpenter)),
            run_descheduler(real_cluster),
            return_exceptions=True,
        )
        held_429 = replica.decisions(allowed=False)
    finally:
        replica.stop()
    failures = [r for r in results if isinstance(r, BaseException)]
    if failures:
        raise failures[0]
    *outcomes, tgp, descheduled = results
    assert isinstance(tgp, Outcome) and isinstance(descheduled, Outcome)
    report = "\n".join(str(o) for o in results)
    print(report)
    for outcome in outcomes:
        assert isinstance(outcome, Outcome)
        assert outcome.notes["deadline events"] == [], outcome  # no deadline: nothing said
        if outcome.protected:
            assert outcome.zero_ready_seconds == 0, report
            assert len(outcome.rollouts) == 1, report
            assert outcome.completed_events, report
            assert outcome.bypassed_events == [], report
        else:
            assert outcome.zero_ready_seconds > 0, report
            assert outcome.rollouts == [], report
            assert outcome.completed_events == [], report
    assert held_429 >= 4
    # Karpenter records a held eviction as a FailedDraining Warning on the Node (one per
    # reason and node within its recorder's 2-minute dedupe, so either its drain's "N pods
    # are waiting to be evicted" or its eviction queue's "evicting pod violates a PDB",
    # whichever comes first); its eviction-request counter has the 429s.
    for outcome in [*outcomes, tgp]:
        assert isinstance(outcome, Outcome)
        print(f"{outcome.name} {outcome.protected} Karpenter's Events on the Node:")
        for event in outcome.karpenter_events:
            print(f"  {event.get('type')} {event.get('reason')}: {event.get('message')}")
        failed = [str(e["message"]) for e in outcome.karpenter_events
                  if e.get("reason") == "FailedDraining"]  # fmt: skip
        # graceful-drain's own line beside it, on the same Node (`kubectl describe node`).
        holding = [str(e["message"]) for e in outcome.karpenter_events
                   if e.get("reason") == DRAIN_HOLDING]  # fmt: skip
        if outcome.protected:
            assert any(HELD_BY_KARPENTER.search(m) for m in failed), outcome.karpenter_events
            ours = [m for m in holding if m.startswith("graceful-drain holds the eviction of ")]
            assert any("/web is Ready" in m for m in ours), outcome.karpenter_events
        else:
            assert holding == [], outcome.karpenter_events
            # its eviction was never refused
            assert not any("violates a PDB" in m for m in failed), outcome.karpenter_events
    assert eviction_requests(karpenter.metrics(), "429") >= 3
    # terminationGracePeriod shorter than the replacement's Ready time: an outage, which
    # graceful-drain reports as bypassed, never as "completed ... evictions proceed".
    assert tgp.zero_ready_seconds > 0, report
    assert "TerminationGracePeriodExpiring" in {e.get("reason") for e in tgp.karpenter_events}
    disrupted = tgp.notes["disrupted"]
    assert isinstance(disrupted, list) and len(disrupted) == 1, disrupted
    assert "This bypasses the PDB of the pod" in str(disrupted[0]["message"])
    print(f"tgp: Karpenter on the pod: {disrupted[0]['message']}")
    [bypassed] = tgp.bypassed_events
    assert bypassed["type"] == "Warning" and "without its eviction" in str(bypassed["message"])
    assert all("evictions proceed" not in str(e["message"]) for e in tgp.completed_events)
    check_termination_deadline(tgp)
    # The descheduler: held, moved, 0 s, nothing more to evict.
    assert descheduled.zero_ready_seconds == 0, report
    assert len(descheduled.rollouts) == 1, report
    assert descheduled.notes["new node"] == "node-b"
    assert descheduled.notes["held message logged"]
    last_cycle = str(descheduled.notes["last cycle"])
    assert "totalEvicted=0" in last_cycle and "evictionRequests=0" in last_cycle, last_cycle


def eviction_requests(exposition: str, code: str) -> float:
    total = 0.0
    for line in exposition.splitlines():
        if line.startswith("karpenter_nodes_eviction_requests_total{") and f'code="{code}"' in (
            line
        ):
            total += float(line.rsplit(" ", 1)[1])
    return total


async def test_two_nodes_disrupted_together_keep_a_ready_pod_of_a_two_replica_deployment(
    installation: Installation, real_cluster: RealCluster, karpenter: Karpenter,
) -> None:  # fmt: skip
    """A 2-replica web, one pod per KWOK node (required anti-affinity), and both NodeClaims
    deleted at once, as a multi-node consolidation disrupts them together: web never has 0
    Ready pods, one rollout (a pod is let go only while another Ready pod runs on a node not
    being drained, `ready-elsewhere`; the last one is held for the rollout). Under decision
    table v2 both evictions were allowed (`replicas-not-one`) and web had none until the new
    pods were Ready. (Karpenter's own multi-node consolidation is not forced here: given two
    underutilized nodes of this pool it replaced them one at a time, which a 2-replica
    Deployment survived under v2 too.)"""
    scenario = Scenario(real_cluster, karpenter, "two-nodes", True, node_pool("two-nodes-on"))
    cluster, pool = real_cluster, scenario.pool_name

    async def prepare(namespace: str, recorder: AvailabilityRecorder) -> None:
        two = pool_web(namespace, pool, replicas=2)
        two["spec"]["template"]["spec"]["affinity"] = {"podAntiAffinity": {  # type: ignore[index]
            "requiredDuringSchedulingIgnoredDuringExecution": [{
                "labelSelector": {"matchLabels": {"app": "web"}},
                "topologyKey": "kubernetes.io/hostname"}]}}  # fmt: skip
        await web_ready(cluster, recorder, namespace, two, replicas=2)

    async def trigger(namespace: str, node: str, recorder: AvailabilityRecorder) -> None:
        nodes = {str(p["spec"]["nodeName"]) for p in await pods(cluster, namespace)}
        claims = await watch(cluster, "karpenter.sh/v1", "nodeclaims", "NodeClaim", None,
                             lambda cs: all(node_claim_of(cs, n) for n in nodes))  # fmt: skip
        names = [str(node_claim_of(claims, n)["metadata"]["name"]) for n in sorted(nodes)]  # type: ignore[index]
        await kubectl(cluster.kubeconfig_path, "delete", "nodeclaim", *names, "--wait=false")

    def settled(namespace: str, recorder: AvailabilityRecorder) -> bool:
        return recorder.ready("web", namespace) >= 2

    replica = await installation.start_controller()
    try:
        outcome = await scenario.run(prepare, trigger, settled)
    finally:
        replica.stop()
    print(outcome)
    assert len(outcome.node.split(", ")) == 2
    assert outcome.zero_ready_seconds == 0
    assert len(outcome.rollouts) == 1


# --- the descheduler ------------------------------------------------------------------------


def node_affinity_policy(namespace: str) -> dict[str, object]:
    return {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "profiles": [{
            "name": "graceful-drain-e2e",
            "pluginConfig": [
                {"name": "DefaultEvictor", "args": {}},
                {"name": "RemovePodsViolatingNodeAffinity", "args": {
                    "nodeAffinityType": ["requiredDuringSchedulingIgnoredDuringExecution"],
                    "namespaces": {"include": [namespace]}}},
            ],
            "plugins": {"deschedule": {"enabled": ["RemovePodsViolatingNodeAffinity"]}},
        }],
    }  # fmt: skip


CYCLE = "Number of evictions/requests"  # the descheduler's line at the end of each cycle


async def run_descheduler(cluster: RealCluster) -> Outcome:
    """RemovePodsViolatingNodeAffinity evicts a single-replica pod whose node (node-a) lost
    the label its required affinity names, node-b having it: the eviction is held (the
    descheduler does not retry), the rollout moves the pod to node-b, and the next cycles
    find nothing to evict."""
    kubeconfig = cluster.kubeconfig_path
    client = admin_client(cluster, "recorder-descheduler")
    async with fresh_namespace(cluster) as namespace, AvailabilityRecorder(
        client, namespace=namespace
    ) as recorder:  # fmt: skip
        label = f"e2e.graceful-drain.dev/{namespace}"
        manifest = web(namespace)
        term = {"matchExpressions": [{"key": label, "operator": "In", "values": ["yes"]}]}
        manifest["spec"]["template"]["spec"]["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
            }
        }
        try:
            await kubectl(kubeconfig, "label", "node", "node-a", f"{label}=yes")
            await web_ready(cluster, recorder, namespace, manifest)
            [old] = await pods(cluster, namespace)
            assert old["spec"]["nodeName"] == "node-a"
            await kubectl(kubeconfig, "label", "node", "node-b", f"{label}=yes")
            start = recorder.clock()
            await kubectl(kubeconfig, "label", "node", "node-a", f"{label}-")
            policy = node_affinity_policy(namespace)
            with Descheduler(cluster, ensure_built(), policy, interval="3s") as descheduler:
                async with asyncio.timeout(SCENARIO_BOUND):
                    await until(recorder, lambda: recorder.pod_departed(
                        namespace, old["metadata"]["name"]))  # fmt: skip
                    await until(recorder, lambda: recorder.ready("web", namespace) >= 1)
                    end = recorder.clock()
                    # The cycles after the move: polled from its log (its only record).
                    seen = descheduler.log_text().count(CYCLE)
                    while True:
                        if descheduler.log_text().count(CYCLE) >= seen + 2:
                            break
                        await asyncio.sleep(0.5)
                log = descheduler.log_text()
            [new] = await pods(cluster, namespace)
            timeline = recorder.timeline("web", namespace)
            return Outcome(
                name="descheduler", protected=True,
                zero_ready_seconds=timeline.zero_ready_seconds(start, end),
                rollouts=timeline.rollouts(start, end), node="node-a",
                completed_events=await events(cluster, namespace, DRAIN_COMPLETED),
                notes={"new node": new["spec"]["nodeName"],
                       "held message logged": "graceful-drain" in log,
                       "last cycle": log.rsplit(CYCLE, 1)[1].splitlines()[0]},
            )  # fmt: skip
        finally:
            await client.close()
            for node in ("node-a", "node-b"):
                await kubectl(kubeconfig, "label", "node", node, f"{label}-", check=False)


# --- NodeClaims readable only later ---------------------------------------------------------


def read_only_role(name: str, namespace: str, rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A ClusterRole of `rules` bound to the ServiceAccount `namespace`/late-reader."""
    return [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": name}, "rules": rules},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": name},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": name},
         "subjects": [{"kind": "ServiceAccount", "name": "late-reader", "namespace": namespace}]},
    ]  # fmt: skip


async def test_nodeclaims_granted_after_the_controller_started_are_read_without_a_restart(
    real_cluster: RealCluster, karpenter: Karpenter, namespace: str, tmp_path: Path,
) -> None:  # fmt: skip
    """kube-apiserver refuses the controller's NodeClaim list (403: its role does not name
    them yet); once a role grants them, the controller's cache asks again and reads them,
    with no restart (it used to ask once, at start, and never again)."""
    account = f"system:serviceaccount:{namespace}:late-reader"
    informers = read_only_role(f"{namespace}-informers", namespace, [
        {"apiGroups": [""], "resources": ["pods", "nodes"], "verbs": ["list", "watch"]},
        {"apiGroups": ["apps"], "resources": ["replicasets", "deployments"],
         "verbs": ["list", "watch"]},
    ])  # fmt: skip
    nodeclaims = read_only_role(f"{namespace}-nodeclaims", namespace, [
        {"apiGroups": ["karpenter.sh"], "resources": ["nodeclaims"], "verbs": ["list", "watch"]},
    ])  # fmt: skip
    await kubectl(real_cluster.kubeconfig_path, "create", "serviceaccount", "late-reader",
                  "-n", namespace)  # fmt: skip
    kubectl_apply(real_cluster, informers)
    kubeconfig = service_account_kubeconfig(real_cluster, namespace, "late-reader",
                                            tmp_path / "late-reader.kubeconfig")  # fmt: skip
    cache = ClusterCache(AsyncClient(KubeConfig.from_file(str(kubeconfig))),
                         nodeclaims_recheck=0.2)  # fmt: skip
    try:
        await cache.start()
        assert cache.nodeclaims is not None
        await until_audited(real_cluster, lambda r: (
            (r.get("user") or {}).get("username") == account
            and (r.get("objectRef") or {}).get("resource") == "nodeclaims"
            and (r.get("responseStatus") or {}).get("code") == 403
        ))  # fmt: skip
        assert not cache.nodeclaims.synced
        kubectl_apply(real_cluster, nodeclaims)
        async with asyncio.timeout(SCENARIO_BOUND):
            await cache.nodeclaims.wait_synced()
    finally:
        await cache.stop()
        await kubectl(real_cluster.kubeconfig_path, "delete", "clusterrolebinding,clusterrole",
                      informers[0]["metadata"]["name"], nodeclaims[0]["metadata"]["name"],
                      "--ignore-not-found")  # fmt: skip
