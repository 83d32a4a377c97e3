"""deploy/ installed with real `kubectl apply` on kubesim: server dry run, then for real.

kubesim serves no CustomResourceDefinitions, so the cert-manager overlay's cert-manager.io
objects are left out here (tests/unit/deploy/test_schema.py checks their fields).
"""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
from collections.abc import AsyncIterator

import pytest
import yaml

from kubesim.apiserver.auth import service_account_user
from kubesim.client import JSON_PATCH, ApiStatusError, KubeClient
from kubesim.sim import KubeSim
from tests.conftest import run_kubectl
from tests.unit.deploy.rbac_expectations import (
    CASES,
    TLS_SECRET,
    WEBHOOK_CONFIGURATION,
    Request,
    expected_allowed,
)
from tests.unit.deploy.rendered import (
    NAMESPACE,
    SELF_SIGNED,
    SERVICE_ACCOUNT,
    Obj,
    Variant,
    by_variant,
    is_cert_manager,
    objects,
    one,
)

pytestmark = pytest.mark.e2e
WEBHOOK_PATH = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
CONTROLLER = service_account_user(NAMESPACE, SERVICE_ACCOUNT)

# kubectl names objects as <resource>.<group>/<name> in its output.
RESOURCE_OF = {
    "Namespace": "namespace",
    "ServiceAccount": "serviceaccount",
    "Role": "role.rbac.authorization.k8s.io",
    "ClusterRole": "clusterrole.rbac.authorization.k8s.io",
    "RoleBinding": "rolebinding.rbac.authorization.k8s.io",
    "ClusterRoleBinding": "clusterrolebinding.rbac.authorization.k8s.io",
    "Service": "service",
    "Deployment": "deployment.apps",
    "PodDisruptionBudget": "poddisruptionbudget.policy",
    "NetworkPolicy": "networkpolicy.networking.k8s.io",
    "ValidatingWebhookConfiguration": (
        "validatingwebhookconfiguration.admissionregistration.k8s.io"
    ),
    "ValidatingAdmissionPolicy": "validatingadmissionpolicy.admissionregistration.k8s.io",
    "ValidatingAdmissionPolicyBinding": (
        "validatingadmissionpolicybinding.admissionregistration.k8s.io"
    ),
    "PriorityClass": "priorityclass.scheduling.k8s.io",
}


def _served(variant: Variant) -> list[Obj]:
    return [item for item in objects(variant) if not is_cert_manager(item)]


def _stream(items: list[Obj]) -> str:
    return yaml.safe_dump_all(items, sort_keys=False)


def _outcomes(stdout: str) -> dict[str, str]:
    """`kind/name created` lines -> {kind/name: created}."""
    pairs = (line.split(" ", 1) for line in stdout.strip().splitlines())
    return {name: outcome for name, outcome in pairs}


def _names(items: list[Obj]) -> list[str]:
    return [f"{RESOURCE_OF[item['kind']]}/{item['metadata']['name']}" for item in items]


