"""The controller's virtualenv, installed inside the Debian root filesystem by the Debian
python3 itself (chroot), with deploy/image/install-venv, from the locked wheels."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pip

from imagebuild.cache import cache_root, digest
from imagebuild.rootfs import ImageUnavailable
from imagebuild.spec import (
    GLIBC_MINOR,
    INSTALL_VENV,
    LOCK,
    PYTHON_MINOR,
    REPO,
    VENV,
    WHEEL_SOURCES,
)

_MACHINES = {"amd64": "x86_64", "arm64": "aarch64"}
_BUILD_DIR = "tmp/graceful-drain-build"  # inside the root filesystem, removed afterwards


def _run(command: list[str], what: str, env: dict[str, str] | None = None) -> None:
    result = subprocess.run(command, env=env, stdout=sys.stderr, check=False)
    if result.returncode != 0:
        raise ImageUnavailable(f"{what} exited {result.returncode}: {' '.join(command)}")


def platform_tags(architecture: str) -> list[str]:
    """The manylinux platforms whose wheels run on the image's glibc, newest first."""
    machine = _MACHINES.get(architecture)
    if machine is None:
        raise ImageUnavailable(f"no wheel platform known for Debian architecture {architecture}")
    tags = [f"manylinux_2_{minor}_{machine}" for minor in range(GLIBC_MINOR, 16, -1)]
    return [*tags, f"manylinux2014_{machine}"]


def ensure_wheels(architecture: str) -> Path:
    """The locked dependencies' wheels for the image's Python and platform (cached by the lock's
    digest), each checked against its hash by pip."""
    lock = LOCK.read_bytes()
    wheels = (
        cache_root() / f"wheels-cp{PYTHON_MINOR.replace('.', '')}-{architecture}-{digest([lock])}"
    )
    if (wheels / ".complete").is_file():
        return wheels
    shutil.rmtree(wheels, ignore_errors=True)
    platforms = [option for tag in platform_tags(architecture) for option in ("--platform", tag)]
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--disable-pip-version-check",
            "--require-hashes",
            "--no-deps",
            "--only-binary=:all:",
            "--implementation",
            "cp",
            "--python-version",
            PYTHON_MINOR,
            *platforms,
            "--dest",
            str(wheels),
            "-r",
            str(LOCK),
        ],
        "pip download",
    )
    (wheels / ".complete").touch()
    return wheels


def build_wheel(workdir: Path, source_date_epoch: int) -> Path:
    """graceful-drain's wheel, built from WHEEL_SOURCES only (what the Dockerfile copies)."""
    source = workdir / "source"
    for entry in WHEEL_SOURCES:
        if (REPO / entry).is_dir():
            shutil.copytree(
                REPO / entry, source / entry,
                ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info"),
            )  # fmt: skip
        else:
            (source / entry).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / entry, source / entry)
    out = workdir / "wheel"
    env = {**os.environ, "SOURCE_DATE_EPOCH": str(source_date_epoch)}
    _run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check",
         "--no-deps", "--wheel-dir", str(out), str(source)],
        "pip wheel", env,
    )  # fmt: skip
    [wheel] = out.glob("*.whl")
    return wheel


def install_venv(root: Path, wheels: Path, wheel: Path, source_date_epoch: int) -> Path:
    """Run install-venv in `root` (chroot) with the Debian python3; the virtualenv's path.

    The root filesystem has no pip: a copy of the running pip is put beside the wheels for the
    install and removed with them."""
    build = root / _BUILD_DIR
    shutil.copytree(Path(pip.__file__).parent, build / "pip-lib" / "pip")
    shutil.copytree(wheels, build / "wheels", ignore=shutil.ignore_patterns(".complete"))
    for file in (LOCK, INSTALL_VENV, wheel):
        shutil.copy2(file, build / file.name)
    inside = f"/{_BUILD_DIR}"
    env = {
        "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": inside,
        "LC_ALL": "C.UTF-8",
        "PYTHONPATH": f"{inside}/pip-lib",
        "SOURCE_DATE_EPOCH": str(source_date_epoch),
        # Set and frozenset constants are marshalled in hash order: a fixed seed makes the
        # bytecode the same from one build to the next.
        "PYTHONHASHSEED": "0",
    }
    _run(
        [
            "chroot",
            str(root),
            "/bin/sh",
            f"{inside}/{INSTALL_VENV.name}",
            "/usr/bin/python3",
            VENV,
            f"{inside}/{LOCK.name}",
            f"{inside}/{wheel.name}",
            "--quiet",
            "--no-index",
            "--find-links",
            f"{inside}/wheels",
        ],
        "install-venv (in the root filesystem)",
        env,
    )
    shutil.rmtree(build)
    return root / VENV.lstrip("/")
