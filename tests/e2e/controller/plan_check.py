"""Predict, drain, check: `graceful-drain plan NODE` against what a real `kubectl drain` does.

    await predict_drain_and_check(DrainSubject(kubeconfig, "node-a", "node-b", recorder))

Cluster-agnostic: it needs a cluster where graceful-drain runs with its webhook registered
and reachable, two schedulable nodes, an admin kubeconfig, `kubectl`, and an
AvailabilityRecorder watching the workloads' namespace. Everything it creates goes through
`kubectl apply`; everything it checks is what kubectl drain printed and what the API shows
afterwards.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubesim.client import KubeClient
from kubesim.recorder import DRAIN_FINISHED, AvailabilityRecorder
from kubesim.watchlog import watch_until
from tests.conftest import kubectl_cache_args, run_kubectl
from tests.e2e.watching import is_ready
from tests.unit.inspection.documented_schema import problems

from .drain_workloads import pod_on, web
from .installed import BOUND

Obj = dict[str, Any]
GRACEFUL_DRAIN = str(Path(sys.executable).parent / "graceful-drain")
DRAIN_TIMEOUT = "20s"  # a ceiling: the drain is interrupted once only PDB-blocked pods are left
BUDGET_VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget"

# Deployments the table cannot protect: name -> spec.strategy.rollingUpdate, and the
# decision's reason (docs/decisions.md, `cannot-surge`).
UNPROTECTABLE: dict[str, Obj] = {
    "solo-no-surge": {"maxSurge": 0, "maxUnavailable": 1},
    "solo-unavailable": {"maxSurge": 1, "maxUnavailable": 1},
}
UNPROTECTABLE_REASON = {"solo-no-surge": "cannot-surge", "solo-unavailable": "cannot-protect"}
PROTECTED = "protected"
# Two replicas on the drained node, opted out of graceful-drain (the last-ready rule would
# hold them, and their replacement, pinned to the drained node, could never be Ready), and a
# budget that allows no disruption.
BLOCKED = "ledger"
DAEMON = "agent"
BARE = "scratch"


@dataclass(frozen=True)
class DrainSubject:
    kubeconfig: Path
    drained: str
    spare: str
    recorder: AvailabilityRecorder
    admin: KubeClient
    namespace: str = "default"


@dataclass(frozen=True)
class Run:
    code: int
    stdout: str
    stderr: str


async def run_plan(kubeconfig: Path, *args: str) -> Run:
    def call() -> subprocess.CompletedProcess[str]:
        env = {"KUBECONFIG": str(kubeconfig), "PATH": str(Path(sys.executable).parent)}
        return subprocess.run([GRACEFUL_DRAIN, "plan", *args], capture_output=True, text=True,
                              env=env, timeout=BOUND, check=False)  # fmt: skip

    done = await asyncio.to_thread(call)
    return Run(done.returncode, done.stdout, done.stderr)


async def kubectl(kubeconfig: Path, *args: str, stdin: str | None = None) -> Run:
    done = await asyncio.to_thread(
        run_kubectl, kubeconfig, *args, check=False, timeout=BOUND, stdin=stdin
    )
    return Run(done.returncode, done.stdout, done.stderr)


def _pinned(deployment: Obj, node: str) -> Obj:
    """Require `node` (a drained node then leaves its pods Pending: none is ever replaced)."""
    spec = deployment["spec"]["template"]["spec"]
    spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}],
    }}}  # fmt: skip
    return deployment


def _prefer(deployment: Obj, node: str) -> Obj:
    prefer = deployment["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
    prefer["preferredDuringSchedulingIgnoredDuringExecution"][0]["preference"]["matchExpressions"][
        0
    ]["values"] = [node]
    return deployment


def workloads(subject: DrainSubject) -> list[Obj]:
    node, namespace = subject.drained, subject.namespace
    objects = [_prefer(web(PROTECTED), node)]
    for name, rolling in UNPROTECTABLE.items():
        solo = _prefer(web(name), node)
        solo["spec"]["strategy"]["rollingUpdate"] = rolling
        objects.append(solo)
    ledger = _pinned(web(BLOCKED, replicas=2), node)
    ledger["metadata"]["annotations"] = {"graceful-drain.stonal.com/enabled": "false"}
    objects.append(ledger)
    objects.append({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": BLOCKED, "namespace": namespace},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": BLOCKED}}},
    })  # fmt: skip
    objects.append({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": DAEMON, "namespace": namespace},
        "spec": {"selector": {"matchLabels": {"app": DAEMON}}, "template": {
            "metadata": {"labels": {"app": DAEMON}},
            "spec": {"containers": [{"name": "agent", "image": "registry.example/agent:1"}]},
        }},
    })  # fmt: skip
    objects.append(pod_on(node, BARE))
    for obj in objects:
        obj["metadata"]["namespace"] = namespace
    return objects


async def _pods(subject: DrainSubject) -> list[Obj]:
    listed = await subject.admin.get(f"/api/v1/namespaces/{subject.namespace}/pods")
    items: list[Obj] = listed["items"]
    return items


async def set_up(subject: DrainSubject) -> None:
    objects = workloads(subject)
    applied = await kubectl(
        subject.kubeconfig, "apply", "-f", "-",
        stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}),
    )  # fmt: skip
    assert applied.code == 0, applied.stderr
    deployments = {PROTECTED: 1, **dict.fromkeys(UNPROTECTABLE, 1), BLOCKED: 2}
    async with asyncio.timeout(BOUND):
        await subject.recorder.wait_until(
            lambda: all(subject.recorder.ready(n, subject.namespace) >= r
                        for n, r in deployments.items())
        )  # fmt: skip
    await watch_until(
        subject.admin, "v1", "pods", "Pod", subject.namespace,
        lambda items: sum(
            1 for p in items if is_ready(p) and p["spec"].get("nodeName") == subject.drained
            and p["metadata"]["labels"].get("app") in (DAEMON, BARE)
        ) == 2,
    )  # fmt: skip
    await watch_until(
        subject.admin, "policy/v1", "poddisruptionbudgets", "PodDisruptionBudget",
        subject.namespace,
        lambda items: any(
            p["metadata"]["name"] == BLOCKED
            and (p.get("status") or {}).get("observedGeneration") == p["metadata"]["generation"]
            and p["status"].get("currentHealthy") == 2
            for p in items
        ),
    )  # fmt: skip


def _by_app(plan: Obj, namespace: str) -> dict[str, list[Obj]]:
    grouped: dict[str, list[Obj]] = {}
    for pod in plan["pods"]:
        if pod["namespace"] == namespace:
            grouped.setdefault(pod["workload"].split("/", 1)[1], []).append(pod)
    return grouped


def check_expected_predictions(plan: Obj, namespace: str) -> None:
    """What the plan must say about the pods this scenario created (the rest are generic)."""
    apps = _by_app(plan, namespace)
    [protected] = apps[PROTECTED]
    assert (protected["outcome"], protected["outage"]) == ("held", False), protected
    assert protected["decision"]["reason"] == "rollout-requested"
    assert protected["expectedWaitSource"] in ("readiness-history", "probe-settings")
    for name in UNPROTECTABLE:
        [solo] = apps[name]
        assert (solo["outcome"], solo["outage"]) == ("evicted", True), solo
        assert solo["decision"]["reason"] == UNPROTECTABLE_REASON[name], solo
        assert solo["fix"], solo
    assert apps[BLOCKED] and all(p["outcome"] == "blocked" for p in apps[BLOCKED])
    assert {p["budget"] for p in apps[BLOCKED]} == {f"{namespace}/{BLOCKED}"}
    [daemon] = apps[DAEMON]
    assert (daemon["outcome"], daemon["kubectlFlags"]) == ("ignored", ["--ignore-daemonsets"])
    [bare] = apps[BARE]
    assert (bare["outcome"], bare["outage"], bare["kubectlFlags"]) == ("evicted", True, ["--force"])
    assert plan["verdict"] == "blocked"
    assert plan["blocked"] == sorted(f"{namespace}/{p['name']}" for p in apps[BLOCKED])
    assert set(plan["outages"]) >= {f"{namespace}/Pod/{BARE}"} | {
        f"{namespace}/Deployment/{name}" for name in UNPROTECTABLE
    }


async def check_every_prediction(
    subject: DrainSubject, plan: Obj, drained: Run, window: tuple[float, float]
) -> None:
    """Each pod's predicted outcome against what the drain did to it."""
    remaining = {(p["metadata"]["namespace"], p["metadata"]["name"]): p
                 for p in await _pods(subject)}  # fmt: skip
    for pod in plan["pods"]:
        key = (pod["namespace"], pod["name"])
        ref = f"{pod['namespace']}/{pod['name']}"
        where = f"{ref}: predicted {pod['outcome']}\n{drained.stderr}"
        outcome = pod["outcome"]
        if outcome == "held":
            deployment = pod["decision"]["deployment"]
            assert f"graceful-drain: waiting for a replacement of Deployment {deployment}" in (
                drained.stderr
            ), where
            assert key not in remaining, where  # gone, replaced by the rollout
        elif outcome == "evicted":
            assert f"pod/{pod['name']} evicted" in drained.stdout, where
            refused = f'pods/"{pod["name"]}" -n "{pod["namespace"]}" (will retry'
            assert refused not in drained.stderr, where  # evicted at the first try
        elif outcome == "blocked":
            assert BUDGET_VIOLATION in drained.stderr and pod["name"] in drained.stderr, where
            assert key in remaining and not remaining[key]["metadata"].get("deletionTimestamp"), (
                where
            )
        elif outcome in ("ignored", "skipped"):
            assert key in remaining and not remaining[key]["metadata"].get("deletionTimestamp"), (
                where
            )
            assert f"pod/{pod['name']} evicted" not in drained.stdout, where
        else:
            raise AssertionError(f"unknown outcome {outcome}")
        kind, name = pod["workload"].split("/", 1)
        if pod["namespace"] == subject.namespace and kind == "Deployment" and outcome != "blocked":
            zero = subject.recorder.timeline(name, subject.namespace).zero_ready_seconds(*window)
            assert (zero > 0) == pod["outage"], f"{where}\nzero-ready seconds: {zero}"
    if any(p["outcome"] == "blocked" for p in plan["pods"]):
        assert drained.code != 0, drained.stdout


