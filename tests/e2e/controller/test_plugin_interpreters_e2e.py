"""The release's kubectl plugin (this machine's archive) runs `plan` against a cluster
(kubesim over HTTP, a controller replica running) under CPython 3.11, 3.12 and 3.13, each
found on PATH or in pyenv; an interpreter this machine does not have skips with one line.
The plugin file is one PEX holding each interpreter's wheels (docs/install.md)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import tarfile
from pathlib import Path

import pytest

from imagebuild.build import project_version
from imagebuild.release import PLUGIN, PLUGIN_PYTHONS, plugin_archive
from imagebuild.rootfs import ImageUnavailable, host_architecture
from kubesim.sim import KubeSim
from tests.conftest import REQUIRE_REAL_CLUSTER
from tests.release.built import current_release, find_python
from tests.unit.inspection.documented_schema import problems

from .drain_cluster import drain_cluster
from .installed import BOUND
from .plan_check import Run

pytestmark = [pytest.mark.e2e, pytest.mark.image]


@pytest.fixture(scope="module")
def plugin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    try:
        release_dir = current_release()
    except ImageUnavailable as error:
        if os.environ.get(REQUIRE_REAL_CLUSTER) == "1":
            pytest.fail(f"{REQUIRE_REAL_CLUSTER}=1: the release: {error}")
        pytest.skip(f"the release is not tested here: {error}")
    into = tmp_path_factory.mktemp("plugin")
    archive = plugin_archive(release_dir, project_version(), "linux", host_architecture())
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    return into / PLUGIN


@pytest.mark.parametrize("python", PLUGIN_PYTHONS)
async def test_the_plugin_plans_a_drain_under_each_python(
    sim: KubeSim, tmp_path: Path, plugin: Path, python: str
) -> None:
    interpreter = find_python(python)
    if interpreter is None:
        pytest.skip(f"no python{python} on this machine (PATH, pyenv)")
    async with drain_cluster(sim, tmp_path) as cluster:
        await cluster.start_replica()
        await cluster.create_web()
        env = {**os.environ, "KUBECONFIG": str(sim.kubeconfig_path),
               "PEX_ROOT": str(tmp_path / "pex")}  # fmt: skip
        done = await asyncio.to_thread(
            subprocess.run, [interpreter, str(plugin), "plan", "node-a", "-o", "json"],
            capture_output=True, text=True, env=env, timeout=BOUND, check=False,
        )  # fmt: skip
        planned = Run(done.returncode, done.stdout, done.stderr)

    assert planned.code == 0, planned.stderr
    document = json.loads(planned.stdout)
    assert problems(document, "plan") == []
    assert (document["node"], document["verdict"]) == ("node-a", "safe")
    [web] = [p for p in document["pods"] if p["workload"] == "Deployment/web"]
    assert web["outcome"] == "held"
