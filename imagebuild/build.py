"""Build the controller image into dist/ (or reuse it while nothing that goes into it changed).

dist/image/ is the OCI image layout, dist/graceful-drain-VERSION.oci.tar the same as one
archive; dist/image.key records what they were built from.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import tempfile
import tomllib
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from imagebuild import oci
from imagebuild.cache import cache_root, digest, tree_digest
from imagebuild.rootfs import check_tools, ensure_rootfs, host_architecture, rootfs_key
from imagebuild.spec import (
    CMD,
    DEBIAN_PACKAGES,
    DEBIAN_SUITE,
    ENTRYPOINT,
    ENV,
    EXPOSED_PORTS,
    INSTALL_VENV,
    LOCK,
    REPO,
    REPOSITORY,
    SOURCE_URL,
    USER,
    VENV,
    WHEEL_SOURCES,
)
from imagebuild.venv import build_wheel, ensure_wheels, install_venv

DIST = REPO / "dist"
# The modules that make the image (not release.py, foreign.py and sbom.py, which make the
# release from it).
_BUILDER = ("build.py", "cache.py", "oci.py", "rootfs.py", "spec.py", "venv.py", "__main__.py")
_FALLBACK_EPOCH = 315532800  # 1980-01-01, the earliest time a wheel's zip can hold


@dataclass(frozen=True)
class BuiltImage:
    layout: Path  # the OCI image layout
    archive: Path  # the same, as one tar file
    tag: str  # the layout's reference name: `umoci unpack --image LAYOUT:TAG`

    @property
    def reference(self) -> str:
        return f"{self.layout}:{self.tag}"


def project_version() -> str:
    version: str = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    return version


def source_date_epoch() -> int:
    """$SOURCE_DATE_EPOCH, else the time of the checked-out commit."""
    if os.environ.get("SOURCE_DATE_EPOCH"):
        return int(os.environ["SOURCE_DATE_EPOCH"])
    result = subprocess.run(
        ["git", "-C", str(REPO), "log", "-1", "--format=%ct"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    return int(result.stdout.strip()) if result.returncode == 0 else _FALLBACK_EPOCH


def source_revision() -> str:
    """$SOURCE_REVISION, else the checked-out commit; "" outside a git checkout. The commit
    is part of image_key, so a cached image never carries another's."""
    if os.environ.get("SOURCE_REVISION"):
        return os.environ["SOURCE_REVISION"]
    result = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True,
        check=False,
    )  # fmt: skip
    return result.stdout.strip() if result.returncode == 0 else ""


def image_key(architecture: str, epoch: int) -> str:
    """Everything the image is made of: the root filesystem's key, the lock, the install
    script, the wheel's sources, this builder's code and the timestamp."""
    builder = [Path(__file__).parent / name for name in _BUILDER]
    return digest([
        rootfs_key(architecture), LOCK.read_bytes(), INSTALL_VENV.read_bytes(),
        tree_digest(REPO, WHEEL_SOURCES), *(path.read_bytes() for path in builder), str(epoch),
        source_revision(),
    ])  # fmt: skip


def image_labels(epoch: int, version: str) -> dict[str, str]:
    """The OCI image labels (the annotation keys of the image-spec): what a scanner or a
    registry reads to find the sources, the version and the commit."""
    labels = {
        "org.opencontainers.image.title": "graceful-drain",
        "org.opencontainers.image.version": version,
        "org.opencontainers.image.licenses": "Apache-2.0",
        "org.opencontainers.image.source": SOURCE_URL,
        "org.opencontainers.image.created": datetime.fromtimestamp(epoch, UTC).strftime(
            "%Y-%m-%dT%H:%M:%SZ"),
    }  # fmt: skip
    if revision := source_revision():
        labels["org.opencontainers.image.revision"] = revision
    return labels


def image_config(architecture: str, epoch: int, version: str) -> oci.Json:
    return {
        "created": datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "architecture": architecture,
        "os": "linux",
        "config": {
            "User": USER,
            "Env": list(ENV),
            "Entrypoint": list(ENTRYPOINT),
            "Cmd": list(CMD),
            "ExposedPorts": {f"{port}/tcp": {} for port in EXPOSED_PORTS},
            "WorkingDir": "/",
            "Labels": image_labels(epoch, version),
        },
    }


def ensure_built(dist: Path = DIST) -> BuiltImage:
    """The image in `dist`, built first unless dist/image.key says it is current.

    Raises rootfs.ImageUnavailable when this machine cannot build it."""
    architecture, epoch, version = host_architecture(), source_date_epoch(), project_version()
    image = BuiltImage(dist / "image", dist / f"graceful-drain-{version}.oci.tar", version)
    key_file = dist / "image.key"
    key = image_key(architecture, epoch)
    current = key_file.is_file() and key_file.read_text().strip() == key
    if current and (image.layout / "index.json").is_file() and image.archive.is_file():
        return image
    check_tools()
    key_file.unlink(missing_ok=True)
    dist.mkdir(parents=True, exist_ok=True)
    rootfs = ensure_rootfs(architecture, epoch)
    wheels = ensure_wheels(architecture)
    cache_root().mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="build-", dir=cache_root()) as tmp:
        workdir = Path(tmp)
        wheel = build_wheel(workdir, epoch)
        root = workdir / "root"
        root.mkdir()
        with tarfile.open(rootfs) as source:
            source.extractall(root, numeric_owner=True, filter="fully_trusted")
        venv = install_venv(root, wheels, wheel, epoch)
        print(f"image: writing the OCI layout to {image.layout}", file=sys.stderr)
        layout = oci.Layout(image.layout, epoch)
        base = layout.add_layer(
            f"Debian {DEBIAN_SUITE}, Essential and {' '.join(DEBIAN_PACKAGES)} (mmdebstrap)",
            # /dev is the runtime's to provide; the bootstrap's device nodes stay out.
            oci.copy_tar(layout, rootfs, keep=lambda name: not name.startswith("dev/")),
        )
        app = layout.add_layer(
            f"{VENV}: {wheel.name} and {LOCK.relative_to(REPO)} (deploy/image/install-venv)",
            oci.copy_tree(layout, root, str(venv.relative_to(root))),
        )
        layout.finish(
            image_config(architecture, epoch, version),
            [base, app],
            {oci.REF_NAME: version, oci.CONTAINERD_NAME: f"{REPOSITORY}:{version}"},
        )
    oci.write_archive(image.layout, image.archive, epoch)
    key_file.write_text(key + "\n")
    return image
