"""Published, proven locally: a real OCI registry (CNCF distribution, realcluster/registry.py)
on loopback receives the controller image (imagebuild/registry.py pushes its OCI layout) and
the packaged chart (`helm push`); the chart is installed FROM that registry (`helm install
oci://...`) with the image named by the digest the registry answered, and the image pulled
back by the reference the installed Deployment carries is what runs the controller
(image.py: kwok nodes run no containers) that protects a drain.

Also: an OCI layout holding an image index of two platforms and a referrer (an SBOM whose
subject is the index) is pushed whole, and pulled back per platform.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from imagebuild import spec
from imagebuild.oci import CONFIG_TYPE, LAYER_TYPE, MANIFEST_TYPE, REF_NAME
from imagebuild.registry import (
    INDEX_TYPE,
    RegistryError,
    Repository,
    exists,
    main,
    parse_reference,
    pull,
    push_layout,
    resolve,
)
from imagebuild.rootfs import host_architecture
from kubesim.recorder import AvailabilityRecorder
from realcluster.cluster import RealCluster
from realcluster.registry import Registry
from tests.conftest import REQUIRE_REAL_CLUSTER
from tests.e2e.conftest import built_or_skip
from tests.release.built import current_release
from tests.unit.chart.rendered import CHART

from .conftest import image_or_skip
from .harness import Installation, helm, kubectl
from .image import ImageRoot
from .loadbalancer import LoadBalancer
from .test_drain_real import assert_drain_is_protected

pytestmark = [pytest.mark.e2e, pytest.mark.realcluster]

RELEASE = "graceful-drain-oci"  # and its namespace
IMAGE_NAME = "graceful-drain"
CHARTS = "charts"  # helm push oci://HOST/charts -> the repository charts/graceful-drain
CHART_VERSION = str(yaml.safe_load((CHART / "Chart.yaml").read_text())["version"])
EMPTY_TYPE = "application/vnd.oci.empty.v1+json"
SBOM_TYPE = "application/vnd.cyclonedx+json"


def published_layout() -> Path:
    """The OCI image layout this test publishes: what an operator downloads, scripts/release's
    dist/release/image (an image index of linux/amd64 and linux/arm64; the pull below takes
    this machine's platform). Everything below reads whatever index.json lists."""
    return current_release() / "image"


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    with Registry(built_or_skip(), tmp_path_factory.mktemp("registry")) as running:
        yield running


# --- a layout of an image index, two platforms and a referrer --------------------------------


class _LayoutWriter:
    def __init__(self, path: Path) -> None:
        self.path = path
        (path / "blobs" / "sha256").mkdir(parents=True)

    def blob(self, media_type: str, data: bytes, **extra: object) -> dict[str, object]:
        digest = hashlib.sha256(data).hexdigest()
        (self.path / "blobs" / "sha256" / digest).write_bytes(data)
        return {"mediaType": media_type, "digest": f"sha256:{digest}", "size": len(data), **extra}

    def json(self, media_type: str, document: object, **extra: object) -> dict[str, object]:
        return self.blob(media_type, json.dumps(document).encode(), **extra)


def index_layout(path: Path, tag: str) -> dict[str, dict[str, object]]:
    """A layout whose index.json lists one image index (linux/amd64 and linux/arm64, tagged
    `tag`); an SBOM artifact whose subject is that index is only among the blobs. The
    descriptors by name."""
    layout = _LayoutWriter(path)
    made: dict[str, dict[str, object]] = {}
    for architecture in ("amd64", "arm64"):
        rootfs = {"type": "layers", "diff_ids": []}
        config = layout.json(CONFIG_TYPE, {"architecture": architecture, "os": "linux",
                                           "rootfs": rootfs})  # fmt: skip
        layer = layout.blob(LAYER_TYPE, f"a layer for {architecture}".encode())
        made[architecture] = layout.json(
            MANIFEST_TYPE,
            {"schemaVersion": 2, "mediaType": MANIFEST_TYPE, "config": config, "layers": [layer]},
            platform={"os": "linux", "architecture": architecture},
        )
    made["index"] = layout.json(INDEX_TYPE, {
        "schemaVersion": 2, "mediaType": INDEX_TYPE,
        "manifests": [made["amd64"], made["arm64"]],
    })  # fmt: skip
    empty = layout.blob(EMPTY_TYPE, b"{}")
    sbom = layout.blob(SBOM_TYPE, b'{"bomFormat": "CycloneDX"}')
    subject = {key: made["index"][key] for key in ("mediaType", "digest", "size")}
    made["sbom"] = layout.json(MANIFEST_TYPE, {
        "schemaVersion": 2, "mediaType": MANIFEST_TYPE, "artifactType": SBOM_TYPE,
        "config": empty, "layers": [sbom], "subject": subject,
    })  # fmt: skip
    entry = {**made["index"], "annotations": {REF_NAME: tag}}
    (path / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [entry]}))
    (path / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    return made


def test_an_image_index_its_platforms_and_its_referrer_are_pushed_and_pulled_per_platform(
    registry: Registry, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repository = Repository(registry.url, "multi/platform")
    made = index_layout(tmp_path / "layout", "1.0.0")
    assert not exists(repository, str(made["index"]["digest"]))

    [pushed] = push_layout(tmp_path / "layout", repository)

    assert (pushed.tag, pushed.digest, pushed.media_type) == (
        "1.0.0", made["index"]["digest"], INDEX_TYPE)  # fmt: skip
    assert resolve(repository, "1.0.0") == made["index"]["digest"]
    for name in ("amd64", "arm64", "sbom"):
        assert exists(repository, str(made[name]["digest"])), name
    for architecture in ("amd64", "arm64"):
        target = tmp_path / f"pulled-{architecture}"
        entry = pull(repository, pushed.digest, target, "1.0.0", ("linux", architecture))
        assert entry["digest"] == made[architecture]["digest"]
        [listed] = json.loads((target / "index.json").read_text())["manifests"]
        assert listed["annotations"] == {REF_NAME: "1.0.0"}
        manifest = json.loads((target / "blobs" / "sha256" / str(entry["digest"])[7:]).read_text())
        [layer] = manifest["layers"]
        blob = target / "blobs" / "sha256" / layer["digest"][7:]
        assert blob.read_bytes() == f"a layer for {architecture}".encode()
    with pytest.raises(RegistryError, match="has no linux/s390x"):
        pull(repository, pushed.digest, tmp_path / "none", "1.0.0", ("linux", "s390x"))
    # Pushed again by the command line, nothing changes (every blob is already there).
    assert main(["push", str(tmp_path / "layout"), f"{registry.url}/multi/platform"]) == 0
    assert capsys.readouterr().out == f"1.0.0 {repository.reference(pushed.digest)}\n"
    assert resolve(repository, "1.0.0") == made["index"]["digest"]


def test_a_layout_missing_a_blob_is_refused_by_name(registry: Registry, tmp_path: Path) -> None:
    made = index_layout(tmp_path / "layout", "1.0.0")
    missing = str(made["arm64"]["digest"])
    (tmp_path / "layout" / "blobs" / "sha256" / missing.removeprefix("sha256:")).unlink()
    for layout, message in [
        (tmp_path / "layout", f"{tmp_path / 'layout'}: blob {missing} is missing"),
        (tmp_path, f"{tmp_path}: not an OCI image layout (no index.json)"),
    ]:
        ran = subprocess.run(
            [sys.executable, "-m", "imagebuild.registry", "push", str(layout),
             f"{registry.url}/broken"],
            capture_output=True, text=True, timeout=60, check=False, cwd=spec.REPO,
        )  # fmt: skip
        assert ran.returncode == 1
        assert ran.stderr == f"python -m imagebuild.registry: error: {message}\n"
    assert not exists(Repository(registry.url, "broken"), "1.0.0")


# --- the chart and the controller image, from the registry to a protected drain -------------


async def push_chart(cluster: RealCluster, registry: Registry, workdir: Path) -> str:
    """`helm package` then `helm push` to oci://HOST/charts; the chart's oci:// reference."""
    await asyncio.to_thread(workdir.mkdir)
    await helm(cluster, "package", str(CHART), "--destination", str(workdir))
    package = workdir / f"graceful-drain-{CHART_VERSION}.tgz"
    await helm(cluster, "push", str(package), f"oci://{registry.host}/{CHARTS}", "--plain-http")
    return f"oci://{registry.host}/{CHARTS}/graceful-drain"


def pull_and_unpack(reference: str, workdir: Path) -> ImageRoot:
    """The image `reference` names, pulled from its registry as a node would, unpacked."""
    repository, digest = parse_reference(reference)
    pull(repository, digest, workdir / "layout", "pulled")
    return ImageRoot.unpacked(workdir / "layout", "pulled", workdir / "bundle")


@pytest.mark.image
async def test_the_chart_installed_from_an_oci_registry_runs_the_pushed_image_and_holds_a_drain(
    registry: Registry, real_cluster: RealCluster, namespace: str,
    recorder: AvailabilityRecorder, tmp_path: Path,
) -> None:  # fmt: skip
    layout = image_or_skip(published_layout)
    repository = Repository(registry.url, IMAGE_NAME)
    [image] = await asyncio.to_thread(push_layout, layout, repository)
    assert resolve(repository, image.tag) == image.digest
    reference = repository.reference(image.digest)  # HOST:PORT/graceful-drain@sha256:...
    service = LoadBalancer().start()
    installed = False

    async def install_from_the_registry() -> None:
        nonlocal installed
        chart = await push_chart(real_cluster, registry, tmp_path / "chart")
        await helm(real_cluster, "install", RELEASE, chart, "--version", CHART_VERSION,
                   "--plain-http", "--namespace", RELEASE, "--create-namespace",
                   "--set", f"image.repository={registry.host}/{IMAGE_NAME}",
                   "--set", f"image.digest={image.digest}", "--set", "replicaCount=0",
                   "--set", f"webhook.url=https://127.0.0.1:{service.port}/validate-eviction",
                   "--set", "tls.selfSigned.extraHosts={127.0.0.1}")  # fmt: skip
        installed = True

    try:
        # The image is pulled back (as a node would pull it) while the chart is pushed and
        # installed from the registry.
        _, launcher = await asyncio.gather(
            install_from_the_registry(),
            asyncio.to_thread(pull_and_unpack, reference, tmp_path / "pulled"),
        )
        installation = Installation(real_cluster, service, tmp_path, RELEASE, RELEASE)
        deployment = await installation.controller_deployment()
        [container] = deployment["spec"]["template"]["spec"]["containers"]
        assert container["image"] == reference
        assert launcher.image_config()["Entrypoint"] == list(spec.ENTRYPOINT)
        await assert_drain_is_protected(
            installation, real_cluster, namespace, recorder, launcher=launcher
        )
        # What the release recorded: the chart as the registry served it.
        listed = json.loads(await helm(real_cluster, "list", "--namespace", RELEASE,
                                       "--output", "json"))  # fmt: skip
        assert [(r["name"], r["chart"]) for r in listed] == [
            (RELEASE, f"graceful-drain-{CHART_VERSION}")]  # fmt: skip
    finally:
        service.stop()
        if installed:
            await helm(real_cluster, "uninstall", RELEASE, "--namespace", RELEASE, "--wait")
            await kubectl(real_cluster.kubeconfig_path, "delete", "namespace", RELEASE,
                          "--wait=false")  # fmt: skip


# --- the other architecture's image, run under emulation --------------------------------------

OTHER = {"amd64": "arm64", "arm64": "amd64"}  # the release's two architectures
QEMU_MACHINE = {"amd64": "x86_64", "arm64": "aarch64"}
MACHINE_PROBE = "import platform; print(platform.machine())"


def emulator_or_skip(architecture: str) -> Path:
    """Debian's qemu-user-static binary for `architecture` (./scripts/build-image installs
    the package); skipped without it, failed under REQUIRE_REAL_CLUSTER=1 (CI)."""
    name = f"qemu-{QEMU_MACHINE[architecture]}-static"
    found = shutil.which(name)
    if found is None:
        message = f"{name} is not installed (Debian's qemu-user-static; ./scripts/build-image)"
        if os.environ.get(REQUIRE_REAL_CLUSTER) == "1":
            pytest.fail(f"{REQUIRE_REAL_CLUSTER}=1: {message}")
        pytest.skip(message)
    return Path(found)


@pytest.mark.image
async def test_the_other_architectures_image_from_the_registry_protects_a_drain_emulated(
    registry: Registry, installation: Installation, real_cluster: RealCluster,
    namespace: str, recorder: AvailabilityRecorder, tmp_path: Path,
) -> None:  # fmt: skip
    """The release's image for the architecture this machine is not (linux/arm64 here),
    pulled by platform from the registry as such a node would, unpacked, and run under
    user-mode emulation (image.py): its own Python and platform wheels (cryptography,
    msgspec, httptools, uvloop) answer the webhook, and a `kubectl drain` is protected as by
    the native image."""
    architecture = OTHER[host_architecture()]
    emulator = emulator_or_skip(architecture)
    layout = image_or_skip(published_layout)
    repository = Repository(registry.url, IMAGE_NAME)
    [image] = await asyncio.to_thread(push_layout, layout, repository)

    def pull_and_unpack_other() -> ImageRoot:
        pulled = tmp_path / "layout"
        pull(repository, image.digest, pulled, architecture, ("linux", architecture))
        return ImageRoot.unpacked(pulled, architecture, tmp_path / "bundle", emulator)

    launcher = await asyncio.to_thread(pull_and_unpack_other)
    probe = launcher.run(launcher.command([*launcher.emulated(f"{spec.VENV}/bin/python"),
                                           "-c", MACHINE_PROBE]))  # fmt: skip
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.strip() == QEMU_MACHINE[architecture]
    await assert_drain_is_protected(
        installation, real_cluster, namespace, recorder, launcher=launcher
    )
