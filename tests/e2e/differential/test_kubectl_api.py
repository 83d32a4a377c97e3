"""What a user does with kubectl on the API kinds `interactions_api.py` covers, on kubesim and
on kube-apiserver, compared: HorizontalPodAutoscalers (`kubectl apply`, `kubectl get hpa`),
`kubectl auth can-i`, CustomResourceDefinitions and the cert-manager overlay, server-side
apply."""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from realcluster.cluster import RealCluster
from tests.e2e.real_control_plane.harness import kubectl

from .servers import kubesim_kubeconfig, kubesim_serve
from .test_kubectl_tables import Table, normalise, parse_tables

pytestmark = [pytest.mark.e2e, pytest.mark.realcluster]

Obj = dict[str, Any]
Both = tuple[Path, Path]  # kubeconfigs: kubesim's, the real control plane's


@pytest.fixture
def kubeconfigs(tmp_path: Path, real_cluster: RealCluster) -> Iterator[Both]:
    with kubesim_serve(tmp_path):
        yield kubesim_kubeconfig(tmp_path), real_cluster.kubeconfig_path


async def on_both(both: Both, run: Callable[[Path, str], Awaitable[Any]]) -> tuple[Any, Any]:
    """`run(kubeconfig, namespace)` on kubesim and on kube-apiserver, in a new namespace of the
    same name on each, deleted afterwards (the real control plane is shared by the module's
    other tests)."""
    namespace = f"kubectl-{secrets.token_hex(3)}"
    answers = []
    for kubeconfig in both:
        await kubectl(kubeconfig, "create", "namespace", namespace)
        try:
            answers.append(await run(kubeconfig, namespace))
        finally:
            await kubectl(kubeconfig, "delete", "namespace", namespace, "--wait=false")
    return answers[0], answers[1]


def hpa(name: str, spec: Obj) -> Obj:
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": name}, "spec": spec}  # fmt: skip


HPAS = [
    # No such Deployments: the real HPA controller only writes conditions, not replicas.
    hpa("cpu", {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                                   "name": "web"}, "maxReplicas": 3}),
    hpa("three", {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db"},
        "minReplicas": 2, "maxReplicas": 6,
        "metrics": [
            {"type": "Resource", "resource": {"name": "memory", "target": {
                "type": "AverageValue", "averageValue": "100Mi"}}},
            {"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {
                "type": "AverageValue", "averageValue": "10"}}},
            {"type": "Resource", "resource": {"name": "cpu", "target": {
                "type": "Utilization", "averageUtilization": 50}}},
        ],
    }),
]  # fmt: skip


async def test_kubectl_get_hpa_tables_match(kubeconfigs: Both) -> None:
    async def run(kubeconfig: Path, namespace: str) -> tuple[str, list[Table]]:
        manifests = yaml.safe_dump_all(HPAS)
        applied = await kubectl(kubeconfig, "apply", "-n", namespace, "-f", "-", stdin=manifests)
        tables = await kubectl(kubeconfig, "get", "hpa", "-n", namespace)
        wide = await kubectl(kubeconfig, "get", "horizontalpodautoscalers.autoscaling", "-o",
                             "wide", "-n", namespace)  # fmt: skip
        return applied.stdout, parse_tables(tables.stdout) + parse_tables(wide.stdout)

    (applied_sim, on_kubesim), (applied_real, on_real) = await on_both(kubeconfigs, run)
    assert applied_sim == applied_real
    assert [names for names, _ in on_real] == [
        ["NAME", "REFERENCE", "TARGETS", "MINPODS", "MAXPODS", "REPLICAS", "AGE"]
    ] * 2
    assert [normalise(t) for t in on_kubesim] == [normalise(t) for t in on_real]
    assert normalise(on_real[0])[1] == [
        ["cpu", "Deployment/web", "cpu: <unknown>/80%", "1", "3", "0", "<age>"],
        ["three", "StatefulSet/db", "memory: <unknown>/100Mi, <unknown>/10 + 1 more...", "2",
         "6", "0", "<age>"],
    ]  # fmt: skip


def reader_rbac(namespace: str) -> str:
    """A ServiceAccount that may read pods and one ConfigMap in `namespace`."""
    rbac = "rbac.authorization.k8s.io/v1"
    return yaml.safe_dump_all([
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "reader"}},
        {"apiVersion": rbac, "kind": "Role", "metadata": {"name": "reader"},
         "rules": [{"apiGroups": [""], "resources": ["pods", "pods/log"],
                    "verbs": ["get", "list", "watch"]},
                   {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"],
                    "resourceNames": ["settings"]}]},
        {"apiVersion": rbac, "kind": "RoleBinding", "metadata": {"name": "reader"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
         "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": namespace}]},
    ])  # fmt: skip


