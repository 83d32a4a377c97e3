"""The API server pushing back on the controller's writes to a Deployment (docs/decisions.md,
"When a write fails"), on the real control plane: a write refused for now is no reason to
let the last Ready pod go.

- the write answered 503 (the test's API proxy), for the restarted-at stamp and for the
  ledger record;
- the stamp answered 429 by API Priority and Fairness for real: a FlowSchema sends the
  controller's writes to the Deployment to a PriorityLevelConfiguration with no seat of its
  own (nominalConcurrencyShares 0, nothing borrowed, `Reject`), which one request of the
  test's own (an admission webhook of the test holding it) occupies;
- the stamp delayed past the webhook's budget (held by the API proxy until the eviction has
  been answered, then relayed: it lands late);

each time: the eviction is held (429) while the API pushes back, the rollout happens once
it answers, web never has 0 Ready pods, the drain completes. The scenarios run concurrently
(`stage`: a namespace and kwok nodes each) under one controller replica talking through
the proxy. And a Deployment that cannot be written at all (a validating webhook on its
updates that always fails): the drain is held for `--rollout-timeout`, then let through
with a Warning naming the failing write; `plan` and `status` say so meanwhile.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime

import aiohttp
import pytest

from realcluster.cluster import RealCluster
from tests.e2e.cli import run_cli

from .apiproxy import ApiProxy, Seen
from .harness import (
    BOUND,
    Installation,
    Obj,
    Routed,
    drain,
    kubectl,
    product_source,
    routed_replicas,
    until_audited,
    until_events,
)
from .test_last_ready_real import Stage, held_in, stage
from .testwebhook import HoldingWebhook, closed_port_url, configuration

pytestmark = [pytest.mark.e2e, pytest.mark.realcluster]

DEPLOYMENT_WRITES = ("PATCH", "PUT")


def writes_web(seen: Seen, namespace: str) -> bool:
    """A write of Deployment web in `namespace` (not of a subresource)."""
    return seen.method in DEPLOYMENT_WRITES and seen.path == (
        f"/apis/apps/v1/namespaces/{namespace}/deployments/web"
    )


def audited_eviction(namespace: str, code: int | None = None) -> Callable[[Obj], bool]:
    """An audit record of an eviction in `namespace` (answered `code`, or anything)."""

    def matches(record: Obj) -> bool:
        ref = record.get("objectRef") or {}
        answered = (record.get("responseStatus") or {}).get("code")
        return (ref.get("namespace") == namespace and ref.get("subresource") == "eviction"
                and (code is None or answered == code))  # fmt: skip

    return matches


async def first_of(*waits: Awaitable[object]) -> None:
    """Until one of `waits` is done (the others cancelled), within BOUND."""
    tasks = [asyncio.ensure_future(w) for w in waits]
    try:
        async with asyncio.timeout(BOUND):
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def held_then_drained(
    staged: Stage, node: str, pushed_back: Callable[[str], Awaitable[None]],
    lift: Callable[[], None], ready: int,
) -> tuple[float, list[str]]:  # fmt: skip
    """Drain `node`; once `pushed_back(pod)` returns (the API pushed back, and the eviction of
    `pod`, the node's pod, was held), `lift()` the pushback; the drain completes and web is
    back to `ready` Ready pods. Fails if the pod left first. (zero-Ready seconds, rollouts)"""
    [old] = await staged.pods_on(node)
    name = old["metadata"]["name"]
    start = staged.recorder.clock()
    draining = asyncio.create_task(drain(staged.cluster, staged.recorder, node))
    departed = staged.recorder.wait_until(
        lambda: staged.recorder.pod_departed(staged.namespace, name)
    )
    pushed = asyncio.ensure_future(pushed_back(name))
    await first_of(pushed, departed)
    lift()
    assert pushed.done() and not pushed.cancelled() and pushed.exception() is None, (
        f"{staged.namespace}: the pod left while the API pushed back"
    )
    drained = await draining
    await staged.until_ready(ready)
    assert drained.code == 0, drained.stderr
    assert held_in(drained, staged.namespace), drained.stderr
    return staged.zero_ready_seconds(start), staged.rollouts(start)


# --- the scenarios --------------------------------------------------------------------------


@dataclass
class Setup:
    """The one controller replica, talking through `api`, answering behind `routed`."""

    api: ApiProxy
    routed: Routed
    installation: Installation

    async def held(self, namespace: str, pod: str) -> None:
        """Until the webhook has answered an eviction of the pod 429."""
        router = self.routed.router
        await router.until(lambda: router.held(namespace, pod))

    async def answered(self, namespace: str, pod: str) -> None:
        """Until the webhook has answered an eviction of the pod."""
        router = self.routed.router
        await router.until(lambda: bool(router.answers_for(namespace, pod)))


Scenario = Callable[[Stage, Setup], Awaitable[None]]


async def answered_503(staged: Stage, setup: Setup, ledger: bool) -> None:
    """Every write of web answered 503 until the eviction has been held: for the stamp (one
    pod, on a) or for the ledger record (two pods, on a and b: the one on b stays Ready)."""
    a, b, *_ = staged.nodes
    await staged.place({a: 1, b: 1} if ledger else {a: 1})
    namespace, failing, injected = staged.namespace, [True], []

    async def unavailable(seen: Seen) -> int | None:
        if failing[0] and writes_web(seen, namespace):
            injected.append(seen.method)
            return 503
        return None

    setup.api.rules.append(unavailable)

    async def pushed_back(pod: str) -> None:
        await setup.held(namespace, pod)
        assert injected, "held before any write was refused"

    zero, rollouts = await held_then_drained(
        staged, a, pushed_back, lambda: failing.__setitem__(0, False), 2 if ledger else 1
    )
    assert zero == 0
    assert len(rollouts) == (0 if ledger else 1), rollouts


async def stamp_503(staged: Stage, setup: Setup) -> None:
    await answered_503(staged, setup, ledger=False)


async def record_503(staged: Stage, setup: Setup) -> None:
    await answered_503(staged, setup, ledger=True)


async def delayed_past_the_budget(staged: Stage, setup: Setup) -> None:
    """The first write of web is held by the proxy until the webhook has answered the
    eviction (it gave up on the write within its budget), then relayed: the stamp lands
    late."""
    a, *_ = staged.nodes
    await staged.place({a: 1})
    namespace = staged.namespace
    answered = asyncio.Event()
    delayed: list[Seen] = []

    async def slow(seen: Seen) -> int | None:
        if writes_web(seen, namespace) and not delayed:
            delayed.append(seen)
            async with asyncio.timeout(BOUND):
                await answered.wait()
        return None

    setup.api.rules.append(slow)

    async def pushed_back(pod: str) -> None:
        await setup.answered(namespace, pod)
        assert delayed, "answered before any write was sent"
        await setup.held(namespace, pod)

    zero, rollouts = await held_then_drained(staged, a, pushed_back, answered.set, 1)
    assert zero == 0
    assert len(rollouts) == 1, rollouts


async def apf_429(staged: Stage, setup: Setup) -> None:
    """API Priority and Fairness answers the controller's writes of web 429 while a request of
    the test's own (a squeezer account creating a ConfigMap, held by the test's admission
    webhook) occupies their priority level, which has no other seat."""
    a, *_ = staged.nodes
    await staged.place({a: 1})
    namespace, api = staged.namespace, setup.api
    async with Squeeze(staged, setup.installation) as squeeze:
        await squeeze.occupied()

        async def pushed_back(pod: str) -> None:
            await api.until(lambda: any(code == 429 and writes_web(seen, namespace)
                                        for seen, code in api.answered))  # fmt: skip
            await setup.held(namespace, pod)

        zero, rollouts = await held_then_drained(staged, a, pushed_back, squeeze.release, 1)
    assert zero == 0
    assert len(rollouts) == 1, rollouts


class Squeeze:
    """A FlowSchema sending the controller's writes of Deployments in the stage's namespace,
    and a squeezer ServiceAccount's ConfigMap creations there, to a priority level with no
    seat of its own: nominalConcurrencyShares 0, nothing lendable or borrowed, `Reject`. With
    nothing executing at that level, the API server still dispatches one request
    (fairqueuing/queueset `canAccommodateSeatsLocked`); with one executing, every other is
    answered 429 at once. `occupied()` makes one execute for as long as the test says: a
    ConfigMap creation the test's admission webhook holds (re-sent should the API server's
    30 s webhook timeout end it first)."""

    def __init__(self, staged: Stage, installation: Installation) -> None:
        self.staged = staged
        self.installation = installation
        self.name = f"e2e-squeeze-{staged.namespace}"
        self.webhook = HoldingWebhook()
        self.released = asyncio.Event()
        self.token = ""
        self.flow_schema_uid = ""
        self._session: aiohttp.ClientSession | None = None
        self._occupying: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Squeeze:
        staged, namespace = self.staged, self.staged.namespace
        await self.webhook.start()
        self.hold = self.webhook.hold(lambda r: "squeeze" in ((r.get("object") or {}).get(
            "metadata") or {}).get("labels", {}))  # fmt: skip
        await kubectl(staged.kubeconfig, "create", "serviceaccount", "squeezer", "-n", namespace)
        await kubectl(staged.kubeconfig, "create", "role", "squeezer", "--verb=create",
                      "--resource=configmaps", "-n", namespace)  # fmt: skip
        await kubectl(staged.kubeconfig, "create", "rolebinding", "squeezer", "--role=squeezer",
                      f"--serviceaccount={namespace}:squeezer", "-n", namespace)  # fmt: skip
        self.token = (await kubectl(staged.kubeconfig, "create", "token", "squeezer", "-n",
                                    namespace)).stdout.strip()  # fmt: skip
        controller = self.installation
        squeezed = [
            {"subjects": [{"kind": "ServiceAccount", "serviceAccount": {
                "name": controller.account, "namespace": controller.namespace}}],
             "resourceRules": [{"verbs": ["patch", "update"], "apiGroups": ["apps"],
                                "resources": ["deployments"], "namespaces": [namespace]}]},
            {"subjects": [{"kind": "ServiceAccount", "serviceAccount": {
                "name": "squeezer", "namespace": namespace}}],
             "resourceRules": [{"verbs": ["create"], "apiGroups": [""],
                                "resources": ["configmaps"], "namespaces": [namespace]}]},
        ]  # fmt: skip
        objects = [
            {"apiVersion": "flowcontrol.apiserver.k8s.io/v1",
             "kind": "PriorityLevelConfiguration", "metadata": {"name": self.name},
             "spec": {"type": "Limited", "limited": {
                 "nominalConcurrencyShares": 0, "lendablePercent": 0,
                 "borrowingLimitPercent": 0, "limitResponse": {"type": "Reject"}}}},
            {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
             "metadata": {"name": self.name},
             "spec": {"priorityLevelConfiguration": {"name": self.name},
                      "matchingPrecedence": 500, "distinguisherMethod": {"type": "ByUser"},
                      "rules": squeezed}},
            configuration(self.name, self.webhook.url, self.webhook.ca_pem, [
                {"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                 "resources": ["configmaps"], "scope": "Namespaced"}], namespace),
        ]  # fmt: skip
        listed = {"apiVersion": "v1", "kind": "List", "items": objects}
        await kubectl(staged.kubeconfig, "apply", "-f", "-", stdin=json.dumps(listed))
        schema = json.loads((await kubectl(staged.kubeconfig, "get", "flowschema", self.name,
                                           "-o", "json")).stdout)  # fmt: skip
        self.flow_schema_uid = schema["metadata"]["uid"]
        cluster = staged.cluster
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=ssl.create_default_context(
                cadata=cluster.ca_pem.decode())),
            headers={"Authorization": f"Bearer {self.token}"},
        )  # fmt: skip
        return self

    async def create_configmap(self, squeeze: bool) -> tuple[int, str]:
        """A ConfigMap created by the squeezer: (HTTP status, the FlowSchema uid it was
        classified under)."""
        assert self._session is not None
        namespace = self.staged.namespace
        labels = {"squeeze": "yes"} if squeeze else {}
        body = {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"generateName": "squeeze-", "labels": labels}}  # fmt: skip
        async with self._session.post(
            f"{self.staged.cluster.server}/api/v1/namespaces/{namespace}/configmaps", json=body
        ) as response:  # fmt: skip
            await response.read()
            return response.status, response.headers.get("X-Kubernetes-PF-FlowSchema-UID", "")

    async def occupied(self) -> None:
        """Once the level is occupied: a probe is classified under the FlowSchema (the API
        server has read it) and, with the held request executing, answered 429."""
        async with asyncio.timeout(BOUND):  # probes polled: the API server reads on its pace
            while True:
                status, schema = await self.create_configmap(False)
                if schema == self.flow_schema_uid and any(
                    r.get("namespace") == self.staged.namespace for r in self.webhook.reviews
                ):  # classified by the FlowSchema, and the test's webhook called
                    break
                await asyncio.sleep(0.5)
            self._occupying = asyncio.create_task(self._occupy())
            await self.hold.received.wait()
            while True:
                status, schema = await self.create_configmap(False)
                if status == 429:
                    break
                await asyncio.sleep(0.5)

    async def _occupy(self) -> None:
        while not self.released.is_set():
            await self.create_configmap(True)

    def release(self) -> None:
        self.released.set()
        self.hold.release()

    async def __aexit__(self, *exc: object) -> None:
        self.release()
        if self._occupying is not None:
            await asyncio.gather(self._occupying, return_exceptions=True)
        if self._session is not None:
            await self._session.close()
        await self.webhook.stop()
        await kubectl(self.staged.kubeconfig, "delete", "flowschema,prioritylevelconfiguration,"
                      "validatingwebhookconfiguration", self.name, "--wait=false",
                      check=False)  # fmt: skip


# (scenario, nodes it needs)
PUSHBACK: list[tuple[Scenario, int]] = [
    (stamp_503, 2), (record_503, 3), (delayed_past_the_budget, 2), (apf_429, 2),
]  # fmt: skip


async def test_a_write_the_api_server_refuses_for_now_holds_the_eviction(
    installation: Installation, real_cluster: RealCluster
) -> None:
    api = await ApiProxy(real_cluster.server, real_cluster.ca_pem).start()

    async def run(setup: Setup, scenario: Scenario, nodes: int) -> None:
        async with stage(real_cluster, nodes) as staged:
            try:
                await scenario(staged, setup)
            except BaseException as error:
                raise AssertionError(f"{scenario.__name__}: {error!r}") from error

    try:
        async with routed_replicas(installation, ["graceful-drain-pushback"], api=api) as routed:
            setup = Setup(api, routed, installation)
            async with asyncio.timeout(4 * BOUND):
                results = await asyncio.gather(*(run(setup, s, n) for s, n in PUSHBACK),
                                               return_exceptions=True)  # fmt: skip
    finally:
        await api.stop()
    failures = [r for r in results if isinstance(r, BaseException)]
    assert not failures, "\n".join(str(failure) for failure in failures)


# --- a Deployment that cannot be written at all ----------------------------------------------


ROLLOUT_TIMEOUT = "20s"
ROLLOUT_TIMEOUT_SECONDS = 20.0
DEPLOYMENT_UPDATES = [{"operations": ["UPDATE"], "apiGroups": ["apps"], "apiVersions": ["v1"],
                       "resources": ["deployments"], "scope": "Namespaced"}]  # fmt: skip


async def graceful_drain_json(cluster: RealCluster, *args: str) -> tuple[int, Obj]:
    """`graceful-drain ARGS --json` from the product's sources: (exit code, its document)."""
    env = {"GRACEFUL_DRAIN_KUBECONFIG": str(cluster.kubeconfig_path),
           "GRACEFUL_DRAIN_ROLLOUT_TIMEOUT": ROLLOUT_TIMEOUT,
           "PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/root")}  # fmt: skip
    code, out, err = await run_cli(*args, "--json", env=env, bound=BOUND, source=product_source())
    assert out, err.decode()
    document: Obj = json.loads(out)
    return code, document


