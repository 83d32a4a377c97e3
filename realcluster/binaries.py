"""Where the control plane's binaries (and helm) are: built or reused by `realcluster/build`."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
BUILD_SCRIPT = HERE / "build"
VERSIONS = HERE / "versions.env"
NAMES = (
    "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "helm",
    "informer-sync", "karpenter", "descheduler", "registry",
)  # fmt: skip
BUILD_TIMEOUT = 45 * 60  # a cold build on 2 cores takes minutes; this only guards a hang


class BinariesUnavailable(RuntimeError):
    """The binaries are not built and cannot be built here (no Go, or the build failed)."""


def versions() -> dict[str, str]:
    """versions.env: what ./build builds (KUBERNETES_VERSION=v1.34.4, ...)."""
    pairs = (
        line.partition("=") for line in VERSIONS.read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    )  # fmt: skip
    return {name.strip(): value.strip() for name, _, value in pairs}


def kubernetes_version() -> str:
    """The real control plane's Kubernetes version, e.g. v1.34.4."""
    return versions()["KUBERNETES_VERSION"]


def go_available() -> bool:
    return shutil.which("go") is not None


def built_bin_dir() -> Path | None:
    """The cache entry's bin folder if the build already completed, without building."""
    if not go_available():
        return None
    printed = subprocess.run(
        [str(BUILD_SCRIPT), "--print"], capture_output=True, text=True, check=False
    )
    if printed.returncode != 0:
        return None
    bin_dir = Path(printed.stdout.strip())
    return bin_dir if (bin_dir / ".complete").is_file() else None


def ensure_built() -> Path:
    """Build the binaries once (reused afterwards) and return their folder."""
    if not go_available():
        raise BinariesUnavailable("go is not on PATH: the real control plane cannot be built")
    result = subprocess.run(
        [str(BUILD_SCRIPT)], capture_output=True, text=True, check=False, timeout=BUILD_TIMEOUT
    )
    if result.returncode != 0:
        raise BinariesUnavailable(
            f"realcluster/build exited {result.returncode}:\n{result.stderr[-4000:]}"
        )
    bin_dir = Path(result.stdout.strip().splitlines()[-1])
    missing = [name for name in NAMES if not (bin_dir / name).is_file()]
    if missing:
        raise BinariesUnavailable(f"realcluster/build left no {', '.join(missing)} in {bin_dir}")
    return bin_dir
