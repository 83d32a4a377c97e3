"""What ./scripts/release leaves in dist/release/ (docs/install.md, "Release artifacts"),
read as an operator's tools would: the OCI image index and its two platform images layer by
layer, the SBOMs against the lock and each image's own dpkg database, SHA256SUMS, the krew
manifest against its archive, the chart's version, and the plugin file run by python3.

The release is built once (./scripts/test runs ./scripts/release before pytest); this module
builds it only when dist/release/ is missing or stale, as root."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote

import pytest
import yaml
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
from packaging.utils import canonicalize_name

from imagebuild import oci, spec
from imagebuild.build import project_version, source_date_epoch, source_revision
from imagebuild.foreign import ELF_MACHINES, parse_control
from imagebuild.release import (
    ARCHITECTURES,
    CHANGELOG,
    PLUGIN,
    PLUGIN_COMPLETION,
    PLUGIN_PLATFORMS,
    PLUGIN_PYTHONS,
    plugin_archive,
)
from imagebuild.rootfs import ImageUnavailable, host_architecture
from tests.conftest import REQUIRE_REAL_CLUSTER
from tests.release.built import current_release, find_python
from tests.unit.deploy.image_lock import read_lock

pytestmark = [pytest.mark.image]

VERSION = project_version()
SITE_PACKAGES = re.compile(
    rf"^{spec.VENV.lstrip('/')}/lib/python{spec.PYTHON_MINOR}/site-packages/"
    r"([^/]+)-([^/-]+)\.dist-info/METADATA$"
)


@pytest.fixture(scope="module")
def release_dir() -> Path:
    """dist/release/, built first only when it is not this checkout's."""
    try:
        return current_release()
    except ImageUnavailable as error:
        if os.environ.get(REQUIRE_REAL_CLUSTER) == "1":
            pytest.fail(f"{REQUIRE_REAL_CLUSTER}=1: the release: {error}")
        pytest.skip(f"the release is not tested here: {error}")


def _blob(layout: Path, descriptor: oci.Json) -> bytes:
    digest: str = descriptor["digest"]
    data = (layout / "blobs" / "sha256" / digest.removeprefix("sha256:")).read_bytes()
    assert len(data) == descriptor["size"]
    assert f"sha256:{hashlib.sha256(data).hexdigest()}" == digest
    return data


@dataclass
class PlatformImage:
    architecture: str
    manifest: oci.Descriptor
    config: oci.Json
    elf_machines: dict[str, int] = field(default_factory=dict)  # path -> e_machine
    dpkg_status: str = ""
    distributions: set[tuple[str, str]] = field(default_factory=set)  # (name, version)


@pytest.fixture(scope="module")
def platform_images(release_dir: Path) -> dict[str, PlatformImage]:
    """Each platform image of the index, its layers read once (ELF headers, dpkg status,
    installed distributions); every blob checked against its digest and size."""
    layout = release_dir / "image"
    entry, *_referrers = json.loads((layout / "index.json").read_text())["manifests"]
    assert entry["mediaType"] == oci.INDEX_TYPE
    assert entry["annotations"][oci.REF_NAME] == VERSION
    index = json.loads(_blob(layout, entry))
    assert index["mediaType"] == oci.INDEX_TYPE
    images: dict[str, PlatformImage] = {}
    for descriptor in index["manifests"]:
        assert descriptor["mediaType"] == oci.MANIFEST_TYPE
        platform = descriptor["platform"]
        manifest = json.loads(_blob(layout, descriptor))
        config = json.loads(_blob(layout, manifest["config"]))
        assert (config["os"], config["architecture"]) == (platform["os"], platform["architecture"])
        image = PlatformImage(
            platform["architecture"],
            oci.Descriptor(descriptor["mediaType"], descriptor["digest"], descriptor["size"]),
            config,
        )
        diff_ids = []
        for layer in manifest["layers"]:
            data = _blob(layout, layer)
            raw = gzip.decompress(data)
            diff_ids.append(f"sha256:{hashlib.sha256(raw).hexdigest()}")
            with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
                for info in tar:
                    if not info.isreg():
                        continue
                    file = tar.extractfile(info)
                    assert file is not None
                    header = file.read(20)
                    if header[:4] == b"\x7fELF":
                        image.elf_machines[info.name] = int.from_bytes(header[18:20], "little")
                    if info.name == "var/lib/dpkg/status":
                        image.dpkg_status = (header + file.read()).decode()
                    if match := SITE_PACKAGES.match(info.name):
                        image.distributions.add((canonicalize_name(match[1]), match[2]))
        assert config["rootfs"]["diff_ids"] == diff_ids
        images[image.architecture] = image
    return images