def received(record: Obj) -> datetime:
    return datetime.fromisoformat(record["requestReceivedTimestamp"])


async def test_a_deployment_that_cannot_be_written_holds_the_drain_for_the_rollout_timeout(
    installation: Installation, real_cluster: RealCluster
) -> None:
    """A validating webhook on web's updates, `failurePolicy: Fail`, whose URL nothing
    listens on: every write of web is refused (500, "failed calling webhook"). The drain of
    its node is held (429) for `--rollout-timeout` (20 s here) from the first refused write,
    then let through with a Warning on the Deployment naming the failing write; meanwhile
    `plan` holds the pod and `status` names the Deployment."""
    replica = await installation.start_controller(
        "graceful-drain-unwritable", env={"GRACEFUL_DRAIN_ROLLOUT_TIMEOUT": ROLLOUT_TIMEOUT}
    )
    try:
        async with stage(real_cluster, 2) as staged:
            a, _ = staged.nodes
            namespace, kubeconfig = staged.namespace, staged.kubeconfig
            await staged.place({a: 1})
            name = f"e2e-deny-{namespace}"
            deny = configuration(name, closed_port_url(), b"", DEPLOYMENT_UPDATES, namespace,
                                 failure_policy="Fail")  # fmt: skip
            del deny["webhooks"][0]["clientConfig"]["caBundle"]
            await staged.apply(deny)
            try:
                await refused_updates(staged)
                [old] = await staged.pods_on(a)
                draining = asyncio.create_task(drain(real_cluster, staged.recorder, a))
                held = asyncio.ensure_future(
                    until_audited(real_cluster, audited_eviction(namespace, 429))
                )
                await first_of(held, staged.recorder.wait_until(
                    lambda: staged.recorder.pod_departed(namespace, old["metadata"]["name"])
                ))  # fmt: skip
                assert held.done() and not held.cancelled(), "let go without being held"
                plan_code, plan = await graceful_drain_json(real_cluster, "plan", a)
                deferred = await deferred_writes(real_cluster, namespace, draining)
                drained = await draining
            finally:
                await kubectl(kubeconfig, "delete", "validatingwebhookconfiguration", name,
                              "--wait=false", check=False)  # fmt: skip
            assert drained.code == 0, drained.stderr
            assert held_in(drained, namespace), drained.stderr
            allowed = await until_audited(real_cluster, audited_eviction(namespace, 201))
            failed_writes = [
                r for r in real_cluster.audit_records()
                if (r.get("user") or {}).get("username") == installation.controller_user
                and r.get("verb") == "patch"
                and (r.get("objectRef") or {}).get("namespace") == namespace
                and (r.get("responseStatus") or {}).get("code", 0) >= 500
            ]  # fmt: skip
            assert failed_writes, "no write of web was refused"
            # Held for the bound: no eviction let through before --rollout-timeout had passed
            # since the first refused write (a lower bound: a loaded machine only delays it).
            waited = (received(allowed) - received(failed_writes[0])).total_seconds()
            assert waited >= ROLLOUT_TIMEOUT_SECONDS - 1, (waited, received(held.result()))
            warnings = [e for e in await until_events(real_cluster, namespace,
                                                      "GracefulDrainWriteFailed")
                        if e["involvedObject"].get("name") == "web"]  # fmt: skip
            assert warnings and warnings[0]["type"] == "Warning", warnings
            assert any(name in e["message"] for e in warnings), warnings
            [pod] = [p for p in plan["pods"] if p["namespace"] == namespace]
            assert pod["outcome"] == "held", pod
            assert plan_code in (0, 1), plan
            # status, while the drain was held: the deferred write, naming what refused it
            assert deferred, "status never listed the held drain's failing write"
            assert any(name in f["message"] for f in deferred), deferred
    finally:
        replica.stop()


