"""The signed release, verified as docs/install.md ("Verify a release") says, on the real
control plane: the folder's image layout (the image index, its platforms, their SBOM
referrers and every cosign signature) pushed to a real OCI registry on loopback; `cosign
verify` of the index, each platform manifest and each SBOM passes with the folder's public
key; a copy whose index signature has one byte changed is refused; only then the chart,
its blob signature verified, is pushed and installed from `oci://` and protects a drain.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from imagebuild.registry import Repository, push_layout
from imagebuild.signing import PUBLIC_KEY, SBOM_TYPE
from kubesim.recorder import AvailabilityRecorder
from realcluster.cluster import RealCluster
from realcluster.registry import Registry
from tests.e2e.conftest import built_or_skip
from tests.unit.chart.rendered import CHART

from .conftest import image_or_skip
from .harness import Installation, helm, kubectl
from .loadbalancer import LoadBalancer
from .test_drain_real import assert_drain_is_protected
from .test_registry_real import published_layout

pytestmark = [pytest.mark.e2e, pytest.mark.realcluster, pytest.mark.image]

RELEASE = "graceful-drain-signed"  # and its namespace
SIGNATURE_TYPE = "application/vnd.dev.cosign.artifact.sig.v1+json"
SIGNATURE_ANNOTATION = "dev.cosignproject.cosign/signature"
VERSION = str(yaml.safe_load((CHART / "Chart.yaml").read_text())["version"])
TIMEOUT = 120


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    with Registry(built_or_skip(), tmp_path_factory.mktemp("registry")) as running:
        yield running


def tool(name: str) -> str:
    path = built_or_skip() / name
    if not path.is_file():
        pytest.skip(f"{name} is not built (realcluster/build)")
    return str(path)


def cosign_verify(reference: str, key: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [tool("cosign"), "verify", "--key", str(key), "--insecure-ignore-tlog=true",
         "--experimental-oci11", "--allow-http-registry", "--allow-insecure-registry",
         reference],
        capture_output=True, text=True, check=False, timeout=TIMEOUT,
    )  # fmt: skip


def referrers_of(layout: Path) -> dict[str, dict[str, object]]:
    """The layout's referrer manifests (index.json's untagged entries), by digest."""
    _, *entries = json.loads((layout / "index.json").read_text())["manifests"]
    return {
        entry["digest"]: json.loads(
            (layout / "blobs" / "sha256" / entry["digest"].removeprefix("sha256:")).read_bytes()
        )
        for entry in entries
    }


def tampered_copy(layout: Path, into: Path) -> str:
    """A copy of the layout whose image index signature has one byte of its signature
    changed (the original signature's manifest removed); the index's digest."""
    shutil.copytree(layout, into)
    [tagged, *entries] = json.loads((into / "index.json").read_text())["manifests"]
    referrers = referrers_of(into)
    [(digest, manifest)] = [
        (d, m) for d, m in referrers.items()
        if m["artifactType"] == SIGNATURE_TYPE and m["subject"]["digest"] == tagged["digest"]  # type: ignore[index]
    ]  # fmt: skip
    layer = manifest["layers"][0]  # type: ignore[index]
    signature = bytearray(base64.b64decode(layer["annotations"][SIGNATURE_ANNOTATION]))
    signature[len(signature) // 2] ^= 0x01
    layer["annotations"][SIGNATURE_ANNOTATION] = base64.b64encode(bytes(signature)).decode()
    data = json.dumps(manifest).encode()
    new_digest = f"sha256:{hashlib.sha256(data).hexdigest()}"
    blobs = into / "blobs" / "sha256"
    (blobs / digest.removeprefix("sha256:")).unlink()
    (blobs / new_digest.removeprefix("sha256:")).write_bytes(data)
    for entry in entries:
        if entry["digest"] == digest:
            entry.update(digest=new_digest, size=len(data))
    (into / "index.json").write_text(json.dumps({"schemaVersion": 2,
                                                 "manifests": [tagged, *entries]}))  # fmt: skip
    return str(tagged["digest"])


async def test_the_signed_release_verifies_a_tampered_copy_does_not_then_it_installs_from_oci(
    registry: Registry, real_cluster: RealCluster, namespace: str,
    recorder: AvailabilityRecorder, tmp_path: Path,
) -> None:  # fmt: skip
    layout = image_or_skip(published_layout)
    release_dir = layout.parent
    key = release_dir / PUBLIC_KEY
    repository = Repository(registry.url, "graceful-drain")
    [image] = await asyncio.to_thread(push_layout, layout, repository)
    referrers = referrers_of(layout)
    platforms = [m["digest"] for m in json.loads(
        (layout / "blobs" / "sha256" / image.digest.removeprefix("sha256:")).read_bytes()
    )["manifests"]]  # fmt: skip
    sboms = [d for d, m in referrers.items() if m["artifactType"] == SBOM_TYPE]
    assert len(sboms) == len(platforms) == 2

    verified = {}
    for digest in [image.digest, *platforms, *sboms]:
        reference = f"{registry.host}/graceful-drain@{digest}"
        verified[digest] = await asyncio.to_thread(cosign_verify, reference, key)
    tampered_digest = tampered_copy(layout, tmp_path / "tampered")
    tampered_repository = Repository(registry.url, "graceful-drain-tampered")
    await asyncio.to_thread(push_layout, tmp_path / "tampered", tampered_repository)
    tampered = await asyncio.to_thread(
        cosign_verify, f"{registry.host}/graceful-drain-tampered@{tampered_digest}", key
    )
    discovered = await asyncio.to_thread(
        subprocess.run, [tool("oras"), "discover", "--plain-http", "--format", "json",
                         f"{registry.host}/graceful-drain@{platforms[0]}"],
        capture_output=True, text=True, check=False, timeout=TIMEOUT,
    )  # fmt: skip

    for digest, result in verified.items():
        assert result.returncode == 0, (digest, result.stderr)
    assert tampered.returncode != 0
    refusal = tampered.stderr.lower()
    assert any(why in refusal for why in ("invalid signature", "no matching signatures",
                                          "no signatures found")), tampered.stderr  # fmt: skip
    assert discovered.returncode == 0, discovered.stderr
    listed = json.loads(discovered.stdout)
    artifact_types = {
        r["artifactType"] for r in listed.get("referrers", listed.get("manifests", []))
    }
    assert {SBOM_TYPE, "application/vnd.dev.cosign.artifact.sig.v1+json"} <= artifact_types

    # Only after the verification: the chart, its signature checked, from oci://.
    chart = release_dir / f"graceful-drain-{VERSION}.tgz"
    checked = await asyncio.to_thread(
        subprocess.run, [tool("cosign"), "verify-blob", "--key", str(key),
                         "--insecure-ignore-tlog=true", "--signature", f"{chart}.sig", str(chart)],
        capture_output=True, text=True, check=False, timeout=TIMEOUT,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stderr
    await helm(real_cluster, "push", str(chart), f"oci://{registry.host}/charts", "--plain-http")
    service = LoadBalancer().start()
    installed = False
    try:
        await helm(real_cluster, "install", RELEASE, f"oci://{registry.host}/charts/graceful-drain",
                   "--version", VERSION, "--plain-http", "--namespace", RELEASE,
                   "--create-namespace",
                   "--set", f"image.repository={registry.host}/graceful-drain",
                   "--set", f"image.digest={image.digest}", "--set", "replicaCount=0",
                   "--set", f"webhook.url=https://127.0.0.1:{service.port}/validate-eviction",
                   "--set", "tls.selfSigned.extraHosts={127.0.0.1}")  # fmt: skip
        installed = True
        installation = Installation(real_cluster, service, tmp_path, RELEASE, RELEASE)
        deployment = await installation.controller_deployment()
        [container] = deployment["spec"]["template"]["spec"]["containers"]
        assert container["image"] == f"{registry.host}/graceful-drain@{image.digest}"
        await assert_drain_is_protected(installation, real_cluster, namespace, recorder)
    finally:
        service.stop()
        if installed:
            await helm(real_cluster, "uninstall", RELEASE, "--namespace", RELEASE, "--wait")
            await kubectl(real_cluster.kubeconfig_path, "delete", "namespace", RELEASE,
                          "--wait=false")  # fmt: skip