def test_the_image_index_has_an_amd64_and_an_arm64_manifest(
    platform_images: dict[str, PlatformImage],
) -> None:
    assert sorted(platform_images) == sorted(ARCHITECTURES)
    revision = source_revision()
    for image in platform_images.values():
        assert image.config["config"]["Entrypoint"] == list(spec.ENTRYPOINT)
        labels = image.config["config"]["Labels"]
        assert labels["org.opencontainers.image.version"] == VERSION
        assert labels["org.opencontainers.image.source"] == spec.SOURCE_URL
        assert re.fullmatch(r"[0-9a-f]{40}", revision)
        assert labels["org.opencontainers.image.revision"] == revision


@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_every_elf_file_in_a_platform_images_layers_is_of_its_architecture(
    platform_images: dict[str, PlatformImage], architecture: str
) -> None:
    machines = platform_images[architecture].elf_machines
    # Debian's python3 and libc, and the platform wheels' extension modules, at least.
    assert len(machines) > 100
    assert any(path.startswith("usr/bin/python3") for path in machines)
    assert any(".cpython-311-" in path and "site-packages" in path for path in machines)
    wrong = {path for path, machine in machines.items() if machine != ELF_MACHINES[architecture]}
    assert wrong == set()


@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_each_sbom_lists_every_locked_distribution_and_every_debian_package_of_its_image(
    release_dir: Path, platform_images: dict[str, PlatformImage], architecture: str
) -> None:
    image = platform_images[architecture]
    text = (
        release_dir / f"graceful-drain-{VERSION}.sbom.linux-{architecture}.cdx.json"
    ).read_text()
    # Valid CycloneDX 1.6 by the schema cyclonedx-python-lib ships (strict: no unknown keys).
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(text) is None
    sbom = json.loads(text)
    assert sbom["bomFormat"] == "CycloneDX"
    assert image.manifest.digest.replace(":", "%3A") in sbom["metadata"]["component"]["purl"]
    purls = [c["purl"] for c in sbom["components"]]
    pypi = {
        (canonicalize_name(m[1]), m[2])
        for m in (re.match(r"pkg:pypi/([^@]+)@(.+)", p) for p in purls) if m
    }  # fmt: skip
    locked = {(pin.name, pin.version) for pin in read_lock(spec.LOCK)}
    assert pypi == locked | {("graceful-drain", VERSION)}
    # ... and that is what the image holds.
    assert image.distributions == pypi
    deb = {
        (m[1], m[2], m[3])
        for m in (re.match(r"pkg:deb/debian/([^@]+)@([^?]+)\?arch=([^&]+)", p) for p in purls)
        if m
    }
    installed = {
        (s.get("Package"), s.get("Version"), s.get("Architecture"))
        for s in parse_control(image.dpkg_status)
    }
    assert len(installed) > 50
    assert {(name, unquote(version), arch) for name, version, arch in deb} == installed
    assert {arch for _, _, arch in installed} == {architecture, "all"}

    # What a scanner needs beside names: a serial number, licenses, the dependency graph.
    assert re.fullmatch(r"urn:uuid:[0-9a-f-]{36}", sbom["serialNumber"])
    python = [c for c in sbom["components"] if c["purl"].startswith("pkg:pypi/")]
    assert [c["name"] for c in python if not c.get("licenses")] == []
    debian = [c for c in sbom["components"] if c["purl"].startswith("pkg:deb/")]
    assert sum(1 for c in debian if c.get("licenses")) > len(debian) / 2
    graph = {d["ref"]: set(d["dependsOn"]) for d in sbom["dependencies"]}
    own = f"pkg:pypi/graceful-drain@{VERSION}"
    reached, stack = set(), [own]
    while stack:
        ref = stack.pop()
        if ref not in reached:
            reached.add(ref)
            stack.extend(graph.get(ref, ()))
    # Every locked distribution is there because something installed needs it.
    assert {c["bom-ref"] for c in python} <= reached
    assert len(graph[own]) < len(python) - 1  # a graph, not a flat list under the app
    assert set(graph) >= {c["bom-ref"] for c in sbom["components"]}


