"""One real control plane per test session (realcluster/), graceful-drain installed on it
from deploy/, and a namespace per test."""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator, Iterator

import pytest

from realcluster.binaries import BinariesUnavailable, ensure_built
from realcluster.cluster import RealCluster
from tests.conftest import REQUIRE_REAL_CLUSTER, run_kubectl

from .harness import Installation, kubectl, overlay
from .loadbalancer import LoadBalancer


@pytest.fixture(scope="session")
def real_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCluster]:
    try:
        bin_dir = ensure_built()
    except BinariesUnavailable as error:
        if os.environ.get(REQUIRE_REAL_CLUSTER) == "1":
            pytest.fail(f"{REQUIRE_REAL_CLUSTER}=1: {error}")
        pytest.skip(str(error))
    with RealCluster(tmp_path_factory.mktemp("realcluster"), bin_dir) as cluster:
        yield cluster


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
        await kubectl(kubeconfig, "delete", "namespace", name, "--wait=false", check=False)
        for node in real_cluster.node_names:
            await kubectl(kubeconfig, "uncordon", node, check=False)
