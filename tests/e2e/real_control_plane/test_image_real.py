"""The controller image (./scripts/build-image), run from its own root filesystem: what it
declares, what it holds, and a protected drain on the real control plane by the controller
started from it (image.py says how it is run without a container runtime)."""

from __future__ import annotations

import json
import re

import pytest
from packaging.utils import canonicalize_name

from imagebuild import spec
from kubesim.recorder import AvailabilityRecorder
from realcluster.cluster import RealCluster
from tests.unit.deploy.image_lock import read_lock

from .harness import Installation
from .image import ImageRoot
from .test_drain_real import assert_drain_is_protected

pytestmark = [pytest.mark.e2e, pytest.mark.realcluster, pytest.mark.image]

PYTHON = f"{spec.VENV}/bin/python"
# Every distribution importlib.metadata finds, and whether a kubesim module is importable.
INVENTORY = """\
import importlib.metadata, importlib.util, json, sys
print(json.dumps({
    "python": "%d.%d" % sys.version_info[:2],
    "distributions": sorted(
        [d.metadata["Name"], d.version] for d in importlib.metadata.distributions()
    ),
    "kubesim": importlib.util.find_spec("kubesim") is not None,
}))
"""
# Who the process is, and where it can write.
PROBE = """\
import errno, json, os, tempfile
def write(directory):
    try:
        with tempfile.TemporaryFile(dir=directory):
            return "written"
    except OSError as error:
        return errno.errorcode[error.errno]
print(json.dumps({"ids": [os.getuid(), os.getgid()],
                  "/opt/graceful-drain": write("/opt/graceful-drain"), "/tmp": write("/tmp")}))
"""


def test_the_entrypoint_prints_the_version_as_the_unprivileged_user(
    controller_image: ImageRoot,
) -> None:
    declared = re.search(r'^version = "(.+)"', (spec.REPO / "pyproject.toml").read_text(), re.M)
    assert declared is not None
    ran = controller_image.run(controller_image.argv(["--version"]))
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == f"graceful-drain {declared.group(1)}\n"
    # The user, and the root filesystem the controller runs on below: read-only but /tmp.
    probe = controller_image.run(controller_image.command([PYTHON, "-c", PROBE]))
    assert probe.returncode == 0, probe.stderr
    assert json.loads(probe.stdout) == {
        "ids": [int(part) for part in spec.USER.split(":")],
        "/opt/graceful-drain": "EROFS",
        "/tmp": "written",
    }


def test_the_image_declares_what_the_dockerfile_declares(controller_image: ImageRoot) -> None:
    """imagebuild/spec.py holds what deploy/Dockerfile declares (tests/unit/deploy/
    test_dockerfile.py); here the built image's config is read back against it."""
    config = controller_image.image_config()
    assert config["User"] == spec.USER
    assert config["Entrypoint"] == list(spec.ENTRYPOINT)
    assert config["Cmd"] == list(spec.CMD)
    assert config["ExposedPorts"] == {f"{port}/tcp": {} for port in spec.EXPOSED_PORTS}
    assert config["Env"] == list(spec.ENV)


def test_the_image_holds_the_locked_packages_and_no_kubesim(controller_image: ImageRoot) -> None:
    ran = controller_image.run(controller_image.command([PYTHON, "-c", INVENTORY]))
    assert ran.returncode == 0, ran.stderr
    inventory = json.loads(ran.stdout)
    assert inventory["python"] == spec.PYTHON_MINOR
    installed = {canonicalize_name(name): version for name, version in inventory["distributions"]}
    locked = {pin.name: pin.version for pin in read_lock(spec.LOCK)}
    assert installed == {**locked, "graceful-drain": controller_image.tag}
    assert inventory["kubesim"] is False


async def test_the_controller_run_from_the_image_protects_a_drain(
    controller_image: ImageRoot, installation: Installation, real_cluster: RealCluster,
    namespace: str, recorder: AvailabilityRecorder,
) -> None:  # fmt: skip
    await assert_drain_is_protected(
        installation, real_cluster, namespace, recorder, launcher=controller_image
    )