async def test_kubectl_auth_can_i_matches(kubeconfigs: Both) -> None:
    async def run(kubeconfig: Path, namespace: str) -> list[tuple[int, str]]:
        await kubectl(kubeconfig, "apply", "-n", namespace, "-f", "-",
                      stdin=reader_rbac(namespace))  # fmt: skip
        reader = f"--as=system:serviceaccount:{namespace}:reader"
        asked = [
            ("auth", "can-i", "--list", reader),
            ("auth", "can-i", "list", "pods", reader),
            ("auth", "can-i", "delete", "pods", reader),
            ("auth", "can-i", "get", "configmaps/settings", reader),
            ("auth", "can-i", "get", "configmaps/other", reader),
            ("auth", "can-i", "create", "horizontalpodautoscalers.autoscaling"),
        ]
        answers = []
        for args in asked:
            run = await kubectl(kubeconfig, *args, "-n", namespace, check=False)
            answers.append((run.code, run.stdout))
        return answers

    on_kubesim, on_real = await on_both(kubeconfigs, run)
    assert on_kubesim == on_real
    codes = [code for code, _ in on_real]
    assert codes == [0, 0, 1, 0, 1, 0]
    listed = on_real[0][1]
    assert "pods/log" in listed and "[settings]" in listed, listed


CERT_MANAGER_CRDS = Path(__file__).with_name("cert-manager-crds.yaml")
CERT_MANAGER_OVERLAY = Path(__file__).resolve().parents[3] / "deploy" / "overlays" / "cert-manager"
CRD_NAMES = ("crd/certificates.cert-manager.io", "crd/issuers.cert-manager.io")


async def apply_cert_manager_overlay(kubeconfig: Path) -> tuple[str, list[Table], str]:
    """What a user does: the CRDs, wait until they are served, then the overlay."""
    crds = await kubectl(kubeconfig, "apply", "-f", str(CERT_MANAGER_CRDS))
    await kubectl(kubeconfig, "wait", "--for=condition=Established", "--timeout=30s",
                  *CRD_NAMES)  # fmt: skip
    applied = await kubectl(kubeconfig, "apply", "-k", str(CERT_MANAGER_OVERLAY))
    tables = await kubectl(kubeconfig, "get", "certificates,issuers", "-o", "wide", "-n",
                           "graceful-drain")  # fmt: skip
    short = await kubectl(kubeconfig, "get", "cert", "-n", "graceful-drain", "-o",
                          "jsonpath={.items[*].spec.secretName}")  # fmt: skip
    return crds.stdout + applied.stdout, parse_tables(tables.stdout), short.stdout


async def test_cert_manager_overlay_applies_after_its_crds(
    tmp_path: Path, own_real_cluster: RealCluster
) -> None:
    """The cluster-wide objects it installs (CRDs, webhook configuration, ClusterRole) would
    change what the session's other tests see: the real side gets a control plane of its own."""
    with kubesim_serve(tmp_path):
        on_kubesim = await apply_cert_manager_overlay(kubesim_kubeconfig(tmp_path))
    on_real = await apply_cert_manager_overlay(own_real_cluster.kubeconfig_path)

    assert on_kubesim[0] == on_real[0]
    assert "certificate.cert-manager.io/graceful-drain-webhook created" in on_real[0]
    assert [names for names, _ in on_real[1]] == [
        ["NAME", "READY", "SECRET", "ISSUER", "STATUS", "AGE"],
        ["NAME", "READY", "STATUS", "AGE"],
    ]
    assert [normalise(t) for t in on_kubesim[1]] == [normalise(t) for t in on_real[1]]
    assert on_kubesim[2] == on_real[2] == "graceful-drain-ca graceful-drain-webhook-tls"


