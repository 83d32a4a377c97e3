"""graceful-drain installed from deploy/ on the session's real control plane (the
`real_cluster` fixture, tests/e2e/conftest.py), and a namespace per test."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TypeVar

import pytest

from imagebuild.build import ensure_built
from imagebuild.rootfs import ImageUnavailable
from kubesim.recorder import AvailabilityRecorder
from realcluster.cluster import RealCluster
from tests.conftest import REQUIRE_REAL_CLUSTER, run_kubectl

from .harness import Installation, admin_client, fresh_namespace, kubectl, overlay
from .image import ImageRoot
from .loadbalancer import LoadBalancer

T = TypeVar("T")


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
    try:
        async with fresh_namespace(real_cluster) as name:
            yield name
    finally:
        for node in real_cluster.node_names:
            await kubectl(real_cluster.kubeconfig_path, "uncordon", node, check=False)


@pytest.fixture
async def recorder(
    real_cluster: RealCluster, namespace: str
) -> AsyncIterator[AvailabilityRecorder]:
    """Ready pods per Deployment of the test's namespace over time, from watches."""
    client = admin_client(real_cluster, "availability-recorder")
    async with AvailabilityRecorder(client, namespace=namespace) as running:
        yield running
    await client.close()


def image_or_skip(build: Callable[[], T]) -> T:
    """`build()` (the controller image, built or reused), once this machine can run the image.

    Skipped with the reason when it cannot build or run it (not root, no mmdebstrap or
    umoci); under REQUIRE_REAL_CLUSTER=1 (CI) that fails instead."""
    try:
        if os.geteuid() != 0:
            raise ImageUnavailable("running the image with chroot needs root")
        if shutil.which("umoci") is None:
            raise ImageUnavailable("umoci is not installed (./scripts/build-image installs it)")
        return build()
    except ImageUnavailable as error:
        if os.environ.get(REQUIRE_REAL_CLUSTER) == "1":
            pytest.fail(f"{REQUIRE_REAL_CLUSTER}=1: the controller image: {error}")
        pytest.skip(f"the controller image is not tested here: {error}")


@pytest.fixture(scope="session")
def controller_image(tmp_path_factory: pytest.TempPathFactory) -> ImageRoot:
    """The controller image (./scripts/build-image, built or reused), unpacked by umoci."""
    image = image_or_skip(ensure_built)
    return ImageRoot.unpacked(image.layout, image.tag, tmp_path_factory.mktemp("image") / "bundle")
