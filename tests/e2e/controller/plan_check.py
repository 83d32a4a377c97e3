"""Predict, drain, check: `graceful-drain plan NODE` against what a real `kubectl drain` does.

    await predict_drain_and_check(DrainSubject(kubeconfig, "node-a", "node-b", recorder))

The drained node holds 21 pods: single-replica protected Deployments (held), one of them
under a PodDisruptionBudget; four replicas all on the node (held: the last-ready rule); two
replicas with a sibling Ready on the spare node (`ready-elsewhere`: evicted at once); opted
out; unprotectable (maxSurge 0, maxUnavailable 1); opted out and blocked by a budget; a Job,
a StatefulSet, a DaemonSet and a bare pod. After the real check, every prediction made wrong
in turn must fail it (`check_the_check_fails_on_each_wrong_prediction`).

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

from .drain_workloads import pod_on, statefulset, web
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
# More single-replica protected Deployments: each held until its replacement is Ready.
SINGLES = (PROTECTED, "cart", "search", "mail", "auth", "feed")
# Four replicas, all on the drained node: the last-ready rule holds every one of them.
CROWD, CROWD_REPLICAS = "crowd", 4
# Two replicas, one on each node: the one on the drained node is evicted at once
# (`ready-elsewhere`), no rollout.
SPREAD = "spread"
# One replica under a PodDisruptionBudget (minAvailable 1): held, and the budget lets the
# eviction through once the replacement is Ready (the pair composes).
GUARDED = "guarded"
OPTED_OUT = "optout"  # one replica, enabled annotation "false": evicted, an outage
# Two replicas on the drained node, opted out of graceful-drain (the last-ready rule would
# hold them, and their replacement, pinned to the drained node, could never be Ready), and a
# budget that allows no disruption.
BLOCKED = "ledger"
DAEMON = "agent"
BARE = "scratch"
JOB = "batch"
STATEFUL = "db"
# Deployment -> the Ready pods it has before the drain.
DEPLOYMENTS: dict[str, int] = {
    **dict.fromkeys(SINGLES, 1), CROWD: CROWD_REPLICAS, SPREAD: 2, GUARDED: 1, OPTED_OUT: 1,
    **dict.fromkeys(UNPROTECTABLE, 1), BLOCKED: 2,
}  # fmt: skip
# What the drain replaces (on the spare node) and must leave the drained node.
REPLACED = [name for name in DEPLOYMENTS if name != BLOCKED]
OTHERS = (DAEMON, BARE, JOB, STATEFUL)  # one Ready pod each on the drained node
MIN_PODS = 20  # issue 26: a node holding at least 20 mixed pods


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


def _job(name: str) -> Obj:
    """A one-pod Job whose pod keeps running (for an hour: without `run-for` it would exit
    after a second, on kubesim's kubelet as in kwok's stages)."""
    labels = {"app": name}
    return {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
        "spec": {"backoffLimit": 6, "template": {
            "metadata": {"labels": labels, "annotations": {"sim.kubesim.io/run-for": "1h"}},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 5,
                     "containers": [{"name": "job", "image": "registry.example/job:1"}]},
        }},
    }  # fmt: skip


def workloads(subject: DrainSubject, spread_replicas: int = 1) -> list[Obj]:
    """Everything the scenario runs. Created while the spare node is cordoned, so every pod
    lands on the drained node; SPREAD gets its second replica (on the spare node) later."""
    node, namespace = subject.drained, subject.namespace
    objects = [_prefer(web(name), node) for name in SINGLES]
    crowd = _prefer(web(CROWD, replicas=CROWD_REPLICAS), node)
    # Surging every replacement at once: the rollout replaces all four in one step.
    crowd["spec"]["strategy"]["rollingUpdate"] = {"maxSurge": "100%", "maxUnavailable": 0}
    objects.append(crowd)
    objects.append(_prefer(web(SPREAD, replicas=spread_replicas), node))
    objects.append(_prefer(web(GUARDED), node))
    objects.append({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": GUARDED},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": GUARDED}}},
    })  # fmt: skip
    optout = _prefer(web(OPTED_OUT), node)
    optout["metadata"]["annotations"] = {"graceful-drain.stonal.com/enabled": "false"}
    objects.append(optout)
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
    objects.append(_job(JOB))
    stateful = statefulset(STATEFUL)
    stateful["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = 5
    objects.append(stateful)
    objects.append(pod_on(node, BARE))
    for obj in objects:
        obj["metadata"]["namespace"] = namespace
    return objects


async def _apply(subject: DrainSubject, objects: list[Obj]) -> None:
    applied = await kubectl(
        subject.kubeconfig, "apply", "-f", "-",
        stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}),
    )  # fmt: skip
    assert applied.code == 0, applied.stderr


async def _cordon(subject: DrainSubject, verb: str, node: str) -> None:
    done = await kubectl(subject.kubeconfig, verb, node)
    assert done.code == 0, done.stderr


def _schedulable(node: Obj) -> bool:
    taints = (node.get("spec") or {}).get("taints") or []
    return not (node.get("spec") or {}).get("unschedulable") and not any(
        t.get("key") == "node.kubernetes.io/unschedulable" for t in taints
    )


async def _until_ready(subject: DrainSubject, counts: dict[str, int]) -> None:
    async with asyncio.timeout(BOUND):
        await subject.recorder.wait_until(
            lambda: all(subject.recorder.ready(n, subject.namespace) >= r
                        for n, r in counts.items())
        )  # fmt: skip


async def _pods(subject: DrainSubject) -> dict[tuple[str, str], Obj]:
    listed = await subject.admin.get("/api/v1/pods")
    return {(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in listed["items"]}


async def set_up(subject: DrainSubject) -> None:
    """Every pod on the drained node (the spare one cordoned meanwhile), then SPREAD's second
    replica on the spare node (the drained one cordoned meanwhile); both nodes schedulable
    again before `plan` reads them."""
    await _cordon(subject, "cordon", subject.spare)
    await _apply(subject, workloads(subject))
    await _until_ready(subject, {**DEPLOYMENTS, SPREAD: 1})
    await watch_until(
        subject.admin, "v1", "pods", "Pod", subject.namespace,
        lambda items: sum(
            1 for p in items if is_ready(p) and p["spec"].get("nodeName") == subject.drained
            and p["metadata"]["labels"].get("app") in OTHERS
        ) == len(OTHERS),
    )  # fmt: skip
    await _cordon(subject, "uncordon", subject.spare)
    await _cordon(subject, "cordon", subject.drained)
    spread = [obj for obj in workloads(subject, spread_replicas=2)
              if obj["kind"] == "Deployment" and obj["metadata"]["name"] == SPREAD]  # fmt: skip
    await _apply(subject, spread)
    await _until_ready(subject, {SPREAD: 2})
    await _cordon(subject, "uncordon", subject.drained)
    await watch_until(
        subject.admin, "v1", "nodes", "Node", None,
        lambda items: all(_schedulable(n) for n in items
                          if n["metadata"]["name"] in (subject.drained, subject.spare)),
    )  # fmt: skip
    await watch_until(
        subject.admin, "policy/v1", "poddisruptionbudgets", "PodDisruptionBudget",
        subject.namespace,
        lambda items: all(
            any(p["metadata"]["name"] == name
                and (p.get("status") or {}).get("observedGeneration")
                == p["metadata"]["generation"]
                and p["status"].get("currentHealthy") == healthy
                for p in items)
            for name, healthy in ((BLOCKED, 2), (GUARDED, 1))
        ),
    )  # fmt: skip


def _by_app(plan: Obj, namespace: str) -> dict[str, list[Obj]]:
    grouped: dict[str, list[Obj]] = {}
    for pod in plan["pods"]:
        if pod["namespace"] == namespace:
            grouped.setdefault(pod["workload"].split("/", 1)[1], []).append(pod)
    return grouped


def _one(apps: dict[str, list[Obj]], name: str, outcome: str, outage: bool, reason: str) -> Obj:
    [pod] = apps[name]
    assert (pod["outcome"], pod["outage"], pod["reason"]) == (outcome, outage, reason), pod
    return pod


def check_expected_predictions(plan: Obj, namespace: str) -> None:
    """What the plan must say about the pods this scenario created (the rest are generic)."""
    apps = _by_app(plan, namespace)
    assert sum(map(len, apps.values())) >= MIN_PODS, apps
    for name in SINGLES:
        single = _one(apps, name, "held", False, "rollout-requested")
        assert single["expectedWaitSource"] in ("readiness-history", "probe-settings"), single
    assert len(apps[CROWD]) == CROWD_REPLICAS, apps[CROWD]
    for pod in apps[CROWD]:
        assert (pod["outcome"], pod["outage"], pod["reason"]) == (
            "held", False, "rollout-requested",
        ), pod  # fmt: skip
    _one(apps, SPREAD, "evicted", False, "ready-elsewhere")
    guarded = _one(apps, GUARDED, "held", False, "rollout-requested")
    assert guarded["budget"] == f"{namespace}/{GUARDED}", guarded
    _one(apps, OPTED_OUT, "evicted", True, "opted-out")
    for name in UNPROTECTABLE:
        solo = _one(apps, name, "evicted", True, UNPROTECTABLE_REASON[name])
        assert solo["fix"], solo
    assert apps[BLOCKED] and all(p["outcome"] == "blocked" for p in apps[BLOCKED])
    assert {p["budget"] for p in apps[BLOCKED]} == {f"{namespace}/{BLOCKED}"}
    daemon = _one(apps, DAEMON, "ignored", False, "daemonset")
    assert daemon["kubectlFlags"] == ["--ignore-daemonsets"], daemon
    job = _one(apps, JOB, "evicted", True, "no-deployment")
    stateful = _one(apps, STATEFUL, "evicted", True, "no-deployment")
    assert job["kubectlFlags"] == stateful["kubectlFlags"] == [], (job, stateful)
    bare = _one(apps, BARE, "evicted", True, "no-deployment")
    assert bare["kubectlFlags"] == ["--force"], bare
    assert plan["verdict"] == "blocked"
    assert plan["blocked"] == sorted(f"{namespace}/{p['name']}" for p in apps[BLOCKED])
    assert set(plan["outages"]) >= {
        f"{namespace}/Pod/{BARE}",
        f"{namespace}/Job/{JOB}",
        f"{namespace}/StatefulSet/{STATEFUL}",
    } | {f"{namespace}/Deployment/{name}" for name in (*UNPROTECTABLE, OPTED_OUT)}
    assert not set(plan["outages"]) & {
        f"{namespace}/Deployment/{name}" for name in (*SINGLES, CROWD, SPREAD, GUARDED)
    }, plan["outages"]


Key = tuple[str, str]  # (namespace, name)


@dataclass(frozen=True)
class Drained:
    """What the drain did: kubectl's output, the pods before and after, the drain's window."""

    run: Run
    before: dict[Key, str]  # the uid of each pod on the node before the drain
    after: dict[Key, Obj]  # every pod once the drain's replacements are Ready
    window: tuple[float, float]


def _refused(stderr: str, pod: Obj, because: str) -> bool:
    """kubectl retried this very pod's eviction, refused with `because`."""
    retried = f'pods/"{pod["name"]}" -n "{pod["namespace"]}" (will retry'
    return any(retried in line and because in line for line in stderr.splitlines())


