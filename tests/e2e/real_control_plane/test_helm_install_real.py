"""The Helm chart on the real control plane: `helm install`, a protected `kubectl drain`,
`helm upgrade` (the caBundle the controller wrote survives it), then `helm uninstall`
leaves nothing but what docs/operations.md ("Uninstall") says it leaves, and the commands
given there remove that too. On the way, the running controller's /metrics has every metric
the chart's Grafana dashboard and Prometheus alerts query.

The release is not deploy/'s (`graceful-drain-helm` in its own namespace, so it lives beside
the session's kustomize install): every name derives from the release. As in harness.py,
the webhook is registered by URL (the chart's `webhook.url`) in front of controller
processes configured from the installed Deployment, scaled to 0. It is installed with
ci/every-value-values.yaml, every value that bends the chart set; meanwhile the other
ci/*-values.yaml files are installed and uninstalled as their own releases, scoped to an
empty namespace so that their webhooks never see another test's evictions.
"""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path

import pytest
import yaml

from kubesim.recorder import AvailabilityRecorder
from realcluster.cluster import RealCluster
from tests.unit.chart.monitoring import missing_metrics
from tests.unit.chart.rendered import CHART, CI_VALUES

from .harness import (
    HELD,
    REPO,
    Installation,
    Obj,
    create_ready_web,
    drain,
    helm,
    kubectl,
    kubectl_json,
    pods,
    settle,
)
from .loadbalancer import LoadBalancer

pytestmark = [pytest.mark.e2e, pytest.mark.realcluster]

RELEASE = "graceful-drain-helm"
RELEASE_NAMESPACE = "graceful-drain-helm"
EVERY_VALUE_FILE = CHART / "ci" / "every-value-values.yaml"
EVERY_VALUE = yaml.safe_load(EVERY_VALUE_FILE.read_text())
OTHER_CI_VALUES = [path for path in CI_VALUES if path != EVERY_VALUE_FILE]
OPERATIONS_DOC = REPO / "docs" / "operations.md"
# Namespaced kinds an install could leave behind, and cluster-scoped ones.
NAMESPACED = (
    "deployments", "services", "serviceaccounts", "secrets", "configmaps", "roles",
    "rolebindings", "leases.coordination.k8s.io", "poddisruptionbudgets", "networkpolicies",
)  # fmt: skip
CLUSTER_SCOPED = (
    "validatingwebhookconfigurations", "validatingadmissionpolicies",
    "validatingadmissionpolicybindings", "clusterroles", "clusterrolebindings", "priorityclasses",
)  # fmt: skip
# What every namespace has, whoever installs what.
NAMESPACE_DEFAULTS = {"serviceaccounts/default", "configmaps/kube-root-ca.crt"}


def documented_cleanup() -> list[list[str]]:
    """The `kubectl ... delete` commands of docs/operations.md's Uninstall section, with the
    release's names in place of the default ones."""
    text = OPERATIONS_DOC.read_text()
    section = text[text.index("## Uninstall") :]
    section = section[: section.index("\n## ", 1)]
    commands = re.findall(r"^(kubectl -n graceful-drain delete .+)$", section, re.MULTILINE)
    assert commands, "docs/operations.md's Uninstall section lists no cleanup command"
    return [c.replace("graceful-drain", RELEASE).split()[1:] for c in commands]


async def webhook_ca_bundle(cluster: RealCluster) -> str:
    configuration = await kubectl_json(
        cluster.kubeconfig_path, "get", "validatingwebhookconfiguration", RELEASE
    )
    return str(configuration["webhooks"][0]["clientConfig"].get("caBundle", ""))


async def installed_objects(cluster: RealCluster) -> list[Obj]:
    """The release's objects as the API server stored them (Helm's instance label)."""
    selector = f"app.kubernetes.io/instance={RELEASE}"
    kinds = "deployments,services,serviceaccounts,configmaps,roles,rolebindings"
    namespaced = await kubectl_json(cluster.kubeconfig_path, "get", kinds, "-n",
                                    RELEASE_NAMESPACE, "-l", selector)  # fmt: skip
    scoped = await kubectl_json(cluster.kubeconfig_path, "get", ",".join(CLUSTER_SCOPED),
                                "-l", selector)  # fmt: skip
    return list(namespaced["items"]) + list(scoped["items"])