async def deferred_writes(
    cluster: RealCluster, namespace: str, draining: asyncio.Task[object]
) -> list[Obj]:
    """`status --json`'s GracefulDrainWriteDeferred entries for `namespace` (docs/cli.md,
    `writeFailures`), asked until there is one or the drain has ended (the controller writes
    its events after its answers)."""
    async with asyncio.timeout(BOUND):
        while True:
            _, status = await graceful_drain_json(cluster, "status")
            found = [f for f in status.get("writeFailures") or []
                     if f.get("namespace") == namespace
                     and f.get("reason") == "GracefulDrainWriteDeferred"]  # fmt: skip
            if found or draining.done():
                return found
            await asyncio.sleep(1)


async def refused_updates(staged: Stage) -> None:
    """Until an update of web is refused by the failing webhook (the API server has read its
    configuration): a label that changes nothing of the pods, re-sent until refused."""
    async with asyncio.timeout(BOUND):
        for attempt in itertools.count():
            run = await kubectl(staged.kubeconfig, "label", "deployment", "web", "-n",
                                staged.namespace, f"e2e-probe={attempt}", "--overwrite",
                                check=False)  # fmt: skip
            if run.code != 0:
                assert "failed calling webhook" in run.stderr, run.stderr
                return
            await asyncio.sleep(0.5)
