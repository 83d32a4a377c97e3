"""A CycloneDX SBOM per image architecture: the Python distributions (cyclonedx-bom's
`cyclonedx-py requirements` over the image's lock, each narrowed to the one wheel that
architecture installs), graceful-drain itself, and the Debian packages read from that
architecture's dpkg status."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import tarfile
from pathlib import Path
from urllib.parse import quote

from imagebuild.foreign import parse_control
from imagebuild.oci import Json
from imagebuild.rootfs import ImageUnavailable
from imagebuild.spec import DEBIAN_SUITE, LOCK, REPOSITORY

_DEBIAN_RELEASES = {"bookworm": "debian-12"}


def normalise(name: str) -> str:
    """A distribution's normalised name (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def dpkg_status(rootfs_tarball: Path) -> list[dict[str, str]]:
    """(Package, Version, Architecture) of every installed package in the tarball's rootfs."""
    with tarfile.open(rootfs_tarball) as tar:
        member = tar.extractfile("./var/lib/dpkg/status")
        assert member is not None
        text = member.read().decode()
    return [
        {"name": s.get("Package"), "version": s.get("Version"), "arch": s.get("Architecture")}
        for s in parse_control(text)
        if s.get("Status").endswith(" installed")
    ]


def python_components(wheels: Path, epoch: int) -> list[Json]:
    """cyclonedx-py's components for the lock, each with the sha256 of the wheel installed."""
    result = subprocess.run(
        [str(Path(sys.executable).parent / "cyclonedx-py"), "requirements",
         "--output-reproducible", "--of", "JSON", "--sv", "1.6", str(LOCK)],
        capture_output=True, text=True, check=False, env={"SOURCE_DATE_EPOCH": str(epoch)},
    )  # fmt: skip
    if result.returncode != 0:
        raise ImageUnavailable(f"cyclonedx-py exited {result.returncode}: {result.stderr[-2000:]}")
    files = {normalise(w.name.split("-")[0]): w for w in wheels.glob("*.whl")}
    components: list[Json] = []
    for component in json.loads(result.stdout)["components"]:
        wheel = files[normalise(component["name"])]
        sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
        component.pop("description", None)
        component["bom-ref"] = component["purl"]
        component["externalReferences"] = [{
            "type": "distribution", "url": f"https://pypi.org/project/{component['name']}/",
            "comment": wheel.name, "hashes": [{"alg": "SHA-256", "content": sha}],
        }]  # fmt: skip
        components.append(component)
    return components


def debian_components(packages: list[dict[str, str]]) -> list[Json]:
    distro = _DEBIAN_RELEASES.get(DEBIAN_SUITE, DEBIAN_SUITE)
    components = []
    for package in sorted(packages, key=lambda p: p["name"]):
        purl = (f"pkg:deb/debian/{package['name']}@{quote(package['version'], safe='')}"
                f"?arch={package['arch']}&distro={distro}")  # fmt: skip
        components.append({
            "type": "library", "bom-ref": purl, "name": package["name"],
            "version": package["version"], "purl": purl,
        })  # fmt: skip
    return components


def write_sbom(
    path: Path, *, architecture: str, version: str, manifest_digest: str, epoch: int,
    rootfs_tarball: Path, wheels: Path, wheel: Path,
) -> None:  # fmt: skip
    """The SBOM of one architecture's image (its manifest digest in the image's purl)."""
    from datetime import UTC, datetime

    image_purl = (f"pkg:oci/graceful-drain@{quote(manifest_digest, safe='')}"
                  f"?arch={architecture}&repository_url={quote(REPOSITORY, safe='')}")  # fmt: skip
    own = f"pkg:pypi/graceful-drain@{version}"
    python = python_components(wheels, epoch)
    debian = debian_components(dpkg_status(rootfs_tarball))
    bom: Json = {
        "$schema": "http://cyclonedx.org/schema/bom-1.6.schema.json",
        "bomFormat": "CycloneDX",
        "specVersion": "1.6",
        "version": 1,
        "metadata": {
            "timestamp": datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "tools": {"components": [{"type": "application", "name": "cyclonedx-py"},
                                     {"type": "application", "name": "scripts/release"}]},
            "component": {
                "type": "container", "bom-ref": image_purl, "name": "graceful-drain",
                "version": version, "purl": image_purl,
                "properties": [{"name": "oci:platform", "value": f"linux/{architecture}"}],
            },
        },
        "components": [
            {"type": "application", "bom-ref": own, "name": "graceful-drain",
             "version": version, "purl": own, "licenses": [{"expression": "Apache-2.0"}],
             "hashes": [{"alg": "SHA-256",
                         "content": hashlib.sha256(wheel.read_bytes()).hexdigest()}]},
            *python, *debian,
        ],
        "dependencies": [
            {"ref": image_purl, "dependsOn": [own, *(c["bom-ref"] for c in debian)]},
            {"ref": own, "dependsOn": [c["bom-ref"] for c in python]},
        ],
    }  # fmt: skip
    path.write_text(json.dumps(bom, indent=2, sort_keys=True) + "\n")