def test_sha256sums_covers_and_verifies_every_file_of_the_release(release_dir: Path) -> None:
    sums = {
        line.split("  ", 1)[1]: line.split("  ", 1)[0]
        for line in (release_dir / "SHA256SUMS").read_text().splitlines()
    }
    files = {p.relative_to(release_dir).as_posix() for p in release_dir.rglob("*")
             if p.is_file()} - {"SHA256SUMS", "SHA256SUMS.sig", "release.key"}  # fmt: skip
    assert set(sums) == files
    assert "image/index.json" in files and "cosign.pub" in files
    # As an operator checks it: coreutils' sha256sum, in the folder.
    checked = subprocess.run(["sha256sum", "--strict", "-c", "SHA256SUMS"], cwd=release_dir,
                             capture_output=True, text=True, check=False)  # fmt: skip
    assert checked.returncode == 0, checked.stdout[-2000:] + checked.stderr
    assert f"graceful-drain-{VERSION}-image.oci.tar" in files
    assert (release_dir / "CHANGELOG.md").read_bytes() == CHANGELOG.read_bytes()
    assert f"## [{VERSION}]" in CHANGELOG.read_text()


def cosign_binary() -> str:
    from realcluster.binaries import built_bin_dir

    bin_dir = built_bin_dir()
    if bin_dir is None or not (bin_dir / "cosign").is_file():
        pytest.skip("cosign is not built (realcluster/build)")
    return str(bin_dir / "cosign")


