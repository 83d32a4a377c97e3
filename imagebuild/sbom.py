"""A CycloneDX SBOM per image architecture: the Python distributions (cyclonedx-bom's
`cyclonedx-py requirements` over the image's lock, each narrowed to the one wheel that
architecture installs), graceful-drain itself, and the Debian packages read from that
architecture's dpkg status.

What a scanner needs beside names and versions: a serialNumber (a UUID derived from the
platform manifest's digest, so the file stays reproducible), each component's licenses
(a Python wheel's License-Expression, else its license classifiers, else its License
field; a Debian package's machine-readable copyright file), and the dependency graph (each
wheel's Requires-Dist, evaluated for the image's Python and platform, extras followed;
each Debian package's Depends and Pre-Depends among the installed packages)."""

from __future__ import annotations

import email.parser
import hashlib
import json
import re
import subprocess
import sys
import tarfile
import uuid
import zipfile
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import quote

from packaging.markers import Marker
from packaging.requirements import InvalidRequirement, Requirement

from imagebuild.foreign import parse_control
from imagebuild.oci import Json
from imagebuild.rootfs import ImageUnavailable
from imagebuild.spec import DEBIAN_SUITE, LOCK, PYTHON_MINOR, REPOSITORY

_DEBIAN_RELEASES = {"bookworm": "debian-12"}


def normalise(name: str) -> str:
    """A distribution's normalised name (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


_MACHINES = {"amd64": "x86_64", "arm64": "aarch64"}
_CLASSIFIER = "License :: OSI Approved :: "


def dpkg_status(rootfs_tarball: Path) -> list[dict[str, str]]:
    """Every installed package in the tarball's rootfs: name, version, arch, its Depends and
    Pre-Depends (as written), and the License fields of its machine-readable copyright file
    ("" where it has none)."""
    with tarfile.open(rootfs_tarball) as tar:
        member = tar.extractfile("./var/lib/dpkg/status")
        assert member is not None
        text = member.read().decode()
        packages = [
            {"name": s.get("Package"), "version": s.get("Version"), "arch": s.get("Architecture"),
             "depends": ", ".join(filter(None, (s.get("Pre-Depends"), s.get("Depends")))),
             "source": (s.get("Source") or s.get("Package")).split()[0]}
            for s in parse_control(text)
            if s.get("Status").endswith(" installed")
        ]  # fmt: skip
        for package in packages:
            package["licenses"] = "\n".join(copyright_licenses(tar, package["name"]))
    return packages


def copyright_licenses(tar: tarfile.TarFile, package: str) -> list[str]:
    """The distinct `License:` short names of a DEP-5 copyright file, in order."""
    try:
        member = tar.extractfile(f"./usr/share/doc/{package}/copyright")
    except KeyError:
        return []
    if member is None:
        return []
    text = member.read().decode("utf-8", "replace")
    if not text.startswith("Format:") or "copyright-format/1.0" not in text.splitlines()[0]:
        return []
    names: list[str] = []
    for line in text.splitlines():
        name = line.removeprefix("License:").strip() if line.startswith("License:") else ""
        if name and name not in names:
            names.append(name)
    return names


def wheel_metadata(wheel: Path) -> email.message.Message:
    """The METADATA of a wheel's .dist-info."""
    with zipfile.ZipFile(wheel) as archive:
        [name] = [n for n in archive.namelist()
                  if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]  # fmt: skip
        return email.parser.Parser().parsestr(archive.read(name).decode())


def wheel_licenses(metadata: email.message.Message) -> list[Json]:
    """CycloneDX licenses of a wheel: License-Expression (SPDX), else its OSI license
    classifiers, else a one-line License field; [] when it says nothing usable."""
    if expression := (metadata.get("License-Expression") or "").strip():
        return [{"expression": expression}]
    classifiers = [c.removeprefix(_CLASSIFIER) for c in metadata.get_all("Classifier") or []
                   if c.startswith(_CLASSIFIER)]  # fmt: skip
    if classifiers:
        return [{"license": {"name": name}} for name in classifiers]
    text = (metadata.get("License") or "").strip()
    if text and "\n" not in text and len(text) <= 80:
        return [{"license": {"name": text}}]
    return []


def marker_environment(architecture: str) -> dict[str, str]:
    """The image's Python and platform, as PEP 508 markers see them."""
    return {
        "implementation_name": "cpython", "implementation_version": f"{PYTHON_MINOR}.0",
        "os_name": "posix", "platform_machine": _MACHINES[architecture],
        "platform_python_implementation": "CPython", "platform_release": "",
        "platform_system": "Linux", "platform_version": "", "python_full_version":
        f"{PYTHON_MINOR}.0", "python_version": PYTHON_MINOR, "sys_platform": "linux",
    }  # fmt: skip