def _waiting(deployment: str) -> str:
    return f"graceful-drain: waiting for a replacement of Deployment {deployment}"


def _stayed(drained: Drained, key: Key) -> bool:
    """The very pod that was there before the drain is still there, not terminating."""
    pod = drained.after.get(key)
    return (
        pod is not None
        and pod["metadata"]["uid"] == drained.before.get(key)
        and not pod["metadata"].get("deletionTimestamp")
    )


def check_pod(subject: DrainSubject, pod: Obj, drained: Drained) -> None:
    """One pod's prediction (outcome, outage) against what the drain did to it."""
    key = (pod["namespace"], pod["name"])
    out, err = drained.run.stdout, drained.run.stderr
    where = f"{key[0]}/{key[1]}: predicted {pod['outcome']}, outage {pod['outage']}\n{err}"
    outcome = pod["outcome"]
    evicted = f"pod/{pod['name']} evicted" in out
    if outcome == "held":
        # The Deployment was held (this pod, or a sibling kubectl reached first: once the
        # replacement is Ready, a later eviction of a sibling goes through at once).
        deployment = (pod.get("decision") or {}).get("deployment")
        assert deployment and _waiting(deployment) in err, where
        assert key not in drained.after, where  # gone, replaced by the rollout
    elif outcome == "evicted":
        assert evicted, where
        assert f'pods/"{pod["name"]}" -n "{pod["namespace"]}" (will retry' not in err, where
    elif outcome == "blocked":
        assert _refused(err, pod, BUDGET_VIOLATION) and _stayed(drained, key), where
    elif outcome in ("ignored", "skipped"):
        tried = f'pods/"{pod["name"]}" -n "{pod["namespace"]}"' in err
        assert _stayed(drained, key) and not evicted and not tried, where  # never tried
    else:
        raise AssertionError(f"unknown outcome {outcome}")
    kind, name = pod["workload"].split("/", 1)
    if pod["namespace"] == subject.namespace and kind == "Deployment" and outcome != "blocked":
        timeline = subject.recorder.timeline(name, subject.namespace)
        zero = timeline.zero_ready_seconds(*drained.window)
        assert (zero > 0) == pod["outage"], f"{where}\nzero-ready seconds: {zero}"


