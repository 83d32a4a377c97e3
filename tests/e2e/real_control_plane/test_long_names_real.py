"""The longest names Helm allows on the real control plane: the chart installed with a
53-character release name (Helm's limit) into a 63-character namespace (a DNS label) is
accepted by kube-apiserver, its controller turns Ready (its certificate for a 131-character
`<service>.<namespace>.svc` issued, the Lease taken) and a drain is protected.

Before the serving certificate's subject stopped depending on the names, the controller
never turned Ready here (a Common Name is at most 64 characters), and with failurePolicy
Ignore every drain went unprotected. The rendered limits are tests/unit/chart/test_long_names.py.
As in test_helm_install_real.py, the webhook is registered by URL in front of a controller
process configured from the installed Deployment.
"""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from cryptography import x509

from graceful_drain.controller.tls.pki import service_dns_names
from kubesim.recorder import AvailabilityRecorder
from realcluster.cluster import RealCluster
from tests.unit.chart.rendered import CHART
from tests.unit.chart.test_long_names import NAMESPACE_63, RELEASE_53

from .harness import (
    HELD,
    Installation,
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


async def test_a_53_character_release_in_a_63_character_namespace_protects_a_drain(
    real_cluster: RealCluster, namespace: str, recorder: AvailabilityRecorder, tmp_path: Path,
) -> None:  # fmt: skip
    kubeconfig = real_cluster.kubeconfig_path
    service = LoadBalancer().start()
    try:
        await helm(
            real_cluster, "install", RELEASE_53, str(CHART), "--namespace", NAMESPACE_63,
            "--create-namespace", "--set", "replicaCount=0",
            "--set", f"webhook.url=https://127.0.0.1:{service.port}/validate-eviction",
            "--set", "tls.selfSigned.extraHosts={127.0.0.1}",
            "--set", f"namespaces={{{namespace}}}",
        )  # fmt: skip
        [deployment] = (await kubectl_json(
            kubeconfig, "get", "deployments", "-n", NAMESPACE_63,
            "-l", f"app.kubernetes.io/instance={RELEASE_53}",
        ))["items"]  # fmt: skip
        name = deployment["metadata"]["name"]
        installation = Installation(real_cluster, service, tmp_path, NAMESPACE_63, name)
        await create_ready_web(real_cluster, recorder, namespace)
        [old] = await pods(real_cluster, namespace)
        # start_controller returns once the replica's /readyz is 200: Ready.
        replica = await installation.start_controller(f"{name[:40]}-0")
        try:
            drained = await drain(real_cluster, recorder, "node-a")
            window = await settle(recorder, namespace, "node-a")
            lease = await kubectl_json(kubeconfig, "get", "lease", name, "-n", NAMESPACE_63)
        finally:
            replica.stop()
    finally:
        service.stop()

    assert drained.code == 0, drained.stderr
    assert HELD in drained.stderr
    timeline = recorder.timeline("web", namespace)
    assert timeline.zero_ready_seconds(*window) == 0
    [new] = await pods(real_cluster, namespace)
    assert new["metadata"]["name"] != old["metadata"]["name"]

    # The Service kube-apiserver accepted is the one the certificate names, 131 characters.
    instance = f"app.kubernetes.io/instance={RELEASE_53}"
    listed = await kubectl_json(kubeconfig, "get", "services", "-n", NAMESPACE_63, "-l", instance)
    [svc] = listed["items"]
    svc_name = svc["metadata"]["name"]
    assert len(svc_name) == 63
    secret = await kubectl_json(kubeconfig, "get", "secret", f"{name}-webhook-tls",
                                "-n", NAMESPACE_63)  # fmt: skip
    served = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
    sans = served.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    dns_names = service_dns_names(svc_name, NAMESPACE_63)
    assert len(dns_names[0]) == 131
    assert set(dns_names) <= set(sans.get_values_for_type(x509.DNSName))
    assert lease["spec"]["holderIdentity"] == f"{name[:40]}-0"

    await helm(real_cluster, "uninstall", RELEASE_53, "--namespace", NAMESPACE_63, "--wait")
    await kubectl(kubeconfig, "delete", "namespace", NAMESPACE_63, "--wait=false")