def python_dependencies(
    requirements: dict[str, list[str]], roots: Iterable[str], architecture: str
) -> dict[str, set[str]]:
    """name -> the names it depends on, from each distribution's Requires-Dist (normalised
    names to their requirement strings), walked from `roots` with the extras asked for,
    markers evaluated for `architecture`; only distributions of `requirements` count."""
    environment = marker_environment(architecture)
    extras: dict[str, set[str]] = {}
    edges: dict[str, set[str]] = {name: set() for name in requirements}
    pending = [(normalise(root), "") for root in roots]
    while pending:
        name, extra = pending.pop()
        if extra in extras.setdefault(name, set()):
            continue
        extras[name].add(extra)
        for text in requirements.get(name, []):
            try:
                requirement = Requirement(text)
            except InvalidRequirement:
                continue
            marker: Marker | None = requirement.marker
            if marker is not None and not marker.evaluate({**environment, "extra": extra}):
                continue
            target = normalise(requirement.name)
            if target not in requirements or target == name:
                continue
            edges[name].add(target)
            for wanted in ("", *sorted(requirement.extras)):
                if wanted not in extras.get(target, set()):
                    pending.append((target, wanted))
    return edges


def debian_dependencies(packages: list[dict[str, str]]) -> dict[str, set[str]]:
    """name -> the installed packages its Depends/Pre-Depends name (an alternative `a | b`
    counts the installed ones; a version constraint or architecture qualifier is dropped;
    a virtual package is resolved through the packages that provide it only when it is
    installed under that name)."""
    installed = {package["name"] for package in packages}
    edges: dict[str, set[str]] = {}
    for package in packages:
        targets: set[str] = set()
        for clause in filter(None, (c.strip() for c in package["depends"].split(","))):
            for alternative in clause.split("|"):
                target = alternative.strip().split()[0].split(":")[0] if alternative.strip() else ""
                if target in installed and target != package["name"]:
                    targets.add(target)
        edges[package["name"]] = targets
    return edges


def python_components(wheels: Path, epoch: int) -> tuple[list[Json], dict[str, list[str]]]:
    """cyclonedx-py's components for the lock, each with the sha256 of the wheel installed
    and its licenses; and each one's Requires-Dist (by normalised name)."""
    result = subprocess.run(
        [str(Path(sys.executable).parent / "cyclonedx-py"), "requirements",
         "--output-reproducible", "--of", "JSON", "--sv", "1.6", str(LOCK)],
        capture_output=True, text=True, check=False, env={"SOURCE_DATE_EPOCH": str(epoch)},
    )  # fmt: skip
    if result.returncode != 0:
        raise ImageUnavailable(f"cyclonedx-py exited {result.returncode}: {result.stderr[-2000:]}")
    files = {normalise(w.name.split("-")[0]): w for w in wheels.glob("*.whl")}
    components: list[Json] = []
    requirements: dict[str, list[str]] = {}
    for component in json.loads(result.stdout)["components"]:
        wheel = files[normalise(component["name"])]
        sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
        metadata = wheel_metadata(wheel)
        requirements[normalise(component["name"])] = metadata.get_all("Requires-Dist") or []
        if licenses := wheel_licenses(metadata):
            component["licenses"] = licenses
        component.pop("description", None)
        component["bom-ref"] = component["purl"]
        component["externalReferences"] = [{
            "type": "distribution", "url": f"https://pypi.org/project/{component['name']}/",
            "comment": wheel.name, "hashes": [{"alg": "SHA-256", "content": sha}],
        }]  # fmt: skip
        components.append(component)
    return components, requirements


def debian_components(packages: list[dict[str, str]]) -> list[Json]:
    distro = _DEBIAN_RELEASES.get(DEBIAN_SUITE, DEBIAN_SUITE)
    components = []
    for package in sorted(packages, key=lambda p: p["name"]):
        purl = (f"pkg:deb/debian/{package['name']}@{quote(package['version'], safe='')}"
                f"?arch={package['arch']}&distro={distro}")  # fmt: skip
        component: Json = {
            "type": "library", "bom-ref": purl, "name": package["name"],
            "version": package["version"], "purl": purl,
        }  # fmt: skip
        if package.get("licenses"):
            component["licenses"] = [
                {"license": {"name": name}} for name in package["licenses"].splitlines()
            ]
        components.append(component)
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
    python, requirements = python_components(wheels, epoch)
    packages = dpkg_status(rootfs_tarball)
    debian = debian_components(packages)
    own_metadata = wheel_metadata(wheel)
    requirements["graceful-drain"] = own_metadata.get_all("Requires-Dist") or []
    python_refs = {normalise(c["name"]): c["bom-ref"] for c in python} | {"graceful-drain": own}
    python_edges = python_dependencies(requirements, ["graceful-drain"], architecture)
    debian_refs = {c["name"]: c["bom-ref"] for c in debian}
    debian_edges = debian_dependencies(packages)
    dependencies = [
        {"ref": image_purl, "dependsOn": [own, *(c["bom-ref"] for c in debian)]},
        *({"ref": python_refs[name], "dependsOn": sorted(python_refs[t] for t in targets)}
          for name, targets in sorted(python_edges.items())),
        *({"ref": debian_refs[name], "dependsOn": sorted(debian_refs[t] for t in targets)}
          for name, targets in sorted(debian_edges.items())),
    ]  # fmt: skip
    bom: Json = {
        "$schema": "http://cyclonedx.org/schema/bom-1.6.schema.json",
        "bomFormat": "CycloneDX",
        "specVersion": "1.6",
        # Reproducible: the same platform manifest always gets the same serial number.
        "serialNumber": f"urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, image_purl)}",
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
        "dependencies": dependencies,
    }  # fmt: skip
    path.write_text(json.dumps(bom, indent=2, sort_keys=True) + "\n")
