"""graceful-drain installed from deploy/ on the session's real control plane (the
`real_cluster` fixture, tests/e2e/conftest.py), and a namespace per test."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterator

import pytest

from kubesim.recorder import AvailabilityRecorder
from realcluster.cluster import RealCluster
from tests.conftest import run_kubectl

from .harness import Installation, admin_client, kubectl, overlay
from .loadbalancer import LoadBalancer


@pytest.fixture(scope="session")
def installation(
    real_cluster: RealCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Installation]:
    """`kubectl apply -k` of deploy/ through the loopback overlay; no replica running yet."""
    service = LoadBalancer().start()
    workdir = tmp_path_factory.mktemp("graceful-drain")
    kustomization = overlay(workdir / "overlay", service.port)
    run_kubectl(real_cluster.kubeconfig_path, "apply", "-k", str(kustomization))
    try:
        yield Installation(real_cluster, service, workdir)
    finally:
        service.stop()


@pytest.fixture
async def namespace(real_cluster: RealCluster) -> AsyncIterator[str]:
    """A fresh namespace; afterwards it is deleted and every node uncordoned."""
    name = f"t-{secrets.token_hex(4)}"
    kubeconfig = real_cluster.kubeconfig_path
    await kubectl(kubeconfig, "create", "namespace", name)
    try:
        yield name
    finally:
        # Waited for: a later test's kubectl drain would otherwise meet this namespace's pods,
        # whose evictions a terminating namespace refuses.
        await kubectl(kubeconfig, "delete", "namespace", name, "--timeout=90s", check=False)
        for node in real_cluster.node_names:
            await kubectl(kubeconfig, "uncordon", node, check=False)


@pytest.fixture
async def recorder(
    real_cluster: RealCluster, namespace: str
) -> AsyncIterator[AvailabilityRecorder]:
    """Ready pods per Deployment of the test's namespace over time, from watches."""
    client = admin_client(real_cluster, "availability-recorder")
    async with AvailabilityRecorder(client, namespace=namespace) as running:
        yield running
    await client.close()