@pytest.mark.parametrize("name", ["SHA256SUMS", f"graceful-drain-{VERSION}.tgz"])
def test_a_blob_signature_verifies_with_the_public_key_and_a_flipped_byte_fails_it(
    release_dir: Path, tmp_path: Path, name: str
) -> None:
    cosign = cosign_binary()

    def verify(path: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [cosign, "verify-blob", "--key", str(release_dir / "cosign.pub"),
             "--insecure-ignore-tlog=true", "--signature", str(release_dir / f"{name}.sig"),
             str(path)],
            capture_output=True, text=True, check=False, timeout=60,
        )  # fmt: skip

    verified = verify(release_dir / name)
    assert verified.returncode == 0, verified.stderr
    tampered = tmp_path / name
    data = bytearray((release_dir / name).read_bytes())
    data[len(data) // 2] ^= 0x01
    tampered.write_bytes(bytes(data))
    refused = verify(tampered)
    assert refused.returncode != 0
    assert "invalid signature" in refused.stderr.lower(), refused.stderr


def test_the_layout_carries_each_sbom_and_a_signature_of_everything_as_referrers(
    release_dir: Path, platform_images: dict[str, PlatformImage]
) -> None:
    layout = release_dir / "image"
    tagged, *referrers = json.loads((layout / "index.json").read_text())["manifests"]
    assert tagged["annotations"][oci.REF_NAME] == VERSION
    assert all(oci.REF_NAME not in (r.get("annotations") or {}) for r in referrers)
    documents = {r["digest"]: json.loads(_blob(layout, r)) for r in referrers}
    subjects: dict[str, set[str]] = {}
    for document in documents.values():
        subjects.setdefault(document["artifactType"], set()).add(document["subject"]["digest"])
    platforms = {image.manifest.digest: image for image in platform_images.values()}
    sboms = {d: doc for d, doc in documents.items()
             if doc["artifactType"] == "application/vnd.cyclonedx+json"}  # fmt: skip
    assert {doc["subject"]["digest"] for doc in sboms.values()} == set(platforms)
    for document in sboms.values():
        [layer] = document["layers"]
        architecture = platforms[document["subject"]["digest"]].architecture
        name = f"graceful-drain-{VERSION}.sbom.linux-{architecture}.cdx.json"
        assert layer["annotations"]["org.opencontainers.image.title"] == name
        assert _blob(layout, layer) == (release_dir / name).read_bytes()
    signed = subjects["application/vnd.dev.cosign.artifact.sig.v1+json"]
    assert signed == {tagged["digest"], *platforms, *sboms}


def test_the_krew_manifest_lists_each_platforms_archive_with_its_sha256(
    release_dir: Path,
) -> None:
    manifest = yaml.safe_load((release_dir / "graceful-drain.krew.yaml").read_text())
    assert manifest["kind"] == "Plugin"
    assert manifest["spec"]["version"] == f"v{VERSION}"
    platforms = manifest["spec"]["platforms"]
    assert [(p["selector"]["matchLabels"]["os"], p["selector"]["matchLabels"]["arch"])
            for p in platforms] == list(PLUGIN_PLATFORMS)  # fmt: skip
    for entry, (system, architecture) in zip(platforms, PLUGIN_PLATFORMS, strict=True):
        archive = plugin_archive(release_dir, VERSION, system, architecture)
        assert entry["uri"].endswith(f"/v{VERSION}/{archive.name}")
        assert entry["sha256"] == hashlib.sha256(archive.read_bytes()).hexdigest()
        assert entry["bin"] == PLUGIN
        assert [f["from"] for f in entry["files"]] == [PLUGIN, PLUGIN_COMPLETION]
        with tarfile.open(archive) as tar:
            assert sorted(tar.getnames()) == sorted([PLUGIN, PLUGIN_COMPLETION])
            for name in (PLUGIN, PLUGIN_COMPLETION):
                assert tar.getmember(name).mode & 0o111, name


def host_plugin(release_dir: Path, into: Path) -> Path:
    """This machine's archive unpacked into `into`: the plugin file."""
    archive = plugin_archive(release_dir, VERSION, "linux", host_architecture())
    into.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    return into / PLUGIN


def test_kubectl_completes_the_plugin_with_the_release_files_on_path(
    release_dir: Path, tmp_path: Path
) -> None:
    """The two files of the krew archive on PATH: `kubectl graceful-drain pl<TAB>` completes
    through kubectl's plugin completion (kubectl 1.26+)."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not on PATH")
    bin_dir = host_plugin(release_dir, tmp_path / "bin").parent
    env = {**os.environ, "PEX_ROOT": str(tmp_path / "pex"),
           "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}  # fmt: skip
    result = subprocess.run([kubectl, "__complete", "graceful-drain", "pl"], env=env,
                            capture_output=True, text=True, check=False, timeout=120)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert [line.split("\t")[0] for line in result.stdout.splitlines()] == ["plan", ":4"]


def test_the_packaged_charts_version_is_the_apps_and_its_times_the_releases(
    release_dir: Path,
) -> None:
    with tarfile.open(release_dir / f"graceful-drain-{VERSION}.tgz") as tar:
        chart_file = tar.extractfile("graceful-drain/Chart.yaml")
        assert chart_file is not None
        chart = yaml.safe_load(chart_file.read())
        times = {int(member.mtime) for member in tar.getmembers()}
    assert (chart["version"], chart["appVersion"]) == (VERSION, VERSION)
    assert times == {source_date_epoch()}  # reproducible: not the time helm ran


@pytest.mark.parametrize("python", PLUGIN_PYTHONS)
def test_the_plugin_file_runs_under_each_python(
    release_dir: Path, tmp_path: Path, python: str
) -> None:
    """From a fresh PEX_ROOT: the file alone is enough (its dependencies are inside), under
    CPython 3.11, 3.12 and 3.13 (`plan` against a cluster: tests/e2e/controller/
    test_plugin_interpreters_e2e.py)."""
    interpreter = find_python(python)
    if interpreter is None:
        pytest.skip(f"no python{python} on this machine (PATH, pyenv)")
    plugin = str(host_plugin(release_dir, tmp_path / "bin"))
    env = {**os.environ, "PEX_ROOT": str(tmp_path / "pex")}
    helped = subprocess.run([interpreter, plugin, "--help"], env=env, capture_output=True,
                            text=True, check=False, timeout=300)  # fmt: skip
    assert helped.returncode == 0, helped.stderr
    assert helped.stdout.startswith("usage: kubectl graceful-drain")
    for command in ("plan", "status", "version"):
        assert command in helped.stdout
    version = subprocess.run([interpreter, plugin, "version"], env=env, capture_output=True,
                             text=True, check=False, timeout=300)  # fmt: skip
    assert (version.returncode, version.stdout) == (0, f"kubectl graceful-drain {VERSION}\n")