async def left_behind(cluster: RealCluster) -> set[str]:
    kubeconfig = cluster.kubeconfig_path
    found: set[str] = set()
    for kind in NAMESPACED:
        listed = await kubectl_json(kubeconfig, "get", kind, "-n", RELEASE_NAMESPACE)
        found |= {f"{kind}/{item['metadata']['name']}" for item in listed["items"]}
    for kind in CLUSTER_SCOPED:
        listed = await kubectl_json(kubeconfig, "get", kind)
        found |= {
            f"{kind}/{item['metadata']['name']}"
            for item in listed["items"]
            if item["metadata"]["name"].startswith(RELEASE)
        }
    return found - NAMESPACE_DEFAULTS


async def install_and_uninstall(cluster: RealCluster, values: Path) -> None:
    """`values` as a release of its own (no replica), in a namespace of its own, protecting
    only an empty namespace; then uninstalled, leaving nothing (no controller ever ran)."""
    name = f"graceful-drain-ci-{values.name.removesuffix('-values.yaml')}"  # = its full name
    scope = f"{name}-scope"
    kubeconfig = cluster.kubeconfig_path
    await kubectl(kubeconfig, "create", "namespace", scope)
    await helm(cluster, "install", name, str(CHART), "--namespace", name, "--create-namespace",
               "--values", str(values), "--set", "replicaCount=0",
               "--set", f"namespaces={{{scope}}}")  # fmt: skip
    deployment = await kubectl_json(kubeconfig, "get", "deployment", name, "-n", name)
    assert deployment["spec"]["replicas"] == 0, values.name
    await helm(cluster, "uninstall", name, "--namespace", name, "--wait")
    kinds = "all,configmaps,secrets,serviceaccounts,roles,rolebindings"
    remaining = await kubectl_json(kubeconfig, "get", kinds, "-n", name,
                                   "-l", f"app.kubernetes.io/instance={name}")  # fmt: skip
    assert remaining["items"] == [], values.name
    await kubectl(kubeconfig, "delete", "namespace", name, scope, "--wait=false")


