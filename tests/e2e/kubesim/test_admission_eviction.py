"""pods/eviction and validating admission webhooks, through the official client and lightkube.

A real HTTPS webhook (aiohttp, certificate from its own CertificateAuthority) is
registered with a ValidatingWebhookConfiguration and reached through
`sim.webhook_services`. Expectations follow pkg/registry/core/pod/storage/eviction.go
and staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/ upstream.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
import ssl
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kubernetes
import pytest
from aiohttp import web
from kubernetes.client.exceptions import ApiException
from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Pod

from kubesim.apiserver.admission import webhooks
from kubesim.apiserver.eviction import EvictionRetry
from kubesim.client import KubeClient
from kubesim.pki import CertificateAuthority
from kubesim.sim import KubeSim
from tests.e2e.watching import condition

pytestmark = pytest.mark.e2e

Obj = dict[str, Any]

NS = "shop"
HOOK_NS, HOOK_SVC = "gd-system", "gd-webhook"
HOOK_NAME = "evictions.graceful-drain.test"
APP = {"app": "web"}
DENIAL = "rollout of Deployment shop/web in progress, waited 3s"
EVICTION_RULES = [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                   "resources": ["pods/eviction"], "scope": "*"}]  # fmt: skip
ADMIN_GROUPS = ["system:masters", "kubeadm:cluster-admins", "system:authenticated"]
ADMIN_USER = {"username": "kubernetes-admin", "groups": ADMIN_GROUPS}
TOO_MANY = "Cannot evict pod as it would violate the pod's disruption budget."


# the test webhook


@dataclass
class Received:
    path: str
    query: dict[str, str]
    host: str
    review: Obj


class ReviewServer:
    """An HTTPS admission webhook; its answer depends on the path it is called on."""

    def __init__(self, directory: Path) -> None:
        self.ca = CertificateAuthority("test-webhook-ca")
        # Only the Service's DNS name: calls through the Service must verify against it.
        pair = self.ca.issue_server([f"{HOOK_SVC}.{HOOK_NS}.svc"])
        (directory / "hook.crt").write_bytes(pair.cert_pem)
        (directory / "hook.key").write_bytes(pair.key_pem)
        self._tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._tls.load_cert_chain(directory / "hook.crt", directory / "hook.key")
        self.received: list[Received] = []
        self.release = asyncio.Event()
        self.both_arrived = asyncio.Event()
        self.port = 0
        self._runner: web.AppRunner | None = None

    @property
    def ca_bundle(self) -> str:
        return base64.b64encode(self.ca.cert_pem).decode()

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=self._tls)
        await site.start()
        self.port = self._runner.addresses[0][1]

    async def stop(self) -> None:
        self.release.set()
        if self._runner is not None:
            await self._runner.cleanup()

    async def _handle(self, request: web.Request) -> web.Response:
        review = await request.json()
        self.received.append(
            Received(request.path, dict(request.query), request.headers.get("Host", ""), review)
        )
        if request.path == "/hang":
            await self.release.wait()
        if request.path == "/gate":  # hold every caller until two have arrived
            if sum(r.path == "/gate" for r in self.received) >= 2:
                self.both_arrived.set()
            await self.both_arrived.wait()
        answer: Obj = {"uid": review["request"]["uid"], "allowed": True}
        if request.path == "/deny-429":
            answer = {"uid": answer["uid"], "allowed": False,
                      "status": {"code": 429, "message": DENIAL}}  # fmt: skip
        return web.json_response(
            {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": answer}
        )


@pytest.fixture
async def hooks(sim: KubeSim, tmp_path: Path) -> AsyncIterator[ReviewServer]:
    server = ReviewServer(tmp_path)
    await server.start()
    sim.webhook_services.register(HOOK_NS, HOOK_SVC, 443, "127.0.0.1", server.port)
    sim.create({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": NS, "labels": {"team": "shop"}}})  # fmt: skip
    yield server
    await server.stop()


# cluster setup, in process


def register_webhook(
    sim: KubeSim,
    hooks: ReviewServer,
    path: str = "/allow",
    *,
    failure_policy: str = "Fail",
    timeout: int = 2,
    side_effects: str = "None",
    rules: list[Obj] | None = None,
    match_policy: str = "Equivalent",
    client_config: Obj | None = None,
) -> None:
    config = client_config or {
        "service": {"namespace": HOOK_NS, "name": HOOK_SVC, "path": path},
        "caBundle": hooks.ca_bundle,
    }
    sim.create({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "graceful-drain"},
        "webhooks": [{
            "name": HOOK_NAME, "clientConfig": config, "rules": rules or EVICTION_RULES,
            "failurePolicy": failure_policy, "sideEffects": side_effects,
            "timeoutSeconds": timeout, "matchPolicy": match_policy,
            "admissionReviewVersions": ["v1"],
        }],
    })  # fmt: skip


def set_status(sim: KubeSim, api_version: str, kind: str, name: str, status: Obj) -> Obj:
    group = api_version.rpartition("/")[0]
    rt = sim.resources.by_kind(group, kind)
    assert rt is not None
    current = sim.registry.get(rt, NS, name)
    read, prepared = sim.registry.prepare_update(rt, NS, name, {**current, "status": status},
                                                 "status")  # fmt: skip
    return sim.registry.commit_update(rt, read, prepared)


def pod(sim: KubeSim, name: str, phase: str = "Running", ready: bool = True) -> Obj:
    sim.create({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": NS, "labels": APP},
                "spec": {"nodeName": "node-1",
                         "containers": [{"name": "app", "image": "nginx:1.27"}]}})  # fmt: skip
    ready_condition = {"type": "Ready", "status": "True" if ready else "False"}
    return set_status(sim, "v1", "Pod", name, {"phase": phase, "conditions": [ready_condition]})


def pdb(sim: KubeSim, allowed: int, current: int = 1, desired: int = 1, observed: int = 1,
        name: str = "web") -> Obj:  # fmt: skip
    sim.create({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                "metadata": {"name": name, "namespace": NS},
                "spec": {"minAvailable": desired, "selector": {"matchLabels": APP}}})  # fmt: skip
    return set_status(sim, "policy/v1", "PodDisruptionBudget", name, {
        "observedGeneration": observed, "disruptionsAllowed": allowed,
        "currentHealthy": current, "desiredHealthy": desired, "expectedPods": current,
    })  # fmt: skip


def read(sim: KubeSim, kind: str, name: str) -> Obj | None:
    return sim.get("policy/v1" if kind == "PodDisruptionBudget" else "v1", kind, name, NS)


def eviction_body(name: str, **delete_options: Any) -> kubernetes.client.V1Eviction:
    return kubernetes.client.V1Eviction(
        api_version="policy/v1", kind="Eviction",
        metadata=kubernetes.client.V1ObjectMeta(name=name, namespace=NS),
        delete_options=kubernetes.client.V1DeleteOptions(**delete_options)
        if delete_options else None,
    )  # fmt: skip


async def evict(core: kubernetes.client.CoreV1Api, name: str, dry_run: str | None = None,
                **delete_options: Any) -> None:  # fmt: skip
    await asyncio.to_thread(core.create_namespaced_pod_eviction, name, NS,
                            eviction_body(name, **delete_options), dry_run=dry_run)  # fmt: skip


async def refused(core: kubernetes.client.CoreV1Api, name: str, dry_run: str | None = None,
                  **delete_options: Any) -> ApiException:  # fmt: skip
    with pytest.raises(ApiException) as err:
        await evict(core, name, dry_run, **delete_options)
    return err.value


def status_of(err: ApiException) -> Obj:
    body: Obj = json.loads(err.body)
    return body


def untouched(before: Obj, after: Obj | None) -> bool:
    return after is not None and after["metadata"] == before["metadata"]


# the AdmissionReview


async def test_webhook_receives_the_upstream_admission_review(
    sim: KubeSim, hooks: ReviewServer, core: kubernetes.client.CoreV1Api
) -> None:
    register_webhook(sim, hooks)
    pod(sim, "web-1")
    await evict(core, "web-1", grace_period_seconds=5)

    [received] = hooks.received
    assert (received.path, received.query) == ("/allow", {"timeout": "2s"})
    assert received.host == f"{HOOK_SVC}.{HOOK_NS}.svc:443"
    review = received.review
    uid = review["request"]["uid"]
    assert str(uuid.UUID(uid)) == uid
    eviction_kind = {"group": "policy", "version": "v1", "kind": "Eviction"}
    pods = {"group": "", "version": "v1", "resource": "pods"}
    assert review == {
        "kind": "AdmissionReview",
        "apiVersion": "admission.k8s.io/v1",
        "request": {
            "uid": uid,
            "kind": eviction_kind,
            "resource": pods,
            "subResource": "eviction",
            "requestKind": eviction_kind,
            "requestResource": pods,
            "requestSubResource": "eviction",
            "name": "web-1",
            "namespace": NS,
            "operation": "CREATE",
            "userInfo": ADMIN_USER,
            "object": {
                "apiVersion": "policy/v1",
                "kind": "Eviction",
                "metadata": {"name": "web-1", "namespace": NS, "creationTimestamp": None},
                "deleteOptions": {"gracePeriodSeconds": 5},
            },
            "oldObject": None,
            "dryRun": False,
            "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"},
        },
    }
    [call] = sim.admission.calls
    assert (call.webhook, call.outcome, call.http_status) == (HOOK_NAME, "allowed", 200)


async def test_v1beta1_eviction_reaches_the_webhook_as_policy_v1(
    sim: KubeSim, hooks: ReviewServer, raw: KubeClient
) -> None:
    register_webhook(sim, hooks)
    pod(sim, "web-1")
    url = f"{sim.url}/api/v1/namespaces/{NS}/pods/web-1/eviction"
    body = {"apiVersion": "policy/v1beta1", "kind": "Eviction", "metadata": {"name": "web-1"}}
    async with raw.session.post(url, json=body) as response:
        assert response.status == 201
        assert await response.json() == {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                          "status": "Success", "code": 201}  # fmt: skip
    request = hooks.received[0].review["request"]
    assert request["object"]["apiVersion"] == "policy/v1"
    assert request["kind"] == request["requestKind"] == {"group": "policy", "version": "v1",
                                                         "kind": "Eviction"}  # fmt: skip


async def test_equivalent_match_policy_converts_to_the_rule_version(
    sim: KubeSim, hooks: ReviewServer, core: kubernetes.client.CoreV1Api
) -> None:
    events_rule = [{"operations": ["CREATE"], "apiGroups": ["events.k8s.io"],
                    "apiVersions": ["v1"], "resources": ["events"]}]  # fmt: skip
    register_webhook(sim, hooks, rules=events_rule, match_policy="Equivalent")
    event = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e1"},
             "involvedObject": {"kind": "Pod", "name": "web-1", "namespace": NS},
             "reason": "Testing", "message": "hello", "type": "Normal"}  # fmt: skip
    await asyncio.to_thread(core.create_namespaced_event, NS, event)

    request = hooks.received[0].review["request"]
    assert request["kind"] == {"group": "events.k8s.io", "version": "v1", "kind": "Event"}
    assert request["resource"] == {"group": "events.k8s.io", "version": "v1",
                                   "resource": "events"}  # fmt: skip
    assert request["requestKind"] == {"group": "", "version": "v1", "kind": "Event"}
    assert request["requestResource"] == {"group": "", "version": "v1", "resource": "events"}
    assert request["object"]["apiVersion"] == "events.k8s.io/v1"
    assert request["object"]["note"] == "hello"


async def test_exact_match_policy_skips_the_equivalent_resource(
    sim: KubeSim, hooks: ReviewServer, core: kubernetes.client.CoreV1Api
) -> None:
    events_rule = [{"operations": ["CREATE"], "apiGroups": ["events.k8s.io"],
                    "apiVersions": ["v1"], "resources": ["events"]}]  # fmt: skip
    register_webhook(sim, hooks, rules=events_rule, match_policy="Exact")
    event = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e1"},
             "involvedObject": {"kind": "Pod", "name": "web-1", "namespace": NS}}  # fmt: skip
    await asyncio.to_thread(core.create_namespaced_event, NS, event)
    assert hooks.received == []


# denials and failures


async def test_webhook_429_denial_reaches_the_client(
    sim: KubeSim, hooks: ReviewServer, lk: AsyncClient
) -> None:
    register_webhook(sim, hooks, "/deny-429")
    before = pod(sim, "web-1")
    with pytest.raises(ApiError) as err:
        await lk.create(Pod.Eviction(metadata=ObjectMeta(name="web-1", namespace=NS)),
                        name="web-1", namespace=NS)  # fmt: skip
    assert err.value.status.code == 429
    denied = f'admission webhook "{HOOK_NAME}" denied the request: {DENIAL}'
    assert err.value.status.message == denied
    assert untouched(before, read(sim, "Pod", "web-1"))
    assert sim.admission.calls[0].outcome == "denied"


@pytest.fixture
def three_calls_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """Set before `sim`: the dispatcher it builds keeps the newest three calls."""
    monkeypatch.setattr(webhooks, "CALLS_KEPT", 3)


async def test_only_the_newest_webhook_calls_are_kept(
    three_calls_kept: None, sim: KubeSim, hooks: ReviewServer, lk: AsyncClient
) -> None:
    register_webhook(sim, hooks, "/deny-429")
    names = [f"web-{i}" for i in range(5)]
    for name in names:
        pod(sim, name)
        with pytest.raises(ApiError):
            await lk.create(Pod.Eviction(metadata=ObjectMeta(name=name, namespace=NS)),
                            name=name, namespace=NS)  # fmt: skip
    assert len(hooks.received) == 5
    kept = [call.review["request"]["name"] for call in sim.admission.calls if call.review]
    assert kept == names[2:]


async def test_kubectl_drain_prints_the_webhook_denial_and_retries(
    sim: KubeSim, hooks: ReviewServer, kubeconfig: Path
) -> None:
    register_webhook(sim, hooks, "/deny-429")
    sim.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"}})
    pod(sim, "web-1")
    expected = (
        f'error when evicting pods/"web-1" -n "{NS}" (will retry after 5s): '
        f'admission webhook "{HOOK_NAME}" denied the request: {DENIAL}'
    )
    drain = await asyncio.create_subprocess_exec(
        "kubectl", "drain", "node-1", "--force", "--timeout=60s",
        env={**os.environ, "KUBECONFIG": str(kubeconfig)},
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert drain.stderr is not None
    seen: list[str] = []
    try:
        async with asyncio.timeout(30):  # a 429 is retried: wait for the line, not the exit
            while expected not in seen and (line := await drain.stderr.readline()):
                seen.append(line.decode().rstrip("\n"))
    finally:
        if drain.returncode is None:
            drain.kill()
        await drain.wait()
    assert expected in seen
    assert condition(read(sim, "Pod", "web-1"), "DisruptionTarget") is None


async def test_ignore_policy_admits_after_a_hanging_webhook_times_out(
    sim: KubeSim, hooks: ReviewServer, core: kubernetes.client.CoreV1Api
) -> None:
    register_webhook(sim, hooks, "/hang", failure_policy="Ignore", timeout=1)
    pod(sim, "web-1")
    await evict(core, "web-1")
    after = read(sim, "Pod", "web-1")
    assert after is not None and after["metadata"].get("deletionTimestamp")
    [call] = sim.admission.calls
    assert call.outcome == "ignored"
    url = f"https://{HOOK_SVC}.{HOOK_NS}.svc:443/hang?timeout=1s"
    assert call.error == (f'failed calling webhook "{HOOK_NAME}": failed to call webhook: '
                          f'Post "{url}": context deadline exceeded')  # fmt: skip


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


@pytest.mark.parametrize("failure", ["connection refused", "unknown authority"])
async def test_fail_policy_refuses_when_the_webhook_cannot_be_called(
    sim: KubeSim, hooks: ReviewServer, core: kubernetes.client.CoreV1Api, failure: str
) -> None:
    if failure == "connection refused":
        port = closed_port()
        config = {"url": f"https://127.0.0.1:{port}/validate", "caBundle": hooks.ca_bundle}
        why = f"dial tcp 127.0.0.1:{port}: connect: connection refused"
        url = f"https://127.0.0.1:{port}/validate?timeout=2s"
    else:  # the API server's own CA did not sign the webhook's certificate
        config = {"url": f"https://127.0.0.1:{hooks.port}/allow",
                  "caBundle": base64.b64encode(sim.ca_pem).decode()}  # fmt: skip
        why = "tls: failed to verify certificate: x509: certificate signed by unknown authority"
        url = f"https://127.0.0.1:{hooks.port}/allow?timeout=2s"
    register_webhook(sim, hooks, client_config=config)
    before = pod(sim, "web-1")
    err = await refused(core, "web-1")
    status = status_of(err)
    expected = (f'Internal error occurred: failed calling webhook "{HOOK_NAME}": '
                f'failed to call webhook: Post "{url}": {why}')  # fmt: skip
    assert (err.status, status["reason"]) == (500, "InternalError")
    assert status["message"] == expected
    assert status["details"]["causes"][0]["message"] == status["message"].removeprefix(
        "Internal error occurred: "
    )
    assert untouched(before, read(sim, "Pod", "web-1"))
    assert hooks.received == []


async def test_dry_run_reaches_the_webhook_and_changes_nothing(
    sim: KubeSim, hooks: ReviewServer, core: kubernetes.client.CoreV1Api
) -> None:
    register_webhook(sim, hooks, side_effects="NoneOnDryRun")
    before_pod = pod(sim, "web-1")
    before_pdb = pdb(sim, allowed=1)
    await evict(core, "web-1", dry_run="All")

    request = hooks.received[0].review["request"]
    assert request["dryRun"] is True
    assert request["options"] == {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1",
                                  "dryRun": ["All"]}  # fmt: skip
    assert read(sim, "Pod", "web-1") == before_pod
    assert read(sim, "PodDisruptionBudget", "web") == before_pdb


async def test_side_effects_some_refuses_dry_run(
    sim: KubeSim, hooks: ReviewServer, core: kubernetes.client.CoreV1Api
) -> None:
    register_webhook(sim, hooks, side_effects="Some")
    before = pod(sim, "web-1")
    err = await refused(core, "web-1", dry_run="All")
    assert (err.status, status_of(err)["reason"]) == (400, "BadRequest")
    assert status_of(err)["message"] == f'admission webhook "{HOOK_NAME}" does not support dry run'
    assert hooks.received == []
    assert read(sim, "Pod", "web-1") == before
    await evict(core, "web-1")  # without dry run the webhook is called
    assert len(hooks.received) == 1


# disruption budgets


async def test_budget_with_no_disruption_left_refuses_with_429(
    sim: KubeSim, core: kubernetes.client.CoreV1Api
) -> None:
    sim.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    before = pod(sim, "web-1")
    pdb(sim, allowed=0, current=1, desired=1)
    err = await refused(core, "web-1")
    assert err.status == 429
    assert status_of(err) == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": TOO_MANY, "reason": "TooManyRequests",
        "details": {"causes": [{"reason": "DisruptionBudget",
                                "message": "The disruption budget web needs 1 healthy pods "
                                           "and has 1 currently"}]},
        "code": 429,
    }  # fmt: skip
    assert "Retry-After" not in err.headers
    assert untouched(before, read(sim, "Pod", "web-1"))


async def test_budget_not_yet_observed_refuses_with_retry_after(
    sim: KubeSim, core: kubernetes.client.CoreV1Api
) -> None:
    sim.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    pod(sim, "web-1")
    pdb(sim, allowed=1, observed=0)
    err = await refused(core, "web-1")
    assert err.status == 429 and err.headers["Retry-After"] == "10"
    assert status_of(err)["details"] == {
        "causes": [{"reason": "DisruptionBudget",
                    "message": "The disruption budget web is still being processed by the "
                               "server."}],
        "retryAfterSeconds": 10,
    }  # fmt: skip


async def test_eviction_spends_the_budget_and_marks_the_pod(
    sim: KubeSim, core: kubernetes.client.CoreV1Api
) -> None:
    sim.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    pod(sim, "web-1")
    pdb(sim, allowed=1, current=2, desired=1)
    await evict(core, "web-1")

    evicted = read(sim, "Pod", "web-1")
    assert evicted is not None
    assert evicted["metadata"]["deletionGracePeriodSeconds"] == 30
    target = condition(evicted, "DisruptionTarget")
    assert target is not None and target.items() >= {
        "status": "True", "reason": "EvictionByEvictionAPI", "message": "Eviction API: evicting",
        "lastProbeTime": None,
    }.items()  # fmt: skip
    budget = read(sim, "PodDisruptionBudget", "web")
    assert budget is not None
    assert budget["status"]["disruptionsAllowed"] == 0
    assert set(budget["status"]["disruptedPods"]) == {"web-1"}
    [allowed] = budget["status"]["conditions"]
    assert (allowed["type"], allowed["status"], allowed["reason"]) == (
        "DisruptionAllowed", "False", "InsufficientPods")  # fmt: skip


async def test_concurrent_evictions_cannot_both_spend_the_last_disruption(
    sim: KubeSim, core: kubernetes.client.CoreV1Api
) -> None:
    sim.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    pod(sim, "web-1")
    pod(sim, "web-2")
    pdb(sim, allowed=1, current=2, desired=1)
    results = await asyncio.gather(evict(core, "web-1"), evict(core, "web-2"),
                                   return_exceptions=True)  # fmt: skip
    refusals = [r for r in results if isinstance(r, ApiException)]
    assert results.count(None) == 1 and [r.status for r in refusals] == [429]


async def test_budget_status_writes_are_optimistic_and_admitted_as_the_apiserver(
    sim: KubeSim, hooks: ReviewServer, core: kubernetes.client.CoreV1Api
) -> None:
    # Both evictions judge the same budget, then wait in the webhook on its status write:
    # the second write conflicts, is retried on a fresh read, and finds nothing left.
    sim.eviction.retry = EvictionRetry(steps=20, duration=0.01)
    status_rule = [{"operations": ["UPDATE"], "apiGroups": ["policy"], "apiVersions": ["v1"],
                    "resources": ["poddisruptionbudgets/status"]}]  # fmt: skip
    register_webhook(sim, hooks, "/gate", rules=status_rule)
    pod(sim, "web-1")
    pod(sim, "web-2")
    pdb(sim, allowed=1, current=2, desired=1)
    results = await asyncio.gather(evict(core, "web-1"), evict(core, "web-2"),
                                   return_exceptions=True)  # fmt: skip
    refusals = [r for r in results if isinstance(r, ApiException)]
    assert results.count(None) == 1 and [r.status for r in refusals] == [429]
    budget = read(sim, "PodDisruptionBudget", "web")
    assert budget is not None and len(budget["status"]["disruptedPods"]) == 1
    assert [r.path for r in hooks.received] == ["/gate", "/gate"]
    request = hooks.received[0].review["request"]
    assert (request["subResource"], request["operation"]) == ("status", "UPDATE")
    apiserver = {"username": "system:apiserver",
                 "groups": ["system:authenticated", "system:masters"]}  # fmt: skip
    assert request["userInfo"] == apiserver


async def test_more_than_one_budget_is_a_500_status(
    sim: KubeSim, core: kubernetes.client.CoreV1Api
) -> None:
    sim.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    pod(sim, "web-1")
    pdb(sim, allowed=1, name="web")
    pdb(sim, allowed=1, name="web-too")
    err = await refused(core, "web-1")
    assert err.status == 500
    assert status_of(err) == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "This pod has more than one PodDisruptionBudget, which the eviction "
                   "subresource does not support.",
        "code": 500,
    }  # fmt: skip


async def test_unready_pod_goes_without_spending_a_healthy_budget(
    sim: KubeSim, core: kubernetes.client.CoreV1Api
) -> None:
    sim.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    pod(sim, "web-1", ready=False)
    before = pdb(sim, allowed=0, current=1, desired=1)
    await evict(core, "web-1")
    assert read(sim, "PodDisruptionBudget", "web") == before
    evicted = read(sim, "Pod", "web-1")
    assert evicted is not None and evicted["metadata"].get("deletionTimestamp")


async def test_terminal_pod_is_deleted_whatever_the_budget(
    sim: KubeSim, core: kubernetes.client.CoreV1Api
) -> None:
    sim.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    pod(sim, "web-1", phase="Succeeded", ready=False)
    pdb(sim, allowed=0)
    await evict(core, "web-1")
    assert read(sim, "Pod", "web-1") is None


# request errors


async def test_uid_precondition_mismatch_is_409(
    sim: KubeSim, core: kubernetes.client.CoreV1Api
) -> None:
    sim.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    before = pod(sim, "web-1")
    wrong_uid = kubernetes.client.V1Preconditions(uid="not-the-uid")
    err = await refused(core, "web-1", preconditions=wrong_uid)
    status = status_of(err)
    assert (err.status, status["reason"]) == (409, "Conflict")
    assert status["message"] == (
        'Operation cannot be fulfilled on Pod "web-1": the UID in the precondition '
        f"(not-the-uid) does not match the UID in record ({before['metadata']['uid']}). "
        "The object might have been deleted and then recreated"
    )
    assert status["details"] == {"name": "web-1", "kind": "Pod"}
    assert untouched(before, read(sim, "Pod", "web-1"))


async def test_name_must_match_the_url(sim: KubeSim, raw: KubeClient, hooks: ReviewServer) -> None:
    register_webhook(sim, hooks)
    pod(sim, "web-1")
    url = f"{sim.url}/api/v1/namespaces/{NS}/pods/web-1/eviction"
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "web-2"}}
    async with raw.session.post(url, json=body) as response:
        assert response.status == 400
        assert (await response.json())["message"] == (
            "name in URL does not match name in Eviction object"
        )
    assert hooks.received == []


async def test_missing_pod_is_404_after_admission(
    sim: KubeSim, hooks: ReviewServer, core: kubernetes.client.CoreV1Api
) -> None:
    register_webhook(sim, hooks)
    err = await refused(core, "ghost")
    assert (err.status, status_of(err)["message"]) == (404, 'pods "ghost" not found')
    assert len(hooks.received) == 1


async def test_eviction_through_lightkube(sim: KubeSim, lk: AsyncClient) -> None:
    sim.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    pod(sim, "web-1")
    await lk.create(Pod.Eviction(metadata=ObjectMeta(name="web-1", namespace=NS)),
                    name="web-1", namespace=NS)  # fmt: skip
    assert condition(read(sim, "Pod", "web-1"), "DisruptionTarget") is not None