def check_every_prediction(subject: DrainSubject, plan: Obj, drained: Drained) -> None:
    """Each pod's predicted outcome against what the drain did to it."""
    for pod in plan["pods"]:
        check_pod(subject, pod, drained)
    if any(p["outcome"] == "blocked" for p in plan["pods"]):
        assert drained.run.code != 0, drained.run.stdout


OUTCOMES = ("held", "evicted", "blocked", "ignored")


def check_the_check_fails_on_each_wrong_prediction(
    subject: DrainSubject, plan: Obj, drained: Drained
) -> None:
    """Every prediction about this scenario's pods, made wrong one at a time (another
    outcome; for a Deployment's pod, the other outage), is rejected by `check_pod`. But one:
    "evicted" for a held pod kubectl only reached once its replacement was Ready (never
    refused itself): what the drain did to that pod cannot tell the two apart."""
    for pod in plan["pods"]:
        if pod["namespace"] != subject.namespace:
            continue
        deployment = (pod.get("decision") or {}).get("deployment")
        reached_late = pod["outcome"] == "held" and not _refused(
            drained.run.stderr, pod, _waiting(str(deployment))
        )
        wrong = [
            {**pod, "outcome": o}
            for o in OUTCOMES
            if o != pod["outcome"] and not (o == "evicted" and reached_late)
        ]
        if pod["workload"].startswith("Deployment/") and pod["outcome"] != "blocked":
            wrong.append({**pod, "outage": not pod["outage"]})
        for mutant in wrong:
            try:
                check_pod(subject, mutant, drained)
            except AssertionError:
                continue
            raise AssertionError(
                f"a wrong prediction passes the check: {pod['name']} "
                f"{pod['outcome']}/{pod['outage']} -> {mutant['outcome']}/{mutant['outage']}"
            )


async def settle(subject: DrainSubject) -> None:
    """Until every Deployment the drain could replace has a Ready pod again (off the node)."""
    await _until_ready(subject, dict.fromkeys(REPLACED, 1))


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

    before = {key: p["metadata"]["uid"] for key, p in (await _pods(subject)).items()}
    subject.recorder.mark_drain_started(subject.drained, "kubectl")
    run = await drain_until_only_blocked_remain(subject, plan)
    subject.recorder.mark(DRAIN_FINISHED, node=subject.drained)
    start, _ = subject.recorder.drain_window(subject.drained)
    await settle(subject)
    await watch_until(
        subject.admin, "v1", "pods", "Pod", subject.namespace,
        lambda items: not any(
            p["metadata"]["labels"].get("app") in (*REPLACED, BARE, JOB, STATEFUL)
            and p["spec"].get("nodeName") == subject.drained
            for p in items
        ),
    )  # fmt: skip
    drained = Drained(run, before, await _pods(subject), (start, subject.recorder.clock()))
    check_every_prediction(subject, plan, drained)
    check_the_check_fails_on_each_wrong_prediction(subject, plan, drained)
    return plan
