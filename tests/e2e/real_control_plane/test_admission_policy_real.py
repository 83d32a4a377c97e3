"""The ValidatingAdmissionPolicy shipped in deploy/ (base/admissionpolicy.yaml), enforced by
the real kube-apiserver: the controller's ServiceAccount may write only what graceful-drain
writes; a broader patch by it is refused, and the same patch by an admin is not."""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

import pytest

from kubesim.client import JSON_PATCH, ApiStatusError, KubeClient
from realcluster.cluster import RealCluster

from .harness import BOUND, Installation, admin_client, kubectl, watch_objects, web

pytestmark = [pytest.mark.e2e, pytest.mark.realcluster]

Ops = list[dict[str, Any]]
POLICY = "graceful-drain-controller-writes"
WEBHOOK_CONFIGURATION = (
    "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/graceful-drain"
)
RESTARTED_AT = "/metadata/annotations/graceful-drain.stonal.com~1restarted-at"
COMPLETED_AT = "/metadata/annotations/graceful-drain.stonal.com~1completed-at"
TEMPLATE_ANNOTATIONS = "/spec/template/metadata/annotations"
STAMP = "2026-12-01T12:00:00.000001Z"
PROBE = "/metadata/annotations/graceful-drain-e2e~1enforcement-probe"

ADMITTED: dict[str, Ops] = {
    "stamp restarted-at": [{"op": "add", "path": RESTARTED_AT, "value": STAMP}],
    "mark completed-at": [{"op": "add", "path": COMPLETED_AT, "value": STAMP}],
    "template restartedAt": [
        {"op": "add", "path": f"{TEMPLATE_ANNOTATIONS}/kubectl.kubernetes.io~1restartedAt",
         "value": STAMP},
    ],
    "retire both": [{"op": "remove", "path": RESTARTED_AT}, {"op": "remove", "path": COMPLETED_AT}],
}  # fmt: skip
REFUSED: dict[str, Ops] = {
    "another template annotation": [{
        "op": "add", "path": f"{TEMPLATE_ANNOTATIONS}/sidecar.istio.io~1inject",
        "value": "false",
    }],
    "image": [{"op": "replace", "path": "/spec/template/spec/containers/0/image",
               "value": "registry.example/other:1"}],
    "replicas": [{"op": "replace", "path": "/spec/replicas", "value": 3}],
    "another annotation": [{"op": "add", "path": "/metadata/annotations/team", "value": "x"}],
    "a label": [{"op": "add", "path": "/metadata/labels", "value": {"team": "x"}}],
}  # fmt: skip


async def outcome(client: KubeClient, path: str, ops: Ops) -> tuple[int, str]:
    """(HTTP status, message) of a JSON patch."""
    try:
        await client.patch(path, ops, JSON_PATCH)
    except ApiStatusError as error:
        return error.code, str(error.status.get("message", ""))
    return 200, ""


def denied_by_the_policy(answer: tuple[int, str]) -> bool:
    """The policy's own denial, not any 403."""
    code, message = answer
    return code == 403 and "denied request: graceful-drain may change no" in message


async def until_enforced(controller: KubeClient, path: str) -> None:
    """Until kube-apiserver's admission enforces the policy: it loads policies through an
    informer of its own, some time after they are stored, and says so nowhere in the API; a
    write the policy refuses is the only sign. Each probe sets another value of an annotation
    of its own (a write that changes nothing is admitted by any policy), so that probes
    admitted before enforcement leave nothing the refused writes below would repeat: probing
    with replica counts once left replicas at 3, and the refused "replicas: 3" then changed
    nothing and was admitted."""
    async with asyncio.timeout(BOUND):
        for attempt in itertools.count():
            probe = [{"op": "add", "path": PROBE, "value": str(attempt)}]
            if denied_by_the_policy(await outcome(controller, path, probe)):
                return
            await asyncio.sleep(0.2)


async def test_the_policy_type_checks_and_limits_the_controllers_deployment_writes(
    installation: Installation, real_cluster: RealCluster, namespace: str
) -> None:
    [policy] = await watch_objects(
        real_cluster, "admissionregistration.k8s.io/v1", "validatingadmissionpolicies",
        "ValidatingAdmissionPolicy", None,
        lambda items: any(p["metadata"]["name"] == POLICY
                          and (p.get("status") or {}).get("observedGeneration") for p in items),
    )  # fmt: skip
    assert not (policy["status"].get("typeChecking") or {}).get("expressionWarnings")
    await kubectl(real_cluster.kubeconfig_path, "apply", "-f", "-",
                  stdin=json.dumps(web(namespace, ready_delay="0s")))  # fmt: skip
    path = f"/apis/apps/v1/namespaces/{namespace}/deployments/web"
    controller = await installation.service_account_client()
    admin = admin_client(real_cluster)
    try:
        await until_enforced(controller, path)
        admitted = {name: await outcome(controller, path, ops) for name, ops in ADMITTED.items()}
        refused = {name: await outcome(controller, path, ops) for name, ops in REFUSED.items()}
        by_admin = {name: await outcome(admin, path, ops) for name, ops in REFUSED.items()}
        replicas = (await admin.get(path))["spec"]["replicas"]
    finally:
        await controller.close()
        await admin.close()

    assert admitted == dict.fromkeys(ADMITTED, (200, ""))
    for name, (code, message) in refused.items():
        assert code == 403, (name, message)
        assert f"ValidatingAdmissionPolicy '{POLICY}'" in message, name
        assert "denied request: graceful-drain may change no" in message, name
    assert by_admin == dict.fromkeys(REFUSED, (200, ""))
    assert replicas == 3  # the admin's patch, not the controller's


async def until_enforced_on_webhooks(controller: KubeClient, admin: KubeClient) -> None:
    """The same wait, on the webhook configuration: a timeout change, undone while admitted."""
    async with asyncio.timeout(BOUND):
        for timeout in itertools.cycle((6, 5)):
            probe = [{"op": "replace", "path": "/webhooks/0/timeoutSeconds", "value": timeout}]
            if denied_by_the_policy(await outcome(controller, WEBHOOK_CONFIGURATION, probe)):
                break
            await asyncio.sleep(0.2)
    restore = [{"op": "replace", "path": "/webhooks/0/timeoutSeconds", "value": 5}]
    await admin.patch(WEBHOOK_CONFIGURATION, restore, JSON_PATCH)  # as deploy/ ships it


async def test_on_its_webhook_configuration_only_the_ca_bundle(
    installation: Installation, real_cluster: RealCluster
) -> None:
    admin = admin_client(real_cluster)
    controller = await installation.service_account_client()
    try:
        await until_enforced_on_webhooks(controller, admin)
        configuration = await admin.get(WEBHOOK_CONFIGURATION)
        bundle = configuration["webhooks"][0]["clientConfig"].get("caBundle", "")
        ca_bundle = await outcome(
            controller,
            WEBHOOK_CONFIGURATION,
            [{"op": "add", "path": "/webhooks/0/clientConfig/caBundle", "value": bundle}],
        )
        failure_policy = await outcome(
            controller,
            WEBHOOK_CONFIGURATION,
            [{"op": "replace", "path": "/webhooks/0/failurePolicy", "value": "Fail"}],
        )
        after = await admin.get(WEBHOOK_CONFIGURATION)
    finally:
        await controller.close()
        await admin.close()

    assert ca_bundle == (200, "")
    assert failure_policy[0] == 403
    assert f"ValidatingAdmissionPolicy '{POLICY}'" in failure_policy[1]
    assert after["webhooks"][0]["failurePolicy"] == "Ignore"