async def kubectl(
    sim: KubeSim, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(run_kubectl, sim.kubeconfig_path, *args, stdin=stdin)


@pytest.fixture
async def admin(sim: KubeSim) -> AsyncIterator[KubeClient]:
    client = KubeClient(sim.url, sim.admin_token, sim.ca_pem)
    yield client
    await client.close()


async def _install(sim: KubeSim, variant: Variant) -> list[Obj]:
    items = _served(variant)
    namespace = one(items, "Namespace")
    # NamespaceLifecycle refuses objects in a namespace that does not exist yet, dry run
    # included: a real API server does the same, so the namespace goes first.
    await kubectl(sim, "apply", "-f", "-", stdin=_stream([namespace]))
    dry = await kubectl(sim, "apply", "--dry-run=server", "-f", "-", stdin=_stream(items))
    expected_dry = {name: "created (server dry run)" for name in _names(items)}
    expected_dry[f"namespace/{NAMESPACE}"] = "unchanged (server dry run)"
    assert _outcomes(dry.stdout) == expected_dry
    nothing = await kubectl(sim, "get", "deployments,services", "-n", NAMESPACE, "-o", "name")
    assert nothing.stdout == ""

    applied = await kubectl(sim, "apply", "-f", "-", stdin=_stream(items))
    expected = {name: "created" for name in _names(items)}
    expected[f"namespace/{NAMESPACE}"] = "unchanged"
    assert _outcomes(applied.stdout) == expected
    return items


def missing(wanted: object, live: object, path: str = "") -> list[str]:
    """Where `live` lost or changed something of `wanted` (defaults it added are fine)."""
    if isinstance(wanted, dict):
        if not isinstance(live, dict):
            return [path or "."]
        return [
            p
            for key, value in wanted.items()
            for p in missing(value, live.get(key), f"{path}.{key}")
        ]
    if isinstance(wanted, list):
        if not isinstance(live, list) or len(live) != len(wanted):
            return [path or "."]
        return [
            p
            for i, (w, v) in enumerate(zip(wanted, live, strict=True))
            for p in missing(w, v, f"{path}[{i}]")
        ]
    return [] if wanted == live else [path or "."]


def test_missing_reports_lost_and_changed_fields_but_not_defaults() -> None:
    wanted = {"spec": {"a": 1, "list": [{"x": 1}]}}
    assert missing(wanted, {"spec": {"a": 1, "b": 2, "list": [{"x": 1, "y": 2}]}}) == []
    assert missing(wanted, {"spec": {"a": 2, "list": []}}) == [".spec.a", ".spec.list"]


@by_variant
async def test_applies_with_server_dry_run_then_for_real(sim: KubeSim, variant: Variant) -> None:
    items = await _install(sim, variant)
    for item in items:
        namespace = item["metadata"].get("namespace")
        scope = ["-n", namespace] if namespace else []
        kind = RESOURCE_OF[item["kind"]]
        got = await kubectl(sim, "get", kind, item["metadata"]["name"], *scope, "-o", "json")
        assert missing(item, json.loads(got.stdout)) == [], item["kind"]

    # Re-applying changes nothing. The PDB reports "configured" against any API server:
    # its selector has patchStrategy=replace (staging/src/k8s.io/api/policy/v1/types.go),
    # so kubectl's apply patch always carries it.
    again = await kubectl(sim, "apply", "-f", "-", stdin=_stream(items))
    expected = {name: "unchanged" for name in _names(items)}
    expected["poddisruptionbudget.policy/graceful-drain"] = "configured"
    assert _outcomes(again.stdout) == expected


@by_variant
async def test_reapplying_keeps_the_ca_bundle_written_in_cluster(
    sim: KubeSim, admin: KubeClient, variant: Variant
) -> None:
    items = await _install(sim, variant)
    ca_bundle = base64.b64encode(b"-----BEGIN CERTIFICATE-----\n...\n").decode()
    patch = [{"op": "add", "path": "/webhooks/0/clientConfig/caBundle", "value": ca_bundle}]
    if variant.self_signed:
        # The controller itself writes it, with its own ServiceAccount's RBAC.
        token = sim.service_account_token(NAMESPACE, SERVICE_ACCOUNT)
        writer = KubeClient(sim.url, token, sim.ca_pem)
    else:
        writer = admin  # stands in for cert-manager's cainjector
    try:
        await writer.patch(f"{WEBHOOK_PATH}/{WEBHOOK_CONFIGURATION}", patch, JSON_PATCH)
    finally:
        if writer is not admin:
            await writer.close()

    await kubectl(sim, "apply", "-f", "-", stdin=_stream(items))
    live = await admin.get(f"{WEBHOOK_PATH}/{WEBHOOK_CONFIGURATION}")
    assert live["webhooks"][0]["clientConfig"]["caBundle"] == ca_bundle
    assert live["webhooks"][0]["failurePolicy"] == "Ignore"


async def _access_review(admin: KubeClient, request: Request) -> bool:
    review = await admin.create(
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": CONTROLLER.username,
                "groups": list(CONTROLLER.groups),
                "resourceAttributes": {
                    "verb": request.verb,
                    "group": request.group,
                    "resource": request.resource,
                    "subresource": request.subresource,
                    "namespace": request.namespace,
                    "name": request.name,
                },
            },
        },
    )
    return bool(review["status"]["allowed"])


@by_variant
async def test_installed_rbac_is_enforced_as_modelled(
    sim: KubeSim, admin: KubeClient, variant: Variant
) -> None:
    await _install(sim, variant)
    decisions = {request: await _access_review(admin, request) for request in CASES}
    wrong = [
        request.describe()
        for request, allowed in decisions.items()
        if allowed != expected_allowed(variant, request)
    ]
    assert wrong == []


async def test_controller_can_keep_its_secret_and_read_no_other(sim: KubeSim) -> None:
    await _install(sim, SELF_SIGNED)
    token = sim.service_account_token(NAMESPACE, SERVICE_ACCOUNT)
    controller = KubeClient(sim.url, token, sim.ca_pem)
    secrets = f"/api/v1/namespaces/{NAMESPACE}/secrets"
    try:
        created = await controller.create(
            secrets, {"metadata": {"name": TLS_SECRET}, "type": "Opaque", "data": {}}
        )
        created["data"] = {"ca.crt": base64.b64encode(b"ca").decode()}
        await controller.replace(f"{secrets}/{TLS_SECRET}", created)
        read = await controller.get(f"{secrets}/{TLS_SECRET}")
        assert read["data"] == created["data"]
        for path in (secrets, "/api/v1/namespaces/default/secrets/x", f"{secrets}/other"):
            with pytest.raises(ApiStatusError) as denied:
                await controller.get(path)
            assert denied.value.code == 403
    finally:
        await controller.close()