def ssa_objects(namespace: str, value: str) -> str:
    """A ConfigMap, a Deployment, a Service and a webhook configuration (cluster-scoped, so
    named after the namespace), as a user would apply them."""
    labels = {"app": "web"}
    webhook = {
        "name": "deny.example.com", "admissionReviewVersions": ["v1"], "sideEffects": "None",
        "failurePolicy": "Ignore",
        "clientConfig": {"service": {"namespace": namespace, "name": "web", "path": "/v"}},
        "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                   "resources": ["configmaps"]}],
        "namespaceSelector": {"matchLabels": {"no-such-label": "x"}},
    }  # fmt: skip
    return yaml.safe_dump_all([
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"},
         "data": {"mode": value}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
         "spec": {"replicas": 0, "selector": {"matchLabels": labels},
                  "template": {"metadata": {"labels": labels}, "spec": {"containers": [
                      {"name": "web", "image": "example/web:1", "env": [
                          {"name": "MODE", "value": value}]}]}}}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
         "spec": {"selector": labels, "ports": [{"name": "https", "port": 443}]}},
        {"apiVersion": "admissionregistration.k8s.io/v1",
         "kind": "ValidatingWebhookConfiguration", "metadata": {"name": f"ssa-{namespace}"},
         "webhooks": [webhook]},
    ])  # fmt: skip


async def test_kubectl_apply_server_side_matches(kubeconfigs: Both) -> None:
    async def run(kubeconfig: Path, namespace: str) -> list[tuple[int, str, str]]:
        async def step(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
            done = await kubectl(kubeconfig, *args, "-n", namespace, check=False, stdin=stdin)
            return done.code, done.stdout, done.stderr.replace(namespace, "<ns>")

        apply = ("apply", "--server-side", "-f", "-")
        try:
            return [
                await step(*apply, stdin=ssa_objects(namespace, "a")),
                await step("patch", "configmap", "settings", "--type=merge",
                           "-p", '{"data":{"mode":"b"}}'),
                await step("set", "env", "deployment/web", "MODE=b"),
                await step(*apply, stdin=ssa_objects(namespace, "c")),
                await step(*apply, "--force-conflicts", stdin=ssa_objects(namespace, "c")),
                await step("get", "configmap", "settings", "-o", "jsonpath={.data.mode}"),
                await step("get", "deployment", "web", "-o",
                           "jsonpath={.spec.template.spec.containers[0].env}"),
                await step("get", "configmap/settings", "service/web", "--show-managed-fields",
                           "-o", "jsonpath={range .items[*]}{.metadata.managedFields[*].manager}"
                           "{' '}{.metadata.managedFields[*].operation}{'\\n'}{end}"),
            ]  # fmt: skip
        finally:
            await kubectl(kubeconfig, "delete", "validatingwebhookconfiguration",
                          f"ssa-{namespace}", check=False)  # fmt: skip

    on_kubesim, on_real = await on_both(kubeconfigs, run)
    assert on_kubesim == on_real
    codes = [code for code, _, _ in on_real]
    assert codes == [0, 0, 0, 1, 0, 0, 0, 0]
    conflict = on_real[3][2]
    assert 'conflict with "kubectl-patch" using v1: .data.mode' in conflict, conflict
    assert on_real[5][1] == "c"


PDB = """apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: web
spec:
  minAvailable: 1
  selector:
    matchLabels:
      app: web
"""


async def test_kubectl_apply_twice_and_autoscale(kubeconfigs: Both) -> None:
    """What `kubectl apply` says of an unchanged PodDisruptionBudget (its selector's `replace`
    patch strategy: `configured` on both), and `kubectl autoscale` (kubectl 1.32 writes
    autoscaling/v1) read back through v2 (the real HPA controller writes the status, kubesim
    runs none: the spec is compared)."""

    async def run(kubeconfig: Path, namespace: str) -> tuple[list[str], Any]:
        said = []
        for _ in range(2):
            applied = await kubectl(kubeconfig, "apply", "-n", namespace, "-f", "-", stdin=PDB)
            said.append(applied.stdout.strip())
        made = await kubectl(kubeconfig, "create", "deployment", "web", "--image=nginx",
                             "-n", namespace)  # fmt: skip
        said.append(made.stdout.strip())
        scaled = await kubectl(kubeconfig, "autoscale", "deployment", "web", "--max=3",
                               "--cpu-percent=60", "-n", namespace)  # fmt: skip
        said.append(scaled.stdout.strip())
        spec = await kubectl(kubeconfig, "get", "hpa", "web", "-n", namespace, "-o",
                             "jsonpath={.spec}")  # fmt: skip
        return said, yaml.safe_load(spec.stdout)

    (said_sim, spec_sim), (said_real, spec_real) = await on_both(kubeconfigs, run)
    assert said_real[:2] == [
        "poddisruptionbudget.policy/web created",
        "poddisruptionbudget.policy/web configured",
    ]
    assert said_sim == said_real
    assert spec_sim == spec_real