async def settle(subject: DrainSubject) -> None:
    """Until every Deployment the drain could replace has a Ready pod again (off the node)."""
    names = [PROTECTED, *UNPROTECTABLE]
    async with asyncio.timeout(BOUND):
        await subject.recorder.wait_until(
            lambda: all(subject.recorder.ready(n, subject.namespace) >= 1 for n in names)
        )


def _output_has_settled(plan: Obj, stdout: str, stderr: str) -> bool:
    """kubectl has evicted every pod the plan says it evicts, and has been refused for every
    pod it says is blocked. (A held pod may print nothing more: once its replacement is Ready
    the rollout deletes it, and kubectl's retry finds it gone.)"""
    refusals = [line for line in stderr.splitlines() if BUDGET_VIOLATION in line]
    for pod in plan["pods"]:
        if pod["outcome"] == "evicted" and f"pod/{pod['name']} evicted" not in stdout:
            return False
        if pod["outcome"] == "blocked" and not any(f'"{pod["name"]}"' in r for r in refusals):
            return False
    return True


async def _held_pods_gone(subject: DrainSubject, plan: Obj) -> None:
    held: dict[str, set[str]] = {}
    for pod in plan["pods"]:
        if pod["outcome"] == "held":
            held.setdefault(pod["namespace"], set()).add(pod["name"])
    for namespace, names in held.items():

        def gone(items: list[Obj], names: set[str] = names) -> bool:
            return not any(p["metadata"]["name"] in names for p in items)

        await watch_until(subject.admin, "v1", "pods", "Pod", namespace, gone, bound=BOUND)