async def test_helm_install_protects_a_drain_and_uninstall_leaves_only_what_is_documented(
    real_cluster: RealCluster, namespace: str, recorder: AvailabilityRecorder, tmp_path: Path,
) -> None:  # fmt: skip
    other_ci_values = asyncio.gather(
        *(install_and_uninstall(real_cluster, values) for values in OTHER_CI_VALUES)
    )
    service = LoadBalancer().start()
    try:
        installed_notes = await helm(
            real_cluster, "install", RELEASE, str(CHART), "--namespace", RELEASE_NAMESPACE,
            "--create-namespace", "--values", str(EVERY_VALUE_FILE), "--set", "replicaCount=0",
            "--set", f"webhook.url=https://127.0.0.1:{service.port}/validate-eviction",
            "--set", "tls.selfSigned.extraHosts={127.0.0.1}",
        )  # fmt: skip
        account = EVERY_VALUE["serviceAccount"]["name"]
        installation = Installation(
            real_cluster, service, tmp_path, RELEASE_NAMESPACE, RELEASE, service_account=account
        )
        installed = await installed_objects(real_cluster)
        await create_ready_web(real_cluster, recorder, namespace)
        [old] = await pods(real_cluster, namespace)
        replica = await installation.start_controller(f"{RELEASE}-0")
        try:
            drained = await drain(real_cluster, recorder, "node-a")
            window = await settle(recorder, namespace, "node-a")
            exposition = replica.exposition()
            observed = {
                "leader": replica.metric("graceful_drain_leader"),
                "timeout": replica.metric("graceful_drain_rollout_timeout_seconds"),
                "expiry": replica.metric("graceful_drain_certificate_expiry_timestamp_seconds"),
                "pod lists": replica.metric("graceful_drain_cache_lists_total", resource="pods"),
                "events": replica.metric("graceful_drain_events_total", outcome="created"),
                "started": replica.metric("graceful_drain_rollouts_started_total"),
            }
        finally:
            replica.stop()
    finally:
        service.stop()

    assert drained.code == 0, drained.stderr
    assert HELD in drained.stderr
    timeline = recorder.timeline("web", namespace)
    assert timeline.zero_ready_seconds(*window) == 0
    assert len(timeline.rollouts(*window)) == 1
    [new] = await pods(real_cluster, namespace)
    assert new["metadata"]["name"] != old["metadata"]["name"]
    # Every metric the chart's dashboard and alerts query, on the running controller's /metrics.
    assert missing_metrics(exposition) == {}
    assert observed["leader"] == 1  # leaderElection.enabled: it holds the release's Lease
    assert observed["timeout"] == 600  # rolloutTimeout: 10m
    assert observed["expiry"] > time.time()
    assert observed["pod lists"] >= 1
    assert observed["events"] >= 1  # GracefulDrainStarted at least
    assert observed["started"] == 1
    # The effective configuration, logged once at start-up, is the chart's, extraArgs included.
    [configured] = [line for line in replica.log_lines() if line.get("msg") == "configuration"]
    assert configured["tls_reload_interval"] == "30s"
    assert configured["rollout_timeout"] == "10m0s"
    assert configured["leader_elect"] is True
    assert configured["webhook_configuration"] == RELEASE
    assert configured["self_signed_secret"] == f"{RELEASE}-webhook-tls"

    # An upgrade changes what the values say and keeps the caBundle the controller wrote.
    ca_bundle = await webhook_ca_bundle(real_cluster)
    assert ca_bundle
    await helm(real_cluster, "upgrade", RELEASE, str(CHART), "--namespace", RELEASE_NAMESPACE,
               "--reuse-values", "--set", "rolloutTimeout=11m")  # fmt: skip
    assert await webhook_ca_bundle(real_cluster) == ca_bundle
    deployment = await installation.controller_deployment()
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert {"name": "GRACEFUL_DRAIN_ROLLOUT_TIMEOUT", "value": "11m"} in container["env"]

    # What the API server stored of the values that bend the chart (the monitoring.coreos.com
    # API is not served here: no ServiceMonitor or PrometheusRule, the dashboard still).
    assert {item["kind"] for item in installed} >= {"ServiceAccount", "Service", "ConfigMap"}
    assert not {item["kind"] for item in installed} & {"ServiceMonitor", "PrometheusRule"}
    for kind in ("ServiceMonitor", "PrometheusRule"):
        assert f"does not serve monitoring.coreos.com/v1 {kind}: none" in " ".join(
            installed_notes.split())  # fmt: skip
    assert all(item["metadata"]["labels"]["example.com/team"] == "platform"
               for item in installed)  # fmt: skip
    [sa] = [item for item in installed if item["kind"] == "ServiceAccount"]
    assert sa["metadata"]["name"] == account
    # Helm adds its own meta.helm.sh annotations beside the values'.
    assert EVERY_VALUE["serviceAccount"]["annotations"].items() <= sa["metadata"][
        "annotations"].items()  # fmt: skip
    [svc] = [item for item in installed if item["kind"] == "Service"]
    assert EVERY_VALUE["service"]["annotations"].items() <= svc["metadata"]["annotations"].items()
    [installed_deployment] = [item for item in installed if item["kind"] == "Deployment"]
    pod = installed_deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == account
    assert pod["securityContext"] == EVERY_VALUE["podSecurityContext"]
    assert pod["containers"][0]["securityContext"] == EVERY_VALUE["securityContext"]
    assert [c["maxSkew"] for c in pod["topologySpreadConstraints"]] == [2]
    assert {"name": "TZ", "value": "UTC"} in pod["containers"][0]["env"]

    await helm(real_cluster, "uninstall", RELEASE, "--namespace", RELEASE_NAMESPACE, "--wait")
    assert await left_behind(real_cluster) == {
        f"leases.coordination.k8s.io/{RELEASE}",
        f"secrets/{RELEASE}-webhook-tls",
        f"secrets/{RELEASE}-webhook-tls-ca",
    }
    for command in documented_cleanup():
        await kubectl(real_cluster.kubeconfig_path, *command)
    assert await left_behind(real_cluster) == set()
    await kubectl(real_cluster.kubeconfig_path, "delete", "namespace", RELEASE_NAMESPACE)
    await other_ci_values
