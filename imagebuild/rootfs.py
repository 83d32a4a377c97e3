"""The Debian root filesystem, bootstrapped from Debian's packages by mmdebstrap and cached as
a tarball keyed by everything that chooses its contents (suite, packages, dpkg filters,
architecture)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from imagebuild.cache import cache_root, digest
from imagebuild.spec import DEBIAN_PACKAGES, DEBIAN_SUITE, DPKG_PATH_FILTERS


class ImageUnavailable(Exception):
    """The image cannot be built on this machine (the message says why and what to do)."""


def host_architecture() -> str:
    """Debian's name of this machine's architecture (amd64, arm64, ...), which OCI shares."""
    result = subprocess.run(
        ["dpkg", "--print-architecture"], capture_output=True, text=True, check=True
    )
    return result.stdout.strip()


def check_tools() -> None:
    if os.geteuid() != 0:
        raise ImageUnavailable("building the image needs root (mmdebstrap's root mode, chroot)")
    for tool in ("mmdebstrap", "dpkg", "chroot", "tar"):
        if shutil.which(tool) is None:
            raise ImageUnavailable(
                f"{tool} is not installed (./scripts/build-image installs mmdebstrap with apt-get)"
            )


def rootfs_key(architecture: str) -> str:
    return digest([DEBIAN_SUITE, architecture, *DEBIAN_PACKAGES, "|", *DPKG_PATH_FILTERS])


def ensure_rootfs(architecture: str, source_date_epoch: int) -> Path:
    """The cached root filesystem tarball, bootstrapped first if it is missing."""
    tarball = cache_root() / f"rootfs-{DEBIAN_SUITE}-{rootfs_key(architecture)}.tar"
    if tarball.is_file():
        return tarball
    check_tools()
    tarball.parent.mkdir(parents=True, exist_ok=True)
    partial = tarball.with_suffix(".partial.tar")
    command = [
        "mmdebstrap", "--mode=root", "--variant=essential", "--quiet",
        f"--architectures={architecture}", f"--include={','.join(DEBIAN_PACKAGES)}",
        *(f"--dpkgopt={option}" for option in DPKG_PATH_FILTERS),
        DEBIAN_SUITE, str(partial),
    ]  # fmt: skip
    print(f"image: bootstrapping Debian {DEBIAN_SUITE} with mmdebstrap...", file=sys.stderr)
    env = {**os.environ, "SOURCE_DATE_EPOCH": str(source_date_epoch)}
    result = subprocess.run(command, env=env, stdout=sys.stderr, check=False)
    if result.returncode != 0:
        partial.unlink(missing_ok=True)
        raise ImageUnavailable(f"mmdebstrap exited {result.returncode} ({' '.join(command)})")
    partial.rename(tarball)
    return tarball