async def drain_until_only_blocked_remain(subject: DrainSubject, plan: Obj) -> Run:
    """`kubectl drain`, interrupted as an operator would once only the pods the plan says are
    blocked are left (`_output_has_settled`, and every held pod gone): they never go, so left
    alone it would always run to DRAIN_TIMEOUT. Its exit status is then non-zero, as on that
    timeout."""
    process = await asyncio.create_subprocess_exec(
        "kubectl", *kubectl_cache_args(subject.kubeconfig), "drain", subject.drained,
        "--ignore-daemonsets", "--delete-emptydir-data", "--force", f"--timeout={DRAIN_TIMEOUT}",
        env={**os.environ, "KUBECONFIG": str(subject.kubeconfig)},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert process.stdout is not None and process.stderr is not None
    out, err = bytearray(), bytearray()
    output_settled = asyncio.Event()

    async def collect(stream: asyncio.StreamReader, into: bytearray) -> None:
        while chunk := await stream.read(1 << 16):
            into += chunk
            if _output_has_settled(plan, out.decode(), err.decode()):
                output_settled.set()

    async def settled() -> None:
        await asyncio.gather(output_settled.wait(), _held_pods_gone(subject, plan))

    readers = [asyncio.create_task(collect(process.stdout, out)),
               asyncio.create_task(collect(process.stderr, err))]  # fmt: skip
    exited = asyncio.create_task(process.wait())
    interrupt = asyncio.create_task(settled())
    try:
        async with asyncio.timeout(BOUND):
            await asyncio.wait([exited, interrupt], return_when=asyncio.FIRST_COMPLETED)
            if interrupt.done():
                interrupt.result()  # a watch that failed fails here, not as a drain cut short
            if process.returncode is None:
                process.terminate()
            await exited
            await asyncio.gather(*readers)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        for task in (*readers, exited, interrupt):
            task.cancel()
    return Run(process.returncode or 0, out.decode(), err.decode())


async def predict_drain_and_check(subject: DrainSubject) -> Obj:
    await set_up(subject)
    predicted = await run_plan(subject.kubeconfig, subject.drained, "--json")
    assert predicted.code == 2, predicted.stderr  # blocked
    plan: Obj = json.loads(predicted.stdout)
    assert problems(plan, "plan") == []
    check_expected_predictions(plan, subject.namespace)
    on_node = await kubectl(
        subject.kubeconfig, "get", "pods", "--all-namespaces", "-o",
        "jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name}{'\\n'}{end}",
        f"--field-selector=spec.nodeName={subject.drained}",
    )  # fmt: skip
    assert sorted(on_node.stdout.split()) == sorted(
        f"{p['namespace']}/{p['name']}" for p in plan["pods"]
    ), "the plan covers every pod on the node"

    subject.recorder.mark_drain_started(subject.drained, "kubectl")
    drained = await drain_until_only_blocked_remain(subject, plan)
    subject.recorder.mark(DRAIN_FINISHED, node=subject.drained)
    start, _ = subject.recorder.drain_window(subject.drained)
    await settle(subject)
    await watch_until(
        subject.admin, "v1", "pods", "Pod", subject.namespace,
        lambda items: not any(
            p["metadata"]["labels"].get("app") in (PROTECTED, BARE, *UNPROTECTABLE)
            and p["spec"].get("nodeName") == subject.drained
            for p in items
        ),
    )  # fmt: skip
    await check_every_prediction(subject, plan, drained, (start, subject.recorder.clock()))
    return plan
